"""Per-layer error of a cost model against every real GPU source of a release, per kind and
direction (issue #27): published GPU runs with per-layer fwd/bwd (Kineto V100, caffe time
Titan X Maxwell) and the B-Caffe K80 backward times; DeepBench kernels by leave-one-device-out
(:func:`dgtraces.reconstruct.kernels2.stage1.leave_one_device_out`).

``method`` is ``roofline-1.1`` (the shipped model; the dispatch term inside the layers) or
``kernels-2.0`` (device time per layer). No constant of either sees these rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from dgtraces.errors import Code, DgtracesError
from dgtraces.reconstruct.kernels2.traces import MODELLED_AS, measured_table

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

METHODS = ("roofline-1.1", "kernels-2.0")  # the kernels-2.0 summary compares these two
KNOWN = (*METHODS, "kernels-2.1")


def layer_times(method: str, model: str, device: str, batch: int
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(layer names, fwd ms, bwd ms) of ``model`` on ``device`` under ``method``."""
    from dgtraces.reconstruct.roofline.costmodel import layer_arrays

    la = layer_arrays(model)
    if method == "roofline-1.1":
        from dgtraces.reconstruct.roofline.calibration import calibrate
        from dgtraces.reconstruct.roofline.costmodel import layer_costs

        cal = calibrate(device)  # NO_CALIBRATION where the old method has no rows
        c = layer_costs(la, cal.params("fp32"), cal.device, batch)
        return la.layer, c.fwd_ms, c.bwd_ms
    if method == "kernels-2.0":
        from dgtraces.reconstruct.kernels2.network import net_times
        from dgtraces.reconstruct.kernels2.stage2 import calibrate_kernels

        t = net_times(model, device, calibrate_kernels(device).params, batch, la=la)
        return la.layer, t.fwd_ms, t.bwd_ms
    if method == "kernels-2.1":
        from dgtraces.reconstruct.kernels2.network import net_times
        from dgtraces.reconstruct.kernels2.stage2_traces import calibrate21

        t = net_times(model, device, calibrate21(device).params, batch, la=la)
        return la.layer, t.fwd_ms, t.bwd_ms
    raise DgtracesError(f"unknown method {method!r}; known: {', '.join(KNOWN)}",
                        code=Code.BAD_INPUT)


@dataclass
class SourceComparison:
    source: str  # run id or "bcaffe"
    device: str
    model: str
    batch_size: int
    table: "pd.DataFrame"  # layer, kind, direction, measured_ms, predicted_ms, ape_pct

    def by_kind(self) -> "pd.DataFrame":
        t = self.table
        g = t.groupby(["kind", "direction"])
        out = g.agg(layers=("ape_pct", "size"), mape_pct=("ape_pct", "mean"),
                    measured_ms=("measured_ms", "sum"),
                    predicted_ms=("predicted_ms", "sum")).reset_index()
        out["sum_error_pct"] = (out["predicted_ms"] / out["measured_ms"] - 1) * 100
        return out

    def layer_mape(self) -> float:
        """MAPE over layers of fwd + bwd (the roofline-1.1 report's figure)."""
        t = self.table.groupby("layer")[["measured_ms", "predicted_ms"]].sum()
        m, p = t["measured_ms"], t["predicted_ms"]
        keep = m > 0
        return float(((p[keep] / m[keep] - 1).abs() * 100).mean())


def compare(method: str, runs: "pd.DataFrame", timings: "pd.DataFrame"
            ) -> tuple[list[SourceComparison], list[str]]:
    """Every published GPU run with per-layer times whose device the method can model."""
    pub = runs[(runs["provenance"] == "published") & (runs["device_kind"] == "gpu")]
    out, skipped = [], []
    for run in pub.to_dict("records"):
        rid, device, model = str(run["run_id"]), str(run["device"]), str(run["model"])
        if device not in MODELLED_AS or (device == "k80" and model == "googlenet"):
            if device != "k80":
                skipped.append(f"{rid}: device {device!r} has no peaks to model")
            continue
        try:
            names, fwd, bwd = layer_times(method, model, MODELLED_AS[device],
                                          int(run["batch_size"]))
        except DgtracesError as e:
            skipped.append(f"{rid}: {e.code}: {e}")
            continue
        out.append(SourceComparison(rid, device, model, int(run["batch_size"]),
                                    measured_table(timings[timings["run_id"] == rid], model,
                                                   names, fwd, bwd)))
    return out, skipped


def bcaffe(method: str, runs: "pd.DataFrame", timings: "pd.DataFrame"
           ) -> SourceComparison | None:
    """B-Caffe GoogLeNet backward (K80, batch 64 inferred) against ``method``."""
    import pandas as pd

    from dgtraces.models import layer_records
    from dgtraces.reconstruct.roofline.bcaffe import DEVICE, MODEL

    pub = runs[(runs["provenance"] == "published") & (runs["device"] == DEVICE)
               & (runs["model"] == MODEL)]
    if pub.empty:
        return None
    lt = timings[timings["run_id"].isin(pub["run_id"])].dropna(subset=["bwd_ms"])
    meas = lt.groupby("layer")["bwd_ms"].mean().reset_index(name="measured_ms")
    batch = int(pub["batch_size"].iloc[0])
    names, _, bwd = layer_times(method, MODEL, DEVICE, batch)
    t = meas.merge(pd.DataFrame({"layer": names, "predicted_ms": bwd}), on="layer")
    t = t[t["measured_ms"] > 0].assign(direction="bwd")
    kinds = {r["layer"]: r["kind"] for r in layer_records(MODEL)}
    t["kind"] = t["layer"].map(kinds)
    t["ape_pct"] = (t["predicted_ms"] / t["measured_ms"] - 1).abs() * 100
    return SourceComparison("bcaffe", DEVICE, MODEL, batch, t.reset_index(drop=True))
