"""Whether a layer trace is complete, and whether its times are physically plausible.

* **Complete**: a run's ``layer_timings`` name every layer of its model, except that the
  layers of GoogLeNet's auxiliary classifiers may be left out (the predictor drops them).
  Contributions lacking layers are refused with ``INCOMPLETE_TRACE`` unless
  ``contribution.yaml`` says ``partial: true``, and the predictor never picks an
  incomplete run by default (:func:`incomplete_runs`).
* **Throughput**: the FLOPs of one iteration (``layers.fwd_flops + bwd_flops`` per sample x
  ``batch_size``, counting only the phases that were timed: a layer with only ``bwd_ms``
  counts only its ``bwd_flops``) divided by the sum of the layer times is the implied
  FLOP/s. A consistent unit error (microseconds entered as milliseconds, seconds as
  milliseconds) moves it by 1000x. Bounds, not tuned to any data set: above
  :data:`ABOVE_PEAK` x the device's datasheet peak of the run's precision
  (:data:`PEAK_COLUMNS`: an fp32 run is bounded by the fp32 peak, not the fp16 tensor one,
  which let a x1000 error on a V100 fp32 run through; #36 item 8) (Winograd/FFT convolutions
  can beat the counted FLOPs by up to ~2.25x), or below the peak / :data:`BELOW_PEAK`; for a
  device without a datasheet figure for that precision, the generic per-kind range
  :data:`GENERIC_FLOPS`. Both are PLAUSIBILITY with the implied FLOP/s.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import TYPE_CHECKING

from dgtraces.errors import Code, Failure

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

# The bounds are wide on purpose: they only catch unit errors (x1000), never slow or fast
# but honest runs, and none was fitted to stored data.
# ABOVE_PEAK: counted FLOPs are direct-convolution FLOPs; Winograd F(2x2,3x3) does 2.25x
# fewer multiplies for 3x3 convolutions (Lavin & Gray 2016), so a run may legitimately
# *appear* up to ~2.25x faster than the datasheet peak; 2.5 adds a margin for clock boost.
ABOVE_PEAK = 2.5
# BELOW_PEAK: small batches, tiny layers, launch overhead and CPU-bound data movement keep
# real utilisation far under peak (single-digit percent is common at batch 1); 1/5000 =
# 0.02 % of peak is ~50x under the slowest plausible run and still 20x above what a x1000
# unit error (ms entered as s) produces at a typical ~10 % utilisation.
BELOW_PEAK = 5000.0
# GENERIC_FLOPS, for devices without datasheet figures: CPU from an old single core
# (~1e8 FLOP/s effective) to a large many-core AVX-512 server (tens of TFLOP/s); GPU from an
# old mobile part (~1e9) to 2.5x the fp16 tensor peak of current parts (~1e15).
GENERIC_FLOPS = {"cpu": (1e8, 5e13), "gpu": (1e9, 2.5e15)}  # FLOP/s, per device
# PEAK_COLUMNS: precision -> the devices columns whose highest figure bounds a run of it. fp32
# runs on the fp32 units; amp, fp16 and bf16 run their matrix products on tensor cores where
# a device has them (the fp16 tensor figure), else on the units the fp32 figure describes.
_HALF = ("peak_fp32_tflops", "peak_fp16_tensor_tflops")
PEAK_COLUMNS = {"fp32": ("peak_fp32_tflops",), "amp": _HALF, "fp16": _HALF, "bf16": _HALF}
SHOWN_MISSING = 5


@cache
def _structure(model: str) -> tuple[tuple[str, bool], ...]:
    """(layer, aux) of ``model`` in order; built once per model (a contribution has
    hundreds of runs of the same model)."""
    from dgtraces.models import layers_frame

    frame = layers_frame(model)
    return tuple(zip(frame["layer"].tolist(), frame["aux"].astype(bool).tolist(), strict=True))


def missing_layers(model: str, timed) -> list[str]:
    """Layers of ``model`` without a timing row (empty when only all aux layers lack one)."""
    have = set(timed)
    missing = [(name, aux) for name, aux in _structure(model) if name not in have]
    if missing and all(aux for _, aux in missing):
        return []
    return [name for name, _ in missing]


def incomplete_runs(runs: "pd.DataFrame", timings: "pd.DataFrame") -> dict[str, list[str]]:
    """run_id -> missing layers, for every run of a known model that lacks layers."""
    from dgtraces.models import MODELS

    per_run = timings.groupby("run_id", sort=False)["layer"].agg(list)
    out = {}
    for run_id, model in zip(runs["run_id"].astype(str), runs["model"].astype(str), strict=False):
        if model not in MODELS:
            continue
        missing = missing_layers(model, per_run.get(run_id, []))
        if missing:
            out[run_id] = missing
    return out


def incomplete_failures(runs: "pd.DataFrame", timings: "pd.DataFrame",
                        file: str | None) -> list[Failure]:
    """One INCOMPLETE_TRACE failure per run that lacks layers of its model."""
    bad = incomplete_runs(runs, timings)
    r = runs.reset_index(drop=True)
    out = []
    for row, (run_id, model) in enumerate(zip(r["run_id"].astype(str), r["model"], strict=False)):
        if run_id in bad:
            names = bad[run_id]
            shown = ", ".join(names[:SHOWN_MISSING]) + (" ..." if len(names) > SHOWN_MISSING
                                                         else "")
            total = len(_structure(str(model)))
            out.append(Failure(Code.INCOMPLETE_TRACE, f"run lacks {len(names)} layer(s) of "
                               f"{model}: {shown} (declare `partial: true` in "
                               "contribution.yaml if on purpose)", file=file, row=row,
                               column="run_id", expected=f"timing rows for all {total} layers",
                               found=f"{total - len(names)} layers timed"))
    return out


def throughput_failures(runs: "pd.DataFrame", timings: "pd.DataFrame",
                        peaks: Mapping[str, Mapping[str, float]], file: str | None
                        ) -> list[Failure]:
    """PLAUSIBILITY for runs whose implied FLOP/s lies outside the bounds (module doc).
    ``peaks``: device -> precision -> datasheet peak FLOP/s (:func:`device_peaks`)."""
    import math

    from dgtraces.models import MODELS, layers_frame

    flops = layers_frame()[["model", "layer", "fwd_flops", "bwd_flops"]]
    t = timings[["run_id", "layer", "fwd_ms", "bwd_ms"]].merge(
        runs[["run_id", "model"]], on="run_id").merge(flops, on=["model", "layer"])
    fwd, bwd = t["fwd_ms"].astype(float), t["bwd_ms"].astype(float)
    # FLOPs only of the phases that were timed: a backward-only trace is compared with the
    # backward FLOPs, not forward + backward (that would inflate the implied FLOP/s ~1.5x)
    t = t.assign(f=t["fwd_flops"].astype(float).where(fwd.notna(), 0.0)
                 + t["bwd_flops"].astype(float).where(bwd.notna(), 0.0),
                 ms=fwd.fillna(0) + bwd.fillna(0))
    per_run = t.groupby("run_id")[["f", "ms"]].sum()
    out = []
    r = runs.reset_index(drop=True)
    ms, fl = per_run["ms"].to_dict(), per_run["f"].to_dict()
    for row, run in enumerate(r.to_dict("records")):
        rid = str(run["run_id"])
        if run["model"] not in MODELS or rid not in ms:
            continue
        total_ms = float(ms[rid])
        if not total_ms > 0:
            continue  # layer_sum checks report it
        implied = float(fl[rid]) * int(run["batch_size"]) / (total_ms / 1e3)
        precision = str(run.get("precision"))
        peak = peaks.get(str(run["device"]), {}).get(precision)
        if peak is not None and math.isfinite(peak) and peak > 0:
            low, high, basis = peak / BELOW_PEAK, peak * ABOVE_PEAK, \
                f"datasheet {precision} peak {peak:.3g} FLOP/s"
        else:
            low, high = GENERIC_FLOPS.get(str(run.get("device_kind")), GENERIC_FLOPS["gpu"])
            basis = f"no datasheet peak; generic {run.get('device_kind')} range"
        if not low <= implied <= high:
            out.append(Failure(Code.PLAUSIBILITY, f"implied throughput {implied:.3g} FLOP/s is "
                               f"{'above' if implied > high else 'far below'} what the device "
                               f"can do ({basis}); a unit error (us vs ms, s vs ms)?",
                               file=file, row=row, column="run_id",
                               expected=f"{low:.3g} .. {high:.3g} FLOP/s",
                               found=f"{implied:.3g} FLOP/s"))
    return out


def device_peaks(devices: "pd.DataFrame | None") -> dict[str, dict[str, float]]:
    """device -> precision -> peak FLOP/s from a devices table: per precision, the highest
    of its :data:`PEAK_COLUMNS` the row gives (a precision none of them gives is left out)."""
    if devices is None:
        return {}
    out: dict[str, dict[str, float]] = {}
    for d in devices.to_dict("records"):
        per: dict[str, float] = {}
        for precision, columns in PEAK_COLUMNS.items():
            values = [float(v) for v in (d.get(c) for c in columns)
                      if v is not None and v == v]
            if values:
                per[precision] = max(values) * 1e12
        if per:
            out[str(d["device"])] = per
    return out


def reference_peaks() -> dict[str, dict[str, float]]:
    """device -> precision -> peak FLOP/s of the shipped datasheet figures
    (``dgtraces/reference``)."""
    import pandas as pd

    from dgtraces import reference

    rows = reference.device_rows()  # devices.csv + devices_datasheet.csv, one reader
    frame = pd.DataFrame(rows).replace("", None) if rows else None
    return device_peaks(frame)
