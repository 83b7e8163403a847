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
    """A log with no size >= 1 MiB has no such MAPE (NaN inside): the JSON says null, not NaN.
    (An infinite time, the first form of this attack, is now refused by the strict importer.)"""
    log = tmp_path / "all_reduce_perf.log"
    lines = [line for line in
             (FIXTURES / "nccl_tests" / "all_reduce_perf_8xh100.log").read_text().split("\n")
             if not (line.split()[:1] and line.split()[0].isdigit()
                     and int(line.split()[0]) >= 1 << 20)]
    log.write_text("\n".join(lines).replace("maxBytes 1073741824", "maxBytes 524288"))
    res = CliRunner().invoke(main, ["validate-comm", str(log), "--intra", "nvlink4", "--json"])
    try:
        doc = _strict(res.output)
    except ValueError:
        doc = None
    record("invalid JSON output", doc is not None)
    assert doc is not None, res.output
    assert doc["logs"][0]["mape_large"] is None and doc["median_mape_large"] is None
    assert doc["logs"][0]["mape_small"] > 0


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
