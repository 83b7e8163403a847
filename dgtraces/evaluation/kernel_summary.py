"""The error of ``kernels-2.0`` next to ``roofline-1.1`` in one object: DeepBench
leave-one-device-out, calibration leave-one-out, and every real GPU source of a release per
kind and direction; :meth:`KernelSummary.text` is what ``dgtraces reconstruct --report
--method kernels-2.0`` prints, :func:`figure` its log-log plot.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from dgtraces.evaluation.kernels import METHODS, SourceComparison, bcaffe, compare

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from dgtraces.reconstruct.kernels2.stage1 import Stage1


@dataclass
class KernelSummary:
    release: str | None
    sources: dict[str, list[SourceComparison]]  # method -> comparisons
    skipped: dict[str, list[str]]
    loo_device: dict[str, dict[str, tuple[int, float, float]]]
    loo_calibration: dict[str, dict[str, tuple[float, ...]]]  # method -> device -> errors
    stage1: "Stage1"
    devices: dict = field(default_factory=dict)  # device -> KernelCalibration

    def text(self) -> str:
        s1 = self.stage1
        out = [f"kernels-2.0 stage 1: {s1.kernels} DeepBench kernels of "
               f"{len(s1.devices)} GPUs, rms log error {s1.rms_log:.3f}; "
               f"{s1.params.describe()}"]
        for d, c in self.devices.items():
            fit = (f"; fit residuals {', '.join(f'{e:+.1f}%' for e in c.errors_pct)}"
                   if c.errors_pct else "")
            out.append(f"  {d}: basis {c.basis}; kappa={c.params.kappa:.3g}, "
                       f"e_mem={c.params.e_mem:.3g}, h_us={c.params.h_us:.3g}{fit}")
        out.append("DeepBench leave-one-device-out (fit without the GPU; MAPE / median APE):")
        for dev, dirs in self.loo_device.items():
            out.append(f"  {dev:<15} " + "  ".join(f"{d} {n}: {m:.1f}% / {med:.1f}%"
                                                  for d, (n, m, med) in dirs.items()))
        out.append("calibration.csv leave-one-out (signed error of each held-out row):")
        for method, by_dev in self.loo_calibration.items():
            out += [loo_line(method, dev, errs) for dev, errs in by_dev.items()]
        for method, comps in self.sources.items():
            out += comparison_lines(comps, f"real GPU layers, {method} (no constant sees "
                                    "these rows):")
            out += [f"  not modelled: {s}" for s in self.skipped.get(method, [])]
        return "\n".join(out)


def loo_line(method: str, dev: str, errs) -> str:
    """One line of a calibration leave-one-out: mean / max |error|, count within 10%."""
    a = np.abs(errs)
    return (f"  {method:<13} {dev:<5} mean |error| {a.mean():5.1f}%  max {a.max():6.1f}%  "
            f"within 10%: {(a <= 10).sum()}/{len(a)}  [" + ", ".join(f"{e:+.1f}" for e in errs)
            + "]")


def comparison_lines(comps, title: str) -> list[str]:
    """``title``, then per source its per-layer MAPE and per kind and direction."""
    out = [title]
    for c in comps:
        out.append(f"  {c.source} ({c.device}, {c.model}, b{c.batch_size}): per-layer "
                   f"(fwd+bwd) MAPE {c.layer_mape():.1f}%")
        for k in c.by_kind().itertuples():
            out.append(f"    {k.kind:<8} {k.direction} {k.layers:4d} layers  MAPE "
                       f"{k.mape_pct:6.1f}%  sum {k.measured_ms:8.2f} -> "
                       f"{k.predicted_ms:8.2f} ms ({k.sum_error_pct:+.1f}%)")
    return out


def build(frames: dict[str, "pd.DataFrame"], release: str | None = None) -> KernelSummary:
    """Everything above from a release's frames (tens of seconds: the leave-one-outs)."""
    from dgtraces.reconstruct.kernels2.stage1 import leave_one_device_out, stage1
    from dgtraces.reconstruct.kernels2.stage2 import CALIBRATED, calibrate_kernels, loo
    from dgtraces.reconstruct.roofline import calibration

    runs, lt = frames["runs"], frames["layer_timings"]
    sources, skipped = {}, {}
    for method in METHODS:
        comps, skip = compare(method, runs, lt)
        b = bcaffe(method, runs, lt)
        sources[method] = comps + ([b] if b is not None else [])
        skipped[method] = skip
    old = {d: calibration.loo(d, True, d in calibration.WINOGRAD_DEVICES) for d in CALIBRATED}
    new = {d: loo(d) for d in CALIBRATED}
    devices = {d: calibrate_kernels(d) for d in (*CALIBRATED, "titanx-maxwell")}
    return KernelSummary(release, sources, skipped, leave_one_device_out(),
                         {"roofline-1.1": old, "kernels-2.0": new}, stage1(), devices)


def figure(summary: KernelSummary, path) -> None:
    """Predicted vs measured per layer (and per DeepBench kernel, leave-one-device-out),
    log-log, one marker per source, for kernels-2.0."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dgtraces.reconstruct.kernels2.stage1 import kernel_set, loo_predictions

    fig, ax = plt.subplots(figsize=(6.5, 6))
    ks = kernel_set()
    ax.scatter(ks.observed_ms, loo_predictions(), s=4, alpha=0.25, marker=".",
               label="DeepBench kernels, 7 GPUs (leave-one-device-out)")
    markers = iter("osD^vP*X")
    # the whole source id: the two Kineto runs differ only at its end
    for c in summary.sources.get("kernels-2.0", []):
        t = c.table
        ax.scatter(t["measured_ms"], t["predicted_ms"], s=12, marker=next(markers, "o"),
                   alpha=0.7, label=f"{c.source} ({c.device})")
    lo, hi = 1e-3, 1e3
    ax.plot([lo, hi], [lo, hi], "k-", lw=0.8)
    for f in (0.5, 2.0):
        ax.plot([lo, hi], [lo * f, hi * f], "k:", lw=0.6)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("measured ms (per layer and direction / per kernel)")
    ax.set_ylabel("kernels-2.0 predicted ms")
    ax.set_title("kernels-2.0: predicted vs measured (dotted: x0.5, x2)")
    ax.legend(fontsize=6, loc="upper left")
    fig.tight_layout()
    from dgtraces.io.files import atomic_file

    with atomic_file(path) as fh:  # never through a link at ``path`` (#36)
        fig.savefig(fh, format="png", dpi=120)
    plt.close(fig)


FRAGMENT = "reconstruction_kernels.md"
FIGURE = "reconstruction_kernels.png"


def markdown(summary: KernelSummary) -> list[str]:
    """The card fragment: what kernels-2.0 is, its errors next to roofline-1.1, the figure."""
    s1 = summary.stage1
    out = ["<!-- requires provenance: published -->",
           "## Kernel cost model kernels-2.0 (evaluated, not adopted)", "",
           "A cost model that prices each convolution direction as the implicit GEMM cuDNN "
           "runs (waves of thread-block tiles on the GPU's SMs, Winograd only where cuDNN "
           "picks it), fitted on the DeepBench kernels of the `kernels` table "
           f"({s1.kernels} kernel times, {len(s1.devices)} GPUs; rms log error "
           f"{s1.rms_log:.3f}). Pre-registered in docs/reconstruction-kernels.md; by its "
           "rule it was **not adopted** (the shipped K80/V100 traces stay roofline-1.1). "
           "`dgtraces reconstruct --report --method kernels-2.0` prints these figures.", "",
           "DeepBench leave-one-device-out (per-kernel MAPE / median APE, %):", "",
           "| GPU | fwd | dgrad | wgrad | GEMM |", "| --- | ---: | ---: | ---: | ---: |"]
    for dev, dirs in summary.loo_device.items():
        cells = [f"{dirs[d][1]:.1f} / {dirs[d][2]:.1f}" if d in dirs else "" for d in
                 ("fwd", "dgrad", "wgrad", "gemm")]
        out.append(f"| {dev} | " + " | ".join(cells) + " |")
    out += ["", "calibration.csv leave-one-out (mean / max |error| of the held-out rows):", "",
            "| method | " + " | ".join(next(iter(summary.loo_calibration.values()))) + " |",
            "| --- |" + " ---: |" * len(next(iter(summary.loo_calibration.values())))]
    for method, by_dev in summary.loo_calibration.items():
        cells = [f"{np.abs(e).mean():.1f}% / {np.abs(e).max():.1f}%" for e in by_dev.values()]
        out.append(f"| {method} | " + " | ".join(cells) + " |")
    out += ["", "Real GPU layers (never fitted), per-layer (fwd + bwd) MAPE:", "",
            "| source | device | " + " | ".join(summary.sources) + " |",
            "| --- | --- |" + " ---: |" * len(summary.sources)]
    by_source: dict[str, dict[str, str]] = {}
    devices: dict[str, str] = {}
    for method, comps in summary.sources.items():
        for c in comps:
            by_source.setdefault(c.source, {})[method] = f"{c.layer_mape():.1f}%"
            devices[c.source] = c.device
    for src, mape in by_source.items():
        out.append(f"| `{src}` | {devices[src]} | "
                   + " | ".join(mape.get(m, "not modelled") for m in summary.sources) + " |")
    out += ["", f"![kernels-2.0 predicted vs measured, log-log](fragments/{FIGURE})", ""]
    return out


def write(summary: KernelSummary, folder) -> list:
    """Write the fragment and its figure into ``folder``; returns the paths."""
    return write_pair(folder, FRAGMENT, markdown(summary), FIGURE,
                      lambda png: figure(summary, png))


def write_pair(folder, md_name: str, lines: list[str], png_name: str,
               draw: Callable[[Path], None]) -> list[Path]:
    """A card fragment ``md_name`` (``lines``) and its figure ``png_name`` (``draw(path)``)
    written into ``folder``; a link at either name is refused (BAD_INPUT) before either is
    written. Returns [markdown path, figure path]."""
    from dgtraces.io.files import atomic_file, check_targets

    folder = Path(folder)
    md, png = folder / md_name, folder / png_name
    check_targets([md, png], "--fragment")  # both before either is written
    folder.mkdir(parents=True, exist_ok=True)
    with atomic_file(md, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    draw(png)
    return [md, png]
