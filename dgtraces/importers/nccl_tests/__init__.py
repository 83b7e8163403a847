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

The collective comes from ``collective``, else a ``<name>_perf`` in the log or
file name (``all_reduce_perf`` -> allreduce), else the columns (the busbw/algbw ratio for
the rank count, ``redop`` and ``root``; refused, naming the columns read, when not exactly
one collective fits; a log naming another nccl-tests binary, e.g. ``alltoall_perf``, is
BAD_INPUT); a non-zero ``#wrong`` count is PLAUSIBILITY (the run
produced wrong results), a malformed line BAD_FILE naming the line, and so is a table that
stops before the sweep its header announces ends (a log cut at a line boundary).

The log is streamed in blocks (:mod:`.reader`: one run of a binary each; a file holding
several sweeps of one collective gives one set of rows and fits per block, ``block k of n
(line L)`` in their source); the collective is checked against every block's columns
(:mod:`.collective`: a ``<name>_perf`` in a comment or a given ``collective`` that the
columns contradict is BAD_INPUT, as is a second table of another collective). Lines inside
a table that are not rows are counted and reported in ``notes``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dgtraces.errors import Code, DgtracesError, Failure
from dgtraces.importers.base import IMPORTER_VERSION, CommImport, columns_frame

from .collective import Inferred, collective_of
from .reader import BINARIES, PLACEMENTS, Block, Log, check_complete, read_log

MAX_RANKS = 32768  # more than any published nccl-tests run; 100,000 ranks is a forged log


@dataclass(frozen=True)
class BlockSummary:
    """One block of an imported log: where it starts, its ranks, hosts, GPU and sizes, and
    the lines inside its table that are not rows (count, first one's line; 0 when none)."""

    line: int
    ranks: int
    hosts: int
    gpu: str
    device: str
    sizes: int
    skipped_lines: int = 0
    first_skipped_line: int = 0


@dataclass
class NcclTestsImport(CommImport):
    """``ranks``, ``hosts``, ``gpu`` and ``device`` are the first block's; ``blocks`` lists
    every block (one for a log of one run)."""

    collective: str
    ranks: int
    hosts: int
    gpu: str
    device: str
    notes: tuple[str, ...] = ()
    collective_how: str = "given"
    blocks: tuple[BlockSummary, ...] = ()


def _check_ranks(file: str, block: Block) -> None:
    if not block.ranks:
        raise DgtracesError(f"{file}: no '# Using devices' rank lines" + (
            f" for the table at line {block.start}" if block.start > 1 else
            " (not an nccl-tests log?)"), code=Code.BAD_FILE, failures=[Failure(
                Code.BAD_FILE, "no rank lines", file=file, row=block.start)])
    numbers = sorted(r for r, _, _ in block.ranks)
    if len(numbers) > MAX_RANKS or numbers != list(range(len(numbers))):  # #29
        raise DgtracesError(f"{file}: rank lines are not ranks 0..n-1 once each (n <= "
                            f"{MAX_RANKS})", code=Code.PLAUSIBILITY,
                            failures=[Failure(Code.PLAUSIBILITY, "implausible rank lines",
                                              file=file, column="Rank", row=block.start,
                                              expected=f"0..n-1 once each, n <= {MAX_RANKS}",
                                              found=f"{len(numbers)} lines, ranks "
                                                    f"{numbers[0]}..{numbers[-1]}")])


def _blocks(log: Log) -> list[Block]:
    """The blocks with a table; each with plausible rank lines and distinct sizes. A block
    without rows is a run that printed no results: the log is truncated (BAD_FILE) unless no
    block has rows (EMPTY)."""
    import numpy as np

    file = log.file
    tables = [b for b in log.blocks if len(b)]
    if not any(b.ranks for b in log.blocks):
        _check_ranks(file, tables[0] if tables else Block(1))
    if not tables:
        raise DgtracesError(f"{file}: no size/time table lines", code=Code.EMPTY)
    for b in log.blocks:
        if not len(b):
            raise DgtracesError(f"{file}: the run at line {b.start} printed no table rows "
                                "(truncated or failed run)", code=Code.BAD_FILE,
                                failures=[Failure(Code.BAD_FILE, "a run without table rows",
                                                  file=file, row=b.start)])
        _check_ranks(file, b)
        if np.unique(np.frombuffer(b.sizes, dtype=np.int64)).size != len(b):
            raise DgtracesError(f"{file}: a size appears twice in the table at line "
                                f"{b.start} (two runs in one table?)", code=Code.DUPLICATE,
                                failures=[Failure(Code.DUPLICATE, "size twice", file=file,
                                                  row=b.start, column="size")])
    return tables


def import_log(path, *, collective: str | None = None, interconnect: str | None = None,
               source: str | None = None) -> NcclTestsImport:
    """Import one nccl-tests log (see the module docstring)."""
    from dgtraces.importers.base import frame
    from dgtraces.io.files import utc_now

    path = Path(path)
    log = read_log(path)
    file = str(path)
    tables = _blocks(log)
    inferred = collective_of(log, path, collective)
    coll = inferred.collective
    if coll not in BINARIES.values():
        known = " | ".join(BINARIES.values())
        raise DgtracesError(f"{file}: an nccl-tests {coll} log ({inferred.how}); the comm "
                            f"table holds {known}", code=Code.BAD_INPUT, failures=[Failure(
                                Code.BAD_INPUT, "collective not in the comm table", file=file,
                                column="collective", expected=known, found=coll)])
    cited = source or f"nccl-tests log {path.name} (sha256 {log.digest[:12]})"
    stamp = utc_now()
    comm: list[dict] = []
    fits: list[dict] = []
    notes: list[str] = []
    summaries = []
    for k, block in enumerate(tables, start=1):
        where = f"block {k} of {len(tables)} (line {block.start})" if len(tables) > 1 else ""
        summary, base = _describe(block, coll, interconnect)
        summaries.append(summary)
        prefix = f"{cited}; {where}" if where else cited
        gpus = ", ".join(sorted({name for _, _, name in block.ranks}))
        comm.append(_rows(block, base, prefix, gpus, stamp))
        block_fits, block_notes = _fits(block, base, prefix, gpus)
        fits += block_fits
        notes += [f"{where}: {n}" if where else n for n in block_notes]
    first = summaries[0]
    return NcclTestsImport(columns_frame("comm", comm), frame("comm_fits", fits), coll,
                           first.ranks, first.hosts, first.gpu, first.device, tuple(notes),
                           inferred.how, tuple(summaries))


def _describe(block: Block, coll: str, interconnect: str | None) -> tuple[BlockSummary, dict]:
    """The block's summary and the columns its rows share."""
    from dgtraces.reference.devices import device_key

    names = sorted({name for _, _, name in block.ranks})
    hosts = len({host for _, host, _ in block.ranks})
    key = device_key(names[0])
    ranks = len(block.ranks)
    link = interconnect or (f"{key}-x{ranks}-" + ("intra-node" if hosts == 1
                                                  else f"{hosts}-nodes"))
    skipped_at = block.first_skipped[0] if block.first_skipped else 0
    return (BlockSummary(block.start, ranks, hosts, names[0], key, len(block),
                         block.skipped, skipped_at),
            {"collective": coll, "backend": "nccl", "interconnect": link, "workers": ranks})


def _rows(block: Block, base: dict, prefix: str, gpus: str, stamp: str) -> dict:
    """The block's comm rows as column arrays: out-of-place rows, then in-place rows."""
    import numpy as np

    n = len(block)

    def same(value: object):  # one reference repeated (np.full would copy a str per row)
        out = np.empty(2 * n, dtype=object)
        out.fill(value)
        return out

    return {**{key: same(value) for key, value in base.items() if key != "workers"},
            "workers": np.full(2 * n, base["workers"], dtype=np.int64),
            "message_bytes": np.tile(np.frombuffer(block.sizes, dtype=np.int64), 2),
            "time_ms": np.concatenate([np.frombuffer(t, dtype=np.float64) / 1000.0
                                       for t in block.times_us]),
            "n": same(None) if block.iters is None else np.full(2 * n, block.iters, np.int64),
            "provenance": same("measured"),
            "source": np.repeat(np.array([f"{prefix}; {p}; GPUs: {gpus}" for p in PLACEMENTS],
                                         dtype=object), n),
            "timestamp_utc": same(stamp)}


def _fits(block: Block, base: dict, prefix: str, gpus: str) -> tuple[list[dict], list[str]]:
    """The block's alpha-beta fits (one per placement), and notes (no fit, skipped lines)."""
    from dgtraces.fitting import fit_alpha_beta

    fits, notes = [], []
    for k, placement in enumerate(PLACEMENTS):
        src = f"{prefix}; {placement}; GPUs: {gpus}"
        if len(block) < 2:
            notes.append(f"{placement}: one size, no alpha-beta fit")
            continue
        fit = fit_alpha_beta(block.sizes, block.times_us[k])
        if not fit.beta_us_per_byte > 0:
            notes.append(f"{placement}: time does not grow with size, no bandwidth to fit")
            continue
        row = fit.row()
        origin = row.pop("through_origin")
        fits.append(dict(base, **row, provenance="reconstructed", source=(
            f"alpha-beta fit, relative weights (dgtraces.importers.nccl_tests "
            f"{IMPORTER_VERSION}) of {src}" + ("; through the origin" if origin else ""))))
    if block.skipped:
        line, text = block.first_skipped or (0, "")
        notes.append(f"{block.skipped} line(s) inside the table are not table rows and were "
                     f"skipped (first: line {line}: {text!r})")
    return fits, notes


__all__ = ["BINARIES", "PLACEMENTS", "Block", "BlockSummary", "Inferred", "Log",
           "NcclTestsImport", "check_complete", "collective_of", "import_log", "read_log"]
