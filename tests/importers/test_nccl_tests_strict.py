"""issue #36 item 4: the nccl-tests importer is strict. A `*_perf` name (in a comment, the
file name or --collective) is checked against the columns; a second table of another
collective is refused; several sweeps of one collective are separate blocks; rows with a
sign or a letter are refused, other lines inside a table are counted; no traceback for a
malformed header, non-finite or 5000-digit numbers; a FIFO or a device is no input."""

import os
import threading

import pytest

from dgtraces.errors import DgtracesError
from dgtraces.importers import nccl_tests
from dgtraces.reference import path as reference_path
from tests.attack_tally import record
from tests.attack_tally import refused as _refused
from tests.importers.test_importers_nccl import AG, AR

NAME = "nccl-tests: a name contradicting the columns"
SECOND = "nccl-tests: a second table of another collective"
SIGNED = "nccl-tests: a row with a sign or a letter"
NUMBERS = "nccl-tests: malformed numbers or columns"
SPECIAL = "input: a FIFO or device as a file"


def _write(tmp_path, text, name="run.log"):
    path = tmp_path / name
    path.write_text(text)
    return path


def _unnamed(text: str) -> str:
    """The log without its `$ mpirun ... all_reduce_perf` line (no name left in it)."""
    out = "\n".join(line for line in text.splitlines() if "_perf" not in line) + "\n"
    assert "_perf" not in out
    return out


def _at(text: str, start: str) -> int:
    """Index of the first line whose stripped text starts with ``start``."""
    return next(k for k, line in enumerate(text.splitlines()) if line.strip().startswith(start))


def _cells(text: str, column: int, value: str) -> str:
    """Every table row of ``text`` with cell ``column`` set to ``value``."""
    out = []
    for line in text.splitlines():
        cells = line.split()
        if cells and cells[0].isdigit() and len(cells) >= 13:
            cells[column] = value
            line = "  ".join(cells)
        out.append(line)
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("how", ["comment", "second comment", "file name", "given"])
def test_a_name_contradicting_the_columns_is_refused(tmp_path, how):
    ar = AR.read_text()
    call = {
        # an all-reduce table under an all_gather_perf comment (no other name)
        "comment": lambda: nccl_tests.import_log(_write(
            tmp_path, "# compare: all_gather_perf\n" + _unnamed(ar))),
        # the command line names all_reduce_perf, a comment all_gather_perf: two binaries
        "second comment": lambda: nccl_tests.import_log(_write(
            tmp_path, ar.replace("# Using devices", "# all_gather_perf next\n# Using devices"))),
        "file name": lambda: nccl_tests.import_log(_write(tmp_path, _unnamed(ar),
                                                          "all_gather_perf.log")),
        "given": lambda: nccl_tests.import_log(AG, collective="allreduce"),
    }[how]
    err = _refused(call, "BAD_INPUT", NAME)
    assert err.failures[0].column in ("busbw/algbw, redop, root", "busbw/algbw, redop",
                                      "<binary>_perf")


def test_names_the_columns_agree_with_are_kept():
    assert nccl_tests.import_log(AR).collective_how == "named: all_reduce_perf"
    assert nccl_tests.import_log(AG, collective="allgather").collective == "allgather"


@pytest.mark.parametrize("named", [False, True])
def test_a_second_table_of_another_collective_is_refused(tmp_path, named):
    first = AR.read_text() if named else _unnamed(AR.read_text())
    err = _refused(lambda: nccl_tests.import_log(_write(tmp_path, first + AG.read_text())),
                   "BAD_INPUT", SECOND)
    assert err.failures[0].column.startswith("busbw/algbw")


def test_several_sweeps_of_one_collective_are_separate_blocks(tmp_path):
    ar = AR.read_text()
    again = ar.replace("Pid  412", "Pid  512")
    res = nccl_tests.import_log(_write(tmp_path, ar + "some prose between the runs\n" + again))
    second = len(ar.splitlines()) + 3  # the header, after `$ mpirun` (line 1 of each run)
    assert [(b.line, b.ranks, b.sizes) for b in res.blocks] == [(2, 8, 28), (second, 8, 28)]
    assert len(res.comm) == 4 * 28 and len(res.comm_fits) == 4
    assert res.comm["source"].str.contains(f"block 2 of 2 \\(line {second}\\)").sum() == 56
    one = nccl_tests.import_log(AR)  # a log of one run: rows and fits as before
    assert len(one.blocks) == 1 and not one.comm["source"].str.contains("block").any()
    # the shipped Sheffield page: three all_reduce_perf sweeps of one node (was PLAUSIBILITY)
    page = reference_path("nccl-tests/raw/sheffield_bessemer_v100pcie_x4_cuda.rst")
    res = nccl_tests.import_log(page)
    assert res.collective == "allreduce" and [b.ranks for b in res.blocks] == [4, 4, 4]
    assert len(res.comm) == 3 * 2 * 25 and len(res.comm_fits) == 6


@pytest.mark.parametrize("prefix", ["-", "+", "a", "x", "-0"])
def test_rows_with_a_sign_or_a_letter_are_refused(tmp_path, prefix):
    text = AR.read_text()
    i = _at(text, "1024 ")
    lines = text.splitlines()
    lines[i] = lines[i].replace(" 1024 ", f" {prefix}1024 ", 1)
    err = _refused(lambda: nccl_tests.import_log(_write(tmp_path, "\n".join(lines) + "\n")),
                   "BAD_FILE", SIGNED)
    assert err.failures[0].row == i + 1


def test_other_lines_inside_a_table_are_counted(tmp_path):
    text = AR.read_text()
    i = _at(text, "1024 ")
    lines = text.splitlines()
    info = "node-a:41200:41300 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read"
    lines[i:i] = [info, "e 256 float sum -1 28.9 0.04 0.06 0 28.6 0.04 0.06"]
    res = nccl_tests.import_log(_write(tmp_path, "\n".join(lines) + "\n"))
    (block,) = res.blocks
    assert (block.skipped_lines, block.first_skipped_line, block.sizes) == (2, i + 1, 28)
    assert nccl_tests.import_log(AR).blocks[0].skipped_lines == 0


def _header(text: str, old: str, new: str) -> str:
    assert old in text
    return text.replace(old, new, 1)


BIG = "1" + "0" * 5000


@pytest.mark.parametrize("case,code", [
    ("one time block", "BAD_FILE"),
    ("busbw 0, named", "BAD_INPUT"),
    ("busbw 0, unnamed", "BAD_INPUT"),
    ("algbw inf", "PLAUSIBILITY"),
    ("algbw inf, unnamed", "PLAUSIBILITY"),
    ("time nan", "PLAUSIBILITY"),
    ("5000-digit size", "BAD_FILE"),
    ("5000-digit time", "BAD_FILE"),
    ("5000-digit rank", "BAD_FILE"),
    ("5000-digit iters", "BAD_FILE"),
    ("5000-digit maxBytes", "BAD_FILE"),
    ("header without its sweep", "BAD_FILE"),
    ("malformed rank line", "BAD_FILE"),
    ("row after the summary", "BAD_FILE"),
])
def test_malformed_numbers_and_columns_are_typed_errors(tmp_path, case, code):
    ar = AR.read_text()
    wrong = next(line for line in ar.splitlines() if "#wrong" in line)
    row = next(line for line in ar.splitlines() if line.strip().startswith("1024 "))
    text = {
        "one time block": lambda: _header(ar, wrong, " ".join(wrong.split()[:10])),
        "busbw 0, named": lambda: _cells(ar, 7, "0"),
        "busbw 0, unnamed": lambda: _unnamed(_cells(ar, 7, "0")),
        "algbw inf": lambda: _cells(ar, 6, "inf"),
        "algbw inf, unnamed": lambda: _unnamed(_cells(ar, 6, "inf")),
        "time nan": lambda: _cells(ar, 5, "nan"),
        "5000-digit size": lambda: _header(ar, row, row.replace(" 1024 ", f" {BIG} ", 1)),
        "5000-digit time": lambda: _cells(ar, 5, BIG),
        "5000-digit rank": lambda: _header(ar, "Rank  0", f"Rank  {BIG}"),
        "5000-digit iters": lambda: _header(ar, "iters: 20", f"iters: {BIG}"),
        "5000-digit maxBytes": lambda: _header(ar, "maxBytes 1073741824", f"maxBytes {BIG}"),
        "header without its sweep": lambda: _header(ar, "step: 2(factor)", "step: two"),
        "malformed rank line": lambda: _header(ar, "Pid  41203", "Pid x"),
        "row after the summary": lambda: ar + row + "\n",
    }[case]()
    _refused(lambda: nccl_tests.import_log(_write(tmp_path, text)), code, NUMBERS)


@pytest.mark.parametrize("case", ["size", "time", "maxBytes"])
def test_non_ascii_digits_are_refused(tmp_path, case):
    """#36 low (non-ASCII digits outside contributions): float("١٠٢٤") is 1024.0, and the
    importer took Arabic-Indic digits in a row as a size or a time."""
    ar = AR.read_text()
    row = next(line for line in ar.splitlines() if line.strip().startswith("1024 "))
    arabic = str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩")
    text = {"size": lambda: _header(ar, row, row.replace(" 1024 ", " ١٠٢٤ ", 1)),
            "time": lambda: _cells(ar, 5, row.split()[5].translate(arabic)),
            "maxBytes": lambda: _header(ar, "maxBytes 1073741824",
                                        "maxBytes " + "1073741824".translate(arabic)),
            }[case]()
    _refused(lambda: nccl_tests.import_log(_write(tmp_path, text)), "BAD_FILE",
             "non-ASCII digits in a log")


@pytest.mark.parametrize("kind", ["fifo", "char device", "directory"])
def test_a_fifo_or_device_is_refused_without_reading_it(tmp_path, kind):
    """A FIFO would block the importer forever, /dev/zero never ends: both are refused
    before a byte is read (a thread: a hang fails the test instead of the run)."""
    if kind == "fifo":
        path = tmp_path / "all_reduce_perf.log"
        os.mkfifo(path)
    elif kind == "char device":
        path = "/dev/zero"
        if not os.path.exists(path):
            pytest.skip("no /dev/zero")
    else:
        path = tmp_path
    out: list = []
    worker = threading.Thread(target=lambda: out.append(_catch(nccl_tests.import_log, path)),
                              daemon=True)
    worker.start()
    worker.join(timeout=20)
    assert not worker.is_alive(), f"import_log blocked on a {kind}"
    record(SPECIAL, out[0] == "BAD_FILE")
    assert out == ["BAD_FILE"]


def _catch(call, *args):
    try:
        call(*args)
    except DgtracesError as exc:
        return exc.code
    return None
