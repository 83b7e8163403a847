"""Host-side gradient staging: the memory copies around each CPU all-reduce.

The measured S-SGD collector (``dgtraces.collect.ssgd``) packs each message's gradients into
one flat tensor (``torch.cat``), all-reduces it, divides it by the worker count in place
(``div_``) and copies it back into the gradients (``copy_``): three passes over the message's
bytes on the worker's own thread, like the device-to-host and host-to-device copies around
MPI in B-Caffe. The predictor charges them as ``passes x (alpha + n / bw)`` per message with
the ``cpu-memcpy`` row of the links table, which :func:`measure_copy` measured on this
machine (plain single-thread ``copy_`` of fp32 tensors, not the S-SGD rows it is validated on).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from ..errors import require
from ..fitting import fit_alpha_beta  # the comm sweep's fit

COLLECTOR_PASSES = 3  # cat, div_, copy_ in dgtraces.collect.ssgd.Reducer
# DRAM-resident sizes: staged gradients were written during backward and are not hot in
# cache (on this machine copies of <= 32 MiB ran at 12-14 GB/s from cache, >= 64 MiB at ~6.3).
SIZES = (64 << 20, 128 << 20, 256 << 20)


@dataclass(frozen=True)
class CopyFit:
    alpha_us: float
    bandwidth_gb_s: float
    r2: float
    points: tuple[tuple[int, float], ...]  # (bytes, median ms)


def measure_copy(sizes=SIZES, reps: int = 15, threads: int = 1) -> CopyFit:
    """Time ``dst.copy_(src)`` for each size (median of ``reps``) and fit alpha-beta."""
    torch = require("torch", "collect", "host copy measurement")
    import statistics

    torch.set_num_threads(threads)
    points = []
    for nbytes in sizes:
        src = torch.rand(max(1, nbytes // 4))
        dst = torch.empty_like(src)
        dst.copy_(src)
        samples = []
        for _ in range(reps):
            t0 = time.perf_counter()
            dst.copy_(src)
            samples.append((time.perf_counter() - t0) * 1000.0)
        points.append((int(nbytes), statistics.median(samples)))
    fit = fit_alpha_beta([p[0] for p in points], [p[1] * 1000.0 for p in points])
    return CopyFit(fit.alpha_us, fit.bandwidth_gb_s, fit.r2, tuple(points))


if __name__ == "__main__":  # python -m dgtraces.predict.staging
    fit = measure_copy()
    for nbytes, ms in fit.points:
        print(f"{nbytes:>10} B  {ms:9.4f} ms")
    print(f"alpha_us={fit.alpha_us:.3f} bandwidth_gb_s={fit.bandwidth_gb_s:.3f} r2={fit.r2:.4f}")
