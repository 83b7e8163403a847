"""Layer traces as the predictor sees them: per-layer times in execution order plus sizes.

A :class:`Trace` comes from a run of the store (``layer_timings`` of the run, gradient sizes
from the model's ``layers`` structure, batch size and update time from ``runs``), from a
DataFrame of layer timings, or from the reconstruction (``dgtraces.reconstruct``) when no
stored trace matches. It remembers where its numbers came from.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import TYPE_CHECKING

from dgtraces.predict.tracedef import (  # noqa: F401  (Trace, from_frame: re-exported)
    H2D_LINK,
    PREFERENCE,
    Trace,
    from_frame,
    nonneg,
)
from dgtraces.reference import gpu_devices
from dgtraces.values import bad_value as bad

from ..errors import Code, DgtracesError, Failure, StoreError

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Callable

    import pandas as pd

    from dgtraces.store.release import Release

def _phase(params_json, key: str) -> float:
    if not isinstance(params_json, str):
        return 0.0
    try:
        value = json.loads(params_json).get(key, 0.0)
    except (ValueError, AttributeError, RecursionError):
        return 0.0
    return float(value) if isinstance(value, (int, float)) else 0.0


def _whole(value) -> float | None:
    return float(value) if value is not None and value == value and value > 0 else None


def from_run(run_id: str, release: "Release | str | None" = None, *,
             whole: bool = True) -> Trace:
    """Trace of a stored run (``runs`` + ``layer_timings`` of ``release``: an open
    :class:`~dgtraces.store.release.Release`, or a version, default latest).

    io/h2d times are read from the run's ``params_json`` keys ``io_ms``/``h2d_ms`` when
    present. With ``whole`` (default), per-layer times are scaled so that they sum to the
    run's whole-model ``fwd_ms``/``bwd_ms`` (timed without per-layer instrumentation), which
    is what an uninstrumented training iteration runs; the source says by how much.
    """
    from dgtraces.store.release import as_release

    return _from_run(run_id, as_release(release), whole)


def _from_run(run_id: str, rel: Release, whole: bool) -> Trace:
    runs = rel.cached("runs")
    row = runs.loc[runs["run_id"] == run_id]
    if row.empty:
        raise StoreError(f"run {run_id!r} not in runs of release {rel.version}",
                         failures=[Failure(Code.NOT_FOUND, "unknown run", column="run_id",
                                           found=repr(run_id))])
    run = row.iloc[0]
    timings = rel.cached("layer_timings")
    lt = timings.loc[timings["run_id"] == run_id]
    params = run.get("params_json")
    trace = from_frame(lt, run["model"], int(run["batch_size"]),
                       io_ms=_phase(params, "io_ms"), h2d_ms=_phase(params, "h2d_ms"),
                       update_ms=_whole(run["update_ms"]) or 0.0,
                       provenance=str(run["provenance"]), source=str(run["source"]),
                       run_id=run_id, device=str(run["device"]))
    wf, wb = _whole(run.get("fwd_ms")), _whole(run.get("bwd_ms"))
    sf, sb = sum(trace.fwd_ms), sum(trace.bwd_ms)
    if whole and wf and wb and sf > 0 and sb > 0:
        trace = replace(trace, fwd_ms=tuple(f * wf / sf for f in trace.fwd_ms),
                        bwd_ms=tuple(b * wb / sb for b in trace.bwd_ms),
                        source=f"{trace.source}; per-layer times scaled to the run's "
                               f"whole-model medians (fwd x{wf / sf:.4f}, bwd x{wb / sb:.4f})")
    return trace


def find_run(model: str, device: str, batch_size: int, precision: str = "fp32",
             release: "Release | str | None" = None) -> str | None:
    """Best stored run for a setup in ``release`` (a Release or a version, default latest;
    None without a release or a ``runs`` table): see :func:`choose_run`."""
    chosen = _find_run(model, device, batch_size, precision, _opened(release))
    return None if chosen is None else chosen[0]


def _opened(release: "Release | str | None") -> Release | None:
    """``release`` opened (a Release as it is), or None when there is no such release (no
    store at all, or an unknown version): nothing stored to find, traces reconstructed. A
    damaged release (INTEGRITY) or a malformed version (VERSION) raises."""
    from dgtraces.store.release import open_or_none

    return open_or_none(release)


def _find_run(model, device, batch_size, precision, rel: Release | None
              ) -> tuple[str, str] | None:
    """:func:`choose_run` in an open release (None: no release could be opened)."""
    runs = _runs_or_none(rel)
    if runs is None:
        return None
    assert rel is not None
    return choose_run(runs, lambda: rel.cached("layer_timings"), model, device, batch_size,
                      precision)


def pick_run(runs: "pd.DataFrame", timings: "pd.DataFrame | Callable[[], pd.DataFrame]",
             model: str, device: str, batch_size: int, precision: str = "fp32"
             ) -> str | None:
    """The run id of :func:`choose_run` (None: no complete run matches)."""
    chosen = choose_run(runs, timings, model, device, batch_size, precision)
    return None if chosen is None else chosen[0]


def choose_run(runs: "pd.DataFrame", timings: "pd.DataFrame | Callable[[], pd.DataFrame]",
               model: str, device: str, batch_size: int, precision: str = "fp32"
               ) -> tuple[str, str] | None:
    """The best of ``runs`` for a setup and why: ``(run_id, why)``, ``why`` empty when it was
    the only candidate. Ranked by, in order: unflagged first; provenance (measured >
    reconstructed > published); layer-wise timed before profiler-attributed layer times (an
    importer declared ``attributed``, e.g. kineto: autograd runs backward kernels outside the
    forward's record_function scopes, so most of the backward is not attributed to layers);
    then run id. A run whose layer timings (``timings``, or a function reading them, called
    only when some run matches) lack layers of its model is never picked (ask for it by run
    id). docs/predictor.md, "Which stored run"."""
    from dgtraces.importers.registry import attributed_prefixes
    from dgtraces.tables.coverage import incomplete_runs

    m = runs[(runs["model"] == model) & (runs["device"] == device)
             & (runs["batch_size"] == batch_size) & (runs["precision"] == precision)]
    if m.empty:
        return None
    lt = timings() if callable(timings) else timings
    m = m[~m["run_id"].astype(str).isin(set(incomplete_runs(
        m, lt[lt["run_id"].isin(set(m["run_id"]))])))]
    if m.empty:
        return None
    rank = m["provenance"].map({p: i for i, p in enumerate(PREFERENCE)}).fillna(9)
    attributed = (m["collector_version"].astype(str).str.startswith(attributed_prefixes())
                  if "collector_version" in m else False)
    m = m.assign(_flag=m["flagged"].astype(bool), _rank=rank, _attr=attributed)
    m = m.sort_values(["_flag", "_rank", "_attr", "run_id"])
    best = m.iloc[0]
    return str(best["run_id"]), _why(best, m.iloc[1:], (model, device, batch_size, precision))


_SHOWN = 3  # other candidates named in the why


def _why(best, others: "pd.DataFrame", key: tuple) -> str:
    """Why ``best`` won over ``others`` (the first ranking key where each differs)."""
    if others.empty:
        return ""
    reasons = []
    for _, o in others.head(_SHOWN).iterrows():
        if o["_flag"] != best["_flag"]:
            why = f"flagged: {o.get('flag_reason') or 'no reason given'}"
        elif o["_rank"] != best["_rank"]:
            why = f"{o['provenance']} ranks after {best['provenance']}"
        elif o["_attr"] != best["_attr"]:
            why = (f"profiler-attributed layer times ({o['collector_version']}) rank after "
                   "layer-wise timed ones")
        else:
            why = "same rank, run id order"
        reasons.append(f"{o['run_id']} ({why})")
    more = len(others) - _SHOWN
    model, device, batch, precision = key
    return (f"chosen among {len(others) + 1} stored runs of {model}/{device}/batch {batch}/"
            f"{precision} over " + ", ".join(reasons)
            + (f" and {more} more" if more > 0 else "") + " (docs/predictor.md)")


def resolve(model: str | None, device: str | None, batch_size: int | None, *,
            precision: str = "fp32", run_id: str | None = None,
            release: "Release | str | None" = None, whole: bool = True,
            h2d_link: str | None = H2D_LINK, shape_only: bool = False) -> Trace:
    """A stored trace when one matches, else one reconstructed on the fly (labelled so).

    Every caller (``predict``, ``sweep``, ``validate-predictor``) gets its traces here, so a
    GPU trace without a host-to-device time gets the same modelled input copy over
    ``h2d_link`` (:func:`with_default_h2d`; ``None`` leaves h2d as stored). ``release``: an
    open :class:`~dgtraces.store.release.Release` (callers resolving many traces pass one:
    its tables are read once, :meth:`~dgtraces.store.release.Release.cached`) or a version
    (default latest), opened here once.
    ``shape_only``: the caller calibrates the compute time (``--calibrate-img-s``), so a GPU
    with datasheet peaks but no calibration rows gets a shape-only trace
    (:func:`.devices.shape_trace`) instead of NO_CALIBRATION."""
    from dgtraces.store.release import Release

    if isinstance(release, Release):  # a trace is immutable: resolved once per handle
        key = ("resolve", model, device, batch_size, precision, run_id, whole, h2d_link,
               shape_only)
        return release.memo(key, lambda: _resolved(model, device, batch_size, precision,
                                                    run_id, release, whole, h2d_link,
                                                    shape_only))
    return _resolved(model, device, batch_size, precision, run_id, release, whole, h2d_link,
                     shape_only)


def _resolved(model, device, batch_size, precision, run_id, release, whole, h2d_link,
              shape_only) -> Trace:
    """:func:`resolve`, computed."""
    from dgtraces.store.release import Release, as_release

    if run_id is not None:
        trace = _from_run(run_id, as_release(release), whole)
    else:
        rel = _opened(release)  # None: reconstructed on the fly, as without a stored run
        label = release if isinstance(release, str) else (
            release.version if isinstance(release, Release) else None)
        trace = _resolve(model, device, batch_size, precision, rel, label, whole, shape_only)
    if h2d_link is None:
        return trace
    # the handle itself when given one: its store's comm_fits, not the default store's
    return with_default_h2d(trace, h2d_link, release if isinstance(release, Release)
                            else release or "latest")


def _resolve(model, device, batch_size, precision, rel: Release | None, label: str | None,
             whole: bool, shape_only: bool) -> Trace:
    """:func:`resolve` without a run id; ``label``: the release as asked for (messages)."""
    for name, value in (("model", model), ("device", device), ("batch_size", batch_size)):
        if value is None:
            raise bad(name, "needed unless a run id is given", "a value", None)
    model, device = _spelled(model, device, rel)
    chosen = _find_run(model, device, batch_size, precision, rel)
    if chosen is not None:
        assert rel is not None
        trace = _from_run(chosen[0], rel, whole)
        return replace(trace, source=f"{trace.source}; {chosen[1]}") if chosen[1] else trace
    from .devices import no_run_at_batch, shape_trace

    if device not in gpu_devices():
        missing = no_run_at_batch(model, device, batch_size, _runs_or_none(rel))
        if missing is not None:
            raise missing
    try:
        from ..reconstruct import reconstruct_trace
    except ImportError as exc:
        raise StoreError(f"no stored trace for {model}/{device}/batch {batch_size} in release "
                         f"{label or (rel.version if rel else 'none')} and the "
                         "reconstruction module (dgtraces.reconstruct) is not available",
                         code=Code.NOT_FOUND,
                         hint="pass --run-id of a stored run, or install a dgtraces with "
                              "dgtraces.reconstruct") from exc
    try:
        rec = reconstruct_trace(device, model, batch_size, precision=precision)
    except DgtracesError as exc:
        if exc.code != Code.NO_CALIBRATION or not shape_only:
            if exc.code == Code.NO_CALIBRATION:
                exc.hint = _no_calibration_hint(device, precision)
            raise
        return shape_trace(model, device, batch_size, precision)
    run = dict(rec.run)
    update = run.get("update_ms")
    return from_frame(rec.layer_timings, model, batch_size,
                      update_ms=0.0 if update is None or update != update else float(update),
                      provenance="reconstructed",
                      source=f"reconstructed on the fly (no stored trace matched): "
                             f"{run.get('source', 'dgtraces.reconstruct')}",
                      run_id=run.get("run_id"), device=device)


def _no_calibration_hint(device: str, precision: str) -> str:
    """What to do when the reconstruction is not calibrated for ``device``: no calibration
    rows at all, or rows for fp32 only (an amp trace said "no calibration rows" too, which
    contradicted its own error; #36 trial)."""
    from ..reconstruct.roofline.calibration import fitted_rows, get_device

    if precision == "fp32" or not fitted_rows(device):
        return (f"{device} has datasheet peaks but no calibration rows: give "
                "--calibrate-img-s (its measured 1-GPU img/s), or predict a stored run "
                "(`dgtraces predict --run-id`)")
    tensor = get_device(device).tensor_tflops
    why = ("its datasheet gives no tensor-core peak" if not tensor else
           "calibration.csv has no amp/fp32 throughput pair of it")
    return (f"{device} is calibrated for fp32 only ({why}): predict --precision fp32, or "
            f"give --calibrate-img-s (its measured 1-GPU {precision} img/s)")


def _runs_or_none(rel: Release | None) -> "pd.DataFrame | None":
    if rel is None:
        return None
    try:
        return rel.cached("runs")
    except StoreError as exc:
        if exc.code != Code.NOT_FOUND:  # a damaged shard is INTEGRITY, never "no runs"
            raise
        return None


def run_row(run_id: str | None, release: "Release | str | None") -> dict | None:
    """The ``runs`` row of a stored run (None: no run id, no release, or not stored there:
    e.g. a trace reconstructed on the fly)."""
    rel = _opened(release)
    runs = _runs_or_none(rel)
    if run_id is None or runs is None:
        return None
    hit = runs.loc[runs["run_id"] == run_id]
    return None if hit.empty else hit.iloc[0].to_dict()


def _spelled(model: str, device: str, rel: Release | None) -> tuple[str, str]:
    """``AlexNet``/``V100`` as the registry's and the store's spelling where unambiguous."""
    from dgtraces.models.registry import REGISTRY
    from dgtraces.names import canonical

    model = canonical(model, (e.key for e in REGISTRY)) or model
    runs = None
    if device != device.lower() and canonical(device, gpu_devices()) is None:
        runs = _runs_or_none(rel)
    known = gpu_devices() | (set() if runs is None else set(runs["device"].astype(str)))
    return model, canonical(device, known) or device


def with_default_h2d(trace: Trace, link: str = H2D_LINK,
                     release: "Release | str | None" = "latest") -> Trace:
    """For a GPU trace with no host-to-device time, model the input batch's copy over ``link``
    (alpha + bytes / bandwidth, fp32 input as in the ``layers`` table); labelled in the source
    with the link and why it was used (:data:`H2D_LINK` ``"host"``: the GPU's own host
    interface, :func:`dgtraces.reference.devices.host_link`; any other name: given).

    The copy goes host -> GPU, so ``link`` is the host link (PCIe on x86 hosts), not the
    GPU-GPU ``intra`` link of the cluster: predict, sweep and validation all use it alike."""
    from ..comm.links import get_link
    from ..models import inferred
    from ..reference.devices import host_link

    link, why = host_link(trace.device) if link == H2D_LINK else (link, "given")
    lk = get_link(link, field="h2d link", release=release)  # UNKNOWN_LINK for any trace
    if trace.h2d_ms > 0 or trace.device not in gpu_devices():
        return trace
    nbytes = trace.batch_size * inferred(trace.model)[0].in_numel * 4
    ms = lk.alpha_us / 1000.0 + nbytes / (lk.bandwidth_gb_s * 1e9) * 1000.0
    return replace(trace, h2d_ms=ms,
                   source=f"{trace.source}; h2d modelled: {nbytes} input bytes over {link} "
                          f"({lk.bandwidth_gb_s:g} GB/s; {why}) = {ms:.3f} ms "
                          f"(--h2d-ms / --h2d-link override)")
