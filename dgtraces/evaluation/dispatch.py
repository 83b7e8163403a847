"""Before/after figures for the pre-registered ``device-time`` rule (docs/gpu-traces.md).

:func:`figures` evaluates the whole method report under one dispatch rule
(:data:`dgtraces.reconstruct.roofline.costmodel.DISPATCH_RULES`); :func:`criterion` applies the
adoption criterion declared before the rule was run: (a) per-layer MAPE better on every
V100 Kineto trace, (b) leave-one-out rms log error not worse on K80 or V100, (c) CPU
per-layer MAPE (every thread count) and B-Caffe backward MAPE not worse at 0.1 point.
"""

from __future__ import annotations

from dataclasses import dataclass, field

PRINTED = 0.05  # "not worse at the printed precision (0.1 point)": half a printed unit
LOO_TOL = 1e-6  # rms log error: float rounding of identical whole-model times


@dataclass
class RuleFigures:
    rule: str
    gpu: dict[str, dict] = field(default_factory=dict)  # run_id -> mape, iteration, kinds
    cpu_mape: dict[int, float] = field(default_factory=dict)  # threads -> per-layer MAPE
    bcaffe_mape: float | None = None
    loo_rms: dict[str, float] = field(default_factory=dict)  # device -> rms log (shipped cfg)


def from_parts(rule: str, gpu: list, cpu: list, bcaffe) -> RuleFigures:
    """:class:`RuleFigures` of already computed comparisons (GpuComparison list,
    CpuValidation list, BcaffeComparison or None)."""
    out = RuleFigures(rule)
    for c in gpu:
        kinds = {k.kind: {"layers": int(k.layers), "mape_pct": float(k.mape_pct),
                          "sum_error_pct": float(k.sum_error_pct)}
                 for k in c.by_kind().itertuples()}
        out.gpu[c.run_id] = {"layer_mape_pct": c.layer_mape,
                             "iteration_error_pct": c.iteration_error_pct,
                             "layers": len(c.table), "kinds": kinds}
    out.cpu_mape = {int(v.threads): v.mape() for v in cpu}
    out.bcaffe_mape = bcaffe.mape if bcaffe is not None else None
    return out


def per_layer(rule: str, frames: dict, runs, timings) -> RuleFigures:
    """The report's per-layer comparisons (V100 Kineto, CPU, B-Caffe) under ``rule``."""
    from dgtraces.errors import DgtracesError
    from dgtraces.reconstruct.roofline.bcaffe import compare
    from dgtraces.reconstruct.roofline.costmodel import use_dispatch
    from dgtraces.reconstruct.roofline.cpu import cpu_validations
    from dgtraces.reconstruct.roofline.gpu import compare_gpu

    with use_dispatch(rule):
        gpu, _ = compare_gpu(runs, timings)
        try:
            bc = compare(runs, timings)
        except DgtracesError:
            bc = None
        return from_parts(rule, gpu, cpu_validations(frames, []), bc)


@dataclass
class Trial:
    """The shipped rule against the pre-registered one, and the criterion's verdict."""

    before: RuleFigures
    after: RuleFigures

    @property
    def verdict(self) -> dict[str, bool]:
        return criterion(self.before, self.after)

    def runs(self) -> list[tuple[str, dict, dict]]:
        """(run_id, figures before, figures after) per V100 trace."""
        return [(run, b, self.after.gpu[run]) for run, b in self.before.gpu.items()]

    def held_out(self) -> list[tuple[str, float, float]]:
        """(comparison, MAPE before, MAPE after) of the held-out per-layer checks (c)."""
        out = [(f"CPU per-layer MAPE, {t} thread(s)", m, self.after.cpu_mape[t])
               for t, m in self.before.cpu_mape.items()]
        if self.before.bcaffe_mape is not None and self.after.bcaffe_mape is not None:
            out.append(("B-Caffe K80 GoogLeNet backward MAPE", self.before.bcaffe_mape,
                        self.after.bcaffe_mape))
        return out

    def lines(self) -> list[str]:
        v = self.verdict
        out = ["pre-registered rule device-time (docs/gpu-traces.md: a layer's time is its "
               "device time, kernel dispatch charged per iteration), before -> after:"]
        for run, b, a in self.runs():
            out.append(f"  {run}: per-layer MAPE {b['layer_mape_pct']:.1f}% -> "
                       f"{a['layer_mape_pct']:.1f}%, whole mapped iteration "
                       f"{b['iteration_error_pct']:+.1f}% -> {a['iteration_error_pct']:+.1f}%")
            out.append("    by kind (MAPE): " + ", ".join(
                f"{k} {kb['mape_pct']:.1f}% -> {a['kinds'][k]['mape_pct']:.1f}%"
                for k, kb in b["kinds"].items()))
        out += [f"  {label}: {b:.1f}% -> {a:.1f}%" for label, b, a in self.held_out()]
        loo = ("equal (whole-model times unchanged; python scripts/evaluate_dispatch_rule.py "
               "checks it)" if not self.before.loo_rms else
               ("not worse" if v["b_loo"] else "WORSE"))
        out.append(f"  criterion: (a) V100 per-layer MAPE better on every trace: "
                   f"{'yes' if v['a_v100_layers'] else 'no'}; (b) leave-one-out: {loo}; (c) "
                   f"CPU and B-Caffe per-layer not worse: {'yes' if v['c_held_out'] else 'no'}"
                   f" -> {'ADOPTED' if v['adopt'] else 'not adopted (model unchanged)'}")
        return out


def markdown(trial: Trial) -> list[str]:
    """The card's record of the attempt (figures computed, not copied)."""
    v = trial.verdict
    out = ["**Pre-registered rule `device-time`** (declared in `docs/gpu-traces.md` before it "
           "was run): a layer's time is its device time, the host dispatch `kernels * "
           "launch_us` is charged once per iteration outside the layers (no new constant, no "
           "refit; whole-model times unchanged). Adopt only if (a) the V100 per-layer MAPE "
           "improves on both Kineto traces, (b) the calibration leave-one-out rms is not "
           "worse on K80 and V100, (c) the CPU and B-Caffe per-layer MAPE are not worse. "
           "Result: **" + ("adopted" if v["adopt"] else "not adopted, the model is "
                           "unchanged") + "**.", "",
           "| comparison | before (shipped) | after (device-time) |",
           "| --- | ---: | ---: |"]
    out += [f"| `{run}` per-layer MAPE (whole mapped iteration) | {b['layer_mape_pct']:.1f}% "
            f"({b['iteration_error_pct']:+.1f}%) | {a['layer_mape_pct']:.1f}% "
            f"({a['iteration_error_pct']:+.1f}%) |" for run, b, a in trial.runs()]
    out += [f"| {label} | {b:.1f}% | {a:.1f}% |" for label, b, a in trial.held_out()]
    out += ["", f"(a) {'holds' if v['a_v100_layers'] else 'fails'}; (b) holds by construction "
            "(`python scripts/evaluate_dispatch_rule.py` computes it); (c) "
            f"{'holds' if v['c_held_out'] else 'fails'}. Per kind and the full table: "
            "`docs/gpu-traces.md`.", ""]
    return out


def criterion(before: RuleFigures, after: RuleFigures) -> dict[str, bool]:
    """The pre-registered criterion, part by part, and ``adopt`` (all parts hold)."""
    a = bool(before.gpu) and set(before.gpu) == set(after.gpu) and all(
        after.gpu[r]["layer_mape_pct"] < before.gpu[r]["layer_mape_pct"] for r in before.gpu)
    # whole-model times are equal up to float rounding: compare at LOO_TOL
    b = all(after.loo_rms[d] <= before.loo_rms[d] + LOO_TOL for d in before.loo_rms)
    c = all(after.cpu_mape[t] <= before.cpu_mape[t] + PRINTED for t in before.cpu_mape)
    if before.bcaffe_mape is not None and after.bcaffe_mape is not None:
        c = c and after.bcaffe_mape <= before.bcaffe_mape + PRINTED
    return {"a_v100_layers": a, "b_loo": b, "c_held_out": c, "adopt": a and b and c}
