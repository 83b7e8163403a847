"""kernels-2.0's GEMM engine with its tile / split-K candidates precomputed once per batch of
kernels, so that a fit evaluates thousands of kernels under new efficiencies in a few array
operations (docs/reconstruction-kernels3.md, "The GEMM-class kernel model").

The arithmetic is :func:`dgtraces.reconstruct.kernels2.gemm.gemm_seconds`'s, term for term
(tiles, waves per SM, split-K, operand bytes at ``e_mem`` = 0.8, transform bytes, the floor
``t0``); only the order changes: everything that does not depend on a fitted constant is
computed in :func:`batch`, the rest in :func:`seconds`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dgtraces.reconstruct.kernels2.gemm import (
    CLASSES,
    E_MEM_STAGE1,
    MIN_SPLIT_K,
    SPLITS,
    TILES,
    Gpu,
)

# every (tile, split) candidate, and the log operand reuse of its tile: rho = exp(gamma * this)
CANDIDATES = tuple((a, b, s) for a, b in TILES for s in SPLITS)
LOG_REUSE = np.array([np.log((a * b / (a + b)) / 64.0) for a, b, _ in CANDIDATES])


@dataclass(frozen=True)
class Batch:
    """GEMM-class kernels with their candidates precomputed (one row per kernel).

    ``compute_s``: compute time of each candidate at efficiency 1 and operand reuse 1;
    ``bytes_s``: its operand (and split-K partial) bytes over ``e_mem * B``; ``blocks``: its
    thread blocks (tiles x splits, the Habitat transfer's block count)."""

    m: np.ndarray
    n: np.ndarray
    k: np.ndarray
    g: np.ndarray
    cls: np.ndarray  # index into CLASSES
    extra_s: np.ndarray  # Winograd transform bytes over e_mem * B
    compute_s: np.ndarray  # (kernels, candidates)
    bytes_s: np.ndarray  # (kernels, candidates); inf where the candidate is not allowed
    blocks: np.ndarray  # (kernels, candidates)

    def __len__(self) -> int:
        return len(self.m)

    @property
    def flops(self) -> np.ndarray:
        return 2.0 * self.m * self.n * self.k * self.g

    @property
    def operand_bytes(self) -> np.ndarray:
        return 4.0 * (self.m * self.k + self.k * self.n + self.m * self.n) * self.g


def batch(rows: list[tuple], gpus: list[Gpu]) -> Batch:
    """``rows`` of (m, n, k, g, class, split, extra_bytes, device) as
    :func:`~dgtraces.reconstruct.kernels2.gemm.conv_gemm` builds them, each on ``gpus[i]``."""
    f = np.asarray
    if rows:
        m, n, k, g, cls, split, extra = (f(c) for c in list(zip(*rows, strict=True))[:7])
    else:
        m = n = k = g = extra = np.zeros(0)
        cls, split = np.zeros(0, int), np.zeros(0, bool)
    m, n, k, g, extra = (f(x, float) for x in (m, n, k, g, extra))
    cls = f([CLASSES.index(c) for c in cls], int)
    split = f(split, bool)
    peak = f([x.peak_tflops * 1e12 for x in gpus], float)
    mem_rate = E_MEM_STAGE1 * f([x.bandwidth_gb_s * 1e9 for x in gpus], float)
    sm = f([x.sm_count for x in gpus], float)
    comp = np.empty((len(m), len(CANDIDATES)))
    moved = np.empty_like(comp)
    blocks = np.empty_like(comp)
    for j, (a, b, s) in enumerate(CANDIDATES):
        tiles = np.ceil(m / a) * np.ceil(n / b) * g
        ok = (s == 1) | (split & (k / s >= MIN_SPLIT_K))
        waves = np.ceil(tiles * s / sm)
        comp[:, j] = waves * 2.0 * a * b * np.ceil(k / s) / (peak / sm)
        mv = 4.0 * (m * k + k * n + m * n) * g + (2.0 * s * m * n * g * 4.0 if s > 1 else 0.0)
        moved[:, j] = np.where(ok, mv / mem_rate, np.inf)
        blocks[:, j] = tiles * s
    return Batch(m, n, k, g, cls, extra / mem_rate, comp, moved, blocks)


def seconds(b: Batch, eff: np.ndarray, gamma: float, t0_us: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray]:
    """(time of each kernel in s, index of its best candidate): the fastest allowed candidate
    at per-kernel efficiency ``eff`` (of its class), plus the transforms and the floor."""
    rate = eff[:, None] * np.exp(gamma * LOG_REUSE)[None, :]
    t = np.maximum(b.compute_s / rate, b.bytes_s)  # a disallowed candidate has bytes_s = inf
    best = np.argmin(t, axis=1)
    return t[np.arange(len(t)), best] + b.extra_s + t0_us * 1e-6, best


def per_kernel(theta: np.ndarray, unit: np.ndarray, cls: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray]:
    """(efficiency, t0_us) of each kernel from ``theta`` (units x (classes + 1): the five
    class efficiencies, then t0_us) and each kernel's unit and class."""
    return theta[unit, cls], theta[unit, len(CLASSES)]


def subset(b: Batch, keep: np.ndarray) -> Batch:
    """Only the kernels in ``keep`` (a mask or indices)."""
    return Batch(*(getattr(b, f)[keep] for f in ("m", "n", "k", "g", "cls", "extra_s",
                                                 "compute_s", "bytes_s", "blocks")))
