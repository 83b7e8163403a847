"""Stage 1 of ``kernels-2.0``: the global kernel constants fitted on DeepBench's published
kernels of seven GPUs, and the leave-one-device-out check (docs/reconstruction-kernels.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np

from dgtraces.errors import Code, DgtracesError
from dgtraces.reconstruct.deepbench import conv_kernels, gemm_kernels, seven_devices
from dgtraces.reconstruct.kernels2.gemm import (
    Gemms,
    KernelParams,
    conv_gemm,
    gemm_list,
    gemm_seconds,
    get_gpu,
)
from dgtraces.reconstruct.roofline.fit import levenberg_marquardt

STAGE1 = ("e_fwd", "e_dgrad", "e_wgrad", "e_wino", "e_gemm", "gamma", "t0_us")
T0_US = (0.5, 50.0)
GAMMA_MAX = 2.0
STARTS = ((0.7, 0.6, 0.6, 0.6, 0.7, 0.5, 5.0), (0.5, 0.4, 0.4, 0.9, 0.5, 1.0, 10.0),
          (0.9, 0.8, 0.8, 0.4, 0.9, 0.2, 2.0))


def _sig(x):
    return 1.0 / (1.0 + np.exp(-np.clip(x, -30.0, 30.0)))


def to_params(theta: np.ndarray) -> KernelParams:
    e = _sig(theta[:5])
    gamma = GAMMA_MAX * _sig(theta[5])
    t0 = T0_US[0] + (T0_US[1] - T0_US[0]) * _sig(theta[6])
    return KernelParams(float(e[0]), float(e[1]), float(e[2]), float(e[3]), float(e[4]),
                        float(gamma), float(t0))


def from_values(values) -> np.ndarray:
    v = np.asarray(values, float)
    x = np.concatenate([v[:5], [v[5] / GAMMA_MAX], [(v[6] - T0_US[0]) / (T0_US[1] - T0_US[0])]])
    x = np.clip(x, 1e-4, 1 - 1e-4)
    return np.log(x / (1 - x))


@dataclass
class KernelSet:
    """DeepBench kernels as one GEMM batch with their published times and labels."""

    gemms: Gemms
    observed_ms: np.ndarray
    device: np.ndarray  # device key per kernel
    direction: np.ndarray  # fwd | dgrad | wgrad | gemm

    def select(self, keep: np.ndarray) -> "KernelSet":
        g = self.gemms
        sub = Gemms(*(getattr(g, f)[keep] for f in ("m", "n", "k", "g", "cls", "split",
                                                    "extra_bytes", "peak", "bw", "sm")))
        return KernelSet(sub, self.observed_ms[keep], self.device[keep], self.direction[keep])


@cache
def kernel_set() -> KernelSet:
    """Every timed DeepBench conv direction and GEMM of the seven GPUs."""
    rows, obs, dev, direc = [], [], [], []
    for kr in conv_kernels():
        cs = kr.shape
        for d in ("fwd", "dgrad", "wgrad"):
            t = kr.time_ms(d)
            if t is not None:
                rows.append(conv_gemm(cs, d, kr.device))
                obs.append(t)
                dev.append(kr.device)
                direc.append(d)
    for gk in gemm_kernels():
        rows.append((gk.m, gk.n, gk.k, 1, "gemm", True, 0.0, gk.device))
        obs.append(gk.time_ms)
        dev.append(gk.device)
        direc.append("gemm")
    return KernelSet(gemm_list(rows, get_gpu), np.array(obs), np.array(dev), np.array(direc))


def predict_ms(ks: KernelSet, p: KernelParams) -> np.ndarray:
    return gemm_seconds(ks.gemms, p) * 1e3


@dataclass
class Stage1:
    params: KernelParams
    rms_log: float
    kernels: int
    devices: tuple[str, ...]


def fit_stage1(exclude: str | None = None, ks: KernelSet | None = None) -> Stage1:
    """Fit the seven global constants on every DeepBench kernel (without ``exclude``'s), or
    on ``ks``."""
    ks = ks if ks is not None else kernel_set()
    if exclude is not None:
        if exclude not in set(ks.device):
            raise DgtracesError(f"no DeepBench kernels for {exclude!r}; have "
                                f"{', '.join(sorted(set(ks.device)))}", code=Code.UNKNOWN_DEVICE)
        ks = ks.select(ks.device != exclude)
    log_obs = np.log(ks.observed_ms)

    def fun(theta):
        return np.log(predict_ms(ks, to_params(theta))) - log_obs

    best = None
    for start in STARTS:
        theta, cost, _ = levenberg_marquardt(fun, from_values(start), max_iter=100, tol=1e-8)
        if best is None or cost < best[1]:
            best = (theta, cost)
    assert best is not None
    return Stage1(to_params(best[0]), float(np.sqrt(best[1] / len(log_obs))), len(log_obs),
                  tuple(sorted(set(ks.device))))


@cache
def stage1() -> Stage1:
    """The constants every reconstruction uses (all seven GPUs; cached per process)."""
    return fit_stage1()


def ape_by_direction(ks: KernelSet, p: KernelParams) -> dict[str, tuple[int, float]]:
    """direction -> (kernels, MAPE %) of ``p`` on ``ks``."""
    ape = np.abs(predict_ms(ks, p) / ks.observed_ms - 1.0) * 100
    return {d: (int((ks.direction == d).sum()), float(ape[ks.direction == d].mean()))
            for d in ("fwd", "dgrad", "wgrad", "gemm") if (ks.direction == d).any()}


@cache
def loo_predictions() -> np.ndarray:
    """Each DeepBench kernel predicted (ms) by a fit without its device."""
    ks = kernel_set()
    pred = np.empty(len(ks.observed_ms))
    for device in sorted(set(ks.device)):
        keep = ks.device == device
        pred[keep] = predict_ms(ks.select(keep), fit_stage1(exclude=device).params)
    return pred


def leave_one_device_out() -> dict[str, dict[str, tuple[int, float, float]]]:
    """device -> direction -> (kernels, MAPE %, median APE %) predicted by a fit without
    that device."""
    ks = kernel_set()
    ape = np.abs(loo_predictions() / ks.observed_ms - 1.0) * 100
    out: dict[str, dict[str, tuple[int, float, float]]] = {}
    for device in seven_devices():
        for d in ("fwd", "dgrad", "wgrad", "gemm"):
            m = (ks.device == device) & (ks.direction == d)
            if m.any():
                out.setdefault(device, {})[d] = (int(m.sum()), float(ape[m].mean()),
                                                 float(np.median(ape[m])))
    return out
