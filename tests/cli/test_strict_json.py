"""Every ``--json`` output is strict JSON (issue #36, low): ``validate-comm --json`` wrote
``NaN`` for the MAPE of a log with an infinite time (JSON has no NaN), and
``validate-predictor --json``'s ``allow_nan=False`` would have raised a traceback. One
writer (``dgtraces.cli.echo_json``) writes every ``--json``: a non-finite number is null."""

import json

from click.testing import CliRunner

from dgtraces.cli import main
from tests.attack_tally import record
from tests.paths import FIXTURES


def _strict(text: str):
    def refuse(constant):
        raise ValueError(f"not JSON: {constant}")
    return json.loads(text, parse_constant=refuse)


def test_validate_comm_json_is_strict_json(tmp_path):
    log = tmp_path / "all_reduce_perf.log"
    lines = (FIXTURES / "nccl_tests" / "all_reduce_perf_8xh100.log").read_text().split("\n")
    at = next(i for i, line in enumerate(lines) if line.split()[:1] == ["1048576"])
    cells = lines[at].split()
    cells[5:8] = ["inf", "0.00", "0.00"]  # an infinite time, size / inf = 0 GB/s
    lines[at] = "  ".join(cells)
    log.write_text("\n".join(lines))
    res = CliRunner().invoke(main, ["validate-comm", str(log), "--intra", "nvlink4", "--json"])
    try:
        doc = _strict(res.output)
    except ValueError:
        doc = None
    record("invalid JSON output", doc is not None)
    assert doc is not None, res.output
    assert doc["logs"][0]["mape_all"] is None and doc["median_mape_all"] is None


def test_the_json_writer_turns_non_finite_numbers_into_null(capsys):
    import numpy as np

    from dgtraces.cli import echo_json

    echo_json({"a": float("nan"), "b": [1.5, float("-inf"), np.float64("inf")],
               "c": (2, {"d": float("inf")}), "e": object})
    doc = _strict(capsys.readouterr().out)
    assert doc["a"] is None and doc["b"] == [1.5, None, None] and doc["c"] == [2, {"d": None}]
    assert isinstance(doc["e"], str)


def test_no_command_writes_json_past_the_one_writer():
    """No CLI module calls json.dumps for a --json output of its own."""
    from pathlib import Path

    import dgtraces.cli as cli

    folder = Path(cli.__file__).parent
    callers = sorted(p.name for p in folder.glob("*.py")
                     if "json.dumps(" in p.read_text() and p.name not in ("__init__.py",
                                                                          "query.py"))
    assert callers == []  # query.py streams JSON rows itself, with allow_nan=False
