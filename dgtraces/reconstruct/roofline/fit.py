"""Fitting the cost model to whole-model times: Levenberg-Marquardt on log residuals.

The same procedure serves the published GPU throughputs (``calibration.csv``) and the
measured CPU totals (:mod:`dgtraces.reconstruct.roofline.cpu`). Parameters are fitted in an
unconstrained space (logit for efficiencies in (0, 1], log for launch_us and n_half), the
residual of an observation is ``log(predicted / observed)``, and the best of a few fixed
starting points wins. numpy only (scipy is not a dependency).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from dgtraces.errors import Code, DgtracesError
from dgtraces.reconstruct.roofline.costmodel import (
    PARAM_NAMES,
    Device,
    LayerArrays,
    Params,
    layer_arrays,
    predict_ms,
)

# Bounds of the transformed parameters keep the search physical.
WINO_MAX = 2.25  # Winograd F(2x2, 3x3): 16 instead of 36 multiplies per 2x2 output tile
WINO_START = 1.5
_LAUNCH_US = (0.05, 5000.0)
_N_HALF = (1.0, 1e9)
STARTS = (
    (0.5, 0.5, 0.6, 10.0, 1e4),
    (0.3, 0.2, 0.4, 30.0, 1e5),
    (0.7, 0.6, 0.8, 3.0, 1e3),
    (0.2, 0.1, 0.3, 100.0, 1e6),
)


@dataclass(frozen=True)
class Observation:
    """A whole-model time to fit: phase in train | inference | fwd | bwd | fwdbwd."""

    model: str
    batch_size: int
    phase: str
    time_ms: float
    label: str = ""


@dataclass
class FitResult:
    params: Params
    observations: list[Observation]
    predicted_ms: list[float]
    rms_log: float
    iterations: int
    device: Device
    notes: list[str] = field(default_factory=list)

    @property
    def errors_pct(self) -> list[float]:
        """Signed error of each fitted observation, percent of the observed time."""
        return [100.0 * (p / o.time_ms - 1.0) for p, o in zip(self.predicted_ms,
                                                             self.observations, strict=True)]

    @property
    def free_parameters(self) -> int:
        return len(PARAM_NAMES) + (self.params.wino is not None)


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-np.clip(x, -9.0, 30.0)))


def _to_params(theta: np.ndarray) -> Params:
    eff = _sigmoid(theta[:3])
    launch = float(np.clip(np.exp(min(theta[3], 50.0)), *_LAUNCH_US))
    n_half = float(np.clip(np.exp(min(theta[4], 50.0)), *_N_HALF))
    wino = float(1.0 + (WINO_MAX - 1.0) * _sigmoid(theta[5])) if theta.size > 5 else None
    return Params(float(eff[0]), float(eff[1]), float(eff[2]), launch, n_half, wino=wino)


def _from_params(values) -> np.ndarray:
    eff = np.clip(np.asarray(values[:3], float), 1e-4, 1 - 1e-4)
    out = [np.log(eff / (1 - eff)), np.log(values[3:5])]
    if len(values) > 5:
        w = np.clip((values[5] - 1.0) / (WINO_MAX - 1.0), 1e-4, 1 - 1e-4)
        out.append([np.log(w / (1 - w))])
    return np.concatenate(out)


def residuals(params: Params, dev: Device, obs: list[Observation],
              arrays: dict[str, LayerArrays], precision: str = "fp32") -> np.ndarray:
    pred = np.array([predict_ms(arrays[o.model], params, dev, o.batch_size, o.phase,
                                precision) for o in obs])
    return np.log(pred / np.array([o.time_ms for o in obs]))


def levenberg_marquardt(fun, theta0: np.ndarray, max_iter: int = 200, tol: float = 1e-10):
    """Levenberg-Marquardt with a forward-difference Jacobian; returns (theta, cost, its)."""
    theta = theta0.astype(float).copy()
    r = fun(theta)
    cost = float(r @ r)
    lam = 1e-2
    it = 0
    for it in range(1, max_iter + 1):  # noqa: B007 (returned: iterations used)
        jac = np.empty((r.size, theta.size))
        for j in range(theta.size):
            step = 1e-6 * max(1.0, abs(theta[j]))
            t2 = theta.copy()
            t2[j] += step
            jac[:, j] = (fun(t2) - r) / step
        jtj = jac.T @ jac
        grad = jac.T @ r
        improved = False
        while lam < 1e12:
            delta = np.linalg.solve(jtj + lam * np.diag(np.diag(jtj) + 1e-12), -grad)
            cand = theta + delta
            r2 = fun(cand)
            c2 = float(r2 @ r2)
            if np.isfinite(c2) and c2 < cost:
                improved = cost - c2 > tol * max(cost, 1e-30)
                theta, r, cost = cand, r2, c2
                lam = max(lam / 3.0, 1e-12)
                break
            lam *= 4.0
        if not improved:
            break
    return theta, cost, it


def fit(dev: Device, obs: list[Observation], *, starts=STARTS,
        arrays: dict[str, LayerArrays] | None = None, winograd: bool = False) -> FitResult:
    """Fit the five fp32 parameters of ``dev`` to ``obs`` (at least 5 observations), and
    with ``winograd`` the sixth, ``wino`` (started at ``WINO_START`` from every start).

    ``arrays`` (model -> layers) defaults to every layer of each observed model."""
    n_par = len(PARAM_NAMES) + winograd
    if len(obs) < n_par:
        raise DgtracesError(f"{dev.device}: {len(obs)} observation(s) cannot determine "
                            f"{n_par} parameters", code=Code.NO_CALIBRATION)
    if winograd:
        starts = tuple(tuple(s) + (WINO_START,) for s in starts)
    arrays = dict(arrays or {})
    for m in sorted({o.model for o in obs} - set(arrays)):
        arrays[m] = layer_arrays(m)

    def fun(theta):
        return residuals(_to_params(theta), dev, obs, arrays)

    best: tuple[np.ndarray, float, int] | None = None
    for start in starts:
        theta, cost, its = levenberg_marquardt(fun, _from_params(start))
        if best is None or cost < best[1]:
            best = (theta, cost, its)
    if best is None:
        raise DgtracesError("no starting point to fit from", code=Code.NO_CALIBRATION)
    params = _to_params(best[0])
    pred = [predict_ms(arrays[o.model], params, dev, o.batch_size, o.phase) for o in obs]
    return FitResult(params, list(obs), pred, float(np.sqrt(best[1] / len(obs))), best[2], dev)


def fit_tensor_efficiency(dev: Device, base: Params, model: str, batch_size: int,
                          speedup: float) -> tuple[Params, float]:
    """One extra parameter for the tensor-core variant: ``eff_tensor`` in (0, 1] such that
    the predicted amp/fp32 training speed-up of ``model`` at ``batch_size`` equals
    ``speedup`` (bisection; all fp32 parameters held fixed). Returns the parameters and the
    speed-up reached: below ``speedup`` when even eff_tensor = 1 cannot reach it."""
    la = layer_arrays(model)
    t32 = predict_ms(la, base, dev, batch_size, "train")

    def ratio(eff):
        p = Params(**{**base.as_dict(), "eff_tensor": eff})
        return t32 / predict_ms(la, p, dev, batch_size, "train", "amp")

    lo, hi = 1e-4, 1.0
    if ratio(hi) <= speedup:
        return Params(**{**base.as_dict(), "eff_tensor": 1.0}), ratio(hi)
    for _ in range(80):
        mid = np.sqrt(lo * hi)
        lo, hi = (mid, hi) if ratio(mid) < speedup else (lo, mid)
    eff = float(np.sqrt(lo * hi))
    return Params(**{**base.as_dict(), "eff_tensor": eff}), ratio(eff)
