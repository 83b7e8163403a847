"""issue #36 item 5 (`--link-fit` trusted its file) and #34's bad input for link fits: a fit
file is validated against the comm_fits/comm schemas with finite, positive bounds; only a
regular file is opened; an nccl-tests log that is not all-reduce, is truncated, or was
measured to a maxBytes below the sizes asked gives a typed error and no fit."""

import os
import threading

import pandas as pd
import pytest

from dgtraces.comm.linkfit import link_from_fit
from dgtraces.errors import DgtracesError
from tests.attack_tally import record
from tests.attack_tally import refused as _refused
from tests.paths import FIXTURES

AR = FIXTURES / "nccl_tests" / "all_reduce_perf_8xh100.log"
AG = FIXTURES / "nccl_tests" / "ag_2nodes.log"
VALUES = "link-fit: a fit that is not finite, positive and typed"
SPECIAL = "input: a FIFO or device as a file"
UNFIT = "link-fit: a log unfit for the fit asked"

FIT = {"collective": "allreduce", "backend": "nccl", "interconnect": "x", "workers": 4,
       "alpha_us": 60.0, "beta_us_per_byte": 0.001, "r2": 0.99, "provenance": "measured",
       "source": "nccl-tests"}


def _fits_csv(tmp_path, **cells) -> str:
    path = tmp_path / "comm_fits.csv"
    row = {**FIT, **cells}
    path.write_text(",".join(row) + "\n" + ",".join(str(v) for v in row.values()) + "\n")
    return str(path)


def test_a_valid_fit_file_still_gives_its_link(tmp_path):
    link = link_from_fit(_fits_csv(tmp_path))
    assert link.name == "fit:comm_fits.csv" and link.bandwidth_gb_s > 0
    assert link_from_fit(_fits_csv(tmp_path, alpha_us=0.0)).alpha_us == 0.0  # through origin


@pytest.mark.parametrize("column,value,code", [
    ("alpha_us", "-5", "SCHEMA"),  # negative: communication faster than free
    ("beta_us_per_byte", "-0.001", "SCHEMA"),
    ("alpha_us", "NaN", "PLAUSIBILITY"),
    ("beta_us_per_byte", "nan", "PLAUSIBILITY"),
    ("beta_us_per_byte", "0", "PLAUSIBILITY"),  # a free link (was a traceback)
    ("beta_us_per_byte", "inf", "PLAUSIBILITY"),
    ("alpha_us", "inf", "PLAUSIBILITY"),
    ("alpha_us", "fast", "SCHEMA"),  # text in a number column (was a traceback)
    ("beta_us_per_byte", "0.001us", "SCHEMA"),
    ("workers", "four", "SCHEMA"),
    ("beta_us_per_byte", "1e-30", "PLAUSIBILITY"),  # 10^21 GB/s: beyond any link
    ("alpha_us", "1e300", "PLAUSIBILITY"),
])
def test_fit_values_are_checked_against_the_schema_and_bounds(tmp_path, column, value, code):
    _refused(lambda: link_from_fit(_fits_csv(tmp_path, **{column: value})), code, VALUES)


@pytest.mark.parametrize("column,value,code", [
    ("alpha_us", float("nan"), "SCHEMA"), ("beta_us_per_byte", float("inf"), "PLAUSIBILITY"),
    ("beta_us_per_byte", 0.0, "PLAUSIBILITY"), ("alpha_us", -1.0, "SCHEMA"),
])
def test_parquet_fits_too(tmp_path, column, value, code):
    path = tmp_path / "comm_fits.parquet"
    pd.DataFrame([{**FIT, column: value}]).to_parquet(path)
    _refused(lambda: link_from_fit(str(path)), code, VALUES)


@pytest.mark.parametrize("times,code", [
    (["0.1", "-0.2", "0.3"], "SCHEMA"), (["0.1", "inf", "0.3"], "PLAUSIBILITY"),
    (["0.1", "slow", "0.3"], "SCHEMA"),
])
def test_comm_points_are_checked_against_the_comm_schema(tmp_path, times, code):
    path = tmp_path / "comm.csv"
    sizes = [16384, 65536, 262144]
    path.write_text("collective,workers,message_bytes,time_ms\n" + "".join(
        f"allreduce,2,{n},{t}\n" for n, t in zip(sizes, times, strict=True)))
    _refused(lambda: link_from_fit(str(path)), code, VALUES)


@pytest.mark.parametrize("suffix", ["@²", "@٣", "@1", "@-2", "@2x", "@" + "9" * 5000])
def test_workers_suffix_is_ascii_digits_at_least_two(tmp_path, suffix):
    _refused(lambda: link_from_fit(_fits_csv(tmp_path) + suffix), "BAD_INPUT", VALUES)


@pytest.mark.parametrize("line,code", [
    ("1048576   1e999", "PLAUSIBILITY"), ("1e999   1839.1", "PLAUSIBILITY"),
    ("1048576.5   1839.1", "BAD_FILE"), ("4,-1048576   1839.1", "BAD_FILE"),
])
def test_osu_numbers_must_be_finite_and_whole(tmp_path, line, code):
    path = tmp_path / "allreduce4.log"
    path.write_text("# OSU MPI Allreduce Latency Test v5.4.0\n# Size       Avg Latency(us)\n"
                    "16384       80.0\n65536       120.0\n" + line + "\n")
    _refused(lambda: link_from_fit(str(path)), code, VALUES)


def _within(call, seconds=20):
    """The typed error code ``call`` ends with, run in a thread: a hang fails the test."""
    out: list = []

    def run():
        try:
            call()
            out.append(None)
        except DgtracesError as exc:
            out.append(exc.code)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(timeout=seconds)
    assert not worker.is_alive(), "blocked"
    return out[0]


@pytest.fixture
def opened(monkeypatch):
    """The paths opened (builtins.open, io.open, os.open) while the test runs."""
    import builtins
    import io

    seen: list[str] = []

    def spy(real):
        def wrapper(file, *args, **kwargs):
            seen.append(str(file))
            return real(file, *args, **kwargs)
        return wrapper

    monkeypatch.setattr(builtins, "open", spy(builtins.open))
    monkeypatch.setattr(io, "open", spy(io.open))
    monkeypatch.setattr(os, "open", spy(os.open))
    return seen


@pytest.mark.parametrize("kind", ["fifo", "fifo in a folder", "fifo log", "/dev/zero"])
def test_only_regular_files_are_opened(tmp_path, kind, opened):
    if kind == "/dev/zero":
        if not os.path.exists("/dev/zero"):
            pytest.skip("no /dev/zero")
        spec = "/dev/zero"
    else:
        name = {"fifo": "comm_fits.csv", "fifo in a folder": "comm_fits.csv",
                "fifo log": "all_reduce_perf.log"}[kind]
        os.mkfifo(tmp_path / name)
        spec = str(tmp_path if kind == "fifo in a folder" else tmp_path / name)
    code = _within(lambda: link_from_fit(spec))
    special = [p for p in opened if p == spec or p.startswith(str(tmp_path))]
    record(SPECIAL, code == "BAD_FILE" and not special)
    assert code == "BAD_FILE" and special == []  # refused before it is opened


def test_an_nccl_tests_log_unfit_for_a_link_gives_no_fit(tmp_path):
    """#34 bad input: not all-reduce, truncated, or measured below the sizes asked."""
    from dgtraces.comm.linkfit import fit_link, fitted_collective

    gather = tmp_path / "run.log"
    gather.write_text(AG.read_text())
    err = _refused(lambda: link_from_fit(str(gather)), "BAD_INPUT", UNFIT)
    assert err.failures[0].column == "collective"
    lines = AR.read_text().splitlines()
    cut = tmp_path / "cut.log"
    cut.write_text("\n".join(lines[:-8]) + "\n")
    _refused(lambda: link_from_fit(str(cut)), "BAD_FILE", UNFIT)
    fit = fit_link(str(AR), None)
    assert (fit.min_bytes, fit.max_bytes, fit.workers) == (8, 1 << 30, 8)
    err = _refused(lambda: fitted_collective("allreduce", [1 << 20, 2 << 30], fit, workers=8),
                   "BAD_INPUT", UNFIT)
    assert err.failures[0].column == "sizes" and err.failures[0].found == str(2 << 30)
    res = fitted_collective("allreduce", [1 << 20, 1 << 30], fit, workers=8)
    assert [r.message_bytes for r in res.rows] == [1 << 20, 1 << 30]


def test_a_points_file_gives_its_measured_range(tmp_path):
    from dgtraces.comm.linkfit import fit_link

    path = tmp_path / "comm.csv"
    sizes = [2 ** k for k in range(14, 21)]
    pd.DataFrame({"collective": "allreduce", "workers": 2, "message_bytes": sizes,
                  "time_ms": [0.1 + n / 1e6 for n in sizes]}).to_csv(path, index=False)
    fit = fit_link(str(path), None)
    assert (fit.min_bytes, fit.max_bytes) == (1 << 14, 1 << 20)
