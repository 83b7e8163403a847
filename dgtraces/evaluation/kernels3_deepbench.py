"""Clause 1 of kernels-3's pre-registered evaluation (docs/reconstruction-kernels3.md): the
DeepBench leave-one-GPU-out over the eight GPUs, roofline-1.1 on the V100 rows of the same
figures (the only DeepBench GPU it prices), and the Habitat transfer check (each GPU's conv
kernels from the M40's published ones), reported for the K80's uncertainty.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from dgtraces.reconstruct.kernels3.kernelrows import KernelRows

CONV = ("fwd", "dgrad", "wgrad")
ORIGIN = "m40"  # the K80's transfer origin; the check transfers from it too


@dataclass(frozen=True)
class Logo:
    """Every fp32 kernel (row x direction) with its published time, the leave-one-GPU-out
    prediction and, for V100, roofline-1.1's (NaN elsewhere and for GEMMs)."""

    rows: "KernelRows"
    predicted_ms: np.ndarray
    roofline_ms: np.ndarray

    def ape(self, predicted: np.ndarray | None = None) -> np.ndarray:
        p = self.predicted_ms if predicted is None else predicted
        return np.abs(p / self.rows.time_ms - 1.0) * 100

    def mask(self, directions=CONV, layers_only: bool = False, device: str | None = None
             ) -> np.ndarray:
        m = np.isin(self.rows.direction, directions)
        if layers_only:
            m &= self.rows.layer
        if device is not None:
            m &= self.rows.device == device
        return m


def fp32_rows(kernels: "pd.DataFrame") -> "KernelRows":
    from dgtraces.reconstruct.kernels3.kernelrows import kernel_rows

    rows = kernel_rows(kernels)
    return rows.select(rows.precision == "fp32")


def leave_one_gpu_out(kernels: "pd.DataFrame", progress: Callable[[str], None]) -> Logo:
    from dgtraces.reconstruct.kernels3.build import engine_gpus
    from dgtraces.reconstruct.kernels3.fit import leave_one_gpu_out as logo

    rows = fp32_rows(kernels)
    pred = logo(rows, engine_gpus(rows, "fp32"), "fp32", progress)
    return Logo(rows, pred, roofline_v100(rows))


def roofline_v100(rows: "KernelRows") -> np.ndarray:
    """roofline-1.1 (its v100 calibration) on the V100 conv kernels: each conv an isolated
    layer without bias, one kernel each way; its backward split between data and weight
    gradient in proportion to their FLOPs (equal), all to the weight gradient where no data
    gradient is published."""
    from dgtraces.reconstruct.roofline.calibration import calibrate
    from dgtraces.reconstruct.roofline.costmodel import LayerArrays, layer_costs

    cal = calibrate("v100")
    out = np.full(len(rows), np.nan)
    conv = (rows.device == "v100") & np.isin(rows.direction, CONV)
    with_dgrad = {str(k) for k, d in zip(rows.kernel_id, rows.direction, strict=True)
                  if d == "dgrad"}
    for i in np.flatnonzero(conv):
        both = str(rows.kernel_id[i]) in with_dgrad
        la = _conv_arrays(str(rows.key[i]), both, LayerArrays)
        c = layer_costs(la, cal.params("fp32"), cal.device, int(rows.batch[i]))
        fwd = str(rows.direction[i]) == "fwd"
        out[i] = float(c.fwd_ms[0]) if fwd else float(c.bwd_ms[0]) * (0.5 if both else 1.0)
    return out


def _conv_arrays(key: str, both: bool, LayerArrays):
    """A one-layer LayerArrays of the conv of shape ``key`` (per sample, no bias; ``both``:
    its backward runs a data and a weight gradient)."""
    c, h, w, kk, r, s, ph, pw, sh, sw = _parse_key(key)
    p = (h + 2 * ph - r) // sh + 1
    q = (w + 2 * pw - s) // sw + 1
    flops = 2.0 * kk * p * q * c * r * s
    params = kk * c * r * s
    one = np.ones(1)
    return LayerArrays(model="deepbench", layer=np.array([key], object),
                       kind=np.array(["conv"], object), fwd_flops=flops * one,
                       bwd_flops=(2.0 if both else 1.0) * flops * one,
                       in_bytes=4.0 * c * h * w * one, act_bytes=4.0 * kk * p * q * one,
                       grad_bytes=4.0 * params * one, params=params * one,
                       fwd_kernels=one.copy(), bwd_kernels=(2.0 if both else 1.0) * one,
                       winograd=np.array([(r, s, sh, sw) == (3, 3, 1, 1)]), blobs=1)


def _parse_key(key: str) -> tuple[int, ...]:
    """(C, H, W, K, R, S, pad_h, pad_w, stride_h, stride_w) of a conv shape key."""
    import re

    m = re.fullmatch(r"conv:c(\d+)h(\d+)w(\d+)k(\d+)r(\d+)s(\d+)p(\d+)x(\d+)u(\d+)x(\d+)g1", key)
    if m is None:
        from dgtraces.errors import Code, DgtracesError

        raise DgtracesError(f"not an ungrouped conv shape key: {key!r}", code=Code.BAD_INPUT)
    return tuple(int(x) for x in m.groups())


def habitat_check(rows: "KernelRows", model) -> dict[str, tuple[int, float]]:
    """GPU -> (kernels, MAPE %) of its conv kernels predicted from the M40's published kernel
    of the same shape, batch and direction by the K80 transfer's wave scaling (blocks from the
    M40's model of the kernel)."""
    from dgtraces.reconstruct.kernels3 import engine, habitat
    from dgtraces.reconstruct.kernels3.devices import get_device
    from dgtraces.reconstruct.kernels3.fit import modelled_seconds

    fit = model.fits["fp32"]
    origin = get_device(ORIGIN)
    src = {(str(k), str(d), int(n)): (float(t), i) for i, (dev, k, d, n, t) in enumerate(zip(
        rows.device, rows.key, rows.direction, rows.batch, rows.time_ms, strict=True))
        if dev == ORIGIN and d in CONV}
    idx = [v[1] for v in src.values()]
    b = engine.batch([rows.gemm[i] for i in idx], [origin.gpu("fp32")] * len(idx))
    _, best = modelled_seconds(fit, b, fit.theta[ORIGIN])
    blocks = {i: float(b.blocks[j, best[j]]) for j, i in enumerate(idx)}
    flops = dict(zip(idx, b.flops, strict=True))
    bytes_ = dict(zip(idx, b.operand_bytes, strict=True))
    out = {}
    for dev in sorted(set(rows.device) - {ORIGIN}):
        dest = get_device(dev)
        ape = []
        for i in np.flatnonzero((rows.device == dev) & np.isin(rows.direction, CONV)):
            hit = src.get((str(rows.key[i]), str(rows.direction[i]), int(rows.batch[i])))
            if hit is None:
                continue
            t0, j = hit
            t = habitat.scale(np.array([t0]), np.array([flops[j]]), np.array([bytes_[j]]),
                              np.array([blocks[j]]), origin, dest)[0]
            ape.append(abs(t / rows.time_ms[i] - 1.0) * 100)
        out[dev] = (len(ape), float(np.mean(ape)) if ape else float("nan"))
    return out
