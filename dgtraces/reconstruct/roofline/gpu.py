"""The reconstruction's error against real GPU layers (published runs of release v0.4.0+).

For every published GPU run whose device the method can model, :func:`compare_gpu`
reconstructs the same model at the run's batch with the fitted cost model (unchanged: no
parameter sees these rows) on the **dataset spec** of the run's model (layer names match),
and compares per layer (fwd + bwd), per layer kind and for the whole mapped iteration.

Which devices can be modelled: the method needs calibration rows of the device (published
throughputs). ``v100-dgxs-32gb`` is modelled with the ``v100`` calibration: the same GV100
part, and the datasheet figures used (15.7 TFLOPS, 900 GB/s) are identical
(``reference/devices_datasheet.csv``). ``titanx-maxwell`` has no calibration rows (NO
calibration -> not modelled); ``gpu-unstated`` (PipeDream) has no known device at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

# device of a published run -> calibration key of the method (same part, same peak figures)
MODELLED_AS = {"v100-dgxs-32gb": "v100", "v100": "v100", "k80": "k80"}
WHY_NOT = {"titanx-maxwell": "no calibration rows (published throughputs) for Titan X Maxwell",
           "gpu-unstated": "the source states no GPU: nothing to model"}


@dataclass
class GpuComparison:
    run_id: str
    device: str
    model: str
    batch_size: int
    table: pd.DataFrame  # layer, kind, measured_ms, reconstructed_ms, ape_pct

    @property
    def layer_mape(self) -> float:
        return float(self.table["ape_pct"].mean())

    @property
    def iteration_error_pct(self) -> float:
        t = self.table
        return float((t["reconstructed_ms"].sum() / t["measured_ms"].sum() - 1) * 100)

    def by_kind(self) -> pd.DataFrame:
        g = self.table.groupby("kind")
        out = g.agg(layers=("ape_pct", "size"), mape_pct=("ape_pct", "mean"),
                    measured_ms=("measured_ms", "sum"),
                    reconstructed_ms=("reconstructed_ms", "sum")).reset_index()
        out["sum_error_pct"] = (out["reconstructed_ms"] / out["measured_ms"] - 1) * 100
        return out


def compare_gpu(runs: pd.DataFrame, timings: pd.DataFrame
                ) -> tuple[list[GpuComparison], list[str]]:
    """(comparisons, lines saying which published GPU runs were not modelled and why)."""
    import pandas as pd

    from dgtraces.models import layer_records
    from dgtraces.reconstruct.roofline.calibration import calibrate
    from dgtraces.reconstruct.roofline.costmodel import layer_arrays, layer_costs

    pub = runs[(runs["provenance"] == "published") & (runs["device_kind"] == "gpu")]
    out, skipped = [], []
    for run in pub.to_dict("records"):
        run_id, device, model = str(run["run_id"]), str(run["device"]), str(run["model"])
        batch = int(run["batch_size"])
        lt = timings[timings["run_id"] == run_id].dropna(subset=["fwd_ms", "bwd_ms"])
        if device not in MODELLED_AS:
            skipped.append(f"{run_id}: {WHY_NOT.get(device, 'device not calibrated')}")
            continue
        if model == "googlenet" and device == "k80":
            continue  # the B-Caffe comparison (backward only) covers these
        cal = calibrate(MODELLED_AS[device])
        la = layer_arrays(model)
        costs = layer_costs(la, cal.params("fp32"), cal.device, batch)
        rec = pd.DataFrame({"layer": la.layer, "reconstructed_ms": costs.fwd_ms + costs.bwd_ms})
        kinds = {r["layer"]: r["kind"] for r in layer_records(model)}
        t = lt.assign(measured_ms=lt["fwd_ms"] + lt["bwd_ms"])[["layer", "measured_ms"]]
        t = t.merge(rec, on="layer", how="inner")
        t = t[t["measured_ms"] > 0]
        t["kind"] = t["layer"].map(kinds)
        t["ape_pct"] = (t["reconstructed_ms"] / t["measured_ms"] - 1).abs() * 100
        out.append(GpuComparison(run_id, device, model, batch, t.reset_index(drop=True)))
    return out, skipped


def lines(comparisons: list[GpuComparison], skipped: list[str]) -> list[str]:
    title = ("real GPU layers (published runs; cost model unchanged, calibration of the same "
             "GPU part):")
    out = [title]
    for c in comparisons:
        out.append(f"  {c.run_id} ({c.device}, {c.model}, b{c.batch_size}): "
                   f"{len(c.table)} layers, per-layer MAPE {c.layer_mape:.1f}%, whole "
                   f"mapped iteration {c.iteration_error_pct:+.1f}%")
        for k in c.by_kind().itertuples():
            out.append(f"    {k.kind:<8} {k.layers:4d} layers  MAPE {k.mape_pct:6.1f}%  sum "
                       f"measured {k.measured_ms:8.2f} ms reconstructed "
                       f"{k.reconstructed_ms:8.2f} ms ({k.sum_error_pct:+.1f}%)")
    out += [f"  not modelled: {s}" for s in skipped]
    return out


def markdown(comparisons: list[GpuComparison], skipped: list[str]) -> list[str]:
    """The card section: per run, per-layer MAPE, whole-iteration error, per-kind table."""
    if not comparisons and not skipped:
        return ["No published GPU per-layer runs in this release.", ""]
    intro = ("Published real GPU per-layer traces (release v0.4.0+) against the "
             "reconstruction of the same model, batch and device, with the cost model fitted "
             "as above (no parameter sees these rows). Per layer: forward + backward; Kineto "
             "times are GPU kernel sums per layer (the eltwise adds have no linked backward "
             "and are left out). `python -m dgtraces reconstruct --report` prints these "
             "figures.")
    out = [intro, ""]
    for c in comparisons:
        head = (f"**{c.model}, batch {c.batch_size}, {c.device}** (`{c.run_id}`, modelled "
                f"with the `{MODELLED_AS[c.device]}` calibration): {len(c.table)} layers, "
                f"per-layer MAPE **{c.layer_mape:.1f}%**, whole mapped iteration "
                f"**{c.iteration_error_pct:+.1f}%**.")
        out += [head, "",
                "| kind | layers | MAPE | measured ms | reconstructed ms | sum error |",
                "| --- | ---: | ---: | ---: | ---: | ---: |"]
        for k in c.by_kind().itertuples():
            out.append(f"| {k.kind} | {k.layers} | {k.mape_pct:.1f}% | {k.measured_ms:.2f} | "
                       f"{k.reconstructed_ms:.2f} | {k.sum_error_pct:+.1f}% |")
        out.append("")
    if skipped:
        out += ["Not modelled:", ""] + [f"- {s}" for s in skipped] + [""]
    return out
