"""Validation of the predictor against the ``iterations`` table of a release.

Every row with provenance measured or published (training phase) is predicted from its own
trace: ``trace_run_id`` when set, else the best stored run for its model/device/batch, else a
trace reconstructed on the fly, all through :func:`.trace.resolve` (so GPU traces get the
modelled input copy exactly as in ``predict`` and ``sweep``). Measured multi-worker rows use the
release's own ``comm_fits`` for their interconnect (through :func:`.links.links_frame`). Rows
predicted from a reconstructed trace whose reconstruction was fitted to published throughputs
are marked ``circular`` and kept out of the headline MAPE. Rows that cannot be predicted are listed
with the reason, never dropped silently.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from dgtraces.errors import Code, DgtracesError
from dgtraces.predict.cluster import DEFAULT_BUCKET_BYTES, POLICY_NAMES, Cluster, Policy
from dgtraces.predict.dag import predict_trace
from dgtraces.predict.staging import COLLECTOR_PASSES
from dgtraces.predict.trace import resolve

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from dgtraces.store.release import Release

CIRCULAR = ("published single-GPU rows predicted from reconstructed traces are circular: the "
            "reconstruction was fitted to these throughputs, so their error measures the fit, "
            "not the predictor")


def no_nan(obj):
    """``obj`` with every float NaN (pandas' missing value) replaced by None."""
    if isinstance(obj, dict):
        return {k: no_nan(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [no_nan(v) for v in obj]
    if isinstance(obj, float) and obj != obj:
        return None
    return obj


@dataclass(frozen=True)
class ValidationResult:
    release: str
    rows: "pd.DataFrame"  # one row per iterations row, predicted or skipped (with reason)
    by_model: "pd.DataFrame"
    by_policy: "pd.DataFrame"

    def headline(self) -> dict:
        ok = self.rows[self.rows["predicted_ms"].notna() & ~self.rows["circular"]]
        out = {}
        for prov, part in ok.groupby("provenance"):
            plain = (part["plain_ms"] - part["measured_ms"]).abs() / part["measured_ms"] * 100
            workers = "/".join(str(w) for w in sorted({int(w) for w in part["workers"]}))
            devices = ", ".join(sorted({str(d) for d in part["device"]}))
            out[prov] = {"rows": int(len(part)), "mape_pct": float(part["ape_pct"].mean()),
                         "max_ape_pct": float(part["ape_pct"].max()),
                         "plain_dag_mape_pct": float(plain.mean()),
                         "scope": f"{workers}-worker {devices} runs"}  # what the rows are
        return out

    def to_dict(self) -> dict:
        """JSON-ready: missing values are None (JSON null), never NaN."""
        return no_nan({"release": self.release, "headline": self.headline(),
                        "by_model": self.by_model.to_dict("records"),
                        "by_policy": self.by_policy.to_dict("records"),
                        "rows": self.rows.to_dict("records"), "note": CIRCULAR})

    def report(self) -> str:
        lines = [f"predictor validation against release {self.release} (predictions are "
                 f"modelled; measured/published rows are the ground truth)"]
        for prov, h in self.headline().items():
            lines.append(f"  {prov}: MAPE {h['mape_pct']:.2f}% over {h['rows']} rows "
                         f"({h['scope']}; max {h['max_ape_pct']:.2f}%; plain DAG without CPU "
                         f"effects {h['plain_dag_mape_pct']:.2f}%), circular rows excluded")
        if self.rows.get("cpu_effects") is not None and self.rows["cpu_effects"].notna().any():
            lines.append("  CPU rows modelled with: " + "; ".join(
                sorted(set(self.rows["cpu_effects"].dropna()))) + " (set from the "
                "configuration, see evaluation.validation.cpu_effects)")
        fmt = {"mape_pct": "{:.2f}".format, "max_ape_pct": "{:.2f}".format}
        for title, df in (("per model", self.by_model), ("per policy", self.by_policy)):
            lines.append(f"{title}:")
            lines.append(df.to_string(index=False, formatters=fmt) if len(df) else "  (none)")
        skipped = self.rows[self.rows["predicted_ms"].isna()]
        if len(skipped):
            lines.append(f"skipped {len(skipped)} row(s):")
            for r in skipped.itertuples():
                lines.append(f"  {r.iter_id}: {r.reason}")
        if self.rows["circular"].any():
            lines.append(f"note: {CIRCULAR}")
        return "\n".join(lines)


def _val(x):
    """None for any missing marker (None, NaN, pd.NA), else the value."""
    import pandas as pd

    return None if x is None or pd.isna(x) else x


def _measured_ms(row) -> float | None:
    if _val(row["iter_ms"]) is not None:
        return float(row["iter_ms"])
    thr, b = _val(row["throughput_img_s"]), _val(row["batch_size"])
    if thr and b:
        return float(b) * int(row["workers"]) * 1000.0 / float(thr)
    return None


def _predict_row(row, rel: Release, runs, overheads=None) -> dict:
    policy_name = row["policy"]
    if row["phase"] != "train":
        raise DgtracesError("inference rows are outside the training DAG", code=Code.BAD_INPUT)
    if policy_name not in POLICY_NAMES:
        if int(row["workers"]) > 1:
            raise DgtracesError(f"policy {policy_name!r} has no model", code=Code.BAD_INPUT)
        policy_name = "wfbp"  # one worker aggregates nothing: every policy is the same
    rid = _val(row["trace_run_id"])
    if not isinstance(rid, str) and _val(row["batch_size"]) is None:
        raise DgtracesError("row has no batch size and no trace", code=Code.BAD_INPUT)
    batch = _val(row["batch_size"])
    # as predict and sweep do: GPU traces get the modelled input copy (trace.H2D_LINK)
    trace = resolve(row["model"], row["device"], None if batch is None else int(batch),
                    precision=row["precision"], release=rel,
                    run_id=rid if isinstance(rid, str) else None)
    workers = int(row["workers"])
    nodes = max(1, int(row["nodes"]))
    link = row["interconnect"] if workers > 1 else "pcie3"  # 1 worker: no comm, any link
    plain = Cluster(workers, -(-workers // nodes), link, link, "ring", release=rel)
    bucket = _val(row["bucket_bytes"])
    policy = Policy(policy_name, bool(_val(row["io_overlap"]) or False),
                    DEFAULT_BUCKET_BYTES if bucket is None else int(bucket))
    effects = cpu_effects(row, trace, runs)
    pred, _ = predict_trace(trace, replace(plain, **effects), policy)
    if overheads is not None and overheads.terms:  # issue #26 terms (overheads.py)
        from dgtraces.predict.overheads import apply_overheads, validation_spec

        loader = "synthetic" if "synthetic" in str(_val(row.get("notes")) or "") else None
        spec, _ = validation_spec(overheads, trace, loader)
        pred = apply_overheads(pred, trace, spec, loader=loader)
    circular = (row["provenance"] == "published" and trace.provenance == "reconstructed")
    b = pred.breakdown
    return {"predicted_ms": pred.iter_ms, "trace_provenance": trace.provenance,
            "plain_ms": predict_trace(trace, plain, policy)[0].iter_ms if effects
            else pred.iter_ms,
            "cpu_effects": ", ".join(f"{k}={v}" for k, v in effects.items()) or None,
            "trace_run_id": trace.run_id, "trace_source": trace.source, "circular": circular,
            "pred_fwd_ms": b["h2d"] + b["fwd"], "pred_bwd_ms": b["bwd"],
            "pred_comm_exposed_ms": b["comm_exposed"], "pred_update_ms": b["update"],
            "link_source": pred.cluster["intra"]["source"] if workers > 1 else None}


PHASES = ("fwd_ms", "bwd_ms", "comm_wait_ms", "update_ms")


def cpu_effects(row, trace, runs) -> dict:
    """Mechanisms of CPU workers, set from the configuration (never fitted to the rows):

    * ``staging``: the collector packs, scales and unpacks every message (3 copies,
      ``staging.COLLECTOR_PASSES``) at the ``cpu-memcpy`` link's measured copy bandwidth;
    * ``shared_cpu``: when the workers of a node use all its cores for compute
      (workers x threads >= cores of the trace's run), gloo's all-reduce work has no core of
      its own, so it cannot overlap with compute.
    """
    info: dict[str, Any] = {}
    if runs is not None and trace.run_id is not None:
        match = runs.loc[runs["run_id"] == trace.run_id]
        info = match.iloc[0].to_dict() if len(match) else {}
    if info.get("device_kind") != "cpu" or int(row["workers"]) < 2:
        return {}
    threads = _val(row["threads_per_worker"]) or _val(info.get("threads")) or 1
    cores = _val(info.get("cores"))
    per_node = -(-int(row["workers"]) // max(1, int(row["nodes"])))
    return {"staging": "cpu-memcpy", "staging_passes": COLLECTOR_PASSES,
            "shared_cpu": bool(cores is not None and per_node * int(threads) >= int(cores))}


def _measured_phases(text) -> dict:
    """Measured per-phase medians from ``phases_json`` (collector rows), where present."""
    import json

    try:
        data = json.loads(text) if isinstance(text, str) else {}
    except (ValueError, RecursionError):
        data = {}
    return {f"meas_{k}": float(data[k]) if isinstance(data.get(k), (int, float)) else None
            for k in PHASES}


def validate(release: "Release | str | None" = None, overheads=None) -> ValidationResult:
    """Predict every measured/published training row of ``release`` (a Release or a
    version, default latest), with the ``overheads`` terms (an ``overheads.Overheads``)
    when given."""
    import pandas as pd

    from dgtraces.store.release import as_release

    rel = as_release(release)
    release = rel.version
    names = rel.entries
    if "iterations" not in names:
        raise DgtracesError(f"release {release} has no iterations table", code=Code.NOT_FOUND)
    it = rel.table("iterations")
    runs = rel.cached("runs") if "runs" in names else None
    it = it[it["provenance"].isin(("measured", "published"))]
    out = []
    for row in it.to_dict("records"):
        base = {"iter_id": row["iter_id"], "model": row["model"], "device": row["device"],
                "policy": row["policy"], "workers": int(row["workers"]),
                "batch_size": row["batch_size"], "interconnect": row["interconnect"],
                "provenance": row["provenance"], "measured_ms": _measured_ms(row),
                "predicted_ms": None, "circular": False, "reason": None,
                **_measured_phases(row.get("phases_json"))}
        try:
            base.update(_predict_row(row, rel, runs, overheads))
        except DgtracesError as exc:
            base["reason"] = f"[{exc.code}] {exc.message}"
        out.append(base)
    rows = pd.DataFrame(out)
    if rows.empty:
        rows = pd.DataFrame(columns=list(base) if out else ["iter_id", "predicted_ms",
                                                          "measured_ms", "circular"])
    if "plain_ms" not in rows:
        rows["plain_ms"] = None
    rows["plain_ms"] = pd.to_numeric(rows["plain_ms"], errors="coerce")
    rows["predicted_ms"] = pd.to_numeric(rows["predicted_ms"], errors="coerce")
    rows["measured_ms"] = pd.to_numeric(rows["measured_ms"], errors="coerce")
    rows["circular"] = rows["circular"].astype(bool)
    rows["ape_pct"] = (rows["predicted_ms"] - rows["measured_ms"]).abs() / rows["measured_ms"] * 100
    rows["signed_error_pct"] = (rows["predicted_ms"] / rows["measured_ms"] - 1) * 100
    return ValidationResult(release, rows, _summary(rows, "model"), _summary(rows, "policy"))


def _summary(rows: "pd.DataFrame", key: str) -> "pd.DataFrame":
    import pandas as pd

    ok = rows[rows["predicted_ms"].notna()]
    if ok.empty:
        return pd.DataFrame(columns=["provenance", key, "circular", "rows", "mape_pct",
                                     "max_ape_pct", "mean_signed_pct"])
    g = ok.groupby(["provenance", key, "circular"])
    return g.agg(rows=("ape_pct", "size"), mape_pct=("ape_pct", "mean"),
                 max_ape_pct=("ape_pct", "max"),
                 mean_signed_pct=("signed_error_pct", "mean")).reset_index()


def parity_title(res: ValidationResult) -> str:
    """The parity plot's title: each headline MAPE with the rows it covers (worker counts
    and devices), e.g. ``measured MAPE 6.4% (n=9: 2-worker cpu runs)``."""
    heads = [f"{prov} MAPE {h['mape_pct']:.1f}% (n={h['rows']}: {h['scope']})"
             for prov, h in res.headline().items()]
    return f"dgtraces predictor vs release {res.release}\n" + "; ".join(heads)


def parity_plot(res: ValidationResult, path) -> None:
    """Measured vs predicted (log-log) with the y = x line and a +-10% band."""
    import io

    import matplotlib.pyplot as plt

    from dgtraces.io.files import atomic_write_bytes

    fig = parity_figure(res)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    atomic_write_bytes(path, buf.getvalue())


def parity_figure(res: ValidationResult):
    """The parity figure. Markers never hide each other: the plain-DAG rings are drawn
    first, larger and hollow, and every prediction marker is translucent with an edge, so
    points at the same place (several policies of one run) all show."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt


    ok = res.rows[res.rows["predicted_ms"].notna()]
    fig, ax = plt.subplots(figsize=(6.5, 6), dpi=110)
    markers = dict(zip(POLICY_NAMES, "os^Dvp<>", strict=False))
    differs = ok[(ok["plain_ms"] - ok["predicted_ms"]).abs() > 1e-9 * ok["predicted_ms"]]
    if len(differs):
        ax.scatter(differs["measured_ms"], differs["plain_ms"], facecolors="none",
                   edgecolors="grey", s=90, linewidths=1.0, zorder=2,
                   label="plain DAG, no CPU effects")
    for (prov, circ, pol), part in ok.groupby(["provenance", "circular", "policy"]):
        label = f"{prov}{' (circular)' if circ else ''}: {pol}"
        ax.scatter(part["measured_ms"], part["predicted_ms"], marker=markers.get(str(pol), "X"),
                   alpha=0.45 if circ else 0.6, label=label, s=36, edgecolors="black",
                   linewidths=0.6, zorder=3)
    if len(ok):
        values = ok[["measured_ms", "predicted_ms", "plain_ms"]]
        lo = float(values.min().min()) * 0.8
        hi = float(values.max().max()) * 1.25
        xs = [lo, hi]
        ax.plot(xs, xs, color="black", linewidth=1, label="y = x")
        ax.fill_between(xs, [x * 0.9 for x in xs], [x * 1.1 for x in xs], color="grey",
                        alpha=0.15, label="+-10%")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
    ax.set_xlabel("measured / published iteration time (ms)")
    ax.set_ylabel("predicted iteration time (ms, modelled)")
    ax.set_title(parity_title(res), fontsize=9)
    ax.legend(fontsize=7, loc="upper left")
    ax.grid(alpha=0.3, which="both")
    fig.tight_layout()
    return fig
