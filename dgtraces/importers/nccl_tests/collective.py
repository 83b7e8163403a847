"""Which collective an nccl-tests log measured, checked against its columns (issue #36
item 4).

Each nccl-tests binary prints ``busbw = algbw x factor(P)`` (its ``GetBw``), a ``redop``
(``none`` when it does not reduce) and a ``root`` (``-1`` when it has none): the
:data:`SIGNATURES` below, read from nccl-tests' ``src/*.cu``. A block whose best row (the
largest algbw, >= 0.1 GB/s) and rank count (>= 2) say so is *checkable*; the names it is
consistent with are :func:`consistent`.

* A collective given by the caller, or named by a ``<binary>_perf`` anywhere in the log or
  in its file name, is checked against every checkable block: a contradiction (an all-reduce
  table under an ``all_gather_perf`` comment) is BAD_INPUT naming the columns read, and so
  is a log naming two different binaries.
* Unnamed, each checkable block must fit exactly one collective of the comm table, the same
  for every block (a second table of another collective is BAD_INPUT).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dgtraces.errors import Code, DgtracesError, Failure

from .reader import BINARIES, NAMED, Block, Log


@dataclass(frozen=True)
class Signature:
    """``busbw / algbw`` for ``P`` ranks, whether ``redop`` names a reduction, whether a
    ``root`` >= 0 is printed."""

    bus_factor: Callable[[int], float]
    reduces: bool
    rooted: bool


def _ring(p: int) -> float:
    return (p - 1) / p


# the comm table's collectives, then the other binaries (named only: never inferred)
SIGNATURES: dict[str, Signature] = {
    "allreduce": Signature(lambda p: 2 * (p - 1) / p, True, False),
    "reduce_scatter": Signature(_ring, True, False),
    "allgather": Signature(_ring, False, False),
    "broadcast": Signature(lambda p: 1.0, False, True),
    "reduce": Signature(lambda p: 1.0, True, True),
}
OTHER_SIGNATURES: dict[str, Signature] = {
    "alltoall": Signature(_ring, False, False),
    "sendrecv": Signature(lambda p: 1.0, True, False),  # prints the op it was given
    "scatter": Signature(_ring, False, True),
    "gather": Signature(_ring, False, True),
    "hypercube": Signature(lambda p: 1.0, False, False),
}
RATIO_TOLERANCE = 0.03
CHECKED_FROM_GB_S = 0.1  # algbw below: 2 printed decimals say too little


@dataclass(frozen=True)
class Inferred:
    """The collective of a log and how it was told (``given``, ``named: ..`` or the columns
    read)."""

    collective: str
    how: str


def read_columns(block: Block) -> list[str]:
    return ["busbw/algbw", "redop"] + (["root"] if block.best and block.best.root is not None
                                       else [])


def consistent(block: Block, ranks: int | None = None,
               among: dict[str, Signature] | None = None) -> list[str] | None:
    """The collectives of ``among`` (default: every signature) that fit the block's best row
    for ``ranks`` (default: its rank lines); None when the block is not checkable."""
    p = len(block.ranks) if ranks is None else ranks
    best = block.best
    if p < 2 or best is None or not best.algbw_gb_s >= CHECKED_FROM_GB_S:
        return None
    ratio = best.busbw_gb_s / best.algbw_gb_s
    reduces = best.redop.lower() not in ("none", "-", "")
    root = None if best.root is None else best.root != "-1"
    sigs = among if among is not None else {**SIGNATURES, **OTHER_SIGNATURES}
    return [name for name, s in sigs.items()
            if abs(ratio - s.bus_factor(p)) <= RATIO_TOLERANCE * s.bus_factor(p)
            and s.reduces == reduces and (root is None or root == s.rooted)]


def seen(block: Block, ranks: int | None = None) -> str:
    """What was read from the columns, for messages."""
    best = block.best
    p = len(block.ranks) if ranks is None else ranks
    if best is None or not best.algbw_gb_s > 0:
        return f"ranks {p}, no row with algbw > 0"
    return (f"busbw/algbw {best.busbw_gb_s / best.algbw_gb_s:.3f} at {best.size} B for {p} "
            f"ranks, redop {best.redop or '?'}, root "
            f"{best.root if best.root is not None else 'absent'}")


def _names(log: Log, path: Path) -> dict[str, str]:
    """collective -> where it is named (``<binary>_perf`` in the log, or the file name)."""
    out = {BINARIES.get(b, b): f"line {line}: {text}" for b, (line, text) in log.names.items()}
    m = NAMED.search(path.name)
    if m is not None:
        out.setdefault(BINARIES.get(m[1], m[1]), f"file name: {m[0]}")
    return out


def _refuse(file: str, message: str, what: str, column: str, expected: str, found: str,
            row: int | None = None) -> DgtracesError:
    return DgtracesError(f"{file}: {message}", code=Code.BAD_INPUT, failures=[Failure(
        Code.BAD_INPUT, what, file=file, row=row, column=column, expected=expected,
        found=found)])


def collective_of(log: Log, path: Path, given: str | None, ranks: int | None = None
                  ) -> Inferred:
    """The collective of ``log`` (module doc); ``ranks`` overrides the rank lines."""
    file = log.file
    if given is not None:
        if given not in BINARIES.values():
            raise DgtracesError(f"collective must be one of {', '.join(BINARIES.values())}, "
                                f"got {given!r}", code=Code.BAD_INPUT)
        claims = {given: "given"}
    else:
        claims = _names(log, path)
    if len(claims) > 1:
        found = "; ".join(f"{c} ({where})" for c, where in claims.items())
        raise _refuse(file, f"the log names several nccl-tests binaries ({found}); give "
                      "one log per binary", "several binaries named", "<binary>_perf",
                      "one binary", found)
    if claims:
        ((name, where),) = claims.items()
        for block in log.blocks:
            fits = consistent(block, ranks)
            if fits is not None and name not in fits:
                raise _refuse(file, f"{name} ({where}) contradicts the columns of the table "
                              f"at line {block.start} ({seen(block, ranks)}: fits "
                              f"{', '.join(fits) or 'none'})", "collective contradicts the "
                              "columns", ", ".join(read_columns(block)), name,
                              ", ".join(fits) or "none",
                              None if block.best is None else block.best.line)
        return Inferred(name, where if where == "given" else f"named: {where.split(': ')[-1]}")
    return _infer(log, ranks)


def _infer(log: Log, ranks: int | None) -> Inferred:
    """Unnamed: every checkable block fits exactly one collective of the comm table, the
    same one."""
    file = log.file
    found: dict[str, Block] = {}
    for block in log.blocks:
        if not len(block):
            continue
        fits = consistent(block, ranks, SIGNATURES)
        read = ", ".join(read_columns(block))
        if fits is None:
            raise DgtracesError(f"{file}: cannot infer the collective (columns read: {read}; "
                                f"{seen(block, ranks)}, none with algbw >= "
                                f"{CHECKED_FROM_GB_S} GB/s or < 2 ranks); give --collective",
                                code=Code.BAD_INPUT, failures=[Failure(
                                    Code.BAD_INPUT, "collective not inferable", file=file,
                                    column=read, found=seen(block, ranks))])
        if len(fits) != 1:
            raise DgtracesError(f"{file}: cannot infer the collective from the columns "
                                f"({read}: {seen(block, ranks)}; fits {fits or 'none'}); give "
                                f"--collective", code=Code.BAD_INPUT, failures=[Failure(
                                    Code.BAD_INPUT, "collective ambiguous", file=file,
                                    column=read, expected="exactly one collective",
                                    found=", ".join(fits) or "none")])
        found.setdefault(fits[0], block)
    if len(found) > 1:
        where = ", ".join(f"{c} (table at line {b.start})" for c, b in found.items())
        raise _refuse(file, f"tables of different collectives in one log ({where}); import "
                      "them as separate files", "tables of different collectives",
                      "busbw/algbw, redop", "one collective per log", where)
    if not found:
        raise DgtracesError(f"{file}: no size/time table lines", code=Code.EMPTY)
    ((name, block),) = found.items()
    return Inferred(name, f"inferred from the columns: {seen(block, ranks)}")
