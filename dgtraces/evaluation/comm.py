"""``validate-comm``: predict every row of nccl-tests logs, per-size error and per-log MAPE.

Evaluation code (not a runtime path of the predictor). The evaluation rule is pre-registered
in ``docs/collectives.md``: measured = the out-of-place time; error ``|pred - meas| / meas``;
per log MAPE over all sizes and over sizes >= 1 MiB; headline = median over logs.

Reference logs: the shipped CC BY 3.0 sweeps (``dgtraces/reference/nccl-tests``) and, in a
source checkout with a ``../shared/reference/nccl-tests`` folder beside it, its unlicensed
ones too (read there, never shipped; only as pinned: :data:`SHARED_POINTS_SHA256`). The
cluster of each reference log is declared once in :data:`REFERENCE_CLUSTERS`, from what its
``logs.csv`` row states or infers.
"""

from __future__ import annotations

import csv
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path

from dgtraces.errors import Code, DgtracesError

MIB = 1 << 20
SHIPPED = Path(__file__).resolve().parents[1] / "reference" / "nccl-tests"
SHARED_NAME = "shared/reference/nccl-tests"  # beside a source checkout (developers only)


def shared_folder(package_parent: Path) -> Path | None:
    """``../shared/reference/nccl-tests`` of a source checkout (``package_parent`` holds a
    pyproject.toml), else None: an installed package has no such neighbour (beside a wheel
    it named a path inside the virtual environment; #36 trial)."""
    if not (package_parent / "pyproject.toml").is_file():
        return None
    return package_parent.parent / SHARED_NAME


SHARED = shared_folder(Path(__file__).resolve().parents[2])
# The developer-local, unlicensed points (never shipped) count only as they were when the
# evaluation was registered (docs/collectives.md): this sha256, at most SHARED_MAX_BYTES. Any
# other file there (edited, swapped, or beside an installed package) is not evaluated (#36).
SHARED_POINTS_SHA256 = "3333f67446692c64ee4904f5d819e82a880c16064665e22796943c86300419db"
SHARED_MAX_BYTES = 1 << 20


@dataclass(frozen=True)
class LogCluster:
    """The cluster a log ran on (``None``: from the log's rank lines)."""

    workers: int | None
    gpus_per_node: int | None
    intra: str
    inter: str = "ib-hdr"
    nics_per_node: int = 1
    collective: str | None = None


# log_id -> cluster (logs.csv: ranks, gpus_per_node, intra_link); one node each
REFERENCE_CLUSTERS: dict[str, LogCluster] = {
    "konnase_dgx1like_v100x8": LogCluster(8, 8, "nvlink2", collective="allreduce"),
    **{f"sheffield_bessemer_v100pcie_x4_{v}": LogCluster(4, 4, "pcie3",
                                                          collective="allreduce")
       for v in ("nccl283_cu111", "nccl283_cu110", "nccl242_cu101")},
    "sheffield_stanage_a100sxm4_x4": LogCluster(4, 4, "nvlink3", collective="allreduce"),
}


@dataclass(frozen=True)
class PointError:
    message_bytes: int
    measured_us: float
    predicted_us: float
    algorithm: str
    protocol: str

    @property
    def error(self) -> float:
        return (self.predicted_us - self.measured_us) / self.measured_us


@dataclass
class LogResult:
    log_id: str
    source: str
    collective: str
    workers: int
    intra: str
    points: list[PointError]

    def _mape(self, least: int) -> float | None:
        errs = [abs(p.error) for p in self.points if p.message_bytes >= least]
        return sum(errs) / len(errs) if errs else None

    @property
    def mape_all(self) -> float:
        return self._mape(0) or 0.0

    @property
    def mape_1mib(self) -> float | None:
        return self._mape(MIB)

    @property
    def n_all(self) -> int:
        return len(self.points)

    @property
    def n_1mib(self) -> int:
        return sum(p.message_bytes >= MIB for p in self.points)


@dataclass
class CommReport:
    algorithm: str
    logs: list[LogResult]
    notes: list[str] = field(default_factory=list)

    @property
    def median_all(self) -> float | None:
        return statistics.median(x.mape_all for x in self.logs) if self.logs else None

    @property
    def median_1mib(self) -> float | None:
        vals = [x.mape_1mib for x in self.logs if x.mape_1mib is not None]
        return statistics.median(vals) if vals else None

    def to_dict(self) -> dict:
        return {"algorithm": self.algorithm, "median_mape_all": self.median_all,
                "median_mape_1mib": self.median_1mib, "notes": self.notes,
                "logs": [dict(log_id=x.log_id, source=x.source, collective=x.collective,
                              workers=x.workers, intra=x.intra, mape_all=x.mape_all,
                              mape_1mib=x.mape_1mib,
                              points=[dict(asdict(p), error=p.error) for p in x.points])
                         for x in self.logs]}


def _reference_points(text: str) -> dict[str, list[tuple[int, float]]]:
    import io

    out: dict[str, list[tuple[int, float]]] = {}
    for r in csv.DictReader(io.StringIO(text, newline="")):
        out.setdefault(r["log_id"], []).append((int(r["size_B"]), float(r["oop_time_us"])))
    return out


def _shared_points() -> tuple[str | None, str | None]:
    """(text of the developer-local points, None), or (None, why they are not evaluated):
    absent, larger than SHARED_MAX_BYTES, or not the pinned bytes (read once, then hashed)."""
    import hashlib

    if SHARED is None:
        return None, ("the unlicensed konnase log is not shipped: it is evaluated only in a "
                      f"source checkout with ../{SHARED_NAME} beside it")
    path = SHARED / "allreduce_points.csv"
    if not path.is_file():
        return None, f"{SHARED} absent: the unlicensed konnase log is not evaluated"
    with open(path, "rb") as fh:
        data = fh.read(SHARED_MAX_BYTES + 1)
    if hashlib.sha256(data).hexdigest() != SHARED_POINTS_SHA256:
        return None, (f"{path} is not the copy the evaluation was registered with (sha256 "
                      f"{SHARED_POINTS_SHA256[:12]}...): the konnase log is not evaluated")
    return data.decode("utf-8"), None


def reference_logs() -> tuple[dict[str, tuple[str, list[tuple[int, float]]]], list[str]]:
    """log_id -> (source, [(bytes, measured us)]) of the shipped logs plus the shared ones."""
    shipped = (SHIPPED / "allreduce_points.csv").read_text(encoding="utf-8")
    logs = {k: (f"shipped {SHIPPED.name}/allreduce_points.csv", v)
            for k, v in _reference_points(shipped).items()}
    notes = []
    text, why = _shared_points()
    if text is not None:
        for k, v in _reference_points(text).items():
            logs.setdefault(k, (f"{SHARED}/allreduce_points.csv (not shipped)", v))
    else:
        notes.append(str(why))
    return logs, notes


def user_log(path: str, given: LogCluster) -> tuple[LogCluster, list[tuple[int, float]], str]:
    """A user's nccl-tests log: its cluster (options, else its rank lines) and points."""
    from dgtraces.importers import read_text
    from dgtraces.importers.nccl_tests import collective_of, parse

    text, _ = read_text(Path(path))
    ranks, points, _ = parse(text, path)
    if not points:
        raise DgtracesError(f"{path}: no size/time table lines (empty or truncated log)",
                            code=Code.EMPTY)
    workers = given.workers or len(ranks)
    if not workers:
        raise DgtracesError(f"{path}: no rank lines; give --workers", code=Code.BAD_FILE)
    hosts = max(1, len({h for _, h, _ in ranks}))
    coll = given.collective or collective_of(text, Path(path), None, workers, points).collective
    cluster = LogCluster(workers, given.gpus_per_node or max(1, workers // hosts), given.intra,
                         given.inter, given.nics_per_node, coll)
    return cluster, [(p.size, p.times_us[0]) for p in points], path


def _evaluate(log_id: str, source: str, c: LogCluster, pts, algorithm: str) -> LogResult:
    from dgtraces.comm.collective_time import predict_collective

    res = predict_collective(c.collective or "allreduce", [n for n, _ in pts],
                             workers=int(c.workers or 1), gpus_per_node=int(c.gpus_per_node or 1),
                             intra=c.intra, inter=c.inter, nics_per_node=c.nics_per_node,
                             algorithm=algorithm, release=None)
    errs = [PointError(n, meas, r.time_us, r.algorithm, r.protocol)
            for (n, meas), r in zip(pts, res.rows, strict=True)]
    return LogResult(log_id, source, res.collective, res.workers, c.intra, errs)


def validate(paths=(), given: LogCluster | None = None, *, algorithm: str = "auto"
             ) -> CommReport:
    """Predict every row of the given logs (or of the reference logs) with ``algorithm``."""
    results: list[LogResult] = []
    notes: list[str] = []
    if paths:
        assert given is not None
        for path in paths:
            cluster, pts, src = user_log(path, given)
            results.append(_evaluate(Path(path).name, src, cluster, pts, algorithm))
    else:
        logs, notes = reference_logs()
        for log_id, (src, pts) in logs.items():
            results.append(_evaluate(log_id, src, REFERENCE_CLUSTERS[log_id], pts, algorithm))
    return CommReport(algorithm, results, notes)


def write_plot(report: CommReport, path: str) -> None:
    """Time vs size, measured (dots) and predicted (line), log-log, one panel per log."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = max(1, len(report.logs))
    cols = min(3, n)
    rows = -(-n // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.5 * cols, 3.6 * rows), squeeze=False)
    for ax, log in zip(axes.flat, report.logs, strict=False):
        x = [p.message_bytes for p in log.points]
        ax.loglog(x, [p.measured_us for p in log.points], "o", ms=3, label="measured")
        ax.loglog(x, [p.predicted_us for p in log.points], "-", label=f"{report.algorithm}")
        ax.set_title(f"{log.log_id}\nMAPE {log.mape_all:.0%} all, "
                     + ("n/a" if log.mape_1mib is None else f"{log.mape_1mib:.0%}")
                     + " >= 1 MiB", fontsize=8)
        ax.set_xlabel("message bytes")
        ax.set_ylabel("time (us)")
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(report.logs):]:
        ax.axis("off")
    fig.suptitle("nccl-tests: measured vs modelled collective time", fontsize=10)
    fig.tight_layout()
    from dgtraces.io.files import atomic_file

    with atomic_file(path) as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    plt.close(fig)
