"""Devices the predictor can use, and traces for devices without calibration rows.

A GPU device is known when it has a row in ``reference.device_rows()`` (the byte-exact
``devices.csv`` plus ``devices_datasheet.csv``). Its trace comes, in order, from a stored run,
from ``dgtraces.reconstruct`` (devices with published calibration rows), or, when the caller
will set the absolute time with ``--calibrate-img-s``, from a *shape-only* trace: the roofline
cost model with the parameters fitted on :data:`SHAPE_REFERENCE` applied to this device's
datasheet peaks. Only the split of time between layers comes from that model; calibration
rescales the total to the given 1-GPU throughput, so nothing is fitted to multi-GPU figures.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import Code, DgtracesError, Failure

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from dgtraces.predict.tracedef import Trace

SHAPE_REFERENCE = "v100"  # calibrated device whose fitted efficiencies shape other GPUs


def known_devices(runs: pd.DataFrame | None = None) -> dict[str, str]:
    """Device key -> where its traces come from (datasheet GPUs and devices of stored runs)."""
    from ..reconstruct.roofline.calibration import fitted_rows
    from ..reference import device_rows

    out = {}
    for row in device_rows():
        key = row["device"]
        out[key] = ("reconstructable (calibration rows)" if fitted_rows(key)
                    else "datasheet only: needs a stored run or --calibrate-img-s")
    if runs is not None and len(runs):
        for key in sorted(set(runs["device"]) - set(out)):
            out[key] = "stored runs only"
    return out


def no_run_at_batch(model: str, device: str, batch_size: int,
                    runs: pd.DataFrame | None) -> DgtracesError | None:
    """NOT_FOUND naming the stored batch sizes when ``device`` has runs of ``model`` but not
    at ``batch_size`` and cannot be reconstructed (instead of 'unknown device')."""
    if runs is None or not len(runs):
        return None
    mine = runs[(runs["device"] == device) & (runs["model"] == model)]
    if mine.empty:
        return None
    batches = sorted({int(b) for b in mine["batch_size"].dropna()})
    return DgtracesError(
        f"no stored run of {model} on {device} at batch {batch_size}; stored batches: "
        f"{', '.join(map(str, batches))}", code=Code.NOT_FOUND,
        failures=[Failure(Code.NOT_FOUND, "no stored run at that batch", column="batch_size",
                          expected=" | ".join(map(str, batches)), found=str(batch_size))])


def shape_trace(model: str, device: str, batch_size: int, precision: str = "fp32") -> Trace:
    """Per-layer shape of ``model`` on a datasheet-only ``device`` (to be calibrated)."""
    from dgtraces.predict.tracedef import from_frame

    from ..reconstruct.roofline.calibration import calibrate, get_device
    from ..reconstruct.roofline.costmodel import layer_arrays, layer_costs, timings_frame

    dev = get_device(device)  # UNKNOWN_DEVICE
    ref = calibrate(SHAPE_REFERENCE)
    la = layer_arrays(model)
    costs = layer_costs(la, ref.params(precision), dev, batch_size, precision)
    rid = f"shape-{device}-{model}-b{batch_size}-{precision}"
    return from_frame(
        timings_frame(la, costs, rid), model, batch_size, update_ms=float(costs.update_ms),
        provenance="reconstructed", run_id=rid, device=device,
        source=f"layer shape only: roofline cost model with the efficiencies fitted on "
               f"{SHAPE_REFERENCE} applied to the {device} datasheet peaks "
               f"({dev.source}); absolute time set by --calibrate-img-s")
