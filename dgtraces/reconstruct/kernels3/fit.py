"""Stages K1-K4 of kernels-3 (docs/reconstruction-kernels3.md, "Shared priors and shape
effects"): the pooled fit (the shared prior), the shape effects, the per-GPU fits with a
Gaussian prior toward the pooled constants, two rounds; and the DeepBench leave-one-GPU-out
that evaluates the path a GPU without kernels takes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from dgtraces.errors import Code, DgtracesError
from dgtraces.reconstruct.kernels2.gemm import CLASSES
from dgtraces.reconstruct.kernels2.stage1 import STARTS, from_values, to_params
from dgtraces.reconstruct.kernels2.stage2_traces import WINO_UPPER, Box
from dgtraces.reconstruct.kernels3 import engine
from dgtraces.reconstruct.kernels3.kernelrows import KernelRows
from dgtraces.reconstruct.roofline.fit import levenberg_marquardt

PRIOR_SD = 0.5  # sd of log(theta_g / theta_0) per parameter (set, not fitted)
ROUNDS = 2  # K3 + K4, twice
MAX_ITER, TOL = 100, 1e-8
NAMES = (*(f"e_{c}" for c in CLASSES), "t0_us")
# per-GPU bounds: efficiencies [0.05, 1] (e_wino 1.78: F(4x4,3x3) on F(2x2,3x3) FLOPs), t0
UNIT_BOX = Box(NAMES, np.array([0.05] * len(CLASSES) + [0.5]),
               np.array([WINO_UPPER if c == "wino" else 1.0 for c in CLASSES] + [50.0]))

Progress = Callable[[str], None]


@dataclass
class KernelFit:
    """The fitted kernel model of one precision."""

    precision: str
    gamma: float
    theta0: np.ndarray  # the shared prior: five class efficiencies, t0_us
    theta: dict[str, np.ndarray]  # device -> its own constants
    effects: dict[tuple[str, str], tuple[float, int]]  # (shape key, direction) -> (u, GPUs)
    ranges: dict[str, tuple[np.ndarray, np.ndarray]]  # class -> (min, max) of (M, N, K)
    rms_log: dict[str, float]  # device -> rms log error of its kernels under the full model
    kernels: dict[str, int]  # device -> kernel times fitted


def _log_s(rows: KernelRows) -> np.ndarray:
    return np.log(rows.time_ms * 1e-3)


def pooled(b: engine.Batch, log_t: np.ndarray) -> tuple[np.ndarray, float]:
    """K1: kernels-2.0 stage 1 (its parametrisation, starts, optimiser) on ``b``:
    (theta0, gamma)."""
    def unpack(x):
        p = to_params(x)
        e = np.array([p.e_fwd, p.e_dgrad, p.e_wgrad, p.e_wino, p.e_gemm])
        return e, p.gamma, p.t0_us

    def fun(x):
        e, gamma, t0 = unpack(x)
        t, _ = engine.seconds(b, e[b.cls], gamma, np.full(len(b), t0))
        return np.log(t) - log_t

    best = None
    for start in STARTS:
        x, cost, _ = levenberg_marquardt(fun, from_values(start), max_iter=MAX_ITER, tol=TOL)
        if best is None or cost < best[1]:
            best = (x, cost)
    assert best is not None
    e, gamma, t0 = unpack(best[0])
    return np.append(e, t0), float(gamma)


def residuals(b: engine.Batch, log_t: np.ndarray, unit: np.ndarray,
              theta: np.ndarray, gamma: float) -> np.ndarray:
    """log(published / modelled) of every kernel under ``theta`` (units x params)."""
    eff, t0 = engine.per_kernel(theta, unit, b.cls)
    t, _ = engine.seconds(b, eff, gamma, t0)
    return log_t - np.log(t)


def shape_effects(rows: KernelRows, resid: np.ndarray
                  ) -> dict[tuple[str, str], tuple[float, int]]:
    """K2: (shape key, direction) -> (mean residual over every kernel of it, GPUs that
    measured it)."""
    out: dict[tuple[str, str], list] = {}
    for key, d, dev, r in zip(rows.key, rows.direction, rows.device, resid, strict=True):
        e = out.setdefault((str(key), str(d)), [[], set()])
        e[0].append(float(r))
        e[1].add(str(dev))
    return {k: (float(np.mean(v[0])), len(v[1])) for k, v in out.items()}


def effect_of(effects: dict, rows: KernelRows) -> np.ndarray:
    """Each entry's shape effect (0 where the shape is unknown)."""
    return np.array([effects.get((str(k), str(d)), (0.0, 0))[0]
                     for k, d in zip(rows.key, rows.direction, strict=True)])


def fit_unit(b: engine.Batch, target: np.ndarray, theta0: np.ndarray, gamma: float
             ) -> np.ndarray:
    """K3: one GPU's constants on ``target`` (its log times minus the shape effects), with the
    Gaussian prior toward ``theta0``; Levenberg-Marquardt from ``theta0``."""
    lo, hi = UNIT_BOX.lo, UNIT_BOX.hi
    start = np.clip(theta0, lo * 1.001, hi * 0.999)
    log0 = np.log(theta0)

    def values(x):
        s = 1.0 / (1.0 + np.exp(-np.clip(x, -30.0, 30.0)))
        return lo + (hi - lo) * s

    def fun(x):
        th = values(x)
        t, _ = engine.seconds(b, th[b.cls], gamma, np.full(len(b), th[-1]))
        return np.concatenate([np.log(t) - target, (np.log(th) - log0) / PRIOR_SD])

    x0 = UNIT_BOX.theta(dict(zip(NAMES, start, strict=True)))
    x, _, _ = levenberg_marquardt(fun, x0, max_iter=MAX_ITER, tol=TOL)
    return values(x)


def fit_kernels(rows: KernelRows, gpus: dict, precision: str,
                progress: Progress = lambda what: None) -> KernelFit:
    """K1-K4 on ``rows`` (one precision; ``gpus``: device -> engine constants)."""
    if not len(rows):
        raise DgtracesError(f"no {precision} kernels to fit", code=Code.NO_CALIBRATION)
    devices = sorted(set(rows.device))
    unit = np.array([devices.index(d) for d in rows.device])
    b = engine.batch(list(rows.gemm), [gpus[d] for d in rows.device])
    log_t = _log_s(rows)
    progress(f"kernels-3 K1 pooled fit, {precision}: {len(rows)} kernels of "
             f"{len(devices)} GPU(s)")
    theta0, gamma = pooled(b, log_t)
    theta = np.tile(theta0, (len(devices), 1))
    effects = shape_effects(rows, residuals(b, log_t, unit, theta, gamma))
    for rnd in range(ROUNDS):
        u = effect_of(effects, rows)
        for i, d in enumerate(devices):
            progress(f"kernels-3 K3 round {rnd + 1}, {precision} {d}")
            keep = unit == i
            theta[i] = fit_unit(engine.subset(b, keep), log_t[keep] - u[keep], theta0, gamma)
        effects = shape_effects(rows, residuals(b, log_t, unit, theta, gamma))
    final = residuals(b, log_t, unit, theta, gamma) - effect_of(effects, rows)
    ranges = {}
    for c, name in enumerate(CLASSES):
        m = b.cls == c
        if m.any():
            dims = np.stack([b.m[m], b.n[m], b.k[m]])
            ranges[name] = (dims.min(axis=1), dims.max(axis=1))
    return KernelFit(precision, gamma, theta0, {d: theta[i] for i, d in enumerate(devices)},
                     effects, ranges,
                     {d: float(np.sqrt(np.mean(final[unit == i] ** 2)))
                      for i, d in enumerate(devices)},
                     {d: int((unit == i).sum()) for i, d in enumerate(devices)})


def modelled_seconds(fit: KernelFit, b: engine.Batch, theta: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray]:
    """``M_g`` of every kernel of ``b`` under one device's ``theta``: (s, best candidate)."""
    return engine.seconds(b, theta[b.cls], fit.gamma, np.full(len(b), theta[-1]))


def leave_one_gpu_out(rows: KernelRows, gpus: dict, precision: str,
                      progress: Progress = lambda what: None) -> np.ndarray:
    """Clause 1: each kernel (ms) predicted by K1-K4 on the other GPUs, through (b2) / (b3)
    with their shared prior and shape effects: nothing of its own GPU is used."""
    pred = np.empty(len(rows))
    for h in sorted(set(rows.device)):
        progress(f"kernels-3 leave-one-GPU-out: {h} held out")
        held = rows.device == h
        fit = fit_kernels(rows.select(~held), gpus, precision)
        mine = rows.select(held)
        b = engine.batch(list(mine.gemm), [gpus[h]] * len(mine))
        t, _ = modelled_seconds(fit, b, fit.theta0)
        pred[held] = t * np.exp(effect_of(fit.effects, mine)) * 1e3
    return pred
