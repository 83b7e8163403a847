"""Comm bounds (issue #36, lows: comm contribution bounds and a trailing newline in
``interconnect``; nccl-tests plausibility gaps). The ``comm`` schema bounds ranks and message
sizes, orders p10 <= time <= p90, and refuses a collective across >= 2 ranks faster than
2 TB/s (a time in another unit, which an nccl-tests log with a consistent algbw column
passed); ``interconnect`` and ``backend`` are labels without line breaks or edge blanks
(``10GbE\\n`` was a second key beside ``10GbE``) in comm, comm_fits and iterations."""

import pandas as pd
import pytest

from dgtraces.contribute import contribute
from dgtraces.contribute.files import validate_files
from dgtraces.errors import DgtracesError
from tests.attack_tally import record
from tests.conftest import _mini_frames
from tests.contribute.test_contribute import refused, variant, write_contrib
from tests.paths import FIXTURES

CLS = "comm row out of bounds"


def _comm() -> pd.DataFrame:
    return _mini_frames()["comm"].tail(1).reset_index(drop=True)


BAD = {
    "interconnect with a trailing newline": {"interconnect": "loopback\n"},
    "interconnect with a leading blank": {"interconnect": " loopback"},
    "backend with a carriage return": {"backend": "gloo\r"},
    "p10 above the median": {"p10_ms": 0.2},
    "p90 below the median": {"p90_ms": 0.05},
    "a million ranks": {"workers": 10 ** 6},
    "a 2 TiB message": {"message_bytes": 1 << 41},
    "1 GiB in 10 us over 2 ranks": {"message_bytes": 1 << 30, "time_ms": 0.01,
                                    "p10_ms": None, "p90_ms": None},
}


@pytest.mark.parametrize("how", sorted(BAD))
def test_validate_refuses_a_comm_row_out_of_bounds(tmp_path, how):
    df = _comm()
    for col, value in BAD[how].items():
        df[col] = df[col].astype(object)
        df.loc[0, col] = value
    path = tmp_path / "comm.parquet"
    df.to_parquet(path, index=False)
    with pytest.raises(DgtracesError) as exc:
        validate_files([path], use_store=False)
    record(f"{CLS} (validate)", exc.value.code == "SCHEMA")
    assert exc.value.code == "SCHEMA"


def test_one_rank_may_copy_at_memory_speed(tmp_path):
    """A single-rank log (nccl-tests -np 1) copies in GPU memory, not over a link."""
    df = _comm().assign(workers=1, message_bytes=1 << 30, time_ms=0.25, p10_ms=None,
                        p90_ms=None)
    path = tmp_path / "comm.csv"
    df.to_csv(path, index=False)
    assert validate_files([path], use_store=False) == {"comm": 1}


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_contribute_refuses_a_comm_key_with_a_trailing_newline(store, tmp_path, fmt):
    runs, lt = variant("r-comm")
    comm = _comm().assign(interconnect="loopback\n")
    err = refused(write_contrib(tmp_path / "c", runs, lt, fmt=fmt, extra={"comm": comm}),
                  store, "SCHEMA", dry_run=True)
    record("identifier with a trailing newline", True)
    assert {f.column for f in err.failures} == {"interconnect"}
    assert contribute(write_contrib(tmp_path / "ok", runs, lt, fmt=fmt,
                                    extra={"comm": _comm()}), root=store, dry_run=True)


def test_an_nccl_tests_log_in_another_time_unit_is_refused(tmp_path):
    """Every time and algbw column rewritten consistently (times / 1000, algbw x 1000): the
    log's own algbw check passes; 170 TB/s across 8 ranks is no interconnect."""
    from dgtraces.importers.nccl_tests import import_log

    lines = []
    for line in (FIXTURES / "nccl_tests" / "all_reduce_perf_8xh100.log").read_text().split("\n"):
        cells = line.split()
        if cells and cells[0].isdigit():
            for i in (5, 9):  # out-of-place, in-place: time (us), algbw, busbw (GB/s)
                us = float(cells[i]) / 1000
                algbw = int(cells[0]) / (us * 1e3)
                cells[i:i + 3] = [f"{us:.6g}", f"{algbw:.2f}", f"{algbw * 2 * 7 / 8:.2f}"]
            line = "  ".join(cells)
        lines.append(line)
    log = tmp_path / "all_reduce_perf.log"
    log.write_text("\n".join(lines))
    with pytest.raises(DgtracesError) as exc:
        import_log(log)
    record("nccl-tests log faster than any interconnect", exc.value.code == "SCHEMA")
    assert exc.value.code == "SCHEMA"
