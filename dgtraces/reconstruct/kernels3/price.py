"""Pricing GEMM-class kernels under kernels-3 in the pre-registered order (a) measured, (b1)
the device's own kernel at another batch scaled by the model, (b2) the model times the shared
shape effect, (b3) the model alone; the K80 through the M40 and Habitat's wave scaling
(docs/reconstruction-kernels3.md, "Pricing order").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from dgtraces.reconstruct.kernels2.gemm import CLASSES, ConvShape, Gpu, conv_gemm
from dgtraces.reconstruct.kernels3 import engine, habitat
from dgtraces.reconstruct.kernels3.devices import Device
from dgtraces.reconstruct.kernels3.fit import KernelFit, modelled_seconds
from dgtraces.reconstruct.kernels3.kernelrows import KernelRows, conv_key, fc_row

# (device, precision) -> (shape key, direction) -> batch -> (time_ms, kernel ids)
Measured = dict[tuple[str, str], dict[int, tuple[float, tuple[str, ...]]]]


def measured_index(rows: KernelRows) -> dict[tuple[str, str], Measured]:
    """The published kernels by (device, precision), then (shape key, direction) and batch;
    identical published rows are merged into their geometric mean."""
    acc: dict = {}
    for kid, dev, prec, d, key, n, t in zip(rows.kernel_id, rows.device, rows.precision,
                                             rows.direction, rows.key, rows.batch,
                                             rows.time_ms, strict=True):
        per = acc.setdefault((str(dev), str(prec)), {}).setdefault((str(key), str(d)), {})
        per.setdefault(int(n), []).append((float(t), str(kid)))
    return {u: {k: {n: (float(np.exp(np.mean(np.log([t for t, _ in v])))),
                        tuple(i for _, i in v)) for n, v in by_n.items()}
                for k, by_n in per.items()} for u, per in acc.items()}


@dataclass(frozen=True)
class NetKernel:
    """One GEMM-class kernel of a layer: ``geo`` is the per-sample ConvShape or (in, out) of a
    fully connected layer; ``lookup`` the direction its measurements are keyed by."""

    layer: int
    direction: str  # fwd | dgrad | wgrad
    geo: ConvShape | tuple[int, int]

    @property
    def bwd(self) -> bool:
        return self.direction != "fwd"

    @property
    def lookup(self) -> str:
        return self.direction if isinstance(self.geo, ConvShape) else "gemm"

    def key(self, batch: int) -> str:
        if isinstance(self.geo, ConvShape):
            return conv_key(self.geo)
        n_in, n_out = self.geo
        return fc_row(batch, n_in, n_out, self.direction, "")[0]

    def row(self, batch: int, device: str) -> tuple:
        if isinstance(self.geo, ConvShape):
            return conv_gemm(dataclasses.replace(self.geo, n=batch), self.direction, device)
        n_in, n_out = self.geo
        return fc_row(batch, n_in, n_out, self.direction, device)[1]


@dataclass(frozen=True)
class Priced:
    """Per kernel: ms, how it was priced, whether it is an extrapolation; and what the K80
    transfer needs (FLOPs, operand and output bytes, thread blocks of the best candidate)."""

    ms: np.ndarray
    tags: tuple[str, ...]
    extrapolated: np.ndarray
    flops: np.ndarray
    bytes_: np.ndarray
    blocks: np.ndarray


@dataclass(frozen=True)
class Pricer:
    """Prices kernels on one GPU with its own kernels (``measured``) and constants, or, for a
    GPU without kernels, the shared prior (``theta`` = ``fit.theta0``, nothing measured)."""

    fit: KernelFit
    gpu: Gpu
    theta: np.ndarray
    measured: Measured

    def price(self, kernels: Iterable[NetKernel], batch: int) -> Priced:
        ks = list(kernels)
        rows = [k.row(batch, self.gpu.device) for k in ks]
        b = engine.batch(rows, [self.gpu] * len(rows))
        model_s, best = modelled_seconds(self.fit, b, self.theta)
        ms = model_s * 1e3
        tags, extra = [], np.zeros(len(ks), bool)
        scale_at: list[tuple[int, int, float]] = []  # (kernel, n0, measured ms) for (b1)
        for i, k in enumerate(ks):
            key = (k.key(batch), k.lookup)
            by_n = self.measured.get(key)
            if by_n and batch in by_n:
                ms[i] = by_n[batch][0]
                tags.append("a")
            elif by_n and isinstance(k.geo, ConvShape):
                n0 = min(by_n, key=lambda n: (abs(np.log(batch / n)), -n))
                scale_at.append((i, n0, by_n[n0][0]))
                tags.append("b1")
            elif key in self.fit.effects:
                ms[i] *= np.exp(self.fit.effects[key][0])
                tags.append("b2")
            else:
                tags.append("b3")
                extra[i] = self._outside(b, i)
        if scale_at:
            rows0 = [ks[i].row(n0, self.gpu.device) for i, n0, _ in scale_at]
            s0, _ = modelled_seconds(self.fit, engine.batch(rows0, [self.gpu] * len(rows0)),
                                     self.theta)
            for (i, _, t_meas), m0 in zip(scale_at, s0, strict=True):
                ms[i] = t_meas * model_s[i] / m0
        idx = np.arange(len(ks))
        return Priced(ms, tuple(tags), extra, b.flops, b.operand_bytes,
                      b.blocks[idx, best] if len(ks) else np.zeros(0))

    def _outside(self, b: engine.Batch, i: int) -> bool:
        lo, hi = self.fit.ranges.get(CLASSES[b.cls[i]], (None, None))
        if lo is None or hi is None:
            return True
        dims = np.array([b.m[i], b.n[i], b.k[i]])
        return bool(((dims < lo) | (dims > hi)).any())


@dataclass(frozen=True)
class Transfer:
    """The K80 path: each kernel priced on the origin GPU, then Habitat's wave scaling."""

    origin: Pricer
    origin_device: Device
    dest: Device

    def price(self, kernels: Iterable[NetKernel], batch: int) -> Priced:
        p = self.origin.price(kernels, batch)
        ms = habitat.scale(p.ms, p.flops, p.bytes_, p.blocks, self.origin_device, self.dest)
        tags = tuple(f"{t}@{self.origin_device.device}" for t in p.tags)
        return dataclasses.replace(p, ms=ms, tags=tags)


def network_kernels(model: str, training: bool) -> list[NetKernel]:
    """The GEMM-class kernels of ``model`` (layer order): conv and fc forward, data gradient
    (not for a layer fed by the data) and weight gradient; forward only for inference."""
    from dgtraces.reconstruct.kernels2.network import geometry

    out = []
    for i, (geo, from_data) in enumerate(geometry(model)):
        if geo is None:
            continue
        for d in ("fwd", "dgrad", "wgrad") if training else ("fwd",):
            if d == "dgrad" and from_data:
                continue
            out.append(NetKernel(i, d, geo))  # type: ignore[arg-type]
    return out
