"""``validate-predictor --published``: the predictor against published multi-GPU results.

Reads the shipped byte-exact copy ``dgtraces/reference/scaling_published.csv`` (tensorpack
benchmarks, Caffe-MPI READMEs; each row keeps its ``source``) and predicts every row.

How a row becomes a configuration (declared here, never fitted to the rows):

* aggregation (``update`` column) -> algorithm and policy by :data:`UPDATE_RULES`; an NCCL
  aggregation (algorithm :data:`NCCL_DEFAULT`) takes ``predict``'s default for the device
  (``comm.algorithm_default``: ``auto``, NCCL's own choice, for GPUs; issue #25);
* ``intra`` / ``inter`` columns: their first word when it is a links preset; an unstated
  intra link is the device's board link (:data:`BOARD_LINK`), InfiniBand of unstated rate is
  ``ib-fdr`` (:data:`UNSTATED_IB`: the 56 Gb/s generation of 2016-2017 clusters);
* calibration, in order: the 1-GPU ``img_s`` figure of the same source, framework and
  aggregation via ``--calibrate-img-s`` (that row is then the calibration row and not scored;
  multi-GPU figures are never used); else a device with calibration rows is reconstructed
  from ``calibration.csv`` (other publications' 1-GPU figures); else the uncalibrated
  shape-only roofline (:func:`.devices.shape_trace`), used only for speedup rows;
* rows with ``img_s`` are compared as throughput, rows with only ``speedup`` as speedup;
* "synthetic data" rows (and their "same" followers) have no input copy (h2d 0).

Beside the predictor, every scored row gets the **linear-scaling baseline**: N x the source's
own 1-GPU ``img_s`` figure for throughput rows (none when the source gives no 1-GPU figure),
N for speedup rows; its error and per-source MAPE are reported next to the predictor's. Rows
whose predicted speedup is within :data:`NEAR_LINEAR` of N (communication almost or fully
hidden behind backward compute) do not exercise the communication model; they are counted
(``pred_linear``; ``pred_exact_linear`` for speedup equal to N within 1e-6).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dgtraces.errors import Code, DgtracesError
from dgtraces.predict.cluster import Cluster, Policy
from dgtraces.predict.dag import predict_trace
from dgtraces.predict.trace import resolve

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from dgtraces.store.release import Release


def _distinct(values: pd.Series) -> str:
    """The distinct values of a column, sorted and comma-joined (a source's profiles)."""
    return ", ".join(sorted({str(v) for v in values}))


FILE = "scaling_published.csv"
HOROVOD_FUSION_BYTES = 64 * 1024 * 1024  # Horovod docs: HOROVOD_FUSION_THRESHOLD default 64 MB
NCCL_DEFAULT = None  # an NCCL all-reduce: predict's default for the device (auto on GPUs)
# (substring of the update column, algorithm, policy, bucket bytes, why)
UPDATE_RULES = (
    ("parameter server on the host CPU", "ps", "wfbp", None,
     ("push/pull over each GPU's PCIe link to host memory; host ingress = one x16 uplink "
      "per two GPUs (PCIe switch per GPU pair, NVIDIA DGX-1 system architecture "
      "whitepaper)")),
    ("horovod", NCCL_DEFAULT, "bucketed", HOROVOD_FUSION_BYTES,
     "NCCL all-reduce with Horovod tensor fusion (64 MiB default threshold)"),
    ("hierarchical", "hierarchical", "wfbp", None,
     ("NCCL reduce-scatter/all-gather inside nodes, MPI ring between nodes "
      "(Caffe-MPI 2.0)")),
    ("nccl all-reduce", NCCL_DEFAULT, "wfbp", None,
     "NCCL all-reduce of each gradient when ready (TF graph dataflow)"),
)
BOARD_LINK = {"p100": "nvlink1", "v100": "nvlink2", "a100": "nvlink3", "h100": "nvlink4"}
UNSTATED_IB = "ib-fdr"
HOST_LINK = "pcie3"
NEAR_LINEAR = 0.01  # predicted speedup >= (1 - this) x N counts as linear scaling


@dataclass(frozen=True)
class PublishedValidation:
    rows: pd.DataFrame  # one row per published row: scored, calibration or skipped
    framework: str = "none"  # --framework choice (none, auto, or one profile)
    overheads: str = "none"  # --overheads terms added after the DAG

    def scored(self) -> pd.DataFrame:
        return self.rows[self.rows["role"] == "scored"]

    def by_source(self) -> pd.DataFrame:
        s = self.scored()
        g = s.groupby("source", sort=False)
        return g.agg(rows=("ape_pct", "size"), metric=("metric", "first"),
                     framework_profiles=("framework_profile", _distinct),
                     mape_pct=("ape_pct", "mean"), median_ape_pct=("ape_pct", "median"),
                     max_ape_pct=("ape_pct", "max"),
                     mean_signed_pct=("error_pct", "mean"),
                     linear_rows=("linear_ape_pct", "count"),
                     linear_mape_pct=("linear_ape_pct", "mean"),
                     pred_linear_rows=("pred_linear", "sum"),
                     mean_sync_ms=("sync_ms", "mean"),
                     mean_input_ms=("input_ms", "mean")).reset_index()

    def headline(self) -> dict:
        sc = self.scored()
        s, lin = sc["ape_pct"], sc["linear_ape_pct"].dropna()
        return {"framework": self.framework, "overheads": self.overheads,
                "rows": len(s), "mape_pct": float(s.mean()) if len(s) else None,
                "median_ape_pct": float(s.median()) if len(s) else None,
                "linear_rows": len(lin),
                "linear_mape_pct": float(lin.mean()) if len(lin) else None,
                "predictor_mape_on_linear_rows_pct": float(sc.loc[lin.index, "ape_pct"].mean())
                if len(lin) else None,
                "pred_linear_rows": int(sc["pred_linear"].sum()),
                "pred_exact_linear_rows": int(sc["pred_exact_linear"].sum())}

    def to_dict(self) -> dict:
        from dgtraces.evaluation.validation import no_nan

        return no_nan({"file": f"dgtraces/reference/{FILE}", "headline": self.headline(),
                        "by_source": self.by_source().to_dict("records"),
                        "rows": self.rows.to_dict("records")})

    def report(self) -> str:
        h = self.headline()
        lines = [(f"predictor vs published multi-GPU results (dgtraces/reference/{FILE}; "
                 f"predictions are modelled; --framework {self.framework}, --overheads "
                 f"{self.overheads})"),
                 (f"  all sources: MAPE {h['mape_pct']:.2f}%, median error "
                 f"{h['median_ape_pct']:.2f}% over {h['rows']} scored rows"),
                 self._baseline_line(h)]
        fmt = {k: "{:.2f}".format for k in ("mape_pct", "median_ape_pct", "max_ape_pct",
                                             "mean_signed_pct", "linear_mape_pct")}
        lines += ["per source:", self.by_source().to_string(index=False, formatters=fmt),
                  "per row:"]
        cols = ["model", "device", "gpus", "algorithm", "framework_profile", "metric",
                "published",
                "predicted", "error_pct", "linear", "linear_error_pct", "dag_iter_ms",
                "sync_ms", "input_ms", "input_term", "calibration"]
        part = self.rows[self.rows["role"] == "scored"][cols]
        lines.append(part.to_string(index=False, float_format=lambda v: f"{v:.4g}",
                                    max_colwidth=48))
        for r in self.rows[self.rows["role"] != "scored"].itertuples():
            lines.append(f"  {r.role}: {r.model}/{r.device} x{r.gpus} ({r.update}): "
                         f"{r.reason}")
        return "\n".join(lines)


    @staticmethod
    def _baseline_line(h: dict) -> str:
        lin = (f"MAPE {h['linear_mape_pct']:.2f}% over the {h['linear_rows']} rows that have "
               f"one (predictor on those rows: {h['predictor_mape_on_linear_rows_pct']:.2f}%)"
               if h["linear_rows"] else "no row has one")
        return (f"  linear-scaling baseline (N x the source's own 1-GPU figure; N for "
                f"speedup rows): {lin}\n  the predictor predicts linear scaling (speedup "
                f"within {NEAR_LINEAR:.0%} of N: communication hidden) for "
                f"{h['pred_linear_rows']} of {h['rows']} rows ({h['pred_exact_linear_rows']} "
                "exactly); those rows do not exercise its communication model")


def _rule(update: str) -> tuple:
    low = update.lower()
    for rule in UPDATE_RULES:
        if rule[0].lower() in low:
            return rule
    raise DgtracesError(f"aggregation {update!r} has no model", code=Code.BAD_INPUT)


def _link(text: str, fallback: str) -> str:
    from dgtraces.comm.links import known_links

    word = (text or "").split(" ")[0].strip()
    if word in known_links(use_store=False):
        return word
    if "infiniband" in (text or "").lower():
        return UNSTATED_IB
    return fallback


def _num(text: str) -> float | None:
    return float(text) if text not in (None, "") else None


def _configure(row: dict, calib: dict, framework: str | None = None) -> dict:
    from .published_frameworks import row_framework

    _, algo, policy, bucket, why = _rule(row["update"])
    profile, profile_why = row_framework(row, framework)
    device, gpus = row["device"], int(row["gpus"])
    gpn = min(int(row["gpus_per_node"]), gpus)
    intra = _link(row["intra"], BOARD_LINK.get(device, HOST_LINK))
    inter = _link(row["inter"], intra)
    servers = 1
    if algo == "ps":
        intra = inter = HOST_LINK
        servers = max(1, math.ceil(gpus / 2))
    img_1 = calib.get((row["source"], row["framework"], row["update"]))
    algo_why = "the row's aggregation"
    if algo is NCCL_DEFAULT:
        from dgtraces.comm.algorithm_default import default_algorithm

        choice = default_algorithm(device, [intra], [inter], [(gpus, gpn)])
        algo, algo_why = choice.algorithm, choice.why
    return {"algorithm": algo, "algorithm_why": algo_why, "policy": policy,
            "bucket_bytes": bucket, "intra": intra,
            "inter": inter, "servers": servers, "gpus_per_node": gpn, "rule": why,
            "calibrate_img_s": img_1, "profile": profile,
            "framework_profile": "none" if profile is None else profile.key,
            "framework_why": profile_why}


def _predict(row: dict, cfg: dict, rel: Release | str | None, overheads=None) -> dict:
    """One row predicted; ``rel``: the release opened once for every row (or the version as
    given when no such release exists: the traces are reconstructed then)."""
    from dgtraces.predict import calibrate
    from dgtraces.predict.cluster import DEFAULT_BUCKET_BYTES
    from dgtraces.predict.overheads import Overheads, apply_overheads, validation_spec
    from dgtraces.reference.frameworks import apply_framework

    synthetic = "synthetic data" in row["_notes"]
    trace = resolve(row["model"], row["device"], int(row["batch_per_gpu"]), release=rel,
                    h2d_link=None if synthetic else "pcie3", shape_only=True)
    policy = Policy(cfg["policy"], False, cfg["bucket_bytes"] or DEFAULT_BUCKET_BYTES)
    cluster = Cluster(int(row["gpus"]), cfg["gpus_per_node"], cfg["intra"], cfg["inter"],
                      cfg["algorithm"], cfg["servers"], release=rel or "latest",
                      algorithm_why=cfg["algorithm_why"])
    # the row's aggregation fixes the algorithm (ps, hierarchical, NCCL's default)
    cluster, policy = apply_framework(cfg["profile"], cluster, policy,
                                      explicit=frozenset({"algorithm"}))
    if cfg["calibrate_img_s"] is not None:
        trace = calibrate(trace, cfg["calibrate_img_s"], policy)
        how = f"--calibrate-img-s {cfg['calibrate_img_s']:g} (the source's 1-GPU figure)"
    elif trace.run_id and trace.run_id.startswith("shape-"):
        how = "uncalibrated shape-only roofline (no 1-GPU figure, no calibration rows)"
    else:
        how = "reconstruction fitted to calibration.csv (other sources' 1-GPU figures)"
    dag, _ = predict_trace(trace, cluster, policy)
    usable, input_how = validation_spec(overheads or Overheads(), trace, synthetic)
    pred = apply_overheads(dag, trace, usable, synthetic=synthetic)
    b = pred.breakdown
    return {"pred_img_s": pred.throughput_img_s, "pred_speedup": pred.speedup_vs_1,
            "calibration": how, "trace_run_id": trace.run_id,
            "h2d_ms": trace.h2d_ms, "iter_ms": pred.iter_ms, "dag_iter_ms": dag.iter_ms,
            "messages": dag.breakdown["messages"], "policy": policy.name,  # as applied
            "bucket_bytes": dag.bucket_bytes, "cycle_ms": policy.cycle_ms,
            "blocking": cluster.shared_cpu,
            "comm_exposed_ms": dag.breakdown["comm_exposed"],
            "sync_ms": b.get("sync_ms", 0.0), "input_ms": b.get("input_ms", 0.0),
            "input_term": input_how or None}


def validate_published(release: Release | str | None = None, framework: str | None = None,
                       overheads=None) -> PublishedValidation:
    """Predict every row of the shipped published scaling table (see module doc) with the
    traces of ``release`` (an open Release, or a version, default latest), the
    ``framework`` profile choice (None/``none``, ``auto`` = the declared per-row profile,
    or one profile for every row) and the ``overheads`` terms (an ``Overheads``)."""
    import pandas as pd

    from dgtraces.reference import rows as ref_rows
    from dgtraces.store.release import open_if_any

    rel = open_if_any(release)
    table = ref_rows(FILE)
    notes = ""
    for r in table:  # "same" repeats the previous row's notes
        text = r["notes"] or ""
        notes = notes + "; " + text if text.startswith("same") else text
        r["_notes"] = notes
    calib = {(r["source"], r["framework"], r["update"]): float(r["img_s"])
             for r in table if r["gpus"] == "1" and r["img_s"]}
    out = []
    for r in table:
        base: dict[str, Any] = {k: r[k] for k in ("source", "model", "device", "framework",
                                                  "update")}
        base.update(gpus=int(r["gpus"]), batch_per_gpu=int(r["batch_per_gpu"]),
                    published_img_s=_num(r["img_s"]), published_speedup=_num(r["speedup"]))
        metric = "img_s" if base["published_img_s"] is not None else "speedup"
        base["metric"] = metric
        base["published"] = base[f"published_{metric}"]
        try:
            cfg = _configure(r, calib, framework)
            base.update({k: v for k, v in cfg.items() if k not in ("calibrate_img_s",
                                                                   "profile")})
            base["source_1gpu_img_s"] = cfg["calibrate_img_s"]
            base.update(_predict(r, cfg, rel, overheads))
        except DgtracesError as exc:
            base.update(role="skipped", reason=f"[{exc.code}] {exc.message}")
            out.append(base)
            continue
        base["predicted"] = base[f"pred_{metric}"]
        if base["gpus"] == 1 and cfg["calibrate_img_s"] is not None:
            base.update(role="calibration", reason="1-GPU figure used by --calibrate-img-s "
                        "for this source's multi-GPU rows (not scored)")
        else:
            base.update(role="scored", reason=None)
        out.append(base)
    df = pd.DataFrame(out)
    df["error_pct"] = (df["predicted"] / df["published"] - 1) * 100
    df["ape_pct"] = df["error_pct"].abs()
    return PublishedValidation(_with_linear_baseline(df), framework or "none",
                               "none" if overheads is None else overheads.label)


def _with_linear_baseline(df: pd.DataFrame) -> pd.DataFrame:
    """Add the linear-scaling baseline (module doc) and whether the predictor predicted
    linear scaling."""
    import numpy as np

    one = df["source_1gpu_img_s"] if "source_1gpu_img_s" in df else np.nan
    gpus = df["gpus"].astype(float)
    df["linear"] = np.where(df["metric"] == "speedup", gpus, gpus * _as_float(one))
    df["linear_error_pct"] = (df["linear"] / df["published"] - 1) * 100
    df["linear_ape_pct"] = df["linear_error_pct"].abs()
    ratio = _as_float(df.get("pred_speedup", np.nan)) / gpus
    multi = (df["gpus"] > 1) & ratio.notna()
    df["pred_linear"] = multi & (ratio >= 1 - NEAR_LINEAR)
    df["pred_exact_linear"] = multi & ((ratio - 1).abs() < 1e-6)
    return df


def _as_float(values: Any) -> Any:
    """``values`` as float (None -> NaN), a Series kept a Series."""
    import pandas as pd

    return pd.to_numeric(values, errors="coerce") if isinstance(values, pd.Series) else values


def published_plot(measured, pub: PublishedValidation, path) -> None:
    """Two parity panels: the measured CPU rows (iteration ms) and the published multi-GPU
    rows (img/s or speedup, log axes), one marker per source; y = x and a +-10% band."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dgtraces.io.files import atomic_write_bytes

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 5.6), dpi=110)
    ok = measured.rows[measured.rows["predicted_ms"].notna() & ~measured.rows["circular"]]
    cpu = ok[ok["provenance"] == "measured"]
    left.scatter(cpu["measured_ms"], cpu["predicted_ms"], marker="o", label="measured CPU rows")
    scored = pub.scored()
    for (key, part), marker in zip(scored.groupby("source", sort=False), "s^Dvp<>*", strict=False):
        src = str(key)
        right.scatter(part["published"], part["predicted"], marker=marker, s=40,
                      label=f"{src.split('/')[0]} {src[src.rfind('('):]} "
                            f"({part['metric'].iloc[0]})")
    if len(scored):
        right.scatter(scored["published"], scored["linear"], marker="x", s=24, color="grey",
                      label="linear-scaling baseline (N x 1-GPU figure)")
    for ax, x, y, unit in ((left, cpu["measured_ms"], cpu["predicted_ms"], "iteration ms"),
                           (right, scored["published"], scored["predicted"],
                            "img/s or speedup")):
        if len(x):
            lo = float(min(x.min(), y.min())) * 0.8
            hi = float(max(x.max(), y.max())) * 1.25
            ax.plot([lo, hi], [lo, hi], color="black", linewidth=1, label="y = x")
            ax.fill_between([lo, hi], [lo * 0.9, hi * 0.9], [lo * 1.1, hi * 1.1],
                            color="grey", alpha=0.15, label="+-10%")
            ax.set_xscale("log")
            ax.set_yscale("log")
        ax.set_xlabel(f"measured / published ({unit})")
        ax.set_ylabel(f"predicted ({unit}, modelled)")
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=6, loc="upper left")
    heads = "; ".join(f"{p} MAPE {h['mape_pct']:.1f}% (n={h['rows']})"
                      for p, h in measured.headline().items() if p == "measured")
    left.set_title(f"release {measured.release}: {heads}", fontsize=9)
    h = pub.headline()
    right.set_title(f"published multi-GPU: MAPE {h['mape_pct']:.1f}%, median "
                    f"{h['median_ape_pct']:.1f}% (n={h['rows']}; --framework "
                    f"{pub.framework}, --overheads {pub.overheads})", fontsize=9)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    atomic_write_bytes(path, buf.getvalue())
