"""``validate-predictor --published``: the predictor against published multi-GPU results.

Reads the shipped byte-exact copies ``dgtraces/reference/scaling/published_scaling.csv``
(DeepLearningExamples, DLPerf, keras-multi-gpu, Paddle's 2016 benchmark) and
``dgtraces/reference/scaling_published.csv`` (tensorpack, Caffe-MPI: the *older set*, one
source) and predicts every row the predictor can represent. How a row becomes options is the
reviewed mapping ``scaling_mapping.yaml`` (:mod:`.published_mapping`, docs/predictor-published.md),
written before the first score; rows it calls not representable are listed with the reason.

Per row, declared in the mapping and never fitted to the rows:

* the setup's model, device, links, NCCL release and algorithm (``nccl``: ``predict``'s default
  for the GPU, ``comm.algorithm_default``: NCCL's own choice, run by the setup's modelled release,
  :func:`.published_mapping.nccl_model`, at run time; ``nccl`` / ``nccl_time`` override every
  setup, e.g. ``"2.7"`` / ``"tuning"``: the model before issue #34);
* ``--framework auto`` applies the setup's profile, ``none`` none, a name that profile for every
  row; the setup's explicit policy / bucket win over a profile, as on the command line;
* calibration: the table's own 1-GPU figure via ``--calibrate-img-s`` (that 1-GPU row is then
  the calibration, not scored); without one, a device with calibration rows is reconstructed
  from ``calibration.csv`` (other publications' 1-GPU figures), else the uncalibrated
  shape-only roofline, used only for speedup rows;
* the overhead terms of ``--overheads``; the input term uses the setup's loader
  (``overheads.LOADERS``) and is left off, with the reason, where no decode rate exists.

Beside the predictor every scored row gets the **linear-scaling baseline** (N x the table's
1-GPU figure; N for speedup rows). The report is :mod:`.published_report`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from dgtraces.errors import Code, DgtracesError
from dgtraces.predict.cluster import DEFAULT_BUCKET_BYTES, Cluster, Policy
from dgtraces.predict.dag import predict_trace
from dgtraces.predict.trace import resolve
from dgtraces.reference.frameworks import AUTO, MIB  # AUTO: each setup's declared profile

from .published_mapping import (
    FROM_ROW,
    GPU_PAIRS,
    NCCL,
    NEW_FILE,
    OLD_FILE,
    ONE_NODE,
    Setup,
    load_mapping,
    mapped_rows,
    nccl_model,
)
from .published_report import MAPPED_NCCL, OLDER_SOURCE, PublishedValidation

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from dgtraces.store.release import Release


def _num(text: str | None) -> float | None:
    return float(text) if text not in (None, "") else None


def _old_notes(rows: list[dict]) -> dict[int, str]:
    """The older set's notes, where "same" repeats the previous row's (by row position)."""
    out, notes = {}, ""
    for i, r in enumerate(rows):
        text = r.get("notes") or ""
        notes = notes + "; " + text if text.startswith("same") else text
        out[i] = notes
    return out


def _normalise(file: str, row: dict, setup: Setup, notes: str, one_gpu: dict) -> dict:
    """One reference row in the evaluation's columns (both files)."""
    if file == NEW_FILE:
        base = {"source": row["source_repo"], "table": f"{row['commit'][:7]} {row['table']}",
                "framework": row["framework"], "update": row["comm_library"],
                "gpus": int(row["gpus"]), "gpus_per_node": int(row["gpus_per_node"]),
                "batch_per_gpu": _batch(row["batch_per_gpu"]),
                "published_img_s": _num(row["img_s"]), "published_speedup": None,
                "source_1gpu_img_s": _num(row["img_s_1gpu_same_table"]),
                "synthetic": setup.loader == "synthetic", "row_model": row["model"],
                "row_device": row["gpu"]}
    else:
        key = (row["source"], row["framework"], row["update"])
        base = {"source": OLDER_SOURCE, "table": row["source"], "framework": row["framework"],
                "update": row["update"], "gpus": int(row["gpus"]),
                "gpus_per_node": int(row["gpus_per_node"]),
                "batch_per_gpu": _batch(row["batch_per_gpu"]),
                "published_img_s": _num(row["img_s"]), "published_speedup": _num(row["speedup"]),
                "source_1gpu_img_s": one_gpu.get(key), "synthetic": "synthetic data" in notes,
                "row_model": row["model"], "row_device": row["device"]}
    metric = "img_s" if base["published_img_s"] is not None else "speedup"
    base.update(file=file, setup=setup.id, setup_profile=setup.profile or "none",
                loader=setup.loader, nccl_release=setup.nccl_version or setup.nccl_date,
                metric=metric,
                published=base[f"published_{metric}"],
                model=base["row_model"] if setup.model in (None, FROM_ROW) else setup.model,
                device=base["row_device"] if setup.device in (None, FROM_ROW) else setup.device)
    return base


def _batch(text: str) -> int | None:
    return int(text) if str(text).strip().isdigit() else None


def _configure(s: Setup, r: dict, framework: str | None, nccl: tuple[str | None, str]) -> dict:
    """The setup's options for row ``r`` under ``--framework framework`` and the NCCL override
    ``nccl`` = (release or None: the setup's own, time)."""
    from dgtraces.reference.frameworks import get_framework

    gpus = r["gpus"]
    gpn = min(r["gpus_per_node"], gpus)
    intra = s.intra or ""
    inter = intra if s.inter in (None, ONE_NODE) else s.inter
    servers = math.ceil(gpus / 2) if s.servers == GPU_PAIRS else int(s.servers)
    choice = (framework or "none").strip()
    if choice == "none":
        profile, why = None, "--framework none: the setup's options alone"
    elif choice == AUTO:
        profile = get_framework(s.profile)
        why = f"declared for setup {s.id} (scaling_mapping.yaml)"
    else:
        profile, why = get_framework(choice), f"--framework {choice} (forced for every row)"
    algo, algo_why = s.algorithm, "the setup's aggregation (scaling_mapping.yaml)"
    release, nccl_how = None, None
    if algo == NCCL:
        release, nccl_how = nccl[0], f"--nccl {nccl[0]} (forced for every row)"
        if release is None:
            model, nccl_how = nccl_model(s)
            release = model.key
        from dgtraces.comm.algorithm_default import default_algorithm

        c = default_algorithm(r["device"], [intra], [inter], [(gpus, gpn)])
        algo, algo_why = c.algorithm, c.why
    explicit = {"algorithm"} | ({"policy"} if s.policy else set()) | (
        {"bucket_bytes"} if s.bucket_mib is not None else set())
    return {"algorithm": algo, "algorithm_why": algo_why, "intra": intra, "inter": inter,
            "servers": servers, "gpus_per_node": gpn, "nics_per_node": s.nics_per_node,
            "policy_given": s.policy or "wfbp",
            "bucket_given": int(s.bucket_mib * MIB) if s.bucket_mib is not None
            else DEFAULT_BUCKET_BYTES,
            "profile": profile, "explicit": frozenset(explicit),
            "nccl": release, "nccl_time": nccl[1], "nccl_how": nccl_how,
            "framework_profile": "none" if profile is None else profile.key,
            "framework_why": why}


def _predict(r: dict, cfg: dict, rel: Release | str | None, overheads) -> dict:
    """One row predicted; ``rel``: the release opened once for every row (or the version as
    given when no such release exists: the traces are reconstructed then)."""
    from dgtraces.predict import calibrate
    from dgtraces.predict.overheads import Overheads, apply_overheads, validation_spec
    from dgtraces.reference.frameworks import apply_framework

    if r["batch_per_gpu"] is None:
        raise DgtracesError("the row states no batch per GPU", code=Code.BAD_INPUT)
    trace = resolve(r["model"], r["device"], r["batch_per_gpu"], release=rel,
                    h2d_link=None if r["synthetic"] else "pcie3", shape_only=True)
    policy = Policy(cfg["policy_given"], False, cfg["bucket_given"])
    cluster = Cluster(r["gpus"], cfg["gpus_per_node"], cfg["intra"], cfg["inter"],
                      cfg["algorithm"], cfg["servers"], release=rel or "latest",
                      nics_per_node=cfg["nics_per_node"], algorithm_why=cfg["algorithm_why"],
                      nccl=cfg["nccl"], nccl_time=cfg["nccl_time"])
    cluster, policy = apply_framework(cfg["profile"], cluster, policy, cfg["explicit"])
    img_1 = r["source_1gpu_img_s"]
    if img_1 is not None:
        trace = calibrate(trace, img_1, policy)
        how = f"--calibrate-img-s {img_1:g} (the table's 1-GPU figure)"
    elif trace.run_id and trace.run_id.startswith("shape-"):
        how = "uncalibrated shape-only roofline (no 1-GPU figure, no calibration rows)"
    else:
        how = "reconstruction fitted to calibration.csv (other sources' 1-GPU figures)"
    dag, _ = predict_trace(trace, cluster, policy)
    loader = "synthetic" if r["synthetic"] else r["loader"]
    usable, input_how = validation_spec(overheads or Overheads(), trace, loader)
    pred = apply_overheads(dag, trace, usable, loader=loader)
    b = pred.breakdown
    return {"pred_img_s": pred.throughput_img_s, "pred_speedup": pred.speedup_vs_1,
            "calibration": how, "trace_run_id": trace.run_id, "h2d_ms": trace.h2d_ms,
            "iter_ms": pred.iter_ms, "dag_iter_ms": dag.iter_ms,
            "messages": dag.breakdown["messages"], "policy": policy.name,  # as applied
            "bucket_bytes": dag.bucket_bytes, "cycle_ms": policy.cycle_ms,
            "blocking": cluster.shared_cpu, "comm_exposed_ms": dag.breakdown["comm_exposed"],
            "sync_ms": b.get("sync_ms", 0.0), "input_ms": b.get("input_ms", 0.0),
            "input_term": input_how or None}


def validate_published(release: Release | str | None = None, framework: str | None = AUTO,
                       overheads=None, *, setups: tuple[Setup, ...] | None = None,
                       on_step: Callable[[int], None] | None = None, nccl: str | None = None,
                       nccl_time: str = "run") -> PublishedValidation:
    """Predict every row of both shipped scaling tables (see module doc) with the traces of
    ``release`` (an open Release, or a version, default latest), the ``framework`` choice
    (``auto`` = each setup's declared profile, ``none``, or one profile for every row), the
    ``overheads`` terms (an ``Overheads``; None = none), the NCCL release ``nccl`` (None: each
    setup's own, docs/predictor-published.md R1-R5; a modelled release: every setup) at
    ``nccl_time`` and the mapping ``setups`` (default the shipped one). ``on_step(1)`` after
    each row (progress)."""
    import pandas as pd

    from dgtraces.comm.nccl import model
    from dgtraces.reference import rows as ref_rows
    from dgtraces.store.release import open_if_any

    if framework not in (None, "none", AUTO):
        from dgtraces.reference.frameworks import get_framework

        get_framework(framework, extra=(AUTO,))  # a bad name fails before any work
    forced = model(nccl, nccl_time)  # UNKNOWN_NCCL / BAD_INPUT before any work
    choice = (None if nccl is None else forced.version.key, nccl_time)
    rel = open_if_any(release)
    old = ref_rows(OLD_FILE)
    notes = _old_notes(old)
    one_gpu = {(r["source"], r["framework"], r["update"]): float(r["img_s"])
               for r in old if r["gpus"] == "1" and r["img_s"]}
    out, old_i = [], 0
    for file, row, setup in mapped_rows(load_mapping() if setups is None else setups):
        note = ""
        if file == OLD_FILE:
            note, old_i = notes[old_i], old_i + 1
        base: dict[str, Any] = _normalise(file, row, setup, note, one_gpu)
        out.append(base)
        if on_step:
            on_step(1)
        if not setup.scored:
            base.update(role="not representable", reason=setup.reason)
            continue
        try:
            cfg = _configure(setup, base, framework, choice)
            base.update({k: v for k, v in cfg.items() if k not in ("profile", "explicit")})
            base.update(_predict(base, cfg, rel, overheads))
        except DgtracesError as exc:
            base.update(role="skipped", reason=f"[{exc.code}] {exc.message}")
            continue
        base["predicted"] = base[f"pred_{base['metric']}"]
        if base["gpus"] == 1 and base["source_1gpu_img_s"] is not None:
            base.update(role="calibration", reason="1-GPU figure used by --calibrate-img-s "
                        "for its table's multi-GPU rows (not scored)")
        else:
            base.update(role="scored", reason=None)
    df = pd.DataFrame(out)
    for col in ("predicted", "pred_speedup"):  # absent when no row was predicted
        df[col] = pd.to_numeric(df[col], errors="coerce") if col in df else float("nan")
    df["error_pct"] = (df["predicted"] / pd.to_numeric(df["published"], errors="coerce")
                       - 1) * 100
    df["ape_pct"] = df["error_pct"].abs()
    label = (MAPPED_NCCL if nccl is None else f"--nccl {forced.version.key}") + \
        f", --nccl-time {nccl_time}"
    return PublishedValidation(_with_linear_baseline(df), framework or "none",
                               "none" if overheads is None else overheads.label, label)


def _with_linear_baseline(df: pd.DataFrame) -> pd.DataFrame:
    """Add the linear-scaling baseline (module doc), whether the predictor predicted linear
    scaling, and whether the row counts for item 4's targets (multi-GPU, a 1-GPU figure)."""
    import numpy as np
    import pandas as pd

    from .published_report import NEAR_LINEAR

    one = pd.to_numeric(df["source_1gpu_img_s"], errors="coerce")
    gpus = df["gpus"].astype(float)
    df["linear"] = np.where(df["metric"] == "speedup", gpus, gpus * one)
    df["linear_error_pct"] = (df["linear"] / pd.to_numeric(df["published"],
                                                           errors="coerce") - 1) * 100
    df["linear_ape_pct"] = df["linear_error_pct"].abs()
    ratio = df["pred_speedup"] / gpus
    multi = (df["gpus"] > 1) & ratio.notna()
    df["pred_linear"] = multi & (ratio >= 1 - NEAR_LINEAR)
    df["pred_exact_linear"] = multi & ((ratio - 1).abs() < 1e-6)
    df["target_row"] = (df["role"] == "scored") & (df["gpus"] > 1) & df["linear"].notna()
    return df


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
                      label=f"{src[:40]} ({part['metric'].iloc[0]})")
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
