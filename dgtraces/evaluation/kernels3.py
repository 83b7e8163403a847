"""kernels-3's pre-registered evaluation (docs/reconstruction-kernels3.md, "Evaluation rule"),
run once when the release is built: clause 1 DeepBench leave-one-GPU-out
(:mod:`.kernels3_deepbench`), clause 2 Kineto V100 per layer on held-out folds, clause 3
calibration leave-one-out; each figure next to its target and to roofline-1.1's on the same
rows; besides, the leave-one-source-out of the framework overheads, stage F in sample, and the
held-out predictions. The figures become ``method_params`` rows (scope metric / prediction);
``reconstruct --report --method kernels-3`` prints them (:mod:`.kernels3_report`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from dgtraces.evaluation.kernels3_deepbench import CONV, Logo, habitat_check, leave_one_gpu_out

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from dgtraces.reconstruct.kernels3.fit import Progress
    from dgtraces.reconstruct.kernels3.model import Model
    from dgtraces.reconstruct.kernels3.stagef import FRows

KINETO = "kineto-"  # the Kineto V100 run ids start so
CALIBRATION = "calibration.csv row"


@dataclass(frozen=True)
class Clause:
    """One pre-registered figure: its clause, name, what it is and its target."""

    clause: str
    name: str
    what: str
    target_pct: float


def deepbench_clauses() -> tuple[Clause, ...]:
    return (
        Clause("1a", "deepbench.layers.fwd", "DeepBench leave-one-GPU-out, conv rows that are "
               "layers of the seven models, forward MAPE", 15.0),
        Clause("1a", "deepbench.layers.dgrad", "... data gradient MAPE", 20.0),
        Clause("1a", "deepbench.layers.wgrad", "... weight gradient MAPE", 20.0),
        Clause("1b", "deepbench.all_conv", "DeepBench leave-one-GPU-out, all conv rows, three "
               "directions pooled, MAPE", 25.0))


def kineto_clauses(run: str) -> tuple[Clause, ...]:
    return (Clause("2", f"kineto.{run}.all_kinds", f"Kineto V100 {run}, held-out folds, per "
                   "layer (fwd + bwd) MAPE, all kinds", 15.0),
            Clause("2", f"kineto.{run}.conv_fwd", "... conv forward MAPE", 15.0),
            Clause("2", f"kineto.{run}.conv_bwd", "... conv backward MAPE", 15.0))


CALIBRATION_TARGETS = {"v100": (10.0, 20.0), "k80": (15.0, 40.0)}


def metric(c: Clause, value: float, count: int, compared: float, baseline: float,
           compared_count: int) -> list[dict]:
    """Two rows of a clause figure: against its target, and against roofline-1.1 on the
    comparison rows (the same rows, except clause 1: the V100 rows)."""
    base = {"scope": "metric", "basis": f"clause {c.clause}: {c.what}"}
    return [{**base, "param_id": f"kernels-3:metric:{c.name}", "name": c.name,
             "value_pct": value, "target_pct": c.target_pct, "count": count},
            {**base, "param_id": f"kernels-3:metric:{c.name}:vs_roofline",
             "name": f"{c.name}:vs_roofline", "value_pct": compared, "baseline_pct": baseline,
             "count": compared_count}]


def reported(name: str, what: str, **values) -> dict:
    return {"scope": "metric", "param_id": f"kernels-3:metric:{name}", "name": name,
            "basis": f"reported: {what}", **values}


def deepbench_rows(logo: Logo, model: "Model") -> list[dict]:
    """Clause 1 figures, the per-GPU table, the Habitat check and each held-out prediction."""
    ape, roof = logo.ape(), logo.ape(logo.roofline_ms)
    out: list[dict] = []
    for c in deepbench_clauses():
        dirs = CONV if c.name.endswith("all_conv") else (c.name.rsplit(".", 1)[1],)
        m = logo.mask(dirs, layers_only="layers" in c.name)
        v = m & (logo.rows.device == "v100")
        out += metric(c, float(ape[m].mean()), int(m.sum()), float(ape[v].mean()),
                      float(roof[v].mean()), int(v.sum()))
    for dev in sorted(set(logo.rows.device)):
        for d in (*CONV, "gemm"):
            m = logo.mask((d,), device=dev)
            if m.any():
                out.append(reported(f"deepbench.logo.{dev}.{d}", "leave-one-GPU-out MAPE",
                                    device=dev, direction=d, value_pct=float(ape[m].mean()),
                                    count=int(m.sum())))
    for dev, (n, mape) in habitat_check(logo.rows, model).items():
        out.append(reported(f"habitat.m40.{dev}", "conv kernels from the M40's published "
                            "ones by the K80 transfer's wave scaling, MAPE", device=dev,
                            value_pct=mape, count=n))
    for i, (kid, dev, d, p) in enumerate(zip(logo.rows.kernel_id, logo.rows.device,
                                             logo.rows.direction, logo.predicted_ms,
                                             strict=True)):
        out.append({"scope": "prediction", "param_id": f"kernels-3:prediction:logo:{i}",
                    "name": "logo", "kernel_id": str(kid), "device": str(dev),
                    "direction": str(d), "precision": "fp32", "value_ms": float(p),
                    "basis": "leave-one-GPU-out"})
    return out


def kineto_heldout(obs: "FRows") -> np.ndarray:
    """Clause 2: every Kineto row predicted by stage F refitted without its fold (the fold
    held out of both runs; everything else in). NaN for the other rows."""
    from dgtraces.reconstruct.kernels3 import stagef

    kin = np.array([str(x).startswith(KINETO) for x in obs.label])
    pred = np.full(len(obs), np.nan)
    for f in sorted(set(obs.fold[kin])):
        held = kin & (obs.fold == f)
        pred[held] = stagef.predict(obs.select(held), stagef.fit(obs, ~held))
    return pred


def kineto_tables(obs: "FRows", pred: np.ndarray) -> dict[str, "pd.DataFrame"]:
    """run -> layer, kind, direction, measured_ms, predicted_ms, ape_pct (held-out)."""
    import pandas as pd

    from dgtraces.models import layer_records

    kinds = {r["layer"]: r["kind"] for r in layer_records("resnet50-v1.5")}
    out = {}
    kin = np.flatnonzero(np.isfinite(pred))
    parts = [str(obs.label[i]).split(" ") for i in kin]
    t = pd.DataFrame({"run": [p[0] for p in parts], "layer": [p[1] for p in parts],
                      "direction": [p[2] for p in parts], "measured_ms": obs.measured_ms[kin],
                      "predicted_ms": pred[kin]})
    t["kind"] = t["layer"].map(kinds)
    t["ape_pct"] = (t["predicted_ms"] / t["measured_ms"] - 1).abs() * 100
    for run, g in t.groupby("run"):
        out[str(run)] = g.drop(columns="run").reset_index(drop=True)
    return out


def kineto_rows(obs: "FRows", runs: "pd.DataFrame", timings: "pd.DataFrame") -> list[dict]:
    from dgtraces.evaluation.kernels import SourceComparison, compare

    pred = kineto_heldout(obs)
    roof = {c.source: c for c in compare("roofline-1.1", runs, timings)[0]}
    out: list[dict] = []
    for run, t in kineto_tables(obs, pred).items():
        mine = SourceComparison(run, "v100", "resnet50-v1.5", 32, t)
        figures = _three(mine)
        base = _three(roof[run])
        for c, v, b in zip(kineto_clauses(run), figures, base, strict=True):
            n = int(len(t) if "all_kinds" in c.name else ((t["kind"] == "conv")
                    & (t["direction"] == ("fwd" if c.name.endswith("fwd") else "bwd"))).sum())
            out += metric(c, v, n, v, b, n)
    for i in np.flatnonzero(np.isfinite(pred)):
        out.append({"scope": "prediction", "param_id": f"kernels-3:prediction:kineto:{i}",
                    "name": "kineto_heldout", "device": "v100", "value_ms": float(pred[i]),
                    "basis": str(obs.label[i]), "family": "pytorch"})
    return out


def _three(c) -> tuple[float, float, float]:
    """(per-layer MAPE all kinds, conv fwd MAPE, conv bwd MAPE) of a SourceComparison."""
    k = c.by_kind().set_index(["kind", "direction"])["mape_pct"]
    return (c.layer_mape(), float(k.get(("conv", "fwd"), np.nan)),
            float(k.get(("conv", "bwd"), np.nan)))


def calibration_rows(obs: "FRows") -> list[dict]:
    """Clause 3: each calibration.csv row predicted by stage F refitted without it."""
    from dgtraces.reconstruct.kernels3 import stagef
    from dgtraces.reconstruct.roofline import calibration

    cal = np.flatnonzero([str(x).startswith(CALIBRATION) for x in obs.label])
    errs: dict[str, list[float]] = {}
    out: list[dict] = []
    for i in cal:
        held = np.zeros(len(obs), bool)
        held[i] = True
        p = float(stagef.predict(obs.select(held), stagef.fit(obs, ~held))[0])
        e = 100.0 * (p / obs.measured_ms[i] - 1.0)
        dev = str(obs.block[i]).split(" ")[1]
        errs.setdefault(dev, []).append(e)
        out.append({"scope": "prediction", "param_id": f"kernels-3:prediction:loo:{i}",
                    "name": "calibration_loo", "device": dev, "value_pct": e,
                    "value_ms": p, "basis": str(obs.label[i]),
                    "family": str(obs.family[i])})
    for dev, (t_mean, t_max) in CALIBRATION_TARGETS.items():
        a = np.abs(errs[dev])
        old = np.abs(calibration.loo(dev, True, dev in calibration.WINOGRAD_DEVICES))
        for stat, target, v, b in (("mean", t_mean, a.mean(), old.mean()),
                                   ("max", t_max, a.max(), old.max())):
            c = Clause("3", f"calibration.{dev}.{stat}", f"calibration.csv leave-one-out, "
                       f"{dev}, {stat} |error|", target)
            out += metric(c, float(v), len(a), float(v), float(b), len(a))
    return out


def overhead_rows(obs: "FRows") -> list[dict]:
    """Each family's overhead refitted without each of its sources (leave-one-source-out),
    and stage F's in-sample MAPE per block."""
    from dgtraces.reconstruct.kernels3 import stagef

    full = stagef.fit(obs)
    pred = stagef.predict(obs, full)
    out: list[dict] = []
    for fam in sorted(full.overhead_us):
        for block in sorted({str(b) for b, f in zip(obs.block, obs.family, strict=True)
                             if f == fam}):
            keep = obs.block != block
            fit = stagef.fit(obs, keep)
            out.append({"scope": "framework", "name": "overhead_without",
                        "param_id": f"kernels-3:framework:{fam}:without:{_slug(block)}",
                        "family": fam, "value_us": fit.overhead(fam),
                        "basis": f"without {block} (leave-one-source-out)"})
    for block in sorted({str(b) for b in obs.block}):
        m = obs.block == block
        ape = np.abs(pred[m] / obs.measured_ms[m] - 1.0) * 100
        out.append(reported(f"stagef.in_sample.{_slug(block)}", f"stage F in sample, {block}",
                            value_pct=float(ape.mean()), count=int(m.sum())))
    return out


def _slug(text: str) -> str:
    import re

    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")


def evaluate(model: "Model", obs: "FRows", kernels: "pd.DataFrame", runs: "pd.DataFrame",
             timings: "pd.DataFrame", progress: Progress = lambda what: None) -> list[dict]:
    """Every pre-registered figure and reported figure as ``method_params`` rows."""
    logo = leave_one_gpu_out(kernels, progress)
    progress("kernels-3 evaluation: Kineto folds, calibration leave-one-out, overheads")
    return (deepbench_rows(logo, model) + kineto_rows(obs, runs, timings)
            + calibration_rows(obs) + overhead_rows(obs))


def method_params(kernels: "pd.DataFrame", runs: "pd.DataFrame", timings: "pd.DataFrame",
                  progress: Progress = lambda what: None) -> "pd.DataFrame":
    """kernels-3 fitted on the three tables and evaluated: the ``method_params`` rows. The one
    recipe of the release build (``recipes.producers.kernels3_params``) and of ``--refit``."""
    from dgtraces.reconstruct.kernels3.build import fit_model
    from dgtraces.reconstruct.kernels3.params import to_frame

    model, obs = fit_model(kernels, runs, timings, progress)
    return to_frame(model, evaluate(model, obs, kernels, runs, timings, progress))
