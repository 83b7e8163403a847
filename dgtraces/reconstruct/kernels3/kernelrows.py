"""The published kernels kernels-3 fits on and prices from: the ``kernels`` table of a release,
one entry per (row, direction) with a published time, each with its shape key, its implicit
GEMM and the batch it was measured at (docs/reconstruction-kernels3.md).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from dgtraces.reconstruct.kernels2.gemm import ConvShape, conv_gemm, fc_gemm

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

DIRECTIONS = ("fwd", "dgrad", "wgrad")
# devices priced with another device's kernels and constants: the same part, same figures
SAME_PART = {"v100-dgxs-32gb": "v100"}
# the columns a fit reads: their digest ties a parameter table to the rows it was fitted on
FIT_COLUMNS = ("kernel_id", "device", "op", "precision", "batch_size", "in_c", "in_h", "in_w",
               "out_c", "kernel_h", "kernel_w", "pad_h", "pad_w", "stride_h", "stride_w",
               "gemm_m", "gemm_n", "gemm_k", "fwd_ms", "dgrad_ms", "wgrad_ms")


def conv_key(cs: ConvShape) -> str:
    """A conv's shape without its batch: what shape effects and measured kernels are keyed by."""
    return (f"conv:c{cs.c}h{cs.h}w{cs.w}k{cs.k}r{cs.r}s{cs.s}p{cs.pad_h}x{cs.pad_w}"
            f"u{cs.stride_h}x{cs.stride_w}g{cs.group}")


def gemm_key(m: int, n: int, k: int) -> str:
    return f"gemm:m{m}n{n}k{k}"


def conv_shape(r: dict) -> ConvShape:
    """The ``ConvShape`` of a ``kernels`` conv row (ungrouped, as DeepBench publishes them)."""
    x = {c: int(r[c]) for c in ("batch_size", "in_c", "in_h", "in_w", "out_c", "kernel_h",
                                "kernel_w", "pad_h", "pad_w", "stride_h", "stride_w")}
    p = (x["in_h"] + 2 * x["pad_h"] - x["kernel_h"]) // x["stride_h"] + 1
    q = (x["in_w"] + 2 * x["pad_w"] - x["kernel_w"]) // x["stride_w"] + 1
    return ConvShape(x["batch_size"], x["in_c"], x["in_h"], x["in_w"], x["out_c"],
                     x["kernel_h"], x["kernel_w"], x["stride_h"], x["stride_w"], p, q, 1,
                     x["pad_h"], x["pad_w"])


@dataclass(frozen=True)
class KernelRows:
    """One entry per published (kernel row, direction): arrays of equal length."""

    kernel_id: np.ndarray
    device: np.ndarray
    precision: np.ndarray
    direction: np.ndarray  # fwd | dgrad | wgrad | gemm
    key: np.ndarray  # shape key without the batch
    batch: np.ndarray  # conv batch N; GEMM: its M
    layer: np.ndarray  # bool: a conv whose shape is a layer of a shipped model
    time_ms: np.ndarray
    gemm: tuple  # per entry the GEMM row (m, n, k, g, class, split, extra_bytes, device)

    def __len__(self) -> int:
        return len(self.time_ms)

    def select(self, keep: np.ndarray) -> "KernelRows":
        idx = np.flatnonzero(keep) if keep.dtype == bool else keep
        arrays = {f: getattr(self, f)[idx] for f in ("kernel_id", "device", "precision",
                                                     "direction", "key", "batch", "layer",
                                                     "time_ms")}
        return KernelRows(**arrays, gemm=tuple(self.gemm[i] for i in idx))


def kernel_rows(kernels: "pd.DataFrame") -> KernelRows:
    """Every (row, direction) of ``kernels`` with a published time."""
    cols: dict[str, list] = {f: [] for f in ("kernel_id", "device", "precision", "direction",
                                             "key", "batch", "layer", "time_ms")}
    gemms = []
    for r in kernels.to_dict("records"):
        device = str(r["device"])
        if r["op"] == "conv":
            cs = conv_shape(r)
            key = conv_key(cs)
            layer = isinstance(r.get("model"), str)
            entries = [(d, r[f"{d}_ms"], conv_gemm(cs, d, device)) for d in DIRECTIONS]
            batch = cs.n
        else:
            m, n, k = int(r["gemm_m"]), int(r["gemm_n"]), int(r["gemm_k"])
            key, layer, batch = gemm_key(m, n, k), False, m
            entries = [("gemm", r["fwd_ms"], (m, n, k, 1, "gemm", True, 0.0, device))]
        for d, t, g in entries:
            if t is None or not np.isfinite(t) or t <= 0:
                continue  # not measured (DeepBench's N/A*)
            for f, v in (("kernel_id", r["kernel_id"]), ("device", device),
                         ("precision", r["precision"]), ("direction", d), ("key", key),
                         ("batch", batch), ("layer", layer), ("time_ms", float(t))):
                cols[f].append(v)
            gemms.append(g)
    return KernelRows(**{f: np.array(v, dtype=float if f == "time_ms" else
                                     (bool if f == "layer" else (int if f == "batch" else str)))
                         for f, v in cols.items()}, gemm=tuple(gemms))


def fc_row(batch: int, n_in: int, n_out: int, direction: str, device: str) -> tuple[str, tuple]:
    """(shape key, GEMM row) of one direction of a fully connected layer."""
    g = fc_gemm(batch, n_in, n_out, direction, device)
    return gemm_key(*g[:3]), g


def digest(kernels: "pd.DataFrame") -> str:
    """sha256 of the fit columns of ``kernels`` in kernel_id order (CSV, 17 significant
    digits): a parameter table records the digest of the rows it was fitted on."""
    cols = [c for c in FIT_COLUMNS if c in kernels.columns]
    df = kernels[cols].sort_values("kernel_id").reset_index(drop=True)
    text = df.to_csv(index=False, lineterminator="\n", float_format="%.17g")
    return hashlib.sha256(text.encode()).hexdigest()
