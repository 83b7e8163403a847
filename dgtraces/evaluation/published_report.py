"""The published evaluation's tables (:class:`PublishedValidation`): per source and per
framework profile the signed error, MAPE and linear scaling's MAPE on the same rows; issue #35
item 4's targets, each met or not; the leave-one-source-out statement; DLPerf's paired
DataLoader / DALI check of the input term; text, JSON and Markdown renderings.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

OLDER_SOURCE = "older set (scaling_published.csv: tensorpack, Caffe-MPI)"
NEAR_LINEAR = 0.01  # predicted speedup >= (1 - this) x N counts as linear scaling
TARGET_RATIO = 0.5  # item 4: MAPE <= 0.5 x linear scaling's MAPE
TARGET_MIN_ROWS = 8  # ... in each source with at least this many target rows
TARGET_BIAS_PCT = 5.0  # ... and no source's mean signed error beyond +-5%
PAIRED = ("dlperf-pytorch-1.6-dataloader", "dlperf-pytorch-1.6-dali")  # item 3's only check
MAPPED_NCCL = "each setup's release (scaling_mapping.yaml, rules R1-R5)"
LOSO = ("nothing is fitted to these rows (the sync term's cv comes from the shipped Kineto "
        "trace, the profiles from the frameworks' code, compute from each table's own 1-GPU "
        "figure), so leave-one-source-out equals the in-sample error")


def _distinct(values: pd.Series) -> str:
    """The distinct values of a column, sorted and comma-joined."""
    return ", ".join(sorted({str(v) for v in values}))


def _summary(rows: pd.DataFrame, key: str) -> pd.DataFrame:
    """Per ``key``: rows, mean signed error, MAPE, linear's MAPE and the predictor's MAPE on
    the rows that have a linear baseline, their ratio."""
    import pandas as pd

    if rows.empty:
        return pd.DataFrame(columns=[key, "rows", "mean_signed_pct", "mape_pct",
                                     "linear_rows", "linear_mape_pct",
                                     "mape_on_linear_rows_pct", "ratio"])
    g = rows.groupby(key, sort=False)
    out = g.agg(rows=("ape_pct", "size"), mean_signed_pct=("error_pct", "mean"),
                mape_pct=("ape_pct", "mean"), median_ape_pct=("ape_pct", "median"),
                max_ape_pct=("ape_pct", "max"), linear_rows=("linear_ape_pct", "count"),
                linear_mape_pct=("linear_ape_pct", "mean"),
                framework_profiles=("framework_profile", _distinct),
                pred_linear_rows=("pred_linear", "sum"), mean_sync_ms=("sync_ms", "mean"),
                mean_input_ms=("input_ms", "mean")).reset_index()
    on_lin = rows[rows["linear_ape_pct"].notna()].groupby(key, sort=False)["ape_pct"].mean()
    out["mape_on_linear_rows_pct"] = out[key].map(on_lin)
    out["ratio"] = out["mape_on_linear_rows_pct"] / out["linear_mape_pct"]
    return out


@dataclass(frozen=True)
class PublishedValidation:
    rows: pd.DataFrame  # one row per reference row: scored, calibration, skipped or not
    framework: str = "auto"  # --framework choice (none, auto, or one profile)
    overheads: str = "none"  # --overheads terms added after the DAG
    nccl: str = f"{MAPPED_NCCL}, --nccl-time run"  # the NCCL model of the nccl setups

    def scored(self) -> pd.DataFrame:
        return self.rows[self.rows["role"] == "scored"]

    def targets_rows(self) -> pd.DataFrame:
        """Item 4's rows: scored multi-GPU rows with a 1-GPU figure (a linear baseline)."""
        return self.rows[self.rows["target_row"]]

    def by_source(self) -> pd.DataFrame:
        return _summary(self.scored(), "source")

    def by_framework(self) -> pd.DataFrame:
        return _summary(self.scored(), "setup_profile")

    def headline(self) -> dict:
        sc = self.scored()
        s, lin = sc["ape_pct"], sc["linear_ape_pct"].dropna()
        return {"framework": self.framework, "overheads": self.overheads, "nccl": self.nccl,
                "rows": len(s), "mape_pct": float(s.mean()) if len(s) else None,
                "median_ape_pct": float(s.median()) if len(s) else None,
                "mean_signed_pct": float(sc["error_pct"].mean()) if len(s) else None,
                "linear_rows": len(lin),
                "linear_mape_pct": float(lin.mean()) if len(lin) else None,
                "predictor_mape_on_linear_rows_pct": float(sc.loc[lin.index, "ape_pct"].mean())
                if len(lin) else None,
                "pred_linear_rows": int(sc["pred_linear"].sum()),
                "pred_exact_linear_rows": int(sc["pred_exact_linear"].sum()),
                "calibration_rows": int((self.rows["role"] == "calibration").sum()),
                "not_representable_rows": int((self.rows["role"] == "not representable").sum()),
                "skipped_rows": int((self.rows["role"] == "skipped").sum()),
                "leave_one_source_out": LOSO}

    def targets(self) -> list[dict]:
        """Item 4's targets on :meth:`targets_rows`, each with its figures and met or not."""
        t = self.targets_rows()
        out: list[dict] = []
        if t.empty:
            return out
        mape, lin = float(t["ape_pct"].mean()), float(t["linear_ape_pct"].mean())
        out.append({"target": f"overall MAPE <= {TARGET_RATIO} x linear", "rows": len(t),
                    "value": mape, "bound": TARGET_RATIO * lin, "linear_mape_pct": lin,
                    "met": mape <= TARGET_RATIO * lin})
        for src, part in t.groupby("source", sort=False):
            m, li = float(part["ape_pct"].mean()), float(part["linear_ape_pct"].mean())
            bias = float(part["error_pct"].mean())
            if len(part) >= TARGET_MIN_ROWS:
                out.append({"target": f"{src}: MAPE <= {TARGET_RATIO} x linear",
                            "rows": len(part), "value": m, "bound": TARGET_RATIO * li,
                            "linear_mape_pct": li, "met": m <= TARGET_RATIO * li})
            out.append({"target": f"{src}: mean signed error within +-{TARGET_BIAS_PCT:g}%",
                        "rows": len(part), "value": bias, "bound": TARGET_BIAS_PCT,
                        "linear_mape_pct": li, "met": abs(bias) <= TARGET_BIAS_PCT})
        return out

    def paired_check(self) -> pd.DataFrame:
        """DLPerf's DataLoader / DALI pairs (same cluster, same GPU counts): the published and
        the predicted throughput ratio (issue #35 item 3's only check of a CPU decoder)."""
        import pandas as pd

        sc = self.rows[self.rows["role"].isin(("scored", "calibration"))]
        a, b = (sc[sc["setup"] == s].set_index("gpus")[["published", "predicted"]]
                .astype(float) for s in PAIRED)
        ratio = (a / b).dropna().reset_index()
        return pd.DataFrame({"gpus": ratio["gpus"], "published_ratio": ratio["published"],
                             "predicted_ratio": ratio["predicted"]})

    def to_dict(self) -> dict:
        from dgtraces.evaluation.validation import no_nan

        return no_nan({"files": ["dgtraces/reference/scaling/published_scaling.csv",
                                 "dgtraces/reference/scaling_published.csv"],
                       "mapping": "dgtraces/evaluation/scaling_mapping.yaml",
                       "headline": self.headline(), "targets": self.targets(),
                       "by_source": self.by_source().to_dict("records"),
                       "by_framework": self.by_framework().to_dict("records"),
                       "paired_loader_check": self.paired_check().to_dict("records"),
                       "rows": self.rows.to_dict("records")})

    def report(self) -> str:
        h = self.headline()
        fmt = {k: "{:.2f}".format for k in ("mape_pct", "median_ape_pct", "max_ape_pct",
                                             "mean_signed_pct", "linear_mape_pct",
                                             "mape_on_linear_rows_pct", "ratio")}
        lines = [f"predictor vs published multi-GPU results (modelled predictions; "
                 f"--framework {self.framework}, --overheads {self.overheads}; NCCL: "
                 f"{self.nccl}; mapping dgtraces/evaluation/scaling_mapping.yaml)",
                 f"  all sources: MAPE {_f(h['mape_pct'])}%, mean signed error "
                 f"{_f(h['mean_signed_pct'])}% over {h['rows']} scored rows; "
                 f"{h['calibration_rows']} 1-GPU rows used as anchors (calibration), "
                 f"{h['not_representable_rows']} rows not representable, "
                 f"{h['skipped_rows']} skipped ({len(self.rows)} rows in all)",
                 self._baseline_line(h),
                 f"  leave-one-source-out: {LOSO}", "item 4 targets:"]
        lines += [f"  {'met    ' if t['met'] else 'NOT met'} {t['target']}: {t['value']:.2f}"
                  f" (bound {t['bound']:.2f}; {t['rows']} rows)" for t in self.targets()]
        for title, df in (("per source:", self.by_source()),
                          ("per framework profile:", self.by_framework())):
            lines += [title, df.drop(columns=["framework_profiles"]).to_string(
                index=False, formatters=fmt)]
        lines += ["DLPerf DataLoader / DALI pairs (input term's only check):",
                  self.paired_check().to_string(index=False, float_format="{:.4f}".format),
                  "per row:"]
        cols = ["setup", "model", "device", "gpus", "algorithm", "nccl", "framework_profile",
                "metric", "published", "predicted", "error_pct", "linear", "linear_error_pct",
                "sync_ms", "input_ms", "input_term"]
        lines.append(self.scored()[cols].to_string(index=False, float_format=lambda v:
                                                   f"{v:.4g}", max_colwidth=40))
        for r in self.rows[~self.rows["role"].isin(("scored", "calibration"))].itertuples():
            lines.append(f"  {r.role}: {r.setup} {r.row_model}/{r.row_device} x{r.gpus}: "
                         f"{r.reason}")
        return "\n".join(lines)

    @staticmethod
    def _baseline_line(h: dict) -> str:
        lin = (f"MAPE {h['linear_mape_pct']:.2f}% over the {h['linear_rows']} rows that have "
               f"one (predictor on those rows: {h['predictor_mape_on_linear_rows_pct']:.2f}%)"
               if h["linear_rows"] else "no row has one")
        return (f"  linear-scaling baseline (N x the table's own 1-GPU figure; N for "
                f"speedup rows): {lin}\n  the predictor predicts linear scaling (speedup "
                f"within {NEAR_LINEAR:.0%} of N) for {h['pred_linear_rows']} of {h['rows']} "
                f"rows ({h['pred_exact_linear_rows']} exactly)")

    def to_markdown(self) -> str:
        """The docs' results tables (docs/predictor-published.md), never typed."""
        h = self.headline()
        out = [f"`--framework {self.framework} --overheads {self.overheads}` (NCCL: "
               f"{self.nccl}): {h['rows']} scored rows, MAPE {_f(h['mape_pct'])}%, mean "
               f"signed error {_f(h['mean_signed_pct'])}%; linear scaling "
               f"{_f(h['linear_mape_pct'])}% on its {h['linear_rows']} rows (the predictor "
               f"{_f(h['predictor_mape_on_linear_rows_pct'])}% there); "
               f"{h['not_representable_rows']} rows not representable. Leave-one-source-out: "
               f"{LOSO}.", "", "| item 4 target | rows | value | bound | met? |",
               "| --- | --- | --- | --- | --- |"]
        out += [f"| {t['target']} | {t['rows']} | {t['value']:.2f}% | {t['bound']:.2f}% | "
                f"{'met' if t['met'] else 'not met'} |" for t in self.targets()]
        for title, key, df in (("source", "source", self.by_source()),
                               ("framework profile", "setup_profile", self.by_framework())):
            out += ["", f"| {title} | rows | mean signed error | MAPE | linear MAPE (rows) | "
                    "predictor on those rows | ratio |", "|" + " --- |" * 7]
            out += [f"| {r[key]} | {r['rows']} | {r['mean_signed_pct']:+.2f}% | "
                    f"{r['mape_pct']:.2f}% | {_pct(r['linear_mape_pct'])} "
                    f"({r['linear_rows']}) | {_pct(r['mape_on_linear_rows_pct'])} | "
                    f"{_f(r['ratio'])} |" for r in df.to_dict("records")]
        pc = self.paired_check()
        out += ["", "DLPerf's paired rows (PyTorch 1.6, DataLoader / DALI throughput):", "",
                "| GPUs | published ratio | predicted ratio |", "| --- | --- | --- |"]
        out += [f"| {r['gpus']} | {r['published_ratio']:.4f} | {r['predicted_ratio']:.4f} |"
                for r in pc.to_dict("records")]
        return "\n".join(out)


def _f(v) -> str:
    return "-" if v is None or v != v else f"{v:.2f}"


def _pct(v) -> str:
    return "-" if v is None or v != v else f"{v:.2f}%"
