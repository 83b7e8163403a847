"""Stage 2 of ``kernels-2.0``: per-device constants (``kappa``, ``e_mem``, ``h_us``) fitted on
the device's whole-model throughputs (``calibration.csv``), with the stage-1 kernel
constants fixed; defaults for a GPU with kernels or datasheet peaks only
(docs/reconstruction-kernels.md).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import cache

import numpy as np

from dgtraces.errors import Code, DgtracesError
from dgtraces.reconstruct.kernels2.gemm import E_MEM_STAGE1, KernelParams, get_gpu
from dgtraces.reconstruct.kernels2.network import predict_ms
from dgtraces.reconstruct.kernels2.stage1 import stage1
from dgtraces.reconstruct.roofline.calibration import fitted_rows, observation
from dgtraces.reconstruct.roofline.fit import Observation, levenberg_marquardt

KAPPA_MAX = 1.5
H_US = (0.5, 200.0)
STARTS = ((1.0, 0.8, 10.0), (0.7, 0.5, 30.0), (1.3, 0.9, 3.0))
N_STAGE2 = 3


def _sig(x):
    return 1.0 / (1.0 + np.exp(-np.clip(x, -30.0, 30.0)))


def _with(base: KernelParams, theta: np.ndarray) -> KernelParams:
    s = _sig(theta)
    return dataclasses.replace(base, kappa=float(KAPPA_MAX * s[0]), e_mem=float(s[1]),
                               h_us=float(H_US[0] + (H_US[1] - H_US[0]) * s[2]))


def _theta(kappa: float, e_mem: float, h_us: float) -> np.ndarray:
    x = np.clip([kappa / KAPPA_MAX, e_mem, (h_us - H_US[0]) / (H_US[1] - H_US[0])],
                1e-4, 1 - 1e-4)
    return np.log(x / (1 - x))


def fit_device(device: str, obs: list[Observation], base: KernelParams | None = None
               ) -> KernelParams:
    """Fit the three stage-2 constants of ``device`` to ``obs`` (stage 1 held fixed)."""
    if len(obs) < N_STAGE2:
        raise DgtracesError(f"{device}: {len(obs)} throughput row(s) cannot determine "
                            f"{N_STAGE2} constants", code=Code.NO_CALIBRATION)
    base = base or stage1().params
    log_obs = np.log([o.time_ms for o in obs])

    def fun(theta):
        p = _with(base, theta)
        return np.log([predict_ms(o.model, device, p, o.batch_size, o.phase)
                       for o in obs]) - log_obs

    best = None
    for start in STARTS:
        theta, cost, _ = levenberg_marquardt(fun, _theta(*start), max_iter=60, tol=1e-8)
        if best is None or cost < best[1]:
            best = (theta, cost)
    assert best is not None
    return _with(base, best[0])


def device_observations(device: str) -> list[Observation]:
    return [observation(r) for r in fitted_rows(device)]


def errors_pct(device: str, p: KernelParams, obs: list[Observation]) -> tuple[float, ...]:
    """Signed error (%) of each whole-model row of ``obs`` predicted with ``p``."""
    return tuple(100.0 * (predict_ms(o.model, device, p, o.batch_size, o.phase) / o.time_ms
                          - 1.0) for o in obs)


@cache
def loo(device: str) -> tuple[float, ...]:
    """Signed error (%) of each fitted row of ``device`` predicted by a stage-2 fit on the
    other rows (stage 1 from all seven DeepBench GPUs, which never see these rows)."""
    obs = device_observations(device)
    out: list[float] = []
    for i in range(len(obs)):
        out += errors_pct(device, fit_device(device, obs[:i] + obs[i + 1:]), [obs[i]])
    return tuple(out)


@dataclass(frozen=True)
class KernelCalibration:
    """The constants a device is reconstructed with, and what constrained them."""

    device: str
    params: KernelParams
    basis: str  # "throughputs" | "kernels" | "datasheet"
    rows: tuple[int, ...]  # calibration.csv rows fitted (stage 2)
    errors_pct: tuple[float, ...]  # fit residuals of those rows


@cache
def calibrate_kernels(device: str) -> KernelCalibration:
    """Constants for ``device``: stage 2 where calibration rows exist, else the stage-1
    constants with ``kappa = 1``, ``e_mem`` 0.8 and the calibrated devices' mean ``h_us``.
    UNKNOWN_DEVICE (with the known ones) when the device has no datasheet peaks or SMs."""
    from dgtraces.reconstruct.deepbench import seven_devices

    get_gpu(device)
    rows = fitted_rows(device)
    if rows:
        obs = [observation(r) for r in rows]
        p = fit_device(device, obs)
        return KernelCalibration(device, p, "throughputs", tuple(r.row for r in rows),
                                 errors_pct(device, p, obs))
    h = float(np.mean([calibrate_kernels(d).params.h_us for d in CALIBRATED]))
    p = dataclasses.replace(stage1().params, e_mem=E_MEM_STAGE1, kappa=1.0, h_us=h)
    basis = "kernels" if device in seven_devices() else "datasheet"
    return KernelCalibration(device, p, basis, (), ())


CALIBRATED = ("k80", "v100")  # devices with fp32 throughput rows in calibration.csv
