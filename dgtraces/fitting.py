"""Statistics shared by collectors, importers and the predictor (torch-free, numpy only).

* :func:`stats` — (median, p10, p90, n) of timing samples.
* :func:`consistency_flag` — the ``layer_sum_ratio`` rule (per-layer sum vs whole model).
* :func:`fit_alpha_beta` — ``time_us = alpha_us + beta_us_per_byte * bytes`` by weighted least
  squares with alpha, beta >= 0. ``weights="relative"`` (1/time: every size counts by its
  relative error; the collectors' sweeps and nccl-tests logs), ``"uniform"`` (plain OLS, so
  large messages dominate; the OSU logs) or one weight per point. A negative slope becomes
  beta = 0 with alpha = the weighted mean time; a negative intercept refits through the
  origin. R^2 and SSE are on the unweighted times.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Literal

from .errors import Code, DgtracesError

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

RATIO_TOLERANCE = 0.10
Weights = Literal["relative", "uniform"] | Sequence[float]


def stats(samples_ms: Sequence[float]) -> tuple[float, float, float, int]:
    """(median, p10, p90, n) with linear interpolation; p10 <= median <= p90 always."""
    import numpy as np

    arr = np.asarray(samples_ms, dtype=float)
    if arr.size == 0:
        raise DgtracesError("no timing samples", code=Code.COLLECT)
    med, p10, p90 = np.percentile(arr, [50, 10, 90])
    return float(med), float(p10), float(p90), int(arr.size)


def consistency_flag(ratio: float | None, tol: float = RATIO_TOLERANCE
                     ) -> tuple[bool, str | None]:
    """Flag a run whose per-layer sum is not within ``tol`` of the whole-model time."""
    if ratio is None or ratio != ratio:
        return True, "layer_sum_ratio could not be computed"
    if abs(ratio - 1.0) > tol:
        return True, (f"sum of per-layer fwd+bwd is {ratio:.3f} x the whole-model fwd+bwd "
                      f"(allowed {1 - tol:.2f}..{1 + tol:.2f})")
    return False, None


@dataclass(frozen=True)
class AlphaBeta:
    """A constrained alpha-beta fit over ``n_points`` sizes in [min_bytes, max_bytes]."""

    alpha_us: float
    beta_us_per_byte: float
    r2: float
    sse_us2: float
    n_points: int
    min_bytes: int
    max_bytes: int
    through_origin: bool

    @property
    def bandwidth_gb_s(self) -> float:
        """1 / beta in GB/s (inf when beta is 0: bandwidth unresolved)."""
        return 1e-3 / self.beta_us_per_byte if self.beta_us_per_byte > 0 else float("inf")

    def row(self) -> dict:
        """The ``comm_fits`` columns this fit provides (plus ``through_origin``)."""
        out = asdict(self)
        out.pop("sse_us2")
        out["bandwidth_gb_s"] = self.bandwidth_gb_s
        return out


def fit_alpha_beta(sizes_bytes: Sequence[float] | np.ndarray,
                   times_us: Sequence[float] | np.ndarray, *,
                   weights: Weights = "relative") -> AlphaBeta:
    """Fit ``time_us = alpha_us + beta_us_per_byte * bytes`` (see the module doc)."""
    import numpy as np

    x = np.asarray(sizes_bytes, dtype=float)
    y = np.asarray(times_us, dtype=float)
    if x.size < 2 or x.size != y.size:
        raise DgtracesError("need at least 2 (size, time) points to fit alpha-beta",
                            code=Code.BAD_INPUT)
    if not (np.isfinite(x).all() and np.isfinite(y).all()) or (y <= 0).any():
        raise DgtracesError("times must be finite and positive to fit alpha-beta",
                            code=Code.BAD_INPUT)
    if isinstance(weights, str):
        if weights not in ("relative", "uniform"):
            raise DgtracesError(f"weights must be relative, uniform or one per point, got "
                                f"{weights!r}", code=Code.BAD_INPUT)
        w = 1.0 / y if weights == "relative" else np.ones_like(y)
    else:
        w = np.asarray(weights, dtype=float)
        if w.shape != y.shape or not np.isfinite(w).all() or (w <= 0).any():
            raise DgtracesError("weights must be positive, one per point", code=Code.BAD_INPUT)
    ww = w * w  # residuals are scaled by w (as numpy.polyfit's w)
    mx, my = (ww @ x) / ww.sum(), (ww @ y) / ww.sum()
    sxx = float(ww @ ((x - mx) ** 2))
    beta = float(ww @ ((x - mx) * (y - my)) / sxx) if sxx > 0 else 0.0
    alpha = float(my - beta * mx)
    through_origin = False
    if beta < 0:
        alpha, beta = float(my), 0.0
    elif alpha < 0:
        alpha, beta, through_origin = 0.0, float((ww @ (x * y)) / (ww @ (x * x))), True
    pred = alpha + beta * x
    sse = float(((y - pred) ** 2).sum())
    sst = float(((y - y.mean()) ** 2).sum())
    return AlphaBeta(alpha, beta, 1.0 - sse / sst if sst > 0 else 1.0, sse, int(x.size),
                     int(x.min()), int(x.max()), through_origin)
