"""The dataset-card fragment ``cards/fragments/reconstruction.md`` (+ the B-Caffe PNG)."""

from __future__ import annotations

from pathlib import Path

from dgtraces.evaluation.reconstruction import H200_NOTE, WITHIN_PCT, MethodReport
from dgtraces.reconstruct import METHOD_VERSION, method_id
from dgtraces.reconstruct.roofline.calibration import (
    AMP_BATCH,
    CALIBRATION_SOURCE,
    DEVICES_SOURCE,
    WINOGRAD_DEVICES,
)
from dgtraces.reconstruct.roofline.costmodel import PARAM_NAMES
from dgtraces.reconstruct.roofline.fit import WINO_MAX

PNG = "reconstruction_bcaffe_googlenet.png"
# the card (cards/README.md) includes this fragment inline, so links are relative to cards/
PNG_LINK = f"fragments/{PNG}"


def _table(header: list[str], rows: list[list]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return out


def _fits(rep: MethodReport) -> list[str]:
    out = []
    for dev, cal in rep.calibrations.items():
        r = cal.result
        misses = rep.misses(dev)
        out.append(f"**{dev}** ({cal.device.name}; peaks {cal.device.peak_tflops} TFLOP/s fp32, "
                   f"{cal.device.bandwidth_gb_s} GB/s): {len(r.observations)} rows, "
                   f"{r.free_parameters} free parameters, rms log error {r.rms_log:.3f}, "
                   f"{len(r.observations) - len(misses)}/{len(r.observations)} rows within "
                   f"{WITHIN_PCT:.0f}%. Parameters: {r.params.describe(code=True)}.")
        out.append("")
        rows = [[o.label, o.model, o.phase, o.batch_size, f"{o.time_ms:.2f}", f"{p:.2f}",
                 f"{e:+.1f}%" + ("" if abs(e) <= WITHIN_PCT else " **miss**")]
                for o, p, e in zip(r.observations, r.predicted_ms, r.errors_pct, strict=True)]
        out += _table(["row", "model", "phase", "batch", "published ms", "reconstructed ms",
                       "error"], rows)
        out.append("")
        if cal.amp is not None:
            a = cal.amp_fit
            assert a is not None  # set together with cal.amp
            out.append(f"amp (tensor cores): `eff_tensor` = {cal.amp.eff_tensor:.3f}, set so the "
                       f"{a['model_used']} amp/fp32 training speed-up equals the published "
                       f"resnet50v1.5 ratio {a['target_speedup']:.2f} at an assumed batch of "
                       f"{a['assumed_batch_size']}; reached {a['reached_speedup']:.2f}"
                       + (" (not reached: `eff_tensor` is at its bound 1.0, so amp traces are too "
                          "slow by about target / reached)" if a['reached_speedup']
                          < 0.99 * a['target_speedup'] else "")
                       + ". One row, one parameter: no residual to judge it by.")
            out.append("")
    return out


def _variants() -> list[str]:
    from dgtraces.reconstruct.variants import ROW_ARCHITECTURE, TF_RESNET_NOTE, VARIANTS

    used: dict[str, list[str]] = {}
    for (fw, model), arch in ROW_ARCHITECTURE.items():
        used.setdefault(arch, []).append(f"{fw} {model}")
    rows = [[f"`{v.key}`", ", ".join(used.get(v.key, [])), v.citation, v.confidence, v.notes]
            for v in VARIANTS.values()]
    rows.append(["`resnet50` (our Caffe spec)", ", ".join(used["resnet50"]), TF_RESNET_NOTE,
                 "medium", "same architecture as the `layers` table's resnet50"])
    out = ["The published throughputs were measured on each framework's own model "
           "definition, not on the Caffe specs of the `layers` table, so each row is fitted "
           "on the architecture it ran (`dgtraces.reconstruct.variants`, built with the same "
           "`Builder` and `spec.infer`; fitting only, not in `layers`). The reconstructed "
           "K80/V100 traces stay on our Caffe specs. Sources are recalled from the named "
           "files (not re-fetched when this text was generated), with a confidence each:", ""]
    out += _table(["architecture", "calibration rows (framework, model)", "source",
                   "confidence", "what differs from our Caffe spec"], rows)
    out += ["", "A framework BatchNorm with learnable scale is counted as `bn` + `scale`, as "
            "in our resnet50 spec, so only the architecture changes, not the kernel "
            "accounting. MXNet pools round down ('valid'); `spec.infer` rounds up (Caffe), so "
            "those pools are written with the kernel or pad that gives MXNet's output size "
            "(AlexNet pools as 4x4 windows: their FLOPs, not their bytes, are 16/9 too high; "
            "negligible).", ""]
    return out


def _loo(rep: MethodReport) -> list[str]:
    from dgtraces.evaluation.reconstruction import loo_summary
    from dgtraces.reconstruct.roofline.calibration import WINOGRAD_DEVICES

    if not rep.loo:
        return ["Leave-one-out cross-validation was not computed in this build "
                "(`build_report(loo=True)`).", ""]
    out = ["Leave-one-out over each device's calibration rows: each row predicted by the "
           "same fit on the other rows (held-out error, %).", ""]
    rows = []
    for dev, configs in rep.loo.items():
        for name, errs in configs.items():
            s = loo_summary(errs)
            rows.append([dev, name, f"{s['mape']:.1f}%", f"{s['median']:.1f}%",
                         f"{s['rms_log']:.3f}", f"{s['within']}/{s['n']}",
                         " ".join(f"{e:+.0f}" for e in errs)])
    out += _table(["device", "configuration", "MAPE", "median |error|", "rms log",
                   f"within {WITHIN_PCT:.0f}%", "held-out errors by row (%)"], rows)
    out += ["", "The sixth parameter `wino` is used where it lowered the held-out error "
            "against the same variants without it: " + ", ".join(WINOGRAD_DEVICES) + ". "
            "Before (Caffe specs) vs the shipped fit, held-out:"]
    for dev, configs in rep.loo.items():
        names = list(configs)
        after = names[2] if dev in WINOGRAD_DEVICES else names[1]
        b, a = loo_summary(configs[names[0]]), loo_summary(configs[after])
        out.append(f"- {dev} ({after}): MAPE {b['mape']:.1f}% -> {a['mape']:.1f}%, median "
                   f"{b['median']:.1f}% -> {a['median']:.1f}%, rms log {b['rms_log']:.3f} -> "
                   f"{a['rms_log']:.3f}, within {WITHIN_PCT:.0f}% {b['within']} -> "
                   f"{a['within']} of {a['n']}")
    out += ["", "A row at the end of the batch range left out cannot be pinned by the others "
            "(latency terms), so MAPE and rms are dominated by one or two rows; the median and "
            "the count within 5% are given too, and they do not all move the same way.", ""]
    return out


# Causes of the rows that still miss 5% (from the fitted parameters and residual pattern;
# a row that misses and is not listed here is reported as "no cause identified").
MISS_CAUSES = {
    4: "small batch (8) slower than modelled: K80's saturation term is at its bound "
       "(`n_half` = 1), so the model has only launch overhead for small-batch losses",
    6: "AlexNet b64 vs b256 per-image times (2.17 vs 2.04 ms) differ less than the model's "
       "launch and latency terms make them",
    9: "forward-only ResNet-50 slower in the model while ResNet-50 training is slightly "
       "faster: the model's forward/backward split for ResNet is off; a likely contributor "
       "is the Caffe-granularity accounting (a separate Scale pass after every BN, which "
       "MXNet's BatchNorm does in the same kernel), which weighs most in the memory-bound "
       "forward",
    10: "as row 9", 19: "as row 9",
    12: "batch 16 between the latency-bound batch 1 and the compute-bound batch 64 "
        "rows; with `n_half` at its bound there is no under-fill term to bend the curve",
    14: "MXNet ResNet-50 training faster in the model than published: one `wino` for all "
        "3x3 layers, pinned at its bound by the AlexNet rows (whose 5x5 conv2 may run as "
        "FFT/Winograd too, which the model does not have), makes ResNet's 3x3s too fast",
    15: "as row 14",
    23: "published 9486 img/s is 1.2x the fp32 peak in direct FLOPs of the MXNet AlexNet; "
        "the bounds (`eff_gemm` <= 1, `wino` <= 2.25, no FFT for 5x5/11x11) cannot reach it",
}


VARIANTS_TRIED = [
    "### Other model structures tried", "",
    "Alternative mechanisms (under-fill as a floor or with an exponent, launch overlapped "
    "with device time, BatchNorm and Scale folded or fused, Winograd for 5x5 and up to "
    "F(4x4,3x3), gradient accumulation at forks, per-iteration overhead, separate fc / "
    "normalisation / backward-memory efficiencies, a nuisance factor on forward-only rows, "
    "and combinations) were each fitted the same way and judged by the leave-one-out rule "
    "fixed beforehand; none was adopted. None brings every K80 row within 5%, even with a "
    "near-minimax loss; on V100 some combinations do under that loss but worsen the "
    "held-out error. On K80 the training rows alone and the forward-only rows alone are "
    "each fitted better than both together: the two benchmark programs ask for different "
    "forward/backward splits. Table and reproduction: "
    "`docs/reconstruction_variants.md` (`python scripts/explore_reconstruction.py`).", ""]


def _misses(rep: MethodReport) -> list[str]:
    out = []
    for dev in rep.calibrations:
        for label, err in rep.misses(dev):
            row = int(label.rsplit(" ", 1)[-1])
            out.append(f"- {dev} {label} ({err:+.1f}%): "
                       + MISS_CAUSES.get(row, "no cause identified"))
    if not out:
        return ["Every fitted row is within 5%.", ""]
    return ["Rows still off by more than 5% (the test keeps them as strict expected "
            "failures; the 5% bar is not relaxed) and their likely causes:", ""] + out + [""]


def _per_image(rep: MethodReport, device: str, model: str) -> str:
    rows = [r for r in rep.calibrations[device].rows if r.model == model
            and r.phase == "train"]
    return "; ".join(f"{r.framework} b{r.batch_size} {1000 / r.img_per_s:.2f}" for r in rows)


def _cpu(rep: MethodReport) -> list[str]:
    gaps = [m for m in rep.missing if m.startswith("CPU")]
    if not rep.cpu:
        return ["Not available in this build: " + "; ".join(gaps) + ".", ""]
    vs = rep.cpu
    out = [f"Release {rep.release}: measured, unflagged PyTorch CPU runs. At each thread count "
           "the same procedure as for the GPUs: peaks **measured** here (best-of GEMM and "
           "copy, `devices` rows below), the 5 parameters fitted only on the whole-model "
           "forward and backward totals of alexnet and resnet50, then every measured layer "
           "of all three models compared with its prediction (MAPE over layers and "
           "directions measured >= 1 us) and GoogLeNet's totals held out.", ""]
    out += _table(["threads", "devices row", "GFLOP/s", "GB/s", "runs", "totals fitted",
                   "fit rms log", "per-layer MAPE", "time-weighted error"],
                  [[v.threads, f"`{v.device['device']}`",
                    f"{v.device['peak_fp32_tflops'] * 1e3:.1f}",
                    f"{v.device['mem_bandwidth_gb_s']:.1f}", v.runs_used,
                    len(v.fit.observations), f"{v.fit.rms_log:.3f}", f"**{v.mape():.1f}%**",
                    f"{v.weighted_error_pct():.1f}%"] for v in vs])
    out.append("")
    out += [f"- {v.threads} thread(s): {v.fit.params.describe(code=True)}; peaks: "
            f"{v.device['source']}" for v in vs]
    out.append("")
    for by in ("kind", "model"):
        per = [(v.mape(by), v.median_ratio(by)) for v in vs]
        keys = sorted(set().union(*(m.index for m, _ in per)))
        head = [by] + [h for v in vs for h in (f"MAPE, {v.threads} thread(s)",
                                               f"median ratio, {v.threads} thread(s)")]
        out += _table(head, [[k] + [c for m, r in per for c in (
            (f"{m[k]:.1f}%", f"{r[k]:.2f}") if k in m.index else ("-", "-"))] for k in keys])
        out.append("")
    far = sorted({k for v in vs for k, r in v.median_ratio("kind").items()
                  if r < 0.5 or r > 2})
    out += ["Median ratio = reconstructed / measured. Kinds off by more than 2x in the median: "
            + (", ".join(far) or "none") + ". The fit has only whole-model totals, so a kind "
            "the model makes too fast (slow framework code for it) pushes the others' times "
            "up. Two model details (the work measure of the loss layer; eltwise/concat "
            "backward as copies) were corrected after looking at these per-layer data, so they "
            "are not fully blind; a sixth parameter (compute efficiency of non-GEMM layers) "
            "tried on them was dropped.", ""]
    held = [(v.threads, h) for v in vs for h in v.held_out.itertuples()]
    if held:
        out += ["Held-out model (never fitted): GoogLeNet forward + backward totals", ""]
        out += _table(["threads", "batch", "measured ms", "reconstructed ms", "error"],
                      [[t, h.batch_size, f"{h.measured_ms:.1f}", f"{h.predicted_ms:.1f}",
                        f"{h.error_pct:+.1f}%"] for t, h in held])
        out.append("")
    out += [f"- {v.threads} thread(s): {n}" for v in vs for n in v.notes]
    out += [f"- {g}" for g in gaps]
    return out


def _bcaffe(rep: MethodReport, png: str | None) -> list[str]:
    b = rep.bcaffe
    if b is None:
        return ["Not available: " + "; ".join(m for m in rep.missing if "B-Caffe" in m), ""]
    out = [f"Published B-Caffe GoogLeNet backward times (mean of {b.logs} logs; device K80 "
           f"and batch {b.batch_size} are **inferred** settings of those logs) against the K80 "
           f"reconstruction at that batch, {len(b.table)} layers with learnable blobs: "
           f"per-layer MAPE **{b.mape:.1f}%**, sum of reconstructed / sum of published "
           f"{b.total_ratio:.2f}, Spearman rank correlation {b.rank_correlation:.2f}. By layer "
           "group (a ratio below 1: the reconstruction is faster than Caffe was):", ""]
    out += _table(["group", "layers", "median ratio", "B-Caffe ms", "reconstructed ms"],
                  [[g.group, g.layers, f"{g.median_ratio:.2f}", f"{g.bcaffe_ms:.1f}",
                    f"{g.reconstructed_ms:.1f}"] for g in b.by_group().itertuples()])
    out += ["", "The model has one GEMM efficiency for every shape and batched kernels as in "
            "the calibrating frameworks (MXNet, TensorFlow with cuDNN). Possible causes of the "
            "pattern, not tested here: costs in Caffe that scale with the number of kernels "
            "rather than FLOPs (Caffe's own convolution runs its GEMMs one sample at a time) "
            "and cuDNN's per-shape algorithm choice. The per-layer split of reconstructed "
            "traces should be read with this comparison in mind.", ""]
    if png:
        out += [f"![B-Caffe vs reconstruction]({png})", ""]
    out += _table(["layer", "kind", "B-Caffe ms (min-max)", "reconstructed ms", "ratio"],
                  [[r.layer, r.kind, f"{r.bcaffe_bwd_ms:.2f} ({r.bcaffe_min_ms:.2f}-"
                    f"{r.bcaffe_max_ms:.2f})", f"{r.reconstructed_bwd_ms:.2f}",
                    f"{r.ratio:.2f}"] for r in b.table.itertuples()])
    out.append("")
    return out


def markdown(rep: MethodReport, png: str | None = PNG_LINK) -> str:
    lines = [
        "<!-- requires provenance: reconstructed -->",
        "## Reconstructed traces (K80, V100) and the method's measured error", "",
        f"Method `{method_id()}` (`dgtraces.reconstruct`, version {METHOD_VERSION}). The "
        "paper's raw K80/V100 traces cannot be fetched, so the K80 and V100 training traces "
        "(`runs` + `layer_timings` with provenance `reconstructed`) are "
        "**reconstructed**: per-layer forward and backward times computed from the `layers` "
        "table (FLOPs and bytes per sample) and device peaks, by a cost model whose few "
        "parameters are fitted to published whole-model throughputs. They are modelled, not "
        "measured.", "",
        "### Method", "",
        "Per layer and direction: `t = kernels * launch_us + softmax4(F / (eff * peak), "
        "M / (eff_mem * bw)) * (1 + n_half / W)` with `F` FLOPs, `M` bytes moved, `W` the "
        "elements the kernels work on (the saturation term: small batches are latency bound), "
        "`eff` = `eff_gemm` for conv/fc (x `eff_bwd` in backward), kernel counts fixed by "
        "layer kind, training-mode BatchNorm statistics passes, and a momentum-SGD update. "
        f"Free parameters per device: {', '.join(f'`{p}`' for p in PARAM_NAMES)}, and on "
        f"{', '.join(WINOGRAD_DEVICES)} also `wino` in [1, {WINO_MAX}] (3x3 stride-1 "
        "convolutions that many times faster than their direct FLOPs allow, as cuDNN's "
        "Winograd transforms make them; fp32 only; adopted per device by leave-one-out "
        "cross-validation, below); fitted by "
        "Levenberg-Marquardt on log errors (numpy), best of 4 starts. Peaks: "
        f"`{DEVICES_SOURCE}`; throughputs: `{CALIBRATION_SOURCE}` (fp32 train rows: batch / "
        "throughput = fwd + bwd + update; inference rows: forward only).", "",
        "The `resnet50v1.5` rows (NVIDIA DeepLearningExamples) state no batch size: they are "
        "never fitted as times. Their amp/fp32 ratio sets the single tensor-core parameter on "
        f"the v1.5 architecture (assumed batch {AMP_BATCH}); their fp32 throughput is an "
        "out-of-sample check below. GoogLeNet has no calibration row on any GPU: its "
        "K80/V100 traces are extrapolated.", "",
        "### Architectures the calibration rows ran", "",
    ]
    lines += _variants()
    lines += ["### Fit to the published rows", ""]
    lines += _fits(rep)
    for c in rep.v15_check:
        lines.append(f"- V100 out-of-sample: resnet50-v1.5 fp32 training at batch "
                     f"{c['batch_size']} reconstructed at {c['predicted_img_s']:.0f} img/s vs "
                     f"{c['published_img_s']:.0f} img/s published ({c['error_pct']:+.1f}%)")
    lines += [""] + _misses(rep) + ["### Leave-one-out cross-validation", ""] + _loo(rep)
    lines += VARIANTS_TRIED
    lines += ["", "Parameters at a bound of their range (efficiency 1.0, `n_half` 1) mean the "
              "published rows are faster than the model's accounting allows there (the "
              "layers table counts Caffe-granularity BatchNorm, Scale and ReLU traffic that "
              "fused framework kernels do not move) or that the term is not needed. Rows of "
              "different frameworks disagree with each other; for example, ms per image of "
              "K80 AlexNet training: " + _per_image(rep, "k80", "alexnet") + ".", "",
              "### Method error measured on this machine's CPU", ""]
    lines += _cpu(rep)
    lines += ["### B-Caffe comparison (published GoogLeNet traces)", ""]
    lines += _bcaffe(rep, png)
    from dgtraces.reconstruct.roofline.gpu import markdown as gpu_markdown

    lines += ["### Real GPU layers (published Kineto V100 traces)", ""]
    lines += gpu_markdown(rep.gpu, rep.gpu_skipped)
    if rep.trial is not None:
        from dgtraces.evaluation.dispatch import markdown as trial_markdown

        lines += trial_markdown(rep.trial)  # type: ignore[arg-type]
    lines += [
        "### H200", "",
        H200_NOTE, "",
        "### Which rows to trust how much", "",
        "- **measured** (`provenance = measured`: this machine's CPU `runs`/`layer_timings`, "
        "gloo `comm` points and their `comm_fits`, 2-worker S-SGD `iterations`, and the "
        "`devices` rows of its measured peaks per thread count): timings of this machine; "
        "spread in p10/p90; flagged runs say why.",
        "- **published** (`iterations` calibration rows, B-Caffe `runs`/`layer_timings`, "
        "OSU `comm`, datasheet `devices`, real GPU per-layer `runs`/`layer_timings` from "
        "`caffe time`, PipeDream and Kineto): as published; B-Caffe's device and batch are "
        "inferred, PipeDream's GPU is not stated (`gpu-unstated`).",
        "- **reconstructed** (`collector_version` = "
        f"`{method_id()}`): the fitted architectures (the frameworks' own AlexNet and "
        "ResNet-50, above) track the published rows to the errors above (rms " + ", ".join(
            f"{d} {c.result.rms_log:.2f}" for d, c in rep.calibrations.items()) + " in log); the "
        "dataset's Caffe-spec alexnet/resnet50 traces reuse those parameters on a different "
        "architecture (only K80 TensorFlow ResNet-50 ran our resnet50 spec itself); "
        "per-layer splits carry the per-layer error measured on the CPU (" + (", ".join(
            f"MAPE {v.mape():.0f}% at {v.threads} thread(s)" for v in rep.cpu) or "not "
            "measured in this build") + ") and seen against B-Caffe (" + (
            f"MAPE {rep.bcaffe.mape:.0f}%" if rep.bcaffe else "not compared") + "); GoogLeNet "
        "and amp are extrapolations. Use them for whole-model times and the rough share of "
        "each layer, not for per-layer claims.", ""]
    return "\n".join(lines)


def write(rep: MethodReport, folder: str | Path) -> list[Path]:
    """Write ``reconstruction.md`` and the B-Caffe PNG into ``folder``."""
    from dgtraces.io.files import atomic_write_bytes, check_targets
    from dgtraces.reconstruct.roofline.bcaffe import plot

    folder = Path(folder)
    check_targets([folder / PNG, folder / "reconstruction.md"], "--fragment")
    written = []
    if rep.bcaffe is not None:
        plot(rep.bcaffe, folder / PNG)
        written.append(folder / PNG)
    md = folder / "reconstruction.md"
    atomic_write_bytes(md, markdown(rep, PNG_LINK if rep.bcaffe is not None else None).encode())
    written.append(md)
    return written
