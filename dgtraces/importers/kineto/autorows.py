"""Kineto stage 3 for :mod:`.automap`: mapped op times -> ``runs`` + ``layer_timings``.

A shipped trace (``reference/gpu/kineto``) is ``published`` and cites its repository, path,
commit and licence; any other trace is ``measured`` and needs ``--source``-free defaults as
in scope mode (``--device`` when it has GPU events). The batch is ``--batch-size`` or the
first dimension of the first ``aten::conv2d`` / ``aten::linear`` input.
"""

from __future__ import annotations

from pathlib import Path

from dgtraces.errors import Code, DgtracesError
from dgtraces.fitting import stats
from dgtraces.importers.base import collector_version, frame
from dgtraces.importers.kineto.automap import automap
from dgtraces.importers.kineto.parse import Event
from dgtraces.importers.kineto.result import (
    KinetoImport,
    default_run_id,
    layer_rows,
    trace_timestamp,
)
from dgtraces.importers.kineto.scopes import unmapped_summary
from dgtraces.importers.shipped import resolve, shipped
from dgtraces.tables.runrow import runs_row
from dgtraces.values import positive_int


def _batch(events: list[Event]) -> int:
    for e in events:
        if e.cat == "cpu_op" and e.name in ("aten::conv2d", "aten::linear"):
            dims = e.args.get("Input Dims") or []
            if dims and isinstance(dims[0], list) and dims[0]:
                return positive_int("batch_size", dims[0][0])
    raise DgtracesError("no aten::conv2d/linear input to read the batch from; give "
                        "--batch-size", code=Code.BAD_INPUT)


def _median(values: list[float]) -> float | None:
    return stats(values)[0] if values else None


def import_auto(path, model: str, events: list[Event], meta: dict, digest: str, *,
                batch_size: int | None, run_id: str | None, device: str | None,
                source: str | None, precision: str) -> KinetoImport:
    from dgtraces.models import layer_records

    order = [r["layer"] for r in layer_records(model)]
    known = shipped(digest)
    if known is not None and known.model != model:
        raise DgtracesError(f"{path} is the shipped trace of {known.model}, not {model}",
                            code=Code.MODEL_MISMATCH)
    batch = batch_size or _batch(events)
    res = automap(events, model, batch)
    if not res.fwd:
        raise DgtracesError(f"{path}: no profiler op matches a layer of {model} (op kind and "
                            f"input shapes at batch {batch}): another net?", code=Code.EMPTY)
    gpu = sum(e.cat in ("kernel", "gpu_memcpy", "gpu_memset") for e in events)
    if known is not None:
        cited, device = resolve(known, path, source, device)
        provenance = "published"
    else:
        if gpu and not device:
            raise DgtracesError(f"{path}: the trace has GPU events; give --device",
                                code=Code.BAD_INPUT)
        cited = source or f"PyTorch profiler trace {Path(path).name} (sha256 {digest[:12]})"
        device, provenance = device or "cpu", "measured"
    run_id = run_id or default_run_id(model, path, digest)
    rows = layer_rows(run_id, order, res.fwd, res.bwd)
    per_step_f, per_step_b = [0.0] * res.steps, [0.0] * res.steps
    for times, sums in ((res.fwd, per_step_f), (res.bwd, per_step_b)):
        for (_, step), ms in times.items():
            sums[step] += ms
    mapped_ms = sum(res.fwd.values()) + sum(res.bwd.values())
    unmapped = unmapped_summary(res.unmapped, [], mapped_ms)
    share = (sum(res.mapped_kernel_ms) / sum(res.step_kernel_ms)
             if sum(res.step_kernel_ms) > 0 else None)
    layer_sum = sum((r.get("fwd_ms") or 0.0) + (r.get("bwd_ms") or 0.0) for r in rows)
    params = {"file": Path(path).name, "sha256": digest, "mode": "automap (op order, kind, "
              "input shapes)", "time_basis": res.time_basis, "iterations": res.steps,
              "iteration_basis": "ProfilerStep", "batch_basis": "given" if batch_size else
              "first conv/linear input dim", "coverage_conv_fc_bn": res.coverage,
              "missing_conv_fc_bn": list(res.missing), "gpu_events": gpu,
              "step_kernel_ms": res.step_kernel_ms, "mapped_kernel_ms": res.mapped_kernel_ms,
              "mapped_kernel_share": share,
              "unmapped": {"ops": unmapped.ops, "time_ms": unmapped.time_ms,
                           "top": [list(t) for t in unmapped.names[:20]]}}
    if known is not None:
        params.update(stated=known.stated, licence=known.licence)
    fwd_ms, bwd_ms = _median(per_step_f), _median(per_step_b)
    whole = (fwd_ms or 0.0) + (bwd_ms or 0.0)
    ratio = layer_sum / whole if whole > 0 else None
    basis = ("GPU kernel time (sum of the kernels each op launched, by external id)"
             if res.time_basis == "gpu kernels" else "CPU op durations")
    run = runs_row(
        run_id=run_id, model=model, device=device, device_kind="gpu" if gpu else "cpu",
        framework=known.framework if known else "pytorch (kineto trace)",
        precision=precision, batch_size=int(batch), provenance=provenance,
        source=cited, collector_version=collector_version("kineto"),
        timestamp_utc=trace_timestamp(meta, events), fwd_ms=fwd_ms, bwd_ms=bwd_ms,
        iter_ms=_median(res.step_ms), layer_sum_ratio=ratio, flagged=False, params=params,
        notes=f"Kineto trace mapped by op order, kind and input shapes; per-layer times are "
              f"{basis}, one repetition per ProfilerStep; fwd_ms/bwd_ms are the mapped "
              f"layers' sums, iter_ms the step's wall time (includes data loading and the "
              f"optimizer); mapped share of the steps' kernel time in params_json")
    return KinetoImport(frame("runs", [run]), frame("layer_timings", rows), res.steps,
                        tuple(r["layer"] for r in rows), unmapped, sum(res.fwd.values()),
                        sum(res.bwd.values()), sum(res.bwd.values()), gpu,
                        tuple(n for n in order if n not in {r["layer"] for r in rows}),
                        res.time_basis, res.coverage, share)
