"""The per-layer GPU traces ``kernels-2.1`` fits on (docs/reconstruction-kernels.md,
"kernels-2.1"): the published GPU runs of a release with per-layer fwd/bwd times, grouped
into blocks by measurement setup, each (layer, direction) row with its pre-registered fold.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cache
from typing import TYPE_CHECKING

import numpy as np

from dgtraces.errors import Code, DgtracesError
from dgtraces.reconstruct.roofline.gpu import MODELLED_AS as ROOFLINE_MODELLED_AS

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from dgtraces.reconstruct.kernels2.gemm import KernelParams

# device of a published run -> device the kernel methods model it as (same part, same
# figures): roofline-1.1's map, plus Titan X Maxwell, which has datasheet peaks and SMs
MODELLED_AS = {**ROOFLINE_MODELLED_AS, "titanx-maxwell": "titanx-maxwell"}
FIT_TRACE_DEVICES = ("v100", "titanx-maxwell")  # kernels-2.1: devices with fitted traces
TRACE_RELEASE = "0.5.0"  # the release whose published traces the fit reads (pinned)
# B-Caffe K80 stays validation (pre-registered): its runs are never fit data
VALIDATION_ONLY = ("B-Caffe",)


def _resnet(name: str, kind: str) -> str | None:
    if name == "conv1":
        return "stem"
    if name.startswith("layer"):
        return name.split(".")[0]
    return "head" if name == "avgpool" else None


def _googlenet(name: str, kind: str) -> str | None:
    if name == "conv1/7x7_s2":
        return "stem"
    if name.startswith("inception_"):
        return name.split("/")[0]
    return "head" if name.startswith("pool5/") else None


def _alexnet(name: str, kind: str) -> str | None:
    return name if kind in ("conv", "fc") else None


# model -> (layer name, kind) -> the fold a layer starts, or None (joins the fold before it)
FOLD_STARTS = {"resnet50-v1.5": _resnet, "googlenet": _googlenet, "alexnet-owt": _alexnet}


def folds(model: str) -> dict[str, str]:
    """layer -> fold label of ``model`` (pre-registered folds; in layer order a layer
    starts a fold or joins the one before it)."""
    from dgtraces.reconstruct.roofline.costmodel import layer_arrays

    if model not in FOLD_STARTS:
        raise DgtracesError(f"no pre-registered folds for model {model!r}; have "
                            f"{', '.join(FOLD_STARTS)}", code=Code.BAD_INPUT)
    la = layer_arrays(model)
    out, current = {}, None
    for name, kind in zip(la.layer, la.kind, strict=True):
        current = FOLD_STARTS[model](str(name), str(kind)) or current
        if current is None:
            raise DgtracesError(f"{model}: layer {name!r} precedes every fold start",
                                code=Code.BAD_INPUT)
        out[str(name)] = current
    return out


@dataclass(frozen=True)
class TraceBlock:
    """The (layer, direction) rows of the runs of one measurement setup."""

    setup: str
    model: str
    batch: int
    run: np.ndarray  # run id per row
    layer: np.ndarray
    kind: np.ndarray
    index: np.ndarray  # index into layer_arrays(model)
    bwd: np.ndarray  # bool
    measured_ms: np.ndarray
    fold: np.ndarray

    def select(self, keep: np.ndarray) -> "TraceBlock":
        return replace(self, **{f: getattr(self, f)[keep] for f in
                                ("run", "layer", "kind", "index", "bwd", "measured_ms",
                                 "fold")})

    def predict(self, p: "KernelParams", device: str) -> np.ndarray:
        """Predicted device time (ms) of each row."""
        from dgtraces.reconstruct.kernels2.network import net_times

        t = net_times(self.model, device, p, self.batch)
        return np.where(self.bwd, t.bwd_ms[self.index], t.fwd_ms[self.index])

    def frame(self, predicted_ms: np.ndarray, run: str) -> "pd.DataFrame":
        """One run's rows as a :class:`~dgtraces.evaluation.kernels.SourceComparison`
        table (layer, kind, direction, measured_ms, predicted_ms, ape_pct)."""
        import pandas as pd

        m = self.run == run
        return pd.DataFrame({
            "layer": self.layer[m], "measured_ms": self.measured_ms[m],
            "predicted_ms": predicted_ms[m],
            "direction": np.where(self.bwd[m], "bwd", "fwd"), "kind": self.kind[m],
            "ape_pct": np.abs(predicted_ms[m] / self.measured_ms[m] - 1) * 100})


def measured_table(lt: "pd.DataFrame", model: str, names, fwd, bwd) -> "pd.DataFrame":
    """One run's measured (layer, direction) rows with a time > 0 next to ``fwd``/``bwd``
    predicted per layer of ``names``: layer, measured_ms, predicted_ms, direction, kind,
    ape_pct."""
    import pandas as pd

    from dgtraces.models import layer_records

    kinds = {r["layer"]: r["kind"] for r in layer_records(model)}
    pred = pd.DataFrame({"layer": names, "fwd": fwd, "bwd": bwd})
    parts = []
    for d in ("fwd", "bwd"):
        m = lt[["layer", f"{d}_ms"]].rename(columns={f"{d}_ms": "measured_ms"})
        t = m.merge(pred[["layer", d]].rename(columns={d: "predicted_ms"}), on="layer")
        t = t[t["measured_ms"] > 0].assign(direction=d)
        parts.append(t)
    t = pd.concat(parts, ignore_index=True)
    t["kind"] = t["layer"].map(kinds)
    t["ape_pct"] = (t["predicted_ms"] / t["measured_ms"] - 1).abs() * 100
    return t


def blocks_from(runs: "pd.DataFrame", timings: "pd.DataFrame", device: str
                ) -> tuple[TraceBlock, ...]:
    """The fit blocks of ``device`` from a release's runs and layer_timings."""
    import pandas as pd

    from dgtraces.reconstruct.roofline.costmodel import layer_arrays

    pub = runs[(runs["provenance"] == "published") & (runs["device_kind"] == "gpu")]
    setups: dict[tuple, list] = {}
    for r in pub.to_dict("records"):
        if (MODELLED_AS.get(str(r["device"])) != device
                or str(r["framework"]).startswith(VALIDATION_ONLY)):
            continue
        key = (str(r["device"]), str(r["model"]), int(r["batch_size"]), str(r["framework"]))
        setups.setdefault(key, []).append(str(r["run_id"]))
    out = []
    for (dev, model, batch, fw), rids in sorted(setups.items()):
        la = layer_arrays(model)
        pos = {str(n): i for i, n in enumerate(la.layer)}
        fold = folds(model)
        ones = np.ones(len(la.layer))
        parts = [measured_table(timings[timings["run_id"] == rid], model, la.layer, ones,
                                ones).assign(run=rid) for rid in rids]
        t = pd.concat(parts, ignore_index=True)
        out.append(TraceBlock(
            f"{fw} {model} b{batch} on {dev}", model, batch, t["run"].to_numpy(str),
            t["layer"].to_numpy(str), t["kind"].to_numpy(str),
            np.array([pos[n] for n in t["layer"]], int),
            (t["direction"] == "bwd").to_numpy(), t["measured_ms"].to_numpy(float),
            np.array([fold[n] for n in t["layer"]], str)))
    return tuple(out)


@cache
def trace_blocks(device: str) -> tuple[TraceBlock, ...]:
    """The fit blocks of ``device`` from release ``TRACE_RELEASE`` (empty for a device
    without fitted traces)."""
    from dgtraces.store.release import Release

    if device not in FIT_TRACE_DEVICES:
        return ()
    rel = Release.open(TRACE_RELEASE)  # only the two tables the blocks are made of
    return blocks_from(rel.table("runs"), rel.table("layer_timings"), device)
