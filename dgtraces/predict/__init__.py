"""DAG predictor of synchronous data-parallel SGD iteration time (Shi, Wang, Chu, Li 2018).

>>> from dgtraces.predict import Cluster, Policy, predict
>>> p = predict(run_id_or_frame, Cluster(8, 4, "pcie3", "10gbe", "ring"), Policy("wfbp"))

Every result is modelled (``Prediction.provenance == "modelled"``) and carries the provenance
of its trace and of the links it used. ``simulate`` is the reference event simulation;
``fast.iter_times`` the vectorised one, used by ``sweep.run_sweep`` (tests check both agree
to 1e-9 relative).
"""

from __future__ import annotations

import math
from dataclasses import replace
from numbers import Real
from typing import TYPE_CHECKING, Any

from dgtraces.predict.cluster import POLICY_NAMES, Cluster, Policy
from dgtraces.predict.trace import Trace, from_frame, from_run, resolve
from dgtraces.predict.tracedef import nonneg
from dgtraces.values import bad_value as bad

from ..comm.collectives import ALGORITHMS, CommCost, collective
from ..comm.links import Link, get_link, known_links, links_frame
from .dag import Prediction, Schedule, predict_trace, simulate

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from dgtraces.store.release import Release


def load_trace(trace: "str | Trace | pd.DataFrame", *, model: str | None = None,
               batch_size: int | None = None, release: "Release | str | None" = None,
               **phases) -> Trace:
    """Turn a run id (of ``release``: a Release or a version, default latest), a Trace or a
    DataFrame of layer timings (needs ``model`` and ``batch_size``) into a Trace. ``phases``
    may give io_ms, h2d_ms, update_ms. A run id is resolved as the CLI does
    (:func:`.trace.resolve`: modelled input copy for GPU runs)."""
    unknown = sorted(set(phases) - {"io_ms", "h2d_ms", "update_ms"})
    if unknown:
        raise bad(unknown[0], "not a phase time", "io_ms | h2d_ms | update_ms", unknown[0])
    if isinstance(trace, (Trace, str)):
        if model is not None or batch_size is not None:
            raise bad("model" if model is not None else "batch_size", "a run id or Trace "
                      "carries its own model and batch size", "not given", model or batch_size)
        t = trace if isinstance(trace, Trace) else resolve(None, None, None, run_id=trace,
                                                            release=release)
        changes: dict[str, Any] = {k: nonneg(k, v) for k, v in phases.items()}
        return replace(t, **changes) if changes else t
    if model is None:
        raise bad("model", "a DataFrame trace needs the model name", "a model", None)
    if batch_size is None:
        raise bad("batch_size", "a DataFrame trace needs the batch size", ">= 1", None)
    return from_frame(trace, model, batch_size, **phases)


def calibrate(trace: Trace, img_s: float, policy: Policy | None = None) -> Trace:
    """Scale compute so that one worker runs at ``img_s`` images/s (io and h2d unchanged)."""
    if isinstance(img_s, bool) or not isinstance(img_s, Real) or not 0 < img_s < math.inf:
        raise bad("calibrate_img_s", "must be a finite number > 0", "> 0", img_s)
    target = trace.batch_size * 1000.0 / img_s
    overlap = policy.io_overlap if policy else False
    fixed = trace.h2d_ms + (0.0 if overlap else trace.io_ms)
    if trace.compute_ms <= 0 or target <= fixed:
        raise bad("calibrate_img_s", "target is faster than the io + h2d time alone",
                  f"< {trace.batch_size * 1000.0 / max(fixed, 1e-12):.6g} img/s", img_s)
    factor = (target - fixed) / trace.compute_ms
    if overlap and trace.io_ms > target:
        raise bad("calibrate_img_s", "target is faster than the io time alone",
                  f"< {trace.batch_size * 1000.0 / trace.io_ms:.6g} img/s", img_s)
    return trace.scaled(factor, f"compute scaled x{factor:.6g} to {img_s:g} img/s on 1 worker "
                                f"(--calibrate-img-s)")


def predict(trace: "str | Trace | pd.DataFrame", cluster: Cluster, policy: Policy, *,
            model: str | None = None, batch_size: int | None = None,
            release: "Release | str | None" = None, calibrate_img_s: float | None = None,
            **phases) -> Prediction:
    """Predict one S-SGD iteration. ``trace`` is a run id of the store, a Trace, or a
    DataFrame of layer timings (``layer, fwd_ms, bwd_ms``) with ``model`` and ``batch_size``."""
    if not isinstance(cluster, Cluster):
        raise bad("cluster", "must be a Cluster", "Cluster(...)", type(cluster).__name__)
    if not isinstance(policy, Policy):
        raise bad("policy", "must be a Policy", "Policy(...)", type(policy).__name__)
    t = load_trace(trace, model=model, batch_size=batch_size, release=release, **phases)
    if calibrate_img_s is not None:
        t = calibrate(t, calibrate_img_s, policy)
    pred = predict_trace(t, cluster, policy)[0]
    return replace(pred, inputs={"calibrate_img_s": calibrate_img_s, **phases})


__all__ = [
    "ALGORITHMS", "POLICY_NAMES", "Cluster", "CommCost", "Link", "Policy", "Prediction",
    "Schedule", "Trace", "calibrate", "collective", "from_frame", "from_run", "get_link",
    "known_links", "links_frame", "load_trace", "predict", "predict_trace", "resolve",
    "simulate",
]
