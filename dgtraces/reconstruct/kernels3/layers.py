"""A network's layers under kernels-3: the GEMM-class kernels priced per layer and direction,
the memory-bound part as bytes and kernel counts (the bytes rule of roofline-1.1 / kernels-2.x,
bias kernels as kernels-2.0), and their composition with a GPU's memory constants and a
framework family's per-layer overhead (docs/reconstruction-kernels3.md, "(c)", "Framework
overhead", "Whole-model times").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dgtraces.reconstruct.roofline.costmodel import GEMM_KINDS, layer_arrays, traffic


@dataclass(frozen=True)
class Parts:
    """What a layer costs before the memory constants and the overhead are chosen: per
    direction (row 0 forward, row 1 backward) and layer, the GEMM-class kernels' ms, the
    memory-bound bytes and kernel count; how each layer's kernels were priced."""

    model: str
    batch: int
    training: bool
    layer: np.ndarray
    kind: np.ndarray
    gemm_ms: np.ndarray  # (2, layers)
    bytes_: np.ndarray  # (2, layers)
    kernels: np.ndarray  # (2, layers) memory-bound kernels
    tags: tuple[tuple[str, str], ...]  # per layer: (forward, backward) pricing, "+"-joined
    extrapolated: np.ndarray  # (layers,) a GEMM-class kernel priced outside the fitted range
    update_bytes: float
    update_kernels: float

    @property
    def layers(self) -> int:
        return len(self.layer)


def parts(model: str, batch: int, training: bool, pricer, amp: bool = False) -> Parts:
    """The parts of ``model`` at ``batch`` with ``pricer`` (a
    :class:`~dgtraces.reconstruct.kernels3.price.Pricer` or ``Transfer``)."""
    from dgtraces.reconstruct.kernels3.price import network_kernels

    la = layer_arrays(model)
    n = len(la.layer)
    ks = network_kernels(model, training)
    p = pricer.price(ks, batch)
    layer = np.array([k.layer for k in ks], int)
    back = np.array([k.bwd for k in ks], bool)
    gemm = np.zeros((2, n))
    for d in (0, 1):
        m = back == bool(d)
        gemm[d] = np.bincount(layer[m], weights=p.ms[m], minlength=n)
    tags = [["", ""] for _ in range(n)]
    for k, tag in zip(ks, p.tags, strict=True):
        cell = tags[k.layer]
        cell[int(k.bwd)] = f"{cell[int(k.bwd)]}+{tag}" if cell[int(k.bwd)] else tag
    extra = np.bincount(layer, weights=p.extrapolated.astype(float), minlength=n) > 0
    is_gemm = np.isin(la.kind, GEMM_KINDS)
    bias = la.fwd_kernels - 1  # conv/fc: one GEMM per direction, plus a bias kernel if any
    scale = 0.5 if amp else 1.0
    bytes_ = np.zeros((2, n))
    kernels = np.zeros((2, n))
    for d in (0, 1) if training else (0,):
        _, moved, _, kk = traffic(la, batch, bool(d), amp, training=training or bool(d))
        bias_bytes = scale * batch * la.act_bytes * (1.0 if d else 2.0)
        bytes_[d] = np.where(is_gemm, bias * bias_bytes, moved)
        kernels[d] = np.where(is_gemm, bias, kk)
        for i in np.flatnonzero(~is_gemm):
            tags[i][d] = "c"
    return Parts(model, batch, training, la.layer, la.kind, gemm, bytes_, kernels,
                 tuple((f, b) for f, b in tags), extra,
                 5.0 * float(la.grad_bytes.sum()) if training else 0.0,
                 float(la.blobs) if training else 0.0)


@dataclass(frozen=True)
class LayerTimes:
    """Per-layer times (ms) of one trace and the update."""

    fwd_ms: np.ndarray
    bwd_ms: np.ndarray
    update_ms: float


def compose(p: Parts, e_mem: float, floor_us: float, bandwidth_gb_s: float,
            overhead_us: float) -> LayerTimes:
    """Layer times: GEMM-class kernels + bytes / (e_mem B) + kernels x floor + the family's
    per-layer overhead once per layer and direction run."""
    rate = e_mem * bandwidth_gb_s * 1e9
    t = p.gemm_ms + (p.bytes_ / rate + p.kernels * floor_us * 1e-6) * 1e3 + overhead_us * 1e-3
    bwd = t[1] if p.training else np.zeros(p.layers)
    update = (p.update_bytes / rate + p.update_kernels * floor_us * 1e-6) * 1e3
    return LayerTimes(t[0], bwd, update)
