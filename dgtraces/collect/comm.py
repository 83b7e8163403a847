"""Collective microbenchmark (gloo on localhost, or NCCL on this node's GPUs) -> ``comm``
points + ``comm_fits``.

Each repetition starts after a barrier; its time is the slowest rank's (the collective is
done when every rank is done). Points are medians with p10/p90. The alpha-beta model
``time = alpha + beta * bytes`` is fitted by least squares over all sizes of a collective,
weighting each point by 1/time (i.e. minimising *relative* residuals, so that small-message
latency is not swamped by the largest messages, whose absolute residuals dominate plain OLS
on a 4 B..64 MiB sweep). R^2 is computed on the unweighted times. If the fit gives a
negative alpha, it is redone through the origin (alpha = 0), and the fit's ``source`` says so.
A collective whose fitted slope is not positive (sizes too small to resolve bandwidth) gets
no ``comm_fits`` row.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from .. import fitting
from ..errors import Code, DgtracesError
from . import env, procs

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

UNITS = {"": 1, "B": 1, "K": 1024, "KB": 1024, "KIB": 1024, "M": 1024 ** 2, "MB": 1024 ** 2,
         "MIB": 1024 ** 2, "G": 1024 ** 3, "GB": 1024 ** 3, "GIB": 1024 ** 3}
SUPPORTED = ("allreduce", "broadcast")
BACKENDS = ("gloo", "nccl")


def parse_size(text: str) -> int:
    """'4B', '64MiB', '1K' -> bytes (binary units; a multiple of 4 = whole fp32 elements)."""
    m = re.fullmatch(r"\s*(\d+)\s*([A-Za-z]*)\s*", str(text), re.ASCII)
    if not m or m[2].upper() not in UNITS:
        raise DgtracesError(f"bad size {text!r}; use e.g. 4B, 256KiB, 64MiB", code=Code.BAD_INPUT)
    value = int(m[1]) * UNITS[m[2].upper()]
    if value < 4 or value % 4:
        raise DgtracesError(f"size {text!r} must be a positive multiple of 4 bytes",
                            code=Code.BAD_INPUT)
    return value


def parse_sizes(text: str, factor: int = 4) -> list[int]:
    """'4B..64MiB' (geometric, x ``factor``) or a comma list '4B,1MiB'."""
    if factor < 2:
        raise DgtracesError("size factor must be >= 2", code=Code.BAD_INPUT)
    if ".." in text:
        lo, hi = (parse_size(p) for p in text.split("..", 1))
        if lo > hi:
            raise DgtracesError(f"empty size range {text!r}", code=Code.BAD_INPUT)
        sizes = [lo]
        while sizes[-1] * factor <= hi:
            sizes.append(sizes[-1] * factor)
        return sizes
    return sorted({parse_size(p) for p in text.split(",") if p.strip()})


def fit_alpha_beta(sizes, times_ms) -> dict:
    """The sweep's fit (:func:`dgtraces.fitting.fit_alpha_beta`, relative weights) as
    ``comm_fits`` columns plus ``through_origin``."""
    return fitting.fit_alpha_beta(sizes, [t * 1000.0 for t in times_ms]).row()


def time_collectives(dist, clock, make_buffer, sizes, collectives, repeats: int,
                     warmup: int) -> list[list[list[float]]]:
    """Seconds per (collective, size, repeat) on this rank: barrier, mark, collective, mark;
    the clock is read after each repeat's sync (host clock on gloo, CUDA events on NCCL)."""
    times = [[[0.0] * repeats for _ in sizes] for _ in collectives]
    for ci, coll in enumerate(collectives):
        for si, size in enumerate(sizes):
            buf = make_buffer(size // 4)
            for r in range(warmup + repeats):
                dist.barrier()
                t0 = clock.mark()
                if coll == "allreduce":
                    dist.all_reduce(buf)
                else:
                    dist.broadcast(buf, src=0)
                t1 = clock.mark()
                clock.sync()
                if r >= warmup:
                    times[ci][si][r - warmup] = clock.seconds(t0, t1)
    return times


def _worker(rank, world, port, result_path, sizes, collectives, repeats, warmup, backend,
            threads):
    import torch

    from .gpu import Target, clock_for

    target = Target("cuda", rank) if backend == "nccl" else Target("cpu")
    if target.cuda:
        torch.cuda.set_device(rank)
    dist = procs.init(rank, world, port, backend, threads)
    where = target.label

    def make_buffer(n: int):
        return torch.ones(n, dtype=torch.float32, device=where)

    got = time_collectives(dist, clock_for(target, torch), make_buffer, sizes, collectives,
                           repeats, warmup)
    times = torch.tensor(got, dtype=torch.float64, device=where)
    dist.all_reduce(times, op=dist.ReduceOp.MAX)
    procs.finish(rank, result_path, {"times_s": times.cpu().tolist(),
                                     "loadavg": env.loadavg()})


def _describe(backend: str, workers: int, threads: int) -> tuple[str, str]:
    """(interconnect, where-text) of a sweep: the loopback for gloo; for NCCL the GPUs of
    this node (NCCL picks NVLink, PCIe or shared memory itself)."""
    if backend != "nccl":
        return env.INTERCONNECT, (f"127.0.0.1 ({env.cpu_model()}, {threads} thread(s) "
                                  f"each)")
    import torch

    from dgtraces.reference.devices import device_key

    name = torch.cuda.get_device_name(0)
    return (f"{device_key(name)}-x{workers}-intra-node",
            f"{workers} x {name} in one node, one process per GPU, CUDA-event timing")


def collect_comm(*, workers: int = 2, sizes: list[int] | None = None, repeats: int = 20,
                 warmup: int = 3, backend: str = "gloo",
                 collectives: tuple[str, ...] = SUPPORTED, threads: int = 1
                 ) -> dict[str, "pd.DataFrame"]:
    """Measure collectives across ``sizes`` (bytes); returns ``comm`` and ``comm_fits``.
    ``backend`` gloo (CPU processes on 127.0.0.1) or nccl (one process per GPU; NO_CUDA at
    once without CUDA, NCCL or ``workers`` GPUs)."""
    env.positive_int("workers", workers)
    env.positive_int("repeats", repeats)
    env.nonneg_int("warmup", warmup)  # a negative warm-up would keep 0 ms samples
    if backend not in BACKENDS:
        raise DgtracesError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}",
                            code=Code.BAD_INPUT)
    bad = [c for c in collectives if c not in SUPPORTED]
    if bad or not collectives:
        raise DgtracesError(f"collectives must be among {SUPPORTED}, got {bad}",
                            code=Code.BAD_INPUT)
    sizes = sorted(set(sizes or parse_sizes("4B..64MiB")))
    if backend == "nccl":
        from .gpu import require_nccl

        require_nccl("collect comm --backend nccl", workers)
    else:
        env.require_torch("communication collection")
    before = env.loadavg()
    result = procs.spawn(_worker, workers, sizes, list(collectives), repeats, warmup, backend,
                         threads)
    stamp = env.utc_now()
    interconnect, where = _describe(backend, workers, threads)
    source = (f"dgtraces collect comm: torch.distributed {backend}, {workers} processes on "
              f"{where}, median of {repeats} after {warmup} warm-up; loadavg before "
              f"{before} after {result['loadavg']}")
    return sweep_frames(result["times_s"], sizes, collectives, backend=backend,
                        interconnect=interconnect, workers=workers, source=source,
                        stamp=stamp)


def sweep_frames(times_s, sizes, collectives, *, backend: str, interconnect: str,
                 workers: int, source: str, stamp: str) -> dict[str, "pd.DataFrame"]:
    """``comm`` points (median/p10/p90 per size) and ``comm_fits`` (relative-weighted
    alpha-beta per collective; none where the slope is not positive) of a sweep."""
    points, fits = [], []
    for ci, coll in enumerate(collectives):
        medians = []
        for si, size in enumerate(sizes):
            med, p10, p90, n = env.stats([t * 1000.0 for t in times_s[ci][si]])
            medians.append(med)
            points.append({"collective": coll, "backend": backend,
                           "interconnect": interconnect, "workers": workers,
                           "message_bytes": size, "time_ms": med, "p10_ms": p10,
                           "p90_ms": p90, "n": n, "provenance": "measured",
                           "source": source, "timestamp_utc": stamp})
        fit = fit_alpha_beta(sizes, medians) if len(sizes) >= 2 else None  # 1 size: no fit
        if fit is not None and fit["beta_us_per_byte"] > 0:  # else bandwidth unresolvable
            origin = fit.pop("through_origin")
            fits.append({"collective": coll, "backend": backend,
                         "interconnect": interconnect, "workers": workers, **fit,
                         "provenance": "measured",
                         "source": source + ("; fit through the origin (OLS alpha < 0)"
                                             if origin else "")})
    frames = {"comm": env.frame(points)}
    if fits:  # no table at all rather than one without columns
        frames["comm_fits"] = env.frame(fits)
    return frames
