"""Reconstructed K80/V100 traces: a per-layer cost model fitted to published throughputs.

Stable API (used by the predictor)::

    from dgtraces.reconstruct import reconstruct_trace
    rec = reconstruct_trace("k80", "googlenet", 64)       # precision="fp32" | "amp"
    rec.run            # one ``runs`` row (dict), provenance="reconstructed"
    rec.layer_timings  # schema-valid ``layer_timings`` DataFrame

One subpackage per method: :mod:`.roofline` (``roofline-1.1``, the method of the shipped
K80/V100 traces), :mod:`.kernels2` (``kernels-2.0``, ``kernels-2.1``), :mod:`.kernels3`
(``kernels-3``: composed from published kernels, fitted once per release). Shared inputs:
:mod:`.variants` (the architectures the calibration rows ran, the layer records every method
prices) and :mod:`.deepbench` (the published DeepBench sheets).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from dgtraces.errors import Code, DgtracesError
from dgtraces.io.files import utc_now
from dgtraces.tables.runrow import runs_row

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from dgtraces.store.release import Release

METHOD = "dgtraces.reconstruct/roofline"
METHOD_VERSION = "1.1"  # 1.1: fitted on the architectures the rows ran
PRECISIONS = ("fp32", "amp")


def method_id() -> str:
    return f"{METHOD}-{METHOD_VERSION}"


@dataclass
class Reconstruction:
    run: dict
    layer_timings: "pd.DataFrame"
    bound: "pd.DataFrame"  # layer, fwd_bound, bwd_bound, fwd/bwd latency share
    # kernels-3: how each layer was priced ((a)/(b1)/(b2)/(b3)/(c)) and its extrapolation flag
    pricing: "pd.DataFrame | None" = None


def run_id(device: str, model: str, batch_size: int, precision: str) -> str:
    return f"rec-{device}-{model}-b{batch_size}-{precision}-v{METHOD_VERSION}"


def reconstruct_trace(device: str, model: str, batch_size: int, precision: str = "fp32",
                      *, timestamp_utc: str | None = None,
                      method: str = "roofline-1.1",
                      framework: str | None = None) -> Reconstruction:
    """Reconstruct one training trace (per-layer fwd/bwd ms) of ``model`` on ``device``.

    ``method``: ``roofline-1.1`` (releases v0.3.0-v0.5.0; devices with calibration rows),
    ``kernels-2.0`` or ``kernels-2.1`` (docs/reconstruction-kernels.md; any GPU with
    datasheet peaks and an SM count, fp32), ``kernels-3`` (docs/reconstruction-kernels3.md;
    priced with the parameters shipped in the latest release: :func:`kernels3_trace` takes
    an open release; ``framework``: a name of the framework registry whose family's
    per-layer overhead the trace carries, ``none``, or None: the device's default). Raises
    UNKNOWN_DEVICE, UNKNOWN_MODEL, UNKNOWN_FRAMEWORK, BAD_INPUT (batch <= 0, bad precision or
    method, a framework for another method) and NO_CALIBRATION (device without published
    calibration rows, no amp figure, a release without kernels-3 parameters).
    """
    import pandas as pd

    from dgtraces.reconstruct.roofline.calibration import (
        CALIBRATION_SOURCE,
        DEVICES_SOURCE,
        calibrate,
        observation,
    )
    from dgtraces.reconstruct.roofline.costmodel import layer_arrays, layer_costs, timings_frame

    batch_size = checked(model, batch_size, precision)
    if framework is not None and method != "kernels-3":
        raise DgtracesError(f"--framework sets kernels-3's per-layer framework overhead; "
                            f"{method} has none", code=Code.BAD_INPUT)
    if method == "kernels-3":
        from dgtraces.store.release import as_release

        return kernels3_trace(device, model, batch_size, as_release(None), precision,
                              framework=framework, timestamp_utc=timestamp_utc)
    if method != f"roofline-{METHOD_VERSION}":
        return _other_method(method, device, model, batch_size, precision, timestamp_utc)
    cal = calibrate(device)  # UNKNOWN_DEVICE / NO_CALIBRATION
    params = cal.params(precision)
    la = layer_arrays(model)
    costs = layer_costs(la, params, cal.device, batch_size, precision)
    rid = run_id(device, model, batch_size, precision)
    fwd, bwd = float(costs.fwd_ms.sum()), float(costs.bwd_ms.sum())
    rows = [r.as_dict() for r in cal.rows] + [r.as_dict() for r in cal.amp_rows]
    extrapolated = model not in {r.model for r in cal.rows}
    detail = {
        "method": METHOD, "method_version": METHOD_VERSION, "precision": precision,
        "params": params.as_dict(),
        "device_peaks": {"peak_fp32_tflops": cal.device.peak_tflops,
                         "peak_fp16_tensor_tflops": cal.device.tensor_tflops,
                         "mem_bandwidth_gb_s": cal.device.bandwidth_gb_s,
                         "source": DEVICES_SOURCE},
        "calibration_rows": rows, "calibration_source": CALIBRATION_SOURCE,
        "fit_rms_log": cal.result.rms_log,
        "fit_errors_pct": [round(e, 2) for e in cal.result.errors_pct],
        "model_fitted": not extrapolated,
        "fitted_architectures": {f"row {r.row}": observation(r).model for r in cal.rows},
        "architectures_source": "dgtraces.reconstruct.variants",
    }
    frameworks = sorted({r.framework for r in cal.rows + cal.amp_rows})
    notes = ("reconstructed from structure (layers table, Caffe spec) and device peaks; "
             "per-layer times are modelled, not measured; parameters fitted on the "
             "architectures the calibrating frameworks ran (dgtraces.reconstruct.variants)")
    if extrapolated:
        notes += f"; {model} has no calibration row: extrapolated from alexnet/resnet50"
    if precision == "amp" and (a := cal.amp_fit) is not None:
        notes += (f"; amp: one tensor-core efficiency set by the resnet50v1.5 amp/fp32 ratio "
                  f"{a['target_speedup']:.2f} (reached {a['reached_speedup']:.2f})")
    run = runs_row(
        run_id=rid, model=model, device=device, device_kind="gpu", host=cal.device.name,
        framework="reconstructed (calibrated on " + ", ".join(frameworks) + ")",
        precision=precision, batch_size=batch_size, threads=None, cores=None,
        provenance="reconstructed",
        source=f"{method_id()} cost model; peaks: {DEVICES_SOURCE} ({cal.device.source}); "
               f"fitted to {len(cal.rows)} rows of {CALIBRATION_SOURCE}",
        collector_version=method_id(), timestamp_utc=timestamp_utc or utc_now(),
        fwd_ms=fwd, bwd_ms=bwd, update_ms=costs.update_ms,
        iter_ms=fwd + bwd + costs.update_ms, layer_sum_ratio=1.0, flagged=False,
        flag_reason=None, params=detail, notes=notes)
    bound = pd.DataFrame({"layer": list(la.layer), "kind": list(la.kind),
                          "fwd_bound": costs.fwd_bound, "bwd_bound": costs.bwd_bound,
                          "fwd_latency_ms": costs.fwd_latency_ms,
                          "bwd_latency_ms": costs.bwd_latency_ms})
    return Reconstruction(run, timings_frame(la, costs, rid), bound)


METHODS = (f"roofline-{METHOD_VERSION}", "kernels-2.0", "kernels-2.1", "kernels-3")


# per-device batch a reconstruction prices: 2^16; ResNet-50's fp32 activations take about
# 0.1 GB an image, so a 141 GB H200 holds about 1,400 (AlexNet some thousands); more is
# PLAUSIBILITY (a typo, not a batch)
MAX_BATCH = 1 << 16


def checked(model: str, batch_size: int, precision: str) -> int:
    """The batch size as an int; BAD_INPUT for batch <= 0 or a bad precision, PLAUSIBILITY
    above :data:`MAX_BATCH`, UNKNOWN_MODEL."""
    from ..models import get_spec
    from ..values import positive_int

    batch_size = positive_int("batch size", batch_size)  # numpy integers too (Parquet)
    if batch_size > MAX_BATCH:
        from ..values import bad_value

        raise bad_value("batch_size", "more images per device than any GPU's memory holds "
                        "for these models", f"<= {MAX_BATCH}", batch_size,
                        code=Code.PLAUSIBILITY)
    if precision not in PRECISIONS:
        raise DgtracesError(f"precision must be one of {', '.join(PRECISIONS)}, got "
                            f"{precision!r}", code=Code.BAD_INPUT)
    get_spec(model)  # UNKNOWN_MODEL
    return batch_size


def kernels3_trace(device: str, model: str, batch_size: int, rel: "Release",
                   precision: str = "fp32", *, framework: str | None = None,
                   timestamp_utc: str | None = None) -> Reconstruction:
    """One ``kernels-3`` trace priced with the parameters shipped in the open release
    ``rel`` (its ``method_params`` and ``kernels`` tables; never refitted)."""
    from .kernels3.trace import reconstruct

    batch_size = checked(model, batch_size, precision)
    tr = reconstruct(device, model, batch_size, precision, timestamp_utc or utc_now(),
                     framework, rel)
    return Reconstruction(tr.run, tr.layer_timings, tr.bound, tr.pricing)


def _other_method(method: str, device: str, model: str, batch_size: int, precision: str,
                  timestamp_utc: str | None) -> Reconstruction:
    if method not in METHODS:
        raise DgtracesError(f"unknown method {method!r}; known: {', '.join(METHODS)}",
                            code=Code.BAD_INPUT)
    from dgtraces.reconstruct.kernels2.trace import reconstruct

    run, lt, bound = reconstruct(device, model, batch_size, precision,
                                 timestamp_utc or utc_now(), version=method.split("-")[1])
    return Reconstruction(run, lt, bound)


def runs_frame(recs: list[Reconstruction]) -> "pd.DataFrame":
    """A schema-valid ``runs`` frame from several reconstructions."""
    import pandas as pd

    from dgtraces.tables.checks import validate_frame

    return validate_frame("runs", pd.DataFrame([r.run for r in recs]))


__all__ = ["METHOD", "METHODS", "METHOD_VERSION", "Reconstruction", "kernels3_trace",
           "method_id", "reconstruct_trace", "run_id", "runs_frame"]
