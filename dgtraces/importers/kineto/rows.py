"""Kineto stage 3, build rows: attributed times -> ``runs`` + ``layer_timings``.

Scope mode (below) and, for traces without layer scopes, :mod:`.automap`.

Forward: a layer's forward time is the duration of a scope mapped to it, minus mapped scopes
of other layers nested inside it. Scopes are ``record_function`` annotations named exactly
like the model's layers (what our collector emits) or any annotation / ``nn.Module: X_k``
python scope listed in a MAP file (CSV ``scope,layer``).

Backward: autograd nodes (``autograd::engine::evaluate_function: ...`` or ops whose ``Fwd
thread id`` is non-zero, outermost only) carry the ``Sequence number`` of the forward op that
created them; that forward op's innermost mapped scope gives the layer and the iteration.

Iterations are ``ProfilerStep#N`` annotations when present, otherwise the k-th occurrence of
a layer's scope is iteration k. Per layer: median, p10 and p90 over iterations; ``n`` =
iterations. Whatever cannot be attributed (ops outside every mapped scope, backward nodes
without a sequence number such as AccumulateGrad, or whose forward op lies outside the
scopes, e.g. the loss) is counted in :class:`Unmapped`, never dropped silently; model layers
that no scope maps to get no row and are listed (``KinetoImport.unscoped``, ``params_json``
key ``layers_without_scope``). The default run id is ``kineto-<model>-<file stem>-<first 8
hex of the file's sha256>``.

Times are the host (CPU) wall times the trace records; GPU kernel events are counted, not
used, so GPU traces are only meaningful when the run synchronised per layer (noted in the
run). ``runs.fwd_ms`` / ``bwd_ms`` are the median per-iteration spans from the first to the
last mapped forward scope / linked backward node; a layer sum outside 10% of them flags the
run.
"""

from __future__ import annotations

from pathlib import Path

from dgtraces.errors import Code, DgtracesError, Failure
from dgtraces.fitting import RATIO_TOLERANCE, stats
from dgtraces.importers.base import collector_version, frame
from dgtraces.importers.kineto.parse import load_trace, read_map
from dgtraces.importers.kineto.result import (
    KinetoImport,
    default_run_id,
    layer_rows,
    trace_timestamp,
)
from dgtraces.importers.kineto.scopes import attribute, unmapped_summary
from dgtraces.tables.runrow import runs_row
from dgtraces.values import positive_int


def import_trace(path, model: str, *, batch_size: int | None = None, run_id: str | None = None,
                 device: str | None = None, map_path=None, source: str | None = None,
                 precision: str = "fp32") -> KinetoImport:
    """Map a Chrome trace onto ``model``'s layers; see the module docstring."""
    from dgtraces.models import layer_records

    records = layer_records(model)  # UNKNOWN_MODEL early
    order = [r["layer"] for r in records]
    if batch_size is not None:
        batch_size = positive_int("batch_size", batch_size, text_ok=True)
    mapping = read_map(map_path, set(order), model) if map_path else {}
    events, meta, digest = load_trace(path)
    gpu = sum(e.cat in ("kernel", "gpu_memcpy", "gpu_memset") for e in events)
    fwd, bwd, spans, stray_events, stray, trace_bwd, step_ms = attribute(
        events, set(order), mapping)
    if not fwd and not map_path:  # no layer scopes: map ops by module order (torch models)
        from dgtraces.importers.kineto.autorows import import_auto

        return import_auto(path, model, events, meta, digest, batch_size=batch_size,
                           run_id=run_id, device=device, source=source, precision=precision)
    if batch_size is None:
        raise DgtracesError("give --batch-size (scope-mapped traces)", code=Code.BAD_INPUT)
    if gpu and not device:
        raise DgtracesError(f"{path}: the trace has GPU events; give --device",
                            code=Code.BAD_INPUT)
    if not fwd:
        raise DgtracesError(
            f"{path}: no scope maps to a layer of {model} (scopes must be named like the "
            f"layers, or listed in --map)", code=Code.EMPTY,
            failures=[Failure(Code.EMPTY, "unmapped scope", file=str(path), found=name)
                      for name in stray[:20]])
    run_id = run_id or default_run_id(model, path, digest)
    scoped = {layer for layer, _ in fwd}
    unscoped = tuple(name for name in order if name not in scoped)
    rows = layer_rows(run_id, order, fwd, bwd)
    iters = sorted(spans)
    fwd_span = [max(s[0]) - min(s[0]) for s in (spans[i] for i in iters) if s[0]]
    bwd_span = [max(s[1]) - min(s[1]) for s in (spans[i] for i in iters) if s[1]]
    fwd_ms = stats(fwd_span)[0] / 1000.0
    bwd_ms = stats(bwd_span)[0] / 1000.0 if bwd_span else None
    layer_sum = sum((r.get("fwd_ms") or 0.0) + (r.get("bwd_ms") or 0.0) for r in rows)
    ratio = layer_sum / (fwd_ms + (bwd_ms or 0.0)) if fwd_ms + (bwd_ms or 0.0) > 0 else None
    flagged = ratio is None or abs(ratio - 1.0) > RATIO_TOLERANCE
    mapped_fwd, mapped_bwd = sum(fwd.values()), sum(bwd.values())
    unmapped = unmapped_summary(stray_events, stray, mapped_fwd + mapped_bwd)
    params = {"file": Path(path).name, "sha256": digest, "iterations": len(iters),
              "iteration_basis": "ProfilerStep" if step_ms else "scope occurrence",
              "map_entries": len(mapping), "gpu_events": gpu,
              "layers_without_scope": list(unscoped),
              "unmapped": {"ops": unmapped.ops, "time_ms": unmapped.time_ms,
                           "share": unmapped.share, "scopes": list(stray),
                           "top": [list(t) for t in unmapped.names[:20]]},
              "trace": {k: meta[k] for k in ("schemaVersion", "displayTimeUnit") if k in meta}}
    notes = ("imported PyTorch profiler trace: host wall times of layer scopes (fwd) and of "
             "the autograd nodes linked to them by sequence number (bwd)")
    if gpu:
        notes += "; GPU kernels not used: host times are only meaningful with per-layer sync"
    run = runs_row(
        run_id=run_id, model=model, device=device or "cpu",
        device_kind="gpu" if gpu else "cpu", framework="pytorch (kineto trace)",
        precision=precision, batch_size=int(batch_size), provenance="measured",
        source=source or f"PyTorch profiler trace {Path(path).name} (sha256 {digest[:12]})",
        collector_version=collector_version("kineto"),
        timestamp_utc=trace_timestamp(meta, events), fwd_ms=fwd_ms, bwd_ms=bwd_ms,
        iter_ms=stats(step_ms)[0] if step_ms else None,
        layer_sum_ratio=ratio, flagged=flagged,
        flag_reason=(f"layer sum / whole fwd+bwd = {ratio:.3f}, outside 1 +- {RATIO_TOLERANCE}"
                     if flagged and ratio else ("no whole-model time" if flagged else None)),
        params=params, notes=notes)
    return KinetoImport(frame("runs", [run]), frame("layer_timings", rows), len(iters),
                        tuple(r["layer"] for r in rows), unmapped, mapped_fwd, mapped_bwd,
                        trace_bwd, gpu, unscoped)
