"""``reconstruct --report --method kernels-3``: the pre-registered clauses, each as target met /
not met and beats roofline-1.1 yes / no, the adoption rule, the reported figures and the
fitted parameters, all read from a release's ``method_params`` rows (nothing is refitted unless
asked: :func:`refit` recomputes them from the release's tables); :func:`figure` draws the
per-GPU leave-one-GPU-out parity (docs/reconstruction-kernels3.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from dgtraces.store.release import Release


@dataclass(frozen=True)
class Figure:
    """One clause figure: kernels-3 against its target and against roofline-1.1."""

    name: str
    clause: str
    what: str
    value_pct: float
    target_pct: float
    count: int
    compared_pct: float
    baseline_pct: float
    compared_count: int

    @property
    def met(self) -> bool:
        return bool(self.value_pct <= self.target_pct)

    @property
    def beats(self) -> bool:
        return bool(self.compared_pct < self.baseline_pct)


def figures(rows: "pd.DataFrame") -> list[Figure]:
    """The clause figures of ``method_params`` rows, in clause order."""
    m = {str(r["name"]): r for r in rows[rows["scope"] == "metric"].to_dict("records")}
    out = []
    for name, r in m.items():
        if not str(r["basis"]).startswith("clause ") or name.endswith(":vs_roofline"):
            continue
        v = m[f"{name}:vs_roofline"]
        clause, what = str(r["basis"])[len("clause "):].split(": ", 1)
        out.append(Figure(name, clause, what, float(r["value_pct"]), float(r["target_pct"]),
                          int(r["count"]), float(v["value_pct"]), float(v["baseline_pct"]),
                          int(v["count"])))
    return sorted(out, key=lambda f: (f.clause, f.name))


def adoption(figs: list[Figure]) -> tuple[bool, list[str]]:
    """Adopted only if kernels-3 beats roofline-1.1 on every clause figure; the ones that fail."""
    if not figs:
        from dgtraces.errors import Code, DgtracesError

        raise DgtracesError("no clause figures in method_params", code=Code.NOT_FOUND)
    failed = [f"clause {f.clause} {f.name}: {f.compared_pct:.1f}% >= roofline-1.1 "
              f"{f.baseline_pct:.1f}%" for f in figs if not f.beats]
    return not failed, failed


def text(rows: "pd.DataFrame", release: str) -> str:
    """The report."""
    figs = figures(rows)
    out = [f"kernels-3 (docs/reconstruction-kernels3.md), release {release}: figures stored "
           "when the release was built (--refit recomputes them)",
           "clause figure                                   kernels-3  target  met     "
           "| on rows      kernels-3  roofline-1.1  beats"]
    for f in figs:
        rows_ = "V100 rows" if f.clause.startswith("1") else "same rows"
        out.append(f"  {f.clause:<3} {f.name:<42} {f.value_pct:7.1f}% {f.target_pct:5.0f}%  "
                   f"{'met' if f.met else 'NOT met':<7} | {rows_:<10} {f.compared_pct:8.1f}% "
                   f"{f.baseline_pct:10.1f}%    {'yes' if f.beats else 'no'}")
    adopted, failed = adoption(figs)
    out.append(f"adoption (beats roofline-1.1 on every clause): "
               f"{'ADOPTED' if adopted else 'not adopted'}")
    out += [f"  failed: {x}" for x in failed]
    out += ["reported (not clauses):"] + _reported(rows) + ["parameters:"] + _params(rows)
    return "\n".join(out)


def _reported(rows: "pd.DataFrame") -> list[str]:
    m = rows[(rows["scope"] == "metric") & rows["basis"].astype(str).str.startswith("reported")]
    out = []
    for r in m.to_dict("records"):
        out.append(f"  {r['name']:<52} {r['value_pct']:7.1f}%  ({r['count']} rows; "
                   f"{str(r['basis'])[len('reported: '):]})")
    loo = rows[rows["name"] == "calibration_loo"]
    for dev, g in loo.groupby("device"):
        out.append(f"  calibration leave-one-out {dev}: " + ", ".join(
            f"{b.split(' row ')[-1]}: {e:+.1f}%" for b, e in zip(g["basis"], g["value_pct"],
                                                                 strict=True)))
    return out


def _params(rows: "pd.DataFrame") -> list[str]:
    out = []
    k = rows[rows["scope"] == "kernel"]
    for (prec, dev), g in k.groupby([k["precision"], k["device"].fillna("shared prior")]):
        v = {str(r["name"]): r for r in g.to_dict("records")}
        effs = ", ".join(f"{n}={float(r['value_frac']):.3g}" for n, r in v.items()
                         if n.startswith("e_"))
        out.append(f"  {prec!s} {dev!s}: {effs}, t0={float(v['t0']['value_us']):.3g} us")
    for r in rows[rows["scope"].isin(["memory", "framework"])].to_dict("records"):
        val = r["value_frac"] if r["name"] == "e_mem" else r["value_us"]
        unit = "" if r["name"] == "e_mem" else " us"
        who = r["device"] if isinstance(r["device"], str) else r["family"]
        shown, at = _bounded(r["name"], float(val))
        out.append(f"  {r['scope']} {who} {r['name']}={shown}{unit}{at} ({r['basis']})")
    return out


def _bounded(name: str, value: float) -> tuple[str, str]:
    """A stage-F constant as printed: at a bound of its box (within 1e-6 of the box's width),
    the bound and which one (a fitted 9.4e-11 us is the lower bound 0, not a figure)."""
    from dgtraces.reconstruct.kernels3.stagef import E_MEM, FLOOR_US, OVERHEAD_US

    box = {"e_mem": E_MEM, "floor": FLOOR_US}.get(name, OVERHEAD_US)
    for bound, side in zip(box, ("lower", "upper"), strict=True):
        if abs(value - bound) <= 1e-6 * (box[1] - box[0]):
            return f"{bound:g}", f" (at the {side} bound)"
    return f"{value:.4g}", ""


def refit(rel: "Release", progress: Callable[[str], None]) -> "pd.DataFrame":
    """The ``method_params`` rows recomputed from ``rel``'s tables (minutes)."""
    from dgtraces.evaluation.kernels3 import method_params

    kernels, runs, timings = (rel.table(t) for t in ("kernels", "runs", "layer_timings"))
    return method_params(kernels, runs, timings, progress)


def differences(stored: "pd.DataFrame", fresh: "pd.DataFrame", rtol: float = 1e-6
                ) -> list[str]:
    """The rows whose values differ between a stored and a recomputed table."""
    cols = [c for c in stored.columns if c.startswith(("value_", "target_", "baseline_"))]
    a = stored.set_index("param_id")[cols]
    b = fresh.set_index("param_id")[cols]
    out = [f"only stored: {i}" for i in a.index.difference(b.index)]
    out += [f"only recomputed: {i}" for i in b.index.difference(a.index)]
    common = a.index.intersection(b.index)
    x, y = a.loc[common].to_numpy(float), b.loc[common].to_numpy(float)
    bad = ~(np.isclose(x, y, rtol=rtol, equal_nan=True)).all(axis=1)
    out += [f"differs: {i}" for i in common[bad]]
    return out


def figure(rel: "Release", path) -> None:
    """Leave-one-GPU-out parity: published vs predicted time of every DeepBench conv kernel,
    one panel per GPU, log-log, with the x0.5 / x2 band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = rel.table("method_params")
    kernels = rel.table("kernels").set_index("kernel_id")
    pred = rows[rows["name"] == "logo"]
    pred = pred[pred["direction"] != "gemm"]
    devices = sorted(set(pred["device"]))
    fig, axes = plt.subplots(2, (len(devices) + 1) // 2, figsize=(12, 6.5), squeeze=False)
    for ax, dev in zip(axes.flat, devices, strict=False):
        g = pred[pred["device"] == dev]
        meas = np.array([kernels.loc[k, f"{d}_ms"] for k, d in zip(g["kernel_id"],
                                                                   g["direction"],
                                                                   strict=True)], float)
        for d, mk in (("fwd", "o"), ("dgrad", "s"), ("wgrad", "^")):
            sel = (g["direction"] == d).to_numpy()
            ax.scatter(meas[sel], g["value_ms"].to_numpy()[sel], s=8, marker=mk, alpha=0.6,
                       label=d)
        ape = np.abs(g["value_ms"].to_numpy() / meas - 1) * 100
        lo, hi = 1e-3, 1e3
        ax.plot([lo, hi], [lo, hi], "k-", lw=0.7)
        for f in (0.5, 2.0):
            ax.plot([lo, hi], [lo * f, hi * f], "k:", lw=0.5)
        ax.set(xscale="log", yscale="log", xlim=(lo, hi), ylim=(lo, hi),
               title=f"{dev}: MAPE {ape.mean():.0f}%")
        ax.tick_params(labelsize=7)
    for ax in axes.flat[len(devices):]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=7)
    fig.supxlabel("published DeepBench kernel ms")
    fig.supylabel("kernels-3 leave-one-GPU-out ms")
    fig.suptitle("kernels-3: each GPU's conv kernels predicted without its own kernels")
    fig.tight_layout()
    from dgtraces.io.files import atomic_file

    with atomic_file(path) as fh:  # never through a link at ``path`` (#36 item 1)
        fig.savefig(fh, format="png", dpi=110)
    plt.close(fig)


FRAGMENT = "reconstruction_kernels3.md"
FIGURE = "reconstruction_kernels3.png"
# why the clauses that failed failed, per release whose stored figures were analysed (written
# after the evaluation, docs/reconstruction-kernels3.md "Results"; nothing was refitted)
WHY = {"0.6.0": (
    "The DeepBench leave-one-GPU-out errors are dominated by one offset per GPU, not by the "
    "shape: a GPU's kernels run at a device-wide fraction of its datasheet peak (sustained "
    "clock, cuDNN version) that the other GPUs' shared prior does not know. Held out, V100 is "
    "priced 1.27-1.48x too slow (median per direction; its own fit sits at e_fwd = 1.0, the "
    "prior at 0.81), the M40 0.72-0.75x too fast; roofline-1.1's V100 figures come from a "
    "fit on V100 throughputs, which the leave-one-GPU-out by design never sees. In the "
    "calibration leave-one-out the ResNet-50 rows, priced from published kernels of their "
    "shapes, are -5% to +19% (V100) and -6% to +21% (K80); the AlexNet rows, whose "
    "convolutions and fully connected layers no DeepBench row measures (priced by the model "
    "alone, (b3)), are +26% to +36% too slow on V100 in training and at batch 64 (-33% at "
    "batch 1), +52% to +81% on K80 in training (5x5 conv2 dominates; cuDNN 7 runs some 5x5 "
    "convolutions as FFT or Winograd, which the algorithm rule, 3x3 only, does not price: "
    "inferred, not verified).")}


def markdown(rows: "pd.DataFrame", release: str) -> list[str]:
    """The card fragment: the adoption decision with the clauses that failed and why, every
    clause figure, the K80 uncertainty, the parity figure."""
    figs = figures(rows)
    adopted, failed = adoption(figs)
    verdict = "yes" if adopted else "no"
    out = ["<!-- requires provenance: reconstructed -->",
           f"## Kernel-composed traces kernels-3 (evaluated; adopted: {verdict})",
           "", "A cost model that composes a layer's time from DeepBench kernels of the same "
           "shape where they exist, a shape-aware model fitted per GPU with shared priors "
           "elsewhere, bytes for memory-bound layers and a per-layer overhead per framework "
           "family; the K80 by Habitat's wave scaling from the M40. Pre-registered in "
           "docs/reconstruction-kernels3.md and fitted once when release "
           f"{release} was built: its parameters and evaluation are the `method_params` table; "
           "`dgtraces reconstruct --report --method kernels-3` prints these figures.", ""]
    if adopted:
        out += ["**Adopted**: it beats roofline-1.1 on every clause.", ""]
    else:
        out += ["**Not adopted**: it does not beat roofline-1.1 on every pre-registered "
                "clause, so the dataset's reconstructed K80/V100 traces stay roofline-1.1 "
                "(`dgtraces reconstruct --method kernels-3` uses it). Failed:", ""]
        out += [f"- {x}" for x in failed] + [""]
        if release in WHY:
            out += [f"Why: {WHY[release]}", ""]
    out += ["| clause | figure | kernels-3 | target | met | compared on | kernels-3 | "
            "roofline-1.1 | beats |", "| --- | --- | ---: | ---: | --- | --- | ---: | ---: | --- |"]
    for f in figs:
        on = "V100 rows" if f.clause.startswith("1") else "same rows"
        out.append(f"| {f.clause} | `{f.name}` | {f.value_pct:.1f}% | {f.target_pct:.0f}% | "
                   f"{'met' if f.met else 'not met'} | {on} | {f.compared_pct:.1f}% | "
                   f"{f.baseline_pct:.1f}% | {'yes' if f.beats else 'no'} |")
    out += [""] + _k80(rows) + ["", f"![kernels-3 leave-one-GPU-out parity](fragments/{FIGURE})",
                                ""]
    return out


def _k80(rows: "pd.DataFrame") -> list[str]:
    """The K80 uncertainty: its calibration leave-one-out, and the same transfer from the M40
    to the GPUs with published kernels."""
    loo = rows[(rows["name"] == "calibration_loo") & (rows["device"] == "k80")]
    hab = rows[rows["name"].astype(str).str.startswith("habitat.m40.")]
    e = np.abs(loo["value_pct"].to_numpy(float))
    lines = ["**K80 uncertainty.** No kernels of the K80's generation exist: each GEMM-class "
             "kernel is priced on the M40 and transferred by Habitat's wave scaling (SM count, "
             "clock, bandwidth)."]
    if len(e):
        lines[0] += (f" calibration.csv leave-one-out on k80: mean |error| {e.mean():.1f}%, "
                     f"max {e.max():.1f}% ({len(e)} rows).")
    if len(hab):
        vals = {str(d): float(v) for d, v in zip(hab["device"], hab["value_pct"], strict=True)}
        same = vals.pop("titanx-maxwell", None)
        lines[0] += (" The same transfer from the M40's published kernels to the other GPUs' "
                     + (f"gives {same:.1f}% MAPE on the Titan X Maxwell (same generation) and "
                        if same is not None else "gives ")
                     + f"{min(vals.values()):.1f}-{max(vals.values()):.1f}% across generations: "
                     "a K80 kernel time is uncertain by at least that much.")
    return lines


def write(rel: "Release", folder) -> list:
    """Write the fragment and its figure into ``folder``; returns the paths."""
    from dgtraces.evaluation.kernel_summary import write_pair

    return write_pair(folder, FRAGMENT, markdown(rel.table("method_params"), rel.version),
                      FIGURE, lambda png: figure(rel, png))
