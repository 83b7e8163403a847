"""nccl-tests logs (``all_reduce_perf``, ``all_gather_perf``, ``broadcast_perf``,
``reduce_perf``, ``reduce_scatter_perf``) -> ``comm`` points and ``comm_fits``.

A log has a ``# nThread .. nGpus .. iters: N ..`` line, a ``# Using devices`` block with one
``#  Rank  r Group g Pid p on HOST device d [bus] GPU NAME`` line per rank, then the table
``size count type redop [root] time algbw busbw #wrong`` twice per line: out-of-place, then
in-place (older versions print ``error`` instead of ``#wrong`` and no ``root`` column; both
are read by position from the header). Times are microseconds averaged over ``iters``.

Rows: ``workers`` = ranks, ``backend`` nccl, ``message_bytes`` = the ``size`` column (for
all_gather and reduce_scatter the whole buffer, ranks x the per-rank chunk, as nccl-tests
counts it), ``time_ms`` = the average time (``n`` = iters), ``interconnect`` = the given one
or ``<device key>-x<ranks>-intra-node`` (``-<hosts>-nodes`` across hosts), the device key
derived from the GPU name in the header (:func:`dgtraces.reference.devices.device_key`).
Out-of-place and in-place rows differ in ``source``. Fits:
:func:`dgtraces.fitting.fit_alpha_beta` with relative weights over each placement's sizes
(provenance ``reconstructed``: a model of the measured points); a placement whose slope
is not positive gets no fit row, but a note.

The collective comes from ``collective``, else the command line or file name
(``all_reduce_perf`` -> allreduce), else the columns (:func:`infer_from_columns`: the
busbw/algbw ratio for the rank count, ``redop`` and ``root``; refused, naming the columns
read, when not exactly one collective fits; a log naming another nccl-tests binary, e.g.
``alltoall_perf``, is BAD_INPUT); a non-zero ``#wrong`` count is PLAUSIBILITY (the run
produced wrong results), a malformed line BAD_FILE naming the line, and so is a table that
stops before the sweep its header announces ends (a log cut at a line boundary).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from dgtraces.errors import Code, DgtracesError, Failure
from dgtraces.importers.base import IMPORTER_VERSION, CommImport, frame, read_text

BINARIES = {"all_reduce": "allreduce", "all_gather": "allgather", "broadcast": "broadcast",
            "reduce_scatter": "reduce_scatter", "reduce": "reduce"}
# nccl-tests binaries of collectives the comm table does not hold: a log naming one is
# refused by import (not read as the all-gather its columns resemble); validate-comm models
# alltoall
OTHER_BINARIES = ("alltoall", "sendrecv", "scatter", "gather", "hypercube")
NAMED = re.compile(r"\b(" + "|".join((*BINARIES, *OTHER_BINARIES)) + r")_perf")
RANK = re.compile(r"^#\s*Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device\s+"
                  r"(\d+)\s+\[[^\]]*\]\s+(?P<name>.+?)\s*$")
ITERS = re.compile(r"(?<!warmup )(?<!agg )\biters:\s*(\d+)")
# the header's sweep: nccl-tests runs sizes min, min*f (or min+step), ... while <= maxBytes
SWEEP = re.compile(r"minBytes\s+(\d+)\s+maxBytes\s+(\d+)\s+step:\s*(\d+)\((factor|bytes)\)")
# nccl-tests lowers maxBytes to what the GPUs' memory holds, and says so after the header
REDUCED = re.compile(r"Reducing maxBytes to (\d+)")
WORD_BYTES_MAX = 8  # widest nccl-tests type: a printed size is rounded down by < ranks x 8 B
PLACEMENTS = ("out-of-place", "in-place")
MAX_RANKS = 32768  # more than any published nccl-tests run; 100,000 ranks is a forged log
ALGBW_CHECKED_FROM = 0.1  # GB/s: below, 2 printed decimals say too little
ALGBW_TOLERANCE = 0.05  # relative: rounding of time (2-4 digits) and algbw


@dataclass(frozen=True)
class Point:
    line: int
    size: int
    times_us: tuple[float, float]  # out-of-place, in-place
    redop: str = ""  # the columns the collective is inferred from (out-of-place block)
    root: str | None = None
    algbw_gb_s: float = 0.0
    busbw_gb_s: float = 0.0


@dataclass
class NcclTestsImport(CommImport):
    collective: str
    ranks: int
    hosts: int
    gpu: str
    device: str
    notes: tuple[str, ...] = ()
    collective_how: str = "given"


def _bad(file: str, line: int, msg: str, found: str, expected: str | None = None
         ) -> DgtracesError:
    return DgtracesError(f"{file} line {line}: {msg}", code=Code.BAD_FILE, failures=[
        Failure(Code.BAD_FILE, msg, file=file, row=line, expected=expected, found=found)])


@dataclass(frozen=True)
class Inferred:
    """The collective of a log and how it was told (``named`` or the columns read)."""

    collective: str
    how: str


def collective_of(text: str, path: Path, given: str | None, ranks: int = 0,
                  points: "list[Point] | None" = None) -> Inferred:
    """The collective: ``given``, else a ``<name>_perf`` in the log or the file name, else
    inferred from the table's columns (:func:`infer_from_columns`)."""
    if given is not None:
        if given not in BINARIES.values():
            raise DgtracesError(f"collective must be one of {', '.join(BINARIES.values())}, "
                                f"got {given!r}", code=Code.BAD_INPUT)
        return Inferred(given, "given")
    for where in (text[:4000], path.name):
        m = NAMED.search(where)
        if m:
            return Inferred(BINARIES.get(m[1], m[1]), f"named: {m[0]}")
    return infer_from_columns(str(path), ranks, points or [])


# collective -> (busbw/algbw for P ranks, reduces, has a root)
SIGNATURES = {"allreduce": (lambda p: 2 * (p - 1) / p, True, False),
              "reduce_scatter": (lambda p: (p - 1) / p, True, False),
              "allgather": (lambda p: (p - 1) / p, False, False),
              "broadcast": (lambda p: 1.0, False, True),
              "reduce": (lambda p: 1.0, True, True)}
RATIO_TOLERANCE = 0.03


def infer_from_columns(file: str, ranks: int, points: "list[Point]") -> Inferred:
    """The collective from busbw/algbw (for ``ranks``), ``redop`` (none: no reduction) and
    ``root`` (-1: none); BAD_INPUT naming the columns read when not exactly one fits."""
    read = ["busbw/algbw", "redop"] + (["root"] if points and points[0].root is not None else [])
    rated = [p for p in points if p.algbw_gb_s >= 0.1]
    if ranks < 2 or not rated:
        found = f"ranks {ranks}, {len(rated)} rows with algbw >= 0.1 GB/s"
        raise DgtracesError(f"{file}: cannot infer the collective (columns read: "
                            f"{', '.join(read)}; {found}); give --collective",
                            code=Code.BAD_INPUT, failures=[Failure(
                                Code.BAD_INPUT, "collective not inferable", file=file,
                                column=", ".join(read), found=found)])
    best = max(rated, key=lambda p: p.algbw_gb_s)
    ratio = best.busbw_gb_s / best.algbw_gb_s
    reduces = best.redop.lower() not in ("none", "-", "")
    root = None if best.root is None else best.root != "-1"
    fits = [c for c, (r, red, has_root) in SIGNATURES.items()
            if abs(r(ranks) / ratio - 1) <= RATIO_TOLERANCE and red == reduces
            and (root is None or root == has_root)]
    seen = (f"busbw/algbw {ratio:.3f} at {best.size} B for {ranks} ranks, redop "
            f"{best.redop or '?'}, root {best.root if best.root is not None else 'absent'}")
    if len(fits) != 1:
        raise DgtracesError(f"{file}: cannot infer the collective from the columns "
                            f"({', '.join(read)}: {seen}; fits {fits or 'none'}); give "
                            f"--collective", code=Code.BAD_INPUT, failures=[Failure(
                                Code.BAD_INPUT, "collective ambiguous", file=file,
                                column=", ".join(read), expected="exactly one collective",
                                found=", ".join(fits) or "none")])
    return Inferred(fits[0], f"inferred from the columns: {seen}")


def parse(text: str, file: str) -> tuple[list[tuple[int, str, str]], list[Point], int | None]:
    """(ranks as (rank, host, GPU name), table points, iters) of one log."""
    ranks: list[tuple[int, str, str]] = []
    points: list[Point] = []
    iters = None
    columns: list[str] | None = None
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            if (m := RANK.match(line)) is not None:
                ranks.append((int(m[1]), m[2], m["name"]))
            elif iters is None and (m := ITERS.search(line)) is not None and "nThread" in line:
                iters = int(m[1])
            elif re.match(r"^#\s*size\s+count\s+type", line):
                columns = line.lstrip("#").split()
            continue
        if columns is None or not line[0].isdigit():
            continue  # NCCL INFO/WARN lines, mpirun noise
        points.append(_point(line, lineno, columns, file))
    _check_complete(text, file, len(ranks), points)
    return ranks, points, iters


def _check_complete(text: str, file: str, ranks: int, points: "list[Point]") -> None:
    """BAD_FILE when the table stops before the header's sweep ends: nccl-tests runs
    ``size = minBytes; size <= maxBytes; size *= factor`` (or ``+= step``) and prints each
    size rounded down by less than ranks x 8 bytes, so the last line printed is within that
    of the sweep's last size, unless lines are missing."""
    m = SWEEP.search(text)
    if m is None or not points or ranks < 1:
        return
    low, high, step, how = int(m[1]), int(m[2]), int(m[3]), m[4]
    if (r := REDUCED.search(text)) is not None:  # the sweep ends where memory allowed
        high = min(high, int(r[1]))
        low = min(low, high)
    if how == "factor" and step > 1 and 0 < low <= high:
        end = low
        while end * step <= high:
            end *= step
    elif how == "bytes" and step > 0 and 0 < low <= high:
        end = low + (high - low) // step * step
    else:
        return
    last = points[-1]
    if last.size + ranks * WORD_BYTES_MAX <= end:
        raise _bad(file, last.line, "truncated log: the table stops before the sweep of the "
                   "header ends", f"last size {last.size}", f"last size {end} (minBytes {low} "
                   f"maxBytes {high} step {step} {how})")


def _point(line: str, lineno: int, columns: list[str], file: str) -> Point:
    """One table line: size, then the out-of-place and in-place time columns."""
    cells = line.split()
    first_time = columns.index("time")
    per_block = columns.index("time", first_time + 1) - first_time
    if len(cells) != len(columns):
        raise _bad(file, lineno, "wrong number of columns", str(len(cells)), str(len(columns)))
    try:
        size = int(cells[0])
        times = tuple(float(cells[first_time + k * per_block]) for k in range(2))
    except ValueError:
        raise _bad(file, lineno, "non-numeric size or time", repr(line[:120])) from None
    wrong_col = per_block - 1  # "#wrong" / "error" ends each block
    wrong = [cells[first_time + k * per_block + wrong_col] for k in range(2)]
    if columns[first_time + wrong_col] == "#wrong" and any(w not in ("0", "N/A") for w in wrong):
        raise DgtracesError(f"{file} line {lineno}: nccl-tests counted wrong results "
                            f"({' / '.join(wrong)}); the run is not valid", code=Code.PLAUSIBILITY,
                            failures=[Failure(Code.PLAUSIBILITY, "#wrong > 0", file=file,
                                              row=lineno, column="#wrong", expected="0",
                                              found=" / ".join(wrong))])
    if size <= 0 or any(not t > 0 for t in times):
        raise DgtracesError(f"{file} line {lineno}: size and times must be > 0",
                            code=Code.PLAUSIBILITY, failures=[Failure(
                                Code.PLAUSIBILITY, "non-positive value", file=file, row=lineno,
                                found=repr(line[:120]))])
    _check_algbw(cells, columns, first_time, per_block, size, times, lineno, file)
    col = {name: cells[i] for i, name in enumerate(columns[:first_time + per_block])}
    try:
        algbw, busbw = float(col.get("algbw", 0)), float(col.get("busbw", 0))
    except ValueError:
        raise _bad(file, lineno, "non-numeric algbw or busbw", repr(line[:120])) from None
    return Point(lineno, size, (times[0], times[1]), col.get("redop", ""), col.get("root"),
                 algbw, busbw)


def _check_algbw(cells, columns, first_time, per_block, size, times, lineno, file) -> None:
    """Each block's ``algbw`` (GB/s, printed with 2 decimals) must be size / time: a time
    column scaled by 1000 (ms or ns taken for us) disagrees with it (#29)."""
    if columns[first_time + 1] != "algbw":
        return
    for k in range(2):
        try:
            reported = float(cells[first_time + k * per_block + 1])
        except ValueError:
            raise _bad(file, lineno, "non-numeric algbw", repr(cells)[:120]) from None
        implied = size / (times[k] * 1e3)  # bytes per ns = GB/s
        if reported >= ALGBW_CHECKED_FROM and \
                not abs(implied - reported) <= 0.006 + ALGBW_TOLERANCE * reported:
            raise DgtracesError(
                f"{file} line {lineno}: time and algbw disagree (a time in other units?)",
                code=Code.PLAUSIBILITY, failures=[Failure(
                    Code.PLAUSIBILITY, "algbw differs from size / time", file=file, row=lineno,
                    column=f"algbw ({PLACEMENTS[k]})", expected=f"{implied:.4g} GB/s",
                    found=f"{reported} GB/s")])


def import_log(path, *, collective: str | None = None, interconnect: str | None = None,
               source: str | None = None) -> NcclTestsImport:
    """Import one nccl-tests log (see the module docstring)."""
    from dgtraces.fitting import fit_alpha_beta
    from dgtraces.io.files import utc_now
    from dgtraces.reference.devices import device_key

    path = Path(path)
    text, digest = read_text(path)
    file = str(path)
    ranks, points, iters = parse(text, file)
    if not ranks:
        raise DgtracesError(f"{file}: no '# Using devices' rank lines (not an nccl-tests log?)",
                            code=Code.BAD_FILE)
    numbers = sorted(r for r, _, _ in ranks)
    if len(ranks) > MAX_RANKS or numbers != list(range(len(ranks))):  # #29
        raise DgtracesError(f"{file}: rank lines are not ranks 0..n-1 once each (n <= "
                            f"{MAX_RANKS})", code=Code.PLAUSIBILITY,
                            failures=[Failure(Code.PLAUSIBILITY, "implausible rank lines",
                                              file=file, column="Rank",
                                              expected=f"0..n-1 once each, n <= {MAX_RANKS}",
                                              found=f"{len(ranks)} lines, ranks "
                                                    f"{numbers[0]}..{numbers[-1]}")])
    if len(points) < 1:
        raise DgtracesError(f"{file}: no size/time table lines", code=Code.EMPTY)
    inferred = collective_of(text, path, collective, len(ranks), points)
    coll = inferred.collective
    if coll not in BINARIES.values():
        known = " | ".join(BINARIES.values())
        raise DgtracesError(f"{file}: an nccl-tests {coll} log ({inferred.how}); the comm "
                            f"table holds {known}", code=Code.BAD_INPUT, failures=[Failure(
                                Code.BAD_INPUT, "collective not in the comm table", file=file,
                                column="collective", expected=known, found=coll)])
    sizes = [p.size for p in points]
    if len(set(sizes)) != len(sizes):
        raise DgtracesError(f"{file}: a size appears twice (two runs in one log? import them "
                            f"as separate files)", code=Code.DUPLICATE)
    names = sorted({name for _, _, name in ranks})
    hosts = len({host for _, host, _ in ranks})
    key = device_key(names[0])
    link = interconnect or (f"{key}-x{len(ranks)}-" + ("intra-node" if hosts == 1
                                                       else f"{hosts}-nodes"))
    cited = source or f"nccl-tests log {path.name} (sha256 {digest[:12]})"
    base = {"collective": coll, "backend": "nccl", "interconnect": link,
            "workers": len(ranks)}
    stamp = utc_now()
    comm, fits, notes = [], [], []
    for k, placement in enumerate(PLACEMENTS):
        src = f"{cited}; {placement}; GPUs: {', '.join(names)}"
        comm += [dict(base, message_bytes=p.size, time_ms=p.times_us[k] / 1000.0, n=iters,
                      provenance="measured", source=src, timestamp_utc=stamp)
                 for p in points]
        if len(points) < 2:
            notes.append(f"{placement}: one size, no alpha-beta fit")
            continue
        fit = fit_alpha_beta(sizes, [p.times_us[k] for p in points])
        if not fit.beta_us_per_byte > 0:
            notes.append(f"{placement}: time does not grow with size, no bandwidth to fit")
            continue
        row = fit.row()
        origin = row.pop("through_origin")
        fits.append(dict(base, **row, provenance="reconstructed", source=(
            f"alpha-beta fit, relative weights (dgtraces.importers.nccl_tests "
            f"{IMPORTER_VERSION}) of {src}" + ("; through the origin" if origin else ""))))
    return NcclTestsImport(frame("comm", comm), frame("comm_fits", fits), coll, len(ranks),
                           hosts, names[0], key, tuple(notes), inferred.how)
