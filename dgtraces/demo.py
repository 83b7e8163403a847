"""``dgtraces demo``: the project's main job on the shipped data, in well under a minute.

What the release holds (tables; rows per provenance and device), two questions a systems
researcher asks in SQL, a modelled ResNet-50 iteration on 8 V100s under the naive, wfbp and
mgwfbp policies with a Gantt chart of each, and the predictor's validation (parity) figure.
:func:`run_demo` writes every file into one folder and returns a :class:`DemoResult`;
nothing here prints (the CLI does, with a progress bar over :data:`STEPS`).
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from dgtraces.errors import Code

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from dgtraces.store.release import Release

STEPS = ("overview", "sql", "predict", "validate")

ROWS_BY_PROVENANCE_SQL = """\
SELECT 'runs' AS table_name, provenance, device, count(*) AS rows FROM runs GROUP BY ALL
UNION ALL
SELECT 'layer_timings', r.provenance, r.device, count(*)
FROM layer_timings t JOIN runs r USING (run_id) GROUP BY ALL
UNION ALL
SELECT 'iterations', provenance, device, count(*) FROM iterations GROUP BY ALL
ORDER BY table_name, provenance, device"""

# Q1: which layers send the most gradient bytes per iteration (what a fusion policy must move);
# ties (alexnet and alexnet-owt share their fc layers) broken by model and layer, so LIMIT
# keeps the same rows every run (#36 trial: the tied rows came in any order)
LARGEST_GRADIENTS_SQL = """\
SELECT model, layer, kind, grad_bytes, round(grad_bytes / 2^20, 2) AS grad_mib
FROM layers ORDER BY grad_bytes DESC, model, layer LIMIT 5"""

# Q2: communication per unit of backward compute, only where ONE run logged both per layer
# (the B-Caffe GoogLeNet logs on K80s: compute_us and comm_us of every layer, same iteration)
COMM_PER_COMPUTE_SQL = """\
SELECT r.run_id, r.model, r.device, r.batch_size,
       round(sum(t.comm_ms), 2) AS comm_ms, round(sum(t.bwd_ms), 2) AS bwd_ms,
       round(sum(t.comm_ms) / sum(t.bwd_ms), 3) AS comm_per_bwd
FROM layer_timings t JOIN runs r USING (run_id)
WHERE t.comm_ms IS NOT NULL AND t.bwd_ms IS NOT NULL
GROUP BY ALL ORDER BY r.run_id"""

# The prediction: ResNet-50, batch 64 per GPU, 2 nodes x 4 V100 (PCIe) over 10 GbE, with
# predict's defaults: the algorithm for the device (GPU: auto, NCCL's choice;
# algorithm_default), the framework profile the trace implies, the adopted overhead terms.
@dataclass(frozen=True)
class PredictSetup:
    model: str = "resnet50"
    device: str = "v100"
    batch_size: int = 64
    workers: int = 8
    gpus_per_node: int = 4
    intra: str = "pcie3"
    inter: str = "10gbe"
    algorithm: str | None = None  # None: predict's default for the device
    framework: str | None = None  # None: predict's default (the profile the run implies)
    overheads: str | None = None  # None: predict's default (the adopted overhead terms)


PREDICT = PredictSetup()
POLICIES = ("naive", "wfbp", "mgwfbp")


@dataclass
class DemoResult:
    """Everything the demo computed, and where each file went."""

    release: str
    out_dir: Path
    tables: dict[str, int]  # table -> rows
    rows_by_provenance: pd.DataFrame
    largest_gradients: pd.DataFrame
    comm_per_compute: pd.DataFrame
    predictions: pd.DataFrame  # one row per policy, modelled
    validation: dict  # the predictor's headline MAPE per provenance
    files: dict[str, Path] = field(default_factory=dict)  # what -> path
    queries: dict[str, str] = field(default_factory=dict)  # what -> SQL text


def _csv(df: pd.DataFrame, path: Path) -> Path:
    from dgtraces.io.files import atomic_write_bytes

    buf = io.StringIO()
    df.to_csv(buf, index=False)
    atomic_write_bytes(path, buf.getvalue().encode())
    return path


def run_demo(out_dir: str | Path = "dgtraces-demo", release: str | None = None,
             on_step: Callable[[str], None] | None = None) -> DemoResult:
    """Run the demo on ``release`` (default latest), writing files into ``out_dir``.

    ``on_step(name)`` is called as each of :data:`STEPS` starts.
    """
    from dgtraces.query.engine import connect
    from dgtraces.store import manifest as store
    from dgtraces.store.release import Release

    step = on_step or (lambda name: None)
    out = Path(out_dir)
    store.refuse_inside_data(out)
    out.mkdir(parents=True, exist_ok=True)
    version = store.latest() if release is None else store.norm_version(release)

    step("overview")
    rel = Release.open(version)  # the manifest read once for every step
    tables = {k: int(v["rows"]) for k, v in sorted(rel.entries.items())}
    missing = sorted({"layers", "runs", "layer_timings", "iterations"} - set(tables))
    if missing:
        from .errors import StoreError

        raise StoreError(f"release {version} lacks table(s) {', '.join(missing)} that the "
                         "demo queries; use --release 0.3.0 or later", code=Code.NOT_FOUND)
    files: dict[str, Path] = {}
    con = connect(rel)
    try:
        by_prov = con.sql(ROWS_BY_PROVENANCE_SQL).df()
        files["rows_by_provenance"] = _csv(by_prov, out / "rows_by_provenance.csv")
        step("sql")
        grads = con.sql(LARGEST_GRADIENTS_SQL).df()
        ratio = con.sql(COMM_PER_COMPUTE_SQL).df()
    finally:
        con.close()
    files["largest_gradients"] = _csv(grads, out / "largest_gradients.csv")
    files["comm_per_compute"] = _csv(ratio, out / "comm_per_compute.csv")

    step("predict")
    preds = _predict(out, rel, files)
    files["predictions"] = _csv(preds, out / "predict_resnet50_8xv100.csv")

    step("validate")
    from dgtraces.evaluation.validation import parity_plot, validate
    from dgtraces.predict.overheads import DEFAULT, Overheads

    val = validate(rel, Overheads.parse(DEFAULT))  # with predict's default terms
    parity_plot(val, out / "validation_parity.png")
    files["validation_parity"] = out / "validation_parity.png"
    return DemoResult(version, out, tables, by_prov, grads, ratio, preds, val.headline(),
                      files, {"rows_by_provenance": ROWS_BY_PROVENANCE_SQL,
                              "largest_gradients": LARGEST_GRADIENTS_SQL,
                              "comm_per_compute": COMM_PER_COMPUTE_SQL})


def _predict(out: Path, rel: Release, files: dict[str, Path]) -> pd.DataFrame:
    import pandas as pd

    from .predict import Cluster, Policy, predict_trace, resolve
    from .predict.overheads import DEFAULT, Overheads, apply_overheads
    from .predict.timeline import write_gantt
    from .predict.trace import run_row
    from .reference.frameworks import apply_framework, choose_framework

    p = PREDICT
    from .comm.algorithm_default import default_algorithm

    trace = resolve(p.model, p.device, p.batch_size, release=rel)
    choice = default_algorithm(trace.device, [p.intra], [p.inter],
                               [(p.workers, p.gpus_per_node)], given=p.algorithm)
    cluster = Cluster(p.workers, p.gpus_per_node, p.intra, p.inter, choice.algorithm,
                      release=rel, algorithm_why=choice.why)  # its digest: no re-read
    # predict's defaults: the profile the trace's run implies, the adopted overhead terms
    chosen = choose_framework(p.framework, run_row(trace.run_id, rel))
    spec = Overheads.parse(p.overheads or DEFAULT)
    rows = []
    for name in POLICIES:  # each policy given explicitly: it wins over a profile's
        cl, pol = apply_framework(chosen.profile, cluster, Policy(name),
                                  frozenset({"policy", "algorithm"}))
        dag, sched = predict_trace(trace, cl, pol)
        pred = apply_overheads(dag, trace, spec)
        gantt = out / f"gantt_resnet50_8xv100_{name}.png"
        files[f"gantt_{name}"] = write_gantt(gantt, sched, dag)
        rows.append({"policy": name, "algorithm": cl.algorithm, "iter_ms": pred.iter_ms,
                     "throughput_img_s": pred.throughput_img_s,
                     "efficiency": pred.efficiency,
                     "comm_exposed_ms": pred.breakdown["comm_exposed"],
                     "sync_ms": pred.breakdown.get("sync_ms", 0.0), "overheads": spec.label,
                     "framework": chosen.label, "dag_iter_ms": dag.iter_ms,
                     "provenance": pred.provenance, "trace_provenance": pred.trace_provenance,
                     "trace_run_id": pred.trace_run_id})
    return pd.DataFrame(rows)
