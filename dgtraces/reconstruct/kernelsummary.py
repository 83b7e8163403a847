"""The error of ``kernels-2.0`` next to ``roofline-1.1`` in one object: DeepBench
leave-one-device-out, calibration leave-one-out, and every real GPU source of a release per
kind and direction; :meth:`KernelSummary.text` is what ``dgtraces reconstruct --report
--method kernels-2.0`` prints, :func:`figure` its log-log plot.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from dgtraces.reconstruct.kernelreport import METHODS, SourceComparison, bcaffe, compare

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


@dataclass
class KernelSummary:
    release: str | None
    sources: dict[str, list[SourceComparison]]  # method -> comparisons
    skipped: dict[str, list[str]]
    loo_device: dict[str, dict[str, tuple[int, float, float]]]
    loo_calibration: dict[str, dict[str, tuple[float, ...]]]  # method -> device -> errors
    stage1: object = None
    devices: dict = field(default_factory=dict)  # device -> KernelCalibration

    def text(self) -> str:
        s1 = self.stage1
        out = [f"kernels-2.0 stage 1: {s1.kernels} DeepBench kernels of "  # type: ignore[attr-defined]
               f"{len(s1.devices)} GPUs, rms log error {s1.rms_log:.3f}; "  # type: ignore[attr-defined]
               f"{s1.params.describe()}"]  # type: ignore[attr-defined]
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
            for dev, errs in by_dev.items():
                a = np.abs(errs)
                out.append(f"  {method:<13} {dev:<5} mean |error| {a.mean():5.1f}%  max "
                           f"{a.max():6.1f}%  within 10%: {(a <= 10).sum()}/{len(a)}  ["
                           + ", ".join(f"{e:+.1f}" for e in errs) + "]")
        for method, comps in self.sources.items():
            out.append(f"real GPU layers, {method} (no constant sees these rows):")
            for c in comps:
                out.append(f"  {c.source} ({c.device}, {c.model}, b{c.batch_size}): per-layer "
                           f"(fwd+bwd) MAPE {c.layer_mape():.1f}%")
                for k in c.by_kind().itertuples():
                    out.append(f"    {k.kind:<8} {k.direction} {k.layers:4d} layers  MAPE "
                               f"{k.mape_pct:6.1f}%  sum {k.measured_ms:8.2f} -> "
                               f"{k.predicted_ms:8.2f} ms ({k.sum_error_pct:+.1f}%)")
            out += [f"  not modelled: {s}" for s in self.skipped.get(method, [])]
        return "\n".join(out)


def build(frames: dict[str, "pd.DataFrame"], release: str | None = None) -> KernelSummary:
    """Everything above from a release's frames (tens of seconds: the leave-one-outs)."""
    from dgtraces.reconstruct import calibration
    from dgtraces.reconstruct.kernelcal import CALIBRATED, calibrate_kernels, loo
    from dgtraces.reconstruct.kernelfit import leave_one_device_out, stage1

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

    from dgtraces.reconstruct.kernelfit import kernel_set, loo_predictions

    fig, ax = plt.subplots(figsize=(6.5, 6))
    ks = kernel_set()
    ax.scatter(ks.observed_ms, loo_predictions(), s=4, alpha=0.25, marker=".",
               label="DeepBench kernels, 7 GPUs (leave-one-device-out)")
    markers = iter("osD^vP*X")
    for c in summary.sources.get("kernels-2.0", []):
        t = c.table
        ax.scatter(t["measured_ms"], t["predicted_ms"], s=12, marker=next(markers, "o"),
                   alpha=0.7, label=f"{c.source[:40]} ({c.device})")
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
    fig.savefig(path, dpi=120)
    plt.close(fig)
