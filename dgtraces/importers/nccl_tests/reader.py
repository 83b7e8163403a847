"""An nccl-tests log read as blocks, one line at a time (issue #36 item 4).

The file is streamed (:class:`dgtraces.io.lines.TextLines`: a regular file, bounded lines,
sha256 on the way); a block keeps four numbers per table row (line, size, out-of-place and
in-place time) in arrays, so memory grows by tens of bytes per row and not at all for other
lines.

**Blocks.** One run of an nccl-tests binary prints a ``# nThread ..`` header, a ``# Using
devices`` block of ``# Rank`` lines, a column header ``# size count type ..`` and the table,
closed by ``# Out of bounds values`` / ``# Avg bus bandwidth``. A file may hold several runs
(the Sheffield HPC page holds three sweeps of ``all_reduce_perf``): a header, a ``# Using
devices`` line or a rank line after a table, or a second column header, starts a new block.

**Lines.** A non-comment line inside a table (after its column header, before its summary)
is a *table row* when its first cell is a signed number (``-8``, ``+16``, ``1e3``, ``inf``)
or it has the header's number of cells with numbers in the time columns (``a1024 ..``):
a row is parsed strictly, so a sign, a letter or a 5000-digit number is BAD_FILE naming the
line (never dropped). Other lines there (NCCL INFO/WARN lines, mpirun noise) are counted per
block and reported in the import's notes. A table row after the summary is BAD_FILE; so is a
rank line that does not parse, and a column header without two ``time`` blocks
(out-of-place, in-place). Non-finite numbers (algbw ``inf``) are PLAUSIBILITY.
"""

from __future__ import annotations

import math
import re
from array import array
from dataclasses import dataclass, field
from pathlib import Path

from dgtraces.errors import Code, DgtracesError, Failure

BINARIES = {"all_reduce": "allreduce", "all_gather": "allgather", "broadcast": "broadcast",
            "reduce_scatter": "reduce_scatter", "reduce": "reduce"}
# nccl-tests binaries of collectives the comm table does not hold: a log naming one is
# refused by import (not read as the all-gather its columns resemble); validate-comm models
# alltoall
OTHER_BINARIES = ("alltoall", "sendrecv", "scatter", "gather", "hypercube")
NAMED = re.compile(r"\b(" + "|".join((*BINARIES, *OTHER_BINARIES)) + r")_perf")
RANK_LINE = re.compile(r"^#\s*Rank\s")
RANK = re.compile(r"^#\s*Rank\s+(\d{1,9})\s+(?:Group\s+\d{1,9}\s+)?Pid\s+\d{1,12}\s+on\s+(\S+)\s+"
                  r"device\s+(\d{1,9})\s+\[[^\]]*\]\s+(?P<name>.+?)\s*$", re.ASCII)
HEADER = re.compile(r"^#\s*nThread\s")
DEVICES = re.compile(r"^#\s*Using devices")
COLUMNS = re.compile(r"^#\s*size\s+count\s+type")
SUMMARY = re.compile(r"^#\s*(Out of bounds values|Avg bus bandwidth)")
ITERS = re.compile(r"(?<!warmup )(?<!agg )\biters:\s*(\d{1,12})\b", re.ASCII)
# the header's sweep: nccl-tests runs sizes min, min*f (or min+step), ... while <= maxBytes
SWEEP = re.compile(r"minBytes\s+(\d{1,20})\s+maxBytes\s+(\d{1,20})\s+step:\s*(\d{1,20})"
                   r"\((factor|bytes)\)", re.ASCII)
# nccl-tests lowers maxBytes to what the GPUs' memory holds, and says so after the header
REDUCED = re.compile(r"Reducing maxBytes to (\d{1,20})\b", re.ASCII)
# what a log states about how NCCL ran: the header's GPUs per process (-g) and the release
# NCCL prints at init ("NCCL INFO NCCL version 2.18.1+cuda12.1" with NCCL_DEBUG=INFO)
NGPUS = re.compile(r"\bnGpus\s+(\d{1,9})\b", re.ASCII)
NCCL_VERSION = re.compile(r"\bNCCL version (\d{1,4}\.\d{1,4}\.\d{1,4})", re.ASCII)
LONG_NUMBER = re.compile(r"\d{21,}", re.ASCII)  # a header or rank line: no count has 21 digits
# a first cell that claims to be a number: signed, with letters (1e3, 0x10, 8B), inf, nan
NUMBER_CELL = re.compile(r"[-+]?(\.?\d[0-9a-z.+-]*|inf[a-z]*|nan)",
                         re.IGNORECASE | re.ASCII)
SIZE = re.compile(r"\d{1,20}", re.ASCII)
MAX_NUMBER_CHARS = 32  # a printed time or bandwidth (nccl-tests prints <= 7 characters)
WORD_BYTES_MAX = 8  # widest nccl-tests type: a printed size is rounded down by < ranks x 8 B
PLACEMENTS = ("out-of-place", "in-place")
ALGBW_CHECKED_FROM = 0.1  # GB/s: below, 2 printed decimals say too little
ALGBW_TOLERANCE = 0.05  # relative: rounding of time (2-4 digits) and algbw
TIME_LABELS = ("time",)  # "cputime" (-C 1) is the host's time of the launch: not read


def bad(file: str, line: int, msg: str, found: str, expected: str | None = None,
        code: Code = Code.BAD_FILE, column: str | None = None) -> DgtracesError:
    """A typed error located at ``line`` of ``file`` (BAD_FILE unless ``code``)."""
    return DgtracesError(f"{file} line {line}: {msg}", code=code, failures=[
        Failure(code, msg, file=file, row=line, column=column, expected=expected,
                found=found)])


@dataclass(frozen=True)
class Layout:
    """Where a column header puts each value: the first ``time`` column, the width of one
    placement's block, and offsets in the block (``None``: not printed)."""

    columns: tuple[str, ...]
    first_time: int
    per_block: int
    algbw: int | None
    busbw: int | None
    wrong: int | None

    @classmethod
    def of(cls, columns: list[str], file: str, line: int) -> Layout:
        times = [i for i, c in enumerate(columns) if c in TIME_LABELS]
        if len(times) != 2 or columns[0] != "size":
            raise bad(file, line, "column header without two time blocks (out-of-place, "
                      "in-place)", " ".join(columns)[:120], "size count type ... time ... time")
        block = columns[times[0]:times[1]]
        wrong = next((i for i, c in enumerate(block) if c in ("#wrong", "error")), None)
        return cls(tuple(columns), times[0], times[1] - times[0],
                   block.index("algbw") if "algbw" in block else None,
                   block.index("busbw") if "busbw" in block else None, wrong)


@dataclass(slots=True)
class Best:
    """The row the collective is inferred from: the out-of-place block with the largest
    algbw, with its ``redop`` and ``root`` cells."""

    line: int
    size: int
    redop: str
    root: str | None
    algbw_gb_s: float
    busbw_gb_s: float


@dataclass
class Block:
    """One run in a log: header, rank lines and table rows (module doc)."""

    start: int  # its first line
    header: str | None = None
    header_line: int = 0
    reduced: int | None = None
    iters: int | None = None
    ranks: list[tuple[int, str, str]] = field(default_factory=list)
    layout: Layout | None = None
    lines: array = field(default_factory=lambda: array("q"))
    sizes: array = field(default_factory=lambda: array("q"))
    times_us: tuple[array, array] = field(default_factory=lambda: (array("d"), array("d")))
    best: Best | None = None
    ended: bool = False
    skipped: int = 0
    first_skipped: tuple[int, str] | None = None
    nccl_version: tuple[int, str] | None = None  # (line, x.y.z) of its "NCCL version" line

    @property
    def gpus_per_process(self) -> int | None:
        """The header's ``nGpus`` (nccl-tests ``-g``: GPUs one process drives), if stated."""
        m = NGPUS.search(self.header or "")
        return int(m[1]) if m else None

    def has_content(self) -> bool:
        return self.header is not None or bool(self.ranks) or self.layout is not None

    def __len__(self) -> int:
        return len(self.sizes)


@dataclass
class Log:
    """A log's blocks, the ``<binary>_perf`` names it mentions (binary -> (line, text)) and
    the sha256 of its bytes."""

    file: str
    blocks: list[Block]
    names: dict[str, tuple[int, str]]
    digest: str


def read_log(path: str | Path) -> Log:
    """Stream ``path`` into blocks (module doc); every block with rows is checked to end
    where its header's sweep ends (:func:`check_complete`)."""
    from dgtraces.io.bounded import MAX_GUNZIP_BYTES
    from dgtraces.io.lines import TextLines

    file = str(path)
    lines = TextLines(path, max_bytes=MAX_GUNZIP_BYTES)
    blocks: list[Block] = []
    names: dict[str, tuple[int, str]] = {}
    cur = Block(1)
    pending: tuple[int, str] | None = None  # an "NCCL version" line not yet given a block
    for lineno, raw in lines:
        line = raw.strip()
        if not line:
            continue
        for m in NAMED.finditer(line):
            names.setdefault(m[1], (lineno, m[0]))
        if "NCCL version" in line and (v := NCCL_VERSION.search(line)) is not None:
            if cur.ended:  # after a table's summary: the next run's
                pending = pending or (lineno, v[1])
            elif cur.nccl_version is None:
                cur.nccl_version = (lineno, v[1])
        if line.startswith("#"):
            cur = _comment(cur, blocks, line, lineno, file)
            if pending is not None and not cur.ended:  # a run opened after the summary
                cur.nccl_version, pending = cur.nccl_version or pending, None
        elif cur.layout is not None:
            _table_line(cur, line, lineno, file)
    blocks.append(cur)
    kept = [b for b in blocks if b.has_content()]
    for b in kept:
        check_complete(b, file)
    return Log(file, kept, names, lines.digest)


def _comment(cur: Block, blocks: list[Block], line: str, lineno: int, file: str) -> Block:
    """Handle one ``#`` line; returns the block it belongs to (a new one when it starts
    a run)."""
    def new() -> Block:
        blocks.append(cur)
        return Block(lineno)

    if (HEADER.match(line) or RANK_LINE.match(line) or "maxBytes" in line) and \
            LONG_NUMBER.search(line):
        raise bad(file, lineno, "a number longer than 20 digits", repr(line[:120]),
                  "counts and sizes of at most 20 digits")
    opens = HEADER.match(line) or DEVICES.match(line) or RANK_LINE.match(line) or \
        COLUMNS.match(line)
    if opens and not cur.has_content():
        cur.start = lineno  # a block starts at its first header, devices, rank or column line
    if HEADER.match(line):
        if "minBytes" in line and SWEEP.search(line) is None:
            raise bad(file, lineno, "malformed header: no sweep", repr(line[:120]),
                      "minBytes N maxBytes N step: N(factor|bytes)")
        cur = new() if cur.has_content() else cur
        cur.header, cur.header_line = line, lineno
        m = ITERS.search(line)
        cur.iters = int(m[1]) if m else None
    elif DEVICES.match(line):
        cur = new() if cur.ranks or cur.layout is not None else cur
    elif RANK_LINE.match(line):
        cur = new() if cur.layout is not None else cur
        m = RANK.match(line)
        if m is None:
            raise bad(file, lineno, "malformed rank line", repr(line[:120]),
                      "# Rank r [Group g] Pid p on HOST device d [bus] GPU NAME")
        cur.ranks.append((int(m[1]), m[2], m["name"]))
    elif COLUMNS.match(line):
        cur = new() if cur.layout is not None else cur
        cur.layout = Layout.of(line.lstrip("#").split(), file, lineno)
    elif (m := REDUCED.search(line)) is not None:
        cur.reduced = int(m[1])
    elif SUMMARY.match(line) and cur.layout is not None:
        cur.ended = True
    return cur


def _table_line(block: Block, line: str, lineno: int, file: str) -> None:
    """A non-comment line after a column header: a row (parsed strictly), or counted."""
    assert block.layout is not None
    cells = line.split()
    lay = block.layout
    t, w = lay.first_time, lay.per_block
    whole = len(cells) == len(lay.columns)  # the header's cell count, numbers as times
    if block.ended:  # after the summary: prose may start with a number, a row has it all
        if whole and NUMBER_CELL.fullmatch(cells[0]) and _is_number(cells[t]):
            raise bad(file, lineno, "a table row after the table's summary lines",
                      repr(line[:120]), "rows before '# Out of bounds values'")
        return
    if NUMBER_CELL.fullmatch(cells[0]) or (whole and _is_number(cells[t])
                                           and _is_number(cells[t + w])):
        _row(block, cells, line, lineno, file)
        return
    block.skipped += 1
    if block.first_skipped is None:
        block.first_skipped = (lineno, line[:60])


def _is_number(cell: str) -> bool:
    """A short number in ASCII (float("١٠") is 10.0: #36 low, non-ASCII digits)."""
    if not cell.isascii():
        return False
    try:
        float(cell)
    except ValueError:
        return False
    return len(cell) <= MAX_NUMBER_CHARS


def _number(cell: str, what: str, line: str, lineno: int, file: str) -> float:
    """A printed time or bandwidth: BAD_FILE unless a short number, PLAUSIBILITY unless
    finite."""
    value = float(cell) if _is_number(cell) else None
    if value is None:
        raise bad(file, lineno, f"non-numeric {what}", repr(line[:120]), "a number",
                  column=what)
    if not math.isfinite(value):
        raise bad(file, lineno, f"{what} is not finite", cell, "a finite number",
                  Code.PLAUSIBILITY, what)
    return value


def _row(block: Block, cells: list[str], line: str, lineno: int, file: str) -> None:
    """One table row: size, then each placement's time (and algbw, busbw, #wrong)."""
    lay = block.layout
    assert lay is not None
    if len(cells) != len(lay.columns):
        raise bad(file, lineno, "wrong number of columns", str(len(cells)), str(len(lay.columns)))
    if SIZE.fullmatch(cells[0]) is None:
        raise bad(file, lineno, "size is not a whole number of bytes", repr(cells[0][:40]),
                  "digits only", column="size")
    size = int(cells[0])
    values = [_placement(cells, lay, k, line, lineno, file) for k in range(2)]
    if lay.wrong is not None and lay.columns[lay.first_time + lay.wrong] == "#wrong":
        wrong = [cells[lay.first_time + k * lay.per_block + lay.wrong] for k in range(2)]
        if any(w not in ("0", "N/A") for w in wrong):
            raise DgtracesError(
                f"{file} line {lineno}: nccl-tests counted wrong results ({' / '.join(wrong)}); "
                "the run is not valid", code=Code.PLAUSIBILITY, failures=[Failure(
                    Code.PLAUSIBILITY, "#wrong > 0", file=file, row=lineno, column="#wrong",
                    expected="0", found=" / ".join(wrong))])
    times = (values[0][0], values[1][0])
    if size <= 0 or any(not t > 0 for t in times):
        raise bad(file, lineno, "size and times must be > 0", repr(line[:120]),
                  code=Code.PLAUSIBILITY)
    for k, (t, algbw, _) in enumerate(values):
        _check_algbw(size, t, algbw, PLACEMENTS[k], lineno, file)
    block.lines.append(lineno)
    block.sizes.append(size)
    block.times_us[0].append(times[0])
    block.times_us[1].append(times[1])
    algbw, busbw = values[0][1] or 0.0, values[0][2] or 0.0
    if block.best is None or algbw > block.best.algbw_gb_s:
        col = dict(zip(lay.columns[:lay.first_time], cells, strict=False))
        block.best = Best(lineno, size, col.get("redop", ""), col.get("root"), algbw, busbw)


def _placement(cells: list[str], lay: Layout, k: int, line: str, lineno: int, file: str
               ) -> tuple[float, float | None, float | None]:
    """Time, algbw and busbw (None: not printed) of placement ``k`` of a row."""
    at = lay.first_time + k * lay.per_block

    def value(name: str, off: int | None) -> float | None:
        return None if off is None else _number(cells[at + off], f"{name} ({PLACEMENTS[k]})",
                                                line, lineno, file)

    return (_number(cells[at], f"time ({PLACEMENTS[k]})", line, lineno, file),
            value("algbw", lay.algbw), value("busbw", lay.busbw))


def _check_algbw(size: int, time_us: float, reported: float | None, placement: str,
                 lineno: int, file: str) -> None:
    """A block's ``algbw`` (GB/s, printed with 2 decimals) must be size / time: a time
    column scaled by 1000 (ms or ns taken for us) disagrees with it (#29)."""
    if reported is None:
        return
    implied = size / (time_us * 1e3)  # bytes per ns = GB/s
    if reported >= ALGBW_CHECKED_FROM and \
            not abs(implied - reported) <= 0.006 + ALGBW_TOLERANCE * reported:
        raise DgtracesError(
            f"{file} line {lineno}: time and algbw disagree (a time in other units?)",
            code=Code.PLAUSIBILITY, failures=[Failure(
                Code.PLAUSIBILITY, "algbw differs from size / time", file=file, row=lineno,
                column=f"algbw ({placement})", expected=f"{implied:.4g} GB/s",
                found=f"{reported} GB/s")])


def sweep_end(header: str, reduced: int | None = None) -> tuple[int, str] | None:
    """The last size of the sweep a ``# nThread`` header announces (``reduced``: the maxBytes
    nccl-tests lowered it to), and the sweep as text; None when the header says none."""
    m = SWEEP.search(header)
    if m is None:
        return None
    low, high, step, how = int(m[1]), int(m[2]), int(m[3]), m[4]
    if reduced is not None:  # the sweep ends where memory allowed
        high = min(high, reduced)
        low = min(low, high)
    if how == "factor" and step > 1 and 0 < low <= high:
        end = low
        while end * step <= high:
            end *= step
    elif how == "bytes" and step > 0 and 0 < low <= high:
        end = low + (high - low) // step * step
    else:
        return None
    return end, f"minBytes {low} maxBytes {high} step {step} {how}"


def check_complete(block: Block, file: str) -> None:
    """BAD_FILE when the table stops before the header's sweep ends: nccl-tests runs
    ``size = minBytes; size <= maxBytes; size *= factor`` (or ``+= step``) and prints each
    size rounded down by less than ranks x 8 bytes, so the last line printed is within that
    of the sweep's last size, unless lines are missing."""
    if block.header is None or not len(block) or not block.ranks:
        return
    sweep = sweep_end(block.header, block.reduced)
    if sweep is None:
        return
    end, text = sweep
    last = block.sizes[-1]
    if last + len(block.ranks) * WORD_BYTES_MAX <= end:
        raise bad(file, block.lines[-1], "truncated log: the table stops before the sweep of "
                  "the header ends", f"last size {last}", f"last size {end} ({text})")
