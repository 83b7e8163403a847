"""Importers refuse duplicated lines and implausible units and counts (issue #29 lows):
caffe time kept the last of two lines for one layer; nccl-tests took times scaled by
1000 and 100,000 ranks."""

import re

import pytest

from dgtraces.importers import nccl_tests
from dgtraces.importers.caffe_time import import_log
from tests.attack_tally import refused as _refused
from tests.importers.test_importers_gpu import _log
from tests.importers.test_importers_nccl import AR


def _names():
    from dgtraces.models import layer_records

    return [r["layer"] for r in layer_records("alexnet-owt")]


@pytest.mark.parametrize("line", [
    "I0 caffe.cpp:369] conv1\tforward: 9.5 ms.\n",
    "I0 caffe.cpp:372] fc8\tbackward: 0.1 ms.\n",
    "I0 caffe.cpp:381] Average Forward-Backward: 60 ms.\n",
])
def test_caffe_time_duplicated_lines(tmp_path, line):
    path = _log(tmp_path, _names())
    path.write_text(path.read_text() + line)
    _refused(lambda: import_log(path, "alexnet-owt", device="d", source="s"), "BAD_FILE",
             "importer: duplicated line")


def _nccl(tmp_path, text):
    path = tmp_path / "all_reduce_perf.log"
    path.write_text(text)
    return path


def _scale_times(text, factor, placement=0):
    """Multiply one placement's time column of every table line by ``factor``."""
    out = []
    for line in text.splitlines():
        cells = line.split()
        if cells and cells[0].isdigit() and len(cells) >= 13:
            i = 5 + 4 * placement
            cells[i] = f"{float(cells[i]) * factor:.4g}"
            line = "  ".join(cells)
        out.append(line)
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("factor,placement", [(1000, 0), (0.001, 0), (1000, 1), (10, 1)])
def test_nccl_times_in_other_units(tmp_path, factor, placement):
    text = _scale_times(AR.read_text(), factor, placement)
    _refused(lambda: nccl_tests.import_log(_nccl(tmp_path, text)), "PLAUSIBILITY",
             "importer: implausible unit or count")


def _ranks(text, lines):
    head = [ln for ln in text.splitlines() if not re.match(r"^#\s*Rank", ln)]
    at = next(i for i, ln in enumerate(head) if "Using devices" in ln) + 1
    return "\n".join(head[:at] + lines + head[at:]) + "\n"


RANK = "#  Rank {r:>2} Group  0 Pid  41200 on   node-a device  {d} [0x18] NVIDIA H100 80GB HBM3"


@pytest.mark.parametrize("ranks", [
    list(range(100_000)),  # 100,000 ranks
    [0, 1, 1, 2],  # a rank twice
    [0, 2, 3],  # a gap
    [5, 6],  # not from 0
])
def test_nccl_implausible_rank_lines(tmp_path, ranks):
    text = _ranks(AR.read_text(), [RANK.format(r=r, d=r % 8) for r in ranks])
    _refused(lambda: nccl_tests.import_log(_nccl(tmp_path, text)), "PLAUSIBILITY",
             "importer: implausible unit or count")


def test_nccl_honest_log_still_imports(tmp_path):
    text = _scale_times(AR.read_text(), 1.0)
    assert nccl_tests.import_log(_nccl(tmp_path, text)).ranks == 8


def test_importer_inputs_are_size_checked_before_reading(tmp_path, monkeypatch):
    """issue #29 high, `import`: a log or trace larger than the bound is BAD_FILE before a
    byte is read (the bound is lowered here; it is 1 GiB)."""
    from dgtraces.importers.kineto import import_trace
    from dgtraces.io import bounded
    from tests.importers.test_importers_kineto import SCOPES

    monkeypatch.setattr(bounded, "MAX_GUNZIP_BYTES", 1000)
    calls = {
        "nccl-tests": lambda: nccl_tests.import_log(AR),
        "caffe time": lambda: import_log(_log(tmp_path, _names()), "alexnet-owt",
                                         device="d", source="a test log"),
        "kineto": lambda: import_trace(SCOPES, "alexnet", batch_size=2),
    }
    for call in calls.values():
        _refused(call, "BAD_FILE", "importer input over the size bound")


def _osu(tmp_path, name, lines):
    path = tmp_path / name
    path.write_text("# OSU MPI Allreduce Latency Test v5.4.0\n# Size       Avg Latency(us)\n"
                    + "".join(f"{b:<12}{us}\n" for b, us in lines))
    return path


OSU_POINTS = [(4, 31.9), (1024, 60.2), (1048576, 1839.1)]


@pytest.mark.parametrize("name,lines", [
    ("allreduce100000.log", OSU_POINTS),  # 100,000 processes from the file name
    ("allreduce1.log", OSU_POINTS),  # an allreduce of one process
    ("allreduce4.log", [(4, 0.004), (1048576, 0.15)]),  # ms read as us (7 TB/s)
])
def test_osu_implausible_counts_and_units(tmp_path, name, lines):
    from dgtraces.importers import osu

    src = "a test log"
    _refused(lambda: osu.import_log(_osu(tmp_path, name, lines), source=src), "PLAUSIBILITY",
             "importer: implausible unit or count")
    assert osu.import_log(_osu(tmp_path, "allreduce4.log", OSU_POINTS), source=src).workers == 4


def test_link_fit_inputs_are_size_checked_before_reading(tmp_path, monkeypatch):
    """Variant (another reader of importer inputs): `predict --link-fit` of an OSU output
    or an nccl-tests log larger than the bound is BAD_FILE."""
    from dgtraces.comm.linkfit import link_from_fit
    from dgtraces.io import bounded

    monkeypatch.setattr(bounded, "MAX_GUNZIP_BYTES", 1000)
    osu = _osu(tmp_path, "allreduce4.log", OSU_POINTS * 40)
    for path in (osu, AR):
        _refused(lambda p=path: link_from_fit(str(p)), "BAD_FILE",
                 "importer input over the size bound")


def test_link_fit_csv_tables_have_the_parquet_bounds(tmp_path, monkeypatch):
    """Variant (#29 high, review): a comm table handed to `predict --link-fit` as CSV gets
    the bounds its Parquet form gets: the file's size, and each text field's length."""
    from dgtraces.comm import linkfit_files

    huge = tmp_path / "comm.csv"
    huge.write_text("message_bytes,time_ms,source\n8,0.01," + "x" * 70_000 + "\n")
    _refused(lambda: linkfit_files.read_table(huge), "BAD_FILE",
             "importer input over the size bound")
    monkeypatch.setattr(linkfit_files, "MAX_BYTES", 100)
    big = tmp_path / "big.csv"
    big.write_text("message_bytes,time_ms\n" + "8,0.01\n" * 50)
    _refused(lambda: linkfit_files.read_table(big), "BAD_FILE",
             "importer input over the size bound")
