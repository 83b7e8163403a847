"""OSU MPI allreduce latency logs -> ``comm`` points and ``comm_fits`` alpha-beta fits.

A log has ``# OSU MPI Allreduce Latency Test vX.Y.Z`` and ``# Size Avg Latency(us)`` headers,
then one line per message size: ``procs,size latency`` or, as in allreduce4.log, just
``size latency``; the process count then comes from ``workers`` or the file name's digits
(``allreduce4.log`` -> 4, labelled as inferred from the name in the result).

Fits: ordinary least squares of time_us = alpha + beta * bytes over the points, unweighted
(so large messages dominate). A two-segment fit split at the largest jump of the
time-per-size curve (the eager/rendezvous protocol switch, between 8 KiB and 12 KiB in the
shipped logs) replaces the single fit when its BIC is lower; each segment is one
``comm_fits`` row whose ``source`` names its size range. alpha and beta are constrained to
be >= 0 (a negative OLS slope becomes beta = 0 with alpha = mean; a negative intercept
refits through the origin); ``r2`` is reported for the constrained fit.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

from dgtraces.errors import Code, DgtracesError, Failure
from dgtraces.importers.base import IMPORTER_VERSION, CommImport, frame, read_text
from dgtraces.importers.shipped import citation

INTERCONNECT = "unknown (B-Caffe cluster)"
HEADER = re.compile(r"#\s*OSU MPI Allreduce Latency Test v?([0-9.]+)", re.ASCII)
POINT = re.compile(r"^(?:(\d+)\s*,\s*)?(\d+)\s+([0-9.]+(?:[eE][-+]?\d+)?)$", re.ASCII)  # #36


@dataclass
class OsuImport(CommImport):
    workers: int
    workers_from_name: bool
    split_bytes: int | None  # largest size of the first segment, None for one fit
    notes: tuple[str, ...] = ()  # fits left out (e.g. latency flat in size: no bandwidth)


@dataclass(frozen=True)
class Fit:
    alpha_us: float
    beta_us_per_byte: float
    r2: float
    sse: float
    sizes: tuple[int, ...]


def parse(text: str, file: str, workers: int | None = None):
    """-> (version, workers, workers_from_name, [(bytes, us), ...])."""
    version, points, procs = None, [], set()
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            m = HEADER.match(line)
            version = m[1] if m else version
            continue
        m = POINT.match(line)
        if not m:
            raise DgtracesError(f"{file} line {lineno}: malformed OSU line", code=Code.BAD_FILE,
                                failures=[Failure(Code.BAD_FILE, "malformed OSU line", file=file,
                                                  row=lineno, expected="[procs,]size latency",
                                                  found=repr(line[:80]))])
        if m[1] is not None:
            procs.add(int(m[1]))
        points.append((int(m[2]), float(m[3])))
    if version is None or not points:
        raise DgtracesError(f"{file}: not an OSU allreduce latency log (no header or points)",
                            code=Code.BAD_FILE)
    sizes = [p[0] for p in points]
    if len(procs) > 1 or len(set(sizes)) != len(sizes) or min(p[1] for p in points) <= 0:
        raise DgtracesError(f"{file}: mixed process counts, repeated sizes or non-positive "
                            f"latencies", code=Code.PLAUSIBILITY)
    from_name = False
    if procs:
        found = procs.pop()
        if workers is not None and workers != found:
            raise DgtracesError(f"{file}: log says {found} processes, --workers {workers}",
                                code=Code.BAD_INPUT)
        workers = found
    elif workers is None:
        m = re.search(r"(\d+)\D*$", Path(file).name, re.ASCII)
        if not m:
            raise DgtracesError(f"{file}: no process-count column; give --workers",
                                code=Code.BAD_INPUT)
        workers, from_name = int(m[1]), True
    _plausible(file, workers, points)
    return version, workers, from_name, points


MAX_WORKERS = 32768  # as nccl_tests.MAX_RANKS


def _plausible(file: str, workers: int, points) -> None:
    """An allreduce has 2..MAX_WORKERS processes, and no point moves its message faster
    than the comm table's bound, 2 TB/s (latencies in ms read as us are 1000x too fast;
    #29; declared once: ``tables.schema.MAX_COMM_BYTES_PER_US``, #36)."""
    from dgtraces.tables.schema import MAX_COMM_BYTES_PER_US as MAX_BYTES_PER_US

    bad = [] if 2 <= workers <= MAX_WORKERS else [
        Failure(Code.PLAUSIBILITY, "implausible process count", file=file, column="workers",
                expected=f"2..{MAX_WORKERS}", found=str(workers))]
    bad += [Failure(Code.PLAUSIBILITY, "faster than any interconnect (latency in another "
                    "unit?)", file=file, column="latency_us",
                    expected=f"size / latency <= {MAX_BYTES_PER_US:g} B/us",
                    found=f"{b} B in {us} us")
            for b, us in points if b / us > MAX_BYTES_PER_US][:20]
    if bad:
        raise DgtracesError(f"{file}: implausible process count or latencies (another unit?)",
                            code=Code.PLAUSIBILITY, failures=bad)


def fit(points) -> Fit:
    """Constrained (alpha, beta >= 0) unweighted least squares over [(bytes, us), ...]."""
    from dgtraces.fitting import fit_alpha_beta

    xs = [int(p[0]) for p in points]
    got = fit_alpha_beta(xs, [p[1] for p in points], weights="uniform")
    return Fit(got.alpha_us, got.beta_us_per_byte, got.r2, got.sse_us2, tuple(xs))


def _bic(sse: float, n: int, k: int) -> float:
    return n * math.log(max(sse, 1e-12) / n) + k * math.log(n)


def best_fits(points) -> tuple[list[Fit], int | None]:
    """One fit, or two split at the largest jump in latency if the BIC prefers it."""
    points = sorted(points)
    one = fit(points)
    if len(points) < 6:
        return [one], None
    jumps = [points[i + 1][1] / points[i][1] for i in range(len(points) - 1)]
    candidates = [i for i in range(1, len(points) - 2)]
    i = max(candidates, key=lambda j: jumps[j])
    two = [fit(points[:i + 1]), fit(points[i + 1:])]
    n = len(points)
    if _bic(two[0].sse + two[1].sse, n, 5) < _bic(one.sse, n, 2):
        return two, points[i][0]
    return [one], None


def import_log(path, *, source: str | None = None, workers: int | None = None,
               backend: str | None = None, interconnect: str = INTERCONNECT) -> OsuImport:
    """Import one OSU allreduce log; a shipped log cites B-Caffe's logdata and commit."""
    path = Path(path)
    text, digest = read_text(path)
    source, _ = citation(digest, source, path)
    version, workers, from_name, points = parse(text, str(path), workers)
    backend = backend or f"mpi (osu-micro-benchmarks {version})"
    base = {"collective": "allreduce", "backend": backend, "interconnect": interconnect,
            "workers": workers, "provenance": "published", "source": source}
    comm = frame("comm", [dict(base, message_bytes=b, time_ms=us / 1000.0)
                          for b, us in points])
    fits, split = best_fits(points)
    rows, notes = [], []
    for f in fits:
        if not f.beta_us_per_byte > 0:  # flat or falling latency: no bandwidth to state
            notes.append(f"no fit row for {f.sizes[0]}-{f.sizes[-1]} B: latency does not grow "
                         "with size, so alpha-beta gives no bandwidth")
            continue
        what = (f"alpha-beta least squares (dgtraces.importers.osu {IMPORTER_VERSION}) "
                f"over {f.sizes[0]}-{f.sizes[-1]} B of {source}")
        if split is not None:
            what += f"; split at the protocol jump after {split} B"
        rows.append(dict(base, alpha_us=f.alpha_us, beta_us_per_byte=f.beta_us_per_byte,
                         bandwidth_gb_s=1e-3 / f.beta_us_per_byte,
                         r2=f.r2, n_points=len(f.sizes), min_bytes=f.sizes[0],
                         max_bytes=f.sizes[-1], provenance="reconstructed", source=what))
    return OsuImport(comm, frame("comm_fits", rows), workers, from_name, split, tuple(notes))
