"""``kernels-2.0`` applied to a network: per-layer device time of each direction from the
implicit-GEMM kernels of convolutions and fully connected layers and the bytes of every
other layer; host dispatch apart (docs/reconstruction-kernels.md).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import cache

import numpy as np

from dgtraces.reconstruct.kernels2.gemm import (
    ConvShape,
    Gemms,
    KernelParams,
    conv_gemm,
    fc_gemm,
    gemm_list,
    gemm_seconds,
    get_gpu,
)
from dgtraces.reconstruct.roofline.costmodel import GEMM_KINDS, LayerArrays, layer_arrays, traffic

SOFT_P = 4.0


@cache
def geometry(model: str) -> tuple[tuple[object, bool], ...]:
    """Per layer of ``model`` (layer_arrays order): a per-sample :class:`ConvShape` for
    conv, ``(n_in, n_out)`` for fc, None otherwise; and whether it is fed by the data."""
    from dgtraces.models.spec import DATA, infer
    from dgtraces.reconstruct.variants import get_variant_spec

    spec = get_variant_spec(model)
    shapes = {DATA: spec.input_shape}
    out = []
    for item in infer(spec):
        lay = item.layer
        first = shapes[lay.bottoms[0]]
        shapes[lay.name] = item.out
        if lay.kind == "conv":
            geo: object = ConvShape(1, first.c, first.h, first.w, item.out.c, lay.kernel,
                                    lay.kw, lay.stride, lay.stride, item.out.h, item.out.w,
                                    lay.group, lay.pad, lay.pw)
        elif lay.kind == "fc":
            geo = (first.numel, item.out.c)
        else:
            geo = None
        out.append((geo, DATA in lay.bottoms))
    return tuple(out)


def _scaled(cs: ConvShape, batch: int) -> ConvShape:
    return dataclasses.replace(cs, n=batch)


@cache
def _gemms(model: str, device: str, batch: int) -> tuple[Gemms, np.ndarray, np.ndarray]:
    """The GEMM kernels of ``model`` at ``batch``: (kernels, layer index, is backward)."""
    rows, layer, bwd = [], [], []
    for i, (geo, from_data) in enumerate(geometry(model)):
        if geo is None:
            continue
        for d in ("fwd", "dgrad", "wgrad"):
            if d == "dgrad" and from_data:
                continue
            if isinstance(geo, ConvShape):
                rows.append(conv_gemm(_scaled(geo, batch), d, device))
            else:
                rows.append(fc_gemm(batch, geo[0], geo[1], d, device))  # type: ignore[index]
            layer.append(i)
            bwd.append(d != "fwd")
    return gemm_list(rows, get_gpu), np.array(layer, int), np.array(bwd, bool)


def gemm_counts(model: str, device: str, batch: int, layers: int
                ) -> tuple[np.ndarray, np.ndarray]:
    """GEMM kernels per layer of ``model`` (``layers`` of them): (forward, backward)."""
    _, idx, is_bwd = _gemms(model, device, batch)
    return (np.bincount(idx[~is_bwd], minlength=layers),
            np.bincount(idx[is_bwd], minlength=layers))


@dataclass(frozen=True)
class NetTimes:
    """Device time per layer (ms) and the host dispatch of the pass (ms)."""

    fwd_ms: np.ndarray
    bwd_ms: np.ndarray
    update_ms: float
    host_fwd_ms: float
    host_bwd_ms: float
    host_update_ms: float


def net_times(model: str, device: str, p: KernelParams, batch: int,
              training: bool = True, la: LayerArrays | None = None) -> NetTimes:
    """Per-layer device times of ``model`` on ``device`` at ``batch``."""
    la = la if la is not None else layer_arrays(model)
    gpu = get_gpu(device)
    mem_rate = p.e_mem * gpu.bandwidth_gb_s * 1e9
    t0 = p.mem_floor_us() * 1e-6  # memory-bound kernels (GEMMs: t0 in gemm_seconds)
    g, idx, is_bwd = _gemms(model, device, batch)
    sec = gemm_seconds(g, p)
    is_gemm = np.isin(la.kind, GEMM_KINDS)
    bias = la.fwd_kernels - 1  # conv/fc: one GEMM per direction (+ one bias kernel)
    out, launched = [], []
    for back in (False, True):
        _, moved, _, kernels = traffic(la, batch, back, training=training or back)
        launched.append(float(kernels.sum()))
        mem = moved / mem_rate + kernels * t0
        if back:
            bias_bytes = batch * la.act_bytes
        else:
            bias_bytes = 2.0 * batch * la.act_bytes
        layer_gemm = np.bincount(idx[is_bwd == back], weights=sec[is_bwd == back],
                                 minlength=len(la.kind))
        gemm_t = layer_gemm + np.where(is_gemm, bias, 0) * (bias_bytes / mem_rate + t0)
        out.append(np.where(is_gemm, gemm_t, mem) * 1e3)
        if not training:
            break
    h = p.h_us * 1e-3
    update = (la.blobs * t0 + 5 * la.grad_bytes.sum() / mem_rate) * 1e3
    bwd = out[1] if training else np.zeros_like(out[0])
    return NetTimes(out[0], bwd, float(update), launched[0] * h,
                    launched[1] * h if training else 0.0, la.blobs * h)


def soft_max(a: float, b: float) -> float:
    return float((a ** SOFT_P + b ** SOFT_P) ** (1.0 / SOFT_P))


def predict_ms(model: str, device: str, p: KernelParams, batch: int, phase: str) -> float:
    """Whole-model time: ``inference`` (forward pass, inference mode) or ``train`` (fwd +
    bwd + update): the soft maximum of device time and host dispatch."""
    training = phase != "inference"
    t = net_times(model, device, p, batch, training)
    if not training:
        return soft_max(float(t.fwd_ms.sum()), t.host_fwd_ms)
    dev = float(t.fwd_ms.sum() + t.bwd_ms.sum()) + t.update_ms
    return soft_max(dev, t.host_fwd_ms + t.host_bwd_ms + t.host_update_ms)
