"""The method's error in one place: GPU fits, amp variant, CPU validation, B-Caffe check.

:func:`build_report` collects it (library: no printing); :meth:`MethodReport.text` is what
``dgtraces reconstruct --report`` prints; :func:`dgtraces.evaluation.fragment.markdown`
renders the dataset-card fragment from the same object.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from dgtraces.errors import DgtracesError, StoreError
from dgtraces.evaluation.dispatch import RuleFigures, Trial, from_parts, per_layer
from dgtraces.reconstruct.roofline.bcaffe import BcaffeComparison
from dgtraces.reconstruct.roofline.calibration import Calibration
from dgtraces.reconstruct.roofline.cpu import CpuValidation

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

GPU_DEVICES = ("k80", "v100")
WITHIN_PCT = 5.0
V15_CHECK_BATCHES = (64, 128, 256)
V15_FP32_IMG_S = 367.0
H200_NOTE = ("No H200 number is given: roofline-1.1 has no H200 calibration rows, so the "
             "measured H200 traces of release 0.7.0 on (collect layers on a lent H200, "
             "docs/gpu-collection.md) are not compared with it here. "
             "Its per-layer error on a GPU is measured only against the published V100 "
             "Kineto traces (real GPU layers, from release v0.4.0) and the B-Caffe K80 "
             "backward times; the K80/V100 whole-model numbers are fits to, and comparisons "
             "with, published rows.")


@dataclass
class MethodReport:
    calibrations: dict[str, Calibration]
    v15_check: list[dict]  # batch, predicted img/s (v1.5 variant), published v1.5 img/s
    cpu: list[CpuValidation]  # one per thread count with a measured peaks row
    bcaffe: BcaffeComparison | None
    release: str | None
    missing: list[str] = field(default_factory=list)
    loo: dict[str, dict[str, tuple[float, ...]]] | None = None  # device -> config -> errors
    gpu: list = field(default_factory=list)  # reconstruct.gpu.GpuComparison per modelled run
    gpu_skipped: list[str] = field(default_factory=list)  # published GPU runs not modelled
    trial: object | None = None  # dispatch_eval.Trial: the pre-registered rule, before/after

    def misses(self, device: str) -> list[tuple[str, float]]:
        """Fitted rows whose reconstructed total is off by more than 5%."""
        res = self.calibrations[device].result
        return [(o.label, e) for o, e in zip(res.observations, res.errors_pct, strict=True)
                if abs(e) > WITHIN_PCT]

    def text(self) -> str:
        out = []
        for dev, cal in self.calibrations.items():
            r = cal.result
            n_ok = len(r.observations) - len(self.misses(dev))
            out.append(f"{dev}: {len(r.observations)} calibration rows, "
                       f"{r.free_parameters} free parameters; rms log error "
                       f"{r.rms_log:.3f}; {n_ok}/{len(r.observations)} rows within "
                       f"{WITHIN_PCT:.0f}%")
            out.append("  params: " + r.params.describe())
            for o, p, e in zip(r.observations, r.predicted_ms, r.errors_pct, strict=True):
                flag = "" if abs(e) <= WITHIN_PCT else "  MISS"
                out.append(f"  {o.label:<22} {o.model:<9} {o.phase:<9} b{o.batch_size:<4} "
                           f"observed {o.time_ms:9.2f} ms  reconstructed {p:9.2f} ms  "
                           f"{e:+6.1f}%{flag}")
            if cal.amp is not None:
                a = cal.amp_fit
                assert a is not None  # set together with cal.amp
                out.append(f"  amp: eff_tensor={cal.amp.eff_tensor:.3f}; amp/fp32 speed-up "
                           f"target {a['target_speedup']:.2f} (resnet50v1.5 rows), reached "
                           f"{a['reached_speedup']:.2f} at assumed batch "
                           f"{a['assumed_batch_size']}")
        for c in self.v15_check:
            out.append(f"v100 out-of-sample: resnet50-v1.5 fp32 train b{c['batch_size']} "
                       f"reconstructed {c['predicted_img_s']:.0f} img/s vs published "
                       f"resnet50v1.5 {c['published_img_s']:.0f} img/s "
                       f"({c['error_pct']:+.1f}%)")
        for v in self.cpu:
            out.extend(_cpu_lines(v, self.release))
        if self.bcaffe is not None:
            b = self.bcaffe
            out.append(f"B-Caffe GoogLeNet backward vs k80 reconstruction (batch "
                       f"{b.batch_size}, inferred; {len(b.table)} layers, {b.logs} logs): "
                       f"MAPE {b.mape:.1f}%, sum ratio {b.total_ratio:.2f}, Spearman "
                       f"{b.rank_correlation:.2f}")
        if self.gpu or self.gpu_skipped:
            from dgtraces.reconstruct.roofline.gpu import lines

            out.extend(lines(self.gpu, self.gpu_skipped))
        if self.trial is not None:
            out.extend(self.trial.lines())  # type: ignore[attr-defined]
        for dev, configs in (self.loo or {}).items():
            for name, errs in configs.items():
                s = loo_summary(errs)
                out.append(f"{dev} leave-one-out, {name}: MAPE {s['mape']:.1f}%, median "
                           f"{s['median']:.1f}%, rms log {s['rms_log']:.3f}, "
                           f"{s['within']}/{s['n']} within {WITHIN_PCT:.0f}%")
        out.append("other model structures tried against the 5% bar (none adopted): "
                   "docs/reconstruction_variants.md (python scripts/explore_reconstruction.py)")
        out.append(f"h200: {H200_NOTE}")
        out.extend(f"not available: {m}" for m in self.missing)
        return "\n".join(out)


def _cpu_lines(v: CpuValidation, release: str | None) -> list[str]:
    out = []
    out.append(f"cpu ({v.device['name']}; measured peaks "
               f"{v.device['peak_fp32_tflops'] * 1e3:.1f} GFLOP/s, "
               f"{v.device['mem_bandwidth_gb_s']:.1f} GB/s; release "
               f"{release}; {v.runs_used} measured runs, threads {v.threads})")
    out.append(f"  fitted on {len(v.fit.observations)} alexnet/resnet50 totals: rms "
               f"log error {v.fit.rms_log:.3f}; params {v.fit.params.describe()}")
    out.append(f"  per-layer MAPE {v.mape():.1f}% (layers measured >= 1 us); "
               f"time-weighted error {v.weighted_error_pct():.1f}%")
    for kind, m in v.mape("kind").items():
        out.append(f"    {kind:<8} MAPE {m:6.1f}%")
    for model, m in v.mape("model").items():
        out.append(f"    model {model:<10} MAPE {m:6.1f}%")
    for h in v.held_out.itertuples():
        out.append(f"  held-out {h.model} b{h.batch_size}: measured "
                   f"{h.measured_ms:.1f} ms, reconstructed {h.predicted_ms:.1f} ms "
                   f"({h.error_pct:+.1f}%)")
    out.extend(f"  note: {n}" for n in v.notes)
    return out


LOO_CONFIGS = {  # name -> (fit on variant architectures, fit the wino parameter)
    "before: Caffe specs, 5 parameters": (False, False),
    "variants, 5 parameters": (True, False),
    "variants + wino, 6 parameters": (True, True),
}


def loo_table(devices=GPU_DEVICES) -> dict[str, dict[str, tuple[float, ...]]]:
    """Leave-one-out errors of every configuration in ``LOO_CONFIGS`` per device
    (about 30 fits per device and configuration; seconds)."""
    from dgtraces.reconstruct.roofline.calibration import loo

    return {d: {name: loo(d, v, w) for name, (v, w) in LOO_CONFIGS.items()} for d in devices}


def loo_summary(errs) -> dict:
    import numpy as np

    e = np.abs(np.asarray(errs, float))
    return {"n": int(e.size), "mape": float(e.mean()), "median": float(np.median(e)),
            "rms_log": float(np.sqrt(np.mean(np.log1p(np.asarray(errs) / 100) ** 2))),
            "within": int((e <= WITHIN_PCT).sum())}


def v15_check(cal: Calibration) -> list[dict]:
    from dgtraces.reconstruct.roofline.calibration import AMP_MODEL
    from dgtraces.reconstruct.roofline.costmodel import layer_arrays, predict_ms
    from dgtraces.reconstruct.variants import ROW_ARCHITECTURE

    la = layer_arrays(ROW_ARCHITECTURE[("pytorch", AMP_MODEL)])
    rows = []
    for b in V15_CHECK_BATCHES:
        ips = 1000.0 * b / predict_ms(la, cal.result.params, cal.device, b, "train")
        rows.append({"batch_size": b, "predicted_img_s": ips,
                     "published_img_s": V15_FP32_IMG_S,
                     "error_pct": 100 * (ips / V15_FP32_IMG_S - 1)})
    return rows


def build_report(version: str | None = None, *,
                 frames: dict[str, "pd.DataFrame"] | None = None,
                 loo: bool = False, trial: bool = True) -> MethodReport:
    """Everything the report needs (``loo``: also the leave-one-out table, seconds;
    ``trial``: the per-layer comparisons again under the pre-registered dispatch rule).

    ``frames`` defaults to the release ``version`` (latest), whose measured CPU runs and
    measured CPU ``devices`` rows drive the CPU validation. An explicit ``version`` that is
    not in the store raises (StoreError); only an empty store gives an empty release."""
    from dgtraces.reconstruct.roofline.bcaffe import compare
    from dgtraces.reconstruct.roofline.calibration import calibrate
    from dgtraces.reconstruct.roofline.cpu import cpu_validations
    from dgtraces.store import manifest as store
    from dgtraces.store import release as release_mod

    missing: list[str] = []
    if frames is None and version is None:
        try:
            version = store.latest()
        except StoreError:  # no release at all: the report covers the published rows only
            frames = {}
    if frames is None:  # an explicit version that does not exist (or is broken) raises
        version = store.norm_version(str(version))
        frames = release_mod.read_all(version)
    cals = {d: calibrate(d) for d in GPU_DEVICES}
    cpu = cpu_validations(frames, missing)
    runs, lt = frames.get("runs"), frames.get("layer_timings")
    if runs is None or lt is None or not (runs["provenance"] == "published").any():
        from dgtraces.importers.published import published_tables

        pub = published_tables()
        runs, lt = pub["runs"], pub["layer_timings"]
    bc = None
    try:
        bc = compare(runs, lt)
    except DgtracesError as exc:
        missing.append(f"B-Caffe comparison: {exc.message}")
    gpu: tuple[list, list[str]] = ([], [])
    if runs is not None and ((runs["provenance"] == "published")
                             & (runs["device_kind"] == "gpu") & (runs["device"] != "k80")).any():
        from dgtraces.reconstruct.roofline.gpu import compare_gpu

        gpu = compare_gpu(runs, lt)  # else: no such runs (before v0.4.0); the section says so
    rep = MethodReport(cals, v15_check(cals["v100"]), cpu, bc, version, missing,
                       loo_table() if loo else None, *gpu)
    if trial and rep.gpu:
        rep.trial = Trial(from_parts("layer", rep.gpu, cpu, bc),
                          per_layer("iteration", frames, runs, lt))
    return rep


def figures(rule: str, *, loo: bool = True, version: str | None = None) -> RuleFigures:
    """The report's per-layer figures and the calibration leave-one-out rms under ``rule``."""
    from dgtraces.reconstruct.roofline.calibration import WINOGRAD_DEVICES
    from dgtraces.reconstruct.roofline.calibration import loo as loo_errors
    from dgtraces.reconstruct.roofline.costmodel import use_dispatch

    with use_dispatch(rule):
        rep = build_report(version, trial=False)
        out = from_parts(rule, rep.gpu, rep.cpu, rep.bcaffe)
        if loo:
            loo_errors.cache_clear()  # the cached errors were computed under another rule
            out.loo_rms = {d: loo_summary(loo_errors(d, True, d in WINOGRAD_DEVICES))
                           ["rms_log"] for d in GPU_DEVICES}
            loo_errors.cache_clear()
    return out
