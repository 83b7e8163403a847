"""Layer-by-layer comparison of the K80 reconstruction with the published B-Caffe backward
times of GoogLeNet (device K80 and batch 64 are *inferred* settings of those logs).

B-Caffe logs only layers that own learnable blobs (conv, fc), backward only; the six logs
are averaged per layer (min and max kept) before the comparison.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from dgtraces.errors import Code

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

DEVICE = "k80"
MODEL = "googlenet"


@dataclass
class BcaffeComparison:
    table: "pd.DataFrame"  # layer, kind, bcaffe mean/min/max, reconstructed, ratio
    batch_size: int
    logs: int

    @property
    def mape(self) -> float:
        t = self.table
        return float(((t["reconstructed_bwd_ms"] / t["bcaffe_bwd_ms"] - 1).abs() * 100).mean())

    @property
    def total_ratio(self) -> float:
        """Sum of reconstructed over sum of B-Caffe backward (same layers)."""
        return float(self.table["reconstructed_bwd_ms"].sum() / self.table["bcaffe_bwd_ms"].sum())

    def by_group(self) -> "pd.DataFrame":
        """Median ratio and layer count per group (conv kxk, fc)."""
        g = self.table.groupby("group")
        return g.agg(layers=("ratio", "size"), median_ratio=("ratio", "median"),
                     bcaffe_ms=("bcaffe_bwd_ms", "sum"),
                     reconstructed_ms=("reconstructed_bwd_ms", "sum")).reset_index()

    @property
    def rank_correlation(self) -> float:
        """Spearman rank correlation of the per-layer times."""
        t = self.table
        a = t["bcaffe_bwd_ms"].rank().to_numpy()
        b = t["reconstructed_bwd_ms"].rank().to_numpy()
        return float(np.corrcoef(a, b)[0, 1])


def compare(runs: "pd.DataFrame", timings: "pd.DataFrame") -> BcaffeComparison:
    """Compare published B-Caffe runs (``runs`` rows with provenance published, model
    googlenet, device k80) with :func:`reconstruct_trace` at their batch size."""
    from dgtraces.errors import DgtracesError
    from dgtraces.models import get_spec, layer_records
    from dgtraces.reconstruct import reconstruct_trace

    sel = runs[(runs["provenance"] == "published") & (runs["model"] == MODEL)
               & (runs["device"] == DEVICE)]
    if sel.empty:
        raise DgtracesError("no published B-Caffe GoogLeNet K80 runs to compare with",
                            code=Code.NOT_FOUND)
    batches = sorted(set(int(b) for b in sel["batch_size"]))
    if len(batches) != 1:
        raise DgtracesError(f"B-Caffe runs disagree on batch size: {batches}",
                            code=Code.PLAUSIBILITY)
    lt = timings[timings["run_id"].isin(sel["run_id"]) & timings["bwd_ms"].notna()]
    agg = lt.groupby("layer")["bwd_ms"].agg(["mean", "min", "max"]).reset_index()
    rec = reconstruct_trace(DEVICE, MODEL, batches[0]).layer_timings.set_index("layer")
    order = {r["layer"]: (r["layer_idx"], r["kind"]) for r in layer_records(MODEL)}
    agg["layer_idx"] = [order[name][0] for name in agg["layer"]]
    agg["kind"] = [order[name][1] for name in agg["layer"]]
    kernel = {layer.name: layer.kernel for layer in get_spec(MODEL).layers}
    agg["group"] = [f"conv {kernel[n]}x{kernel[n]}" if k == "conv" else k
                    for n, k in zip(agg["layer"], agg["kind"], strict=True)]
    agg["reconstructed_bwd_ms"] = rec.loc[agg["layer"], "bwd_ms"].to_numpy()
    agg = agg.rename(columns={"mean": "bcaffe_bwd_ms", "min": "bcaffe_min_ms",
                              "max": "bcaffe_max_ms"}).sort_values("layer_idx")
    agg["ratio"] = agg["reconstructed_bwd_ms"] / agg["bcaffe_bwd_ms"]
    cols = ["layer_idx", "layer", "kind", "group", "bcaffe_bwd_ms", "bcaffe_min_ms",
            "bcaffe_max_ms", "reconstructed_bwd_ms", "ratio"]
    return BcaffeComparison(agg[cols].reset_index(drop=True), batches[0], len(sel))


def plot(cmp: BcaffeComparison, path) -> None:
    """PNG: per-layer backward ms, B-Caffe (mean with min-max) vs reconstruction."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dgtraces.io.files import atomic_write_bytes

    t = cmp.table
    x = np.arange(len(t))
    fig, ax = plt.subplots(figsize=(12, 4.5))
    err = np.vstack([t["bcaffe_bwd_ms"] - t["bcaffe_min_ms"],
                     t["bcaffe_max_ms"] - t["bcaffe_bwd_ms"]])
    ax.bar(x - 0.2, t["bcaffe_bwd_ms"], 0.4, yerr=err, label="B-Caffe (published, mean of "
           f"{cmp.logs} logs; min-max)", color="#4c72b0")
    ax.bar(x + 0.2, t["reconstructed_bwd_ms"], 0.4, label="reconstructed (K80 cost model)",
           color="#dd8452")
    ax.set_xticks(x)
    ax.set_xticklabels(t["layer"], rotation=90, fontsize=6)
    ax.set_ylabel("backward time per layer (ms)")
    ax.set_title(f"GoogLeNet backward per layer, K80 (inferred), batch {cmp.batch_size} "
                 f"(inferred): MAPE {cmp.mape:.0f}%, sum ratio {cmp.total_ratio:.2f}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    atomic_write_bytes(path, buf.getvalue())
