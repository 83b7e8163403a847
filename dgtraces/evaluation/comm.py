"""``validate-comm``: predict every row of nccl-tests logs; per-size error, per-log MAPE for
sizes >= 1 MiB and below, and the targets of issue #34 item 4.

Evaluation code (not a runtime path of the predictor). The rule is pre-registered in
``docs/collectives.md``: measured = the out-of-place time; error ``|pred - meas| / meas``; per
log the MAPE over sizes >= 1 MiB and over sizes < 1 MiB; the targets hold over the scored
reference logs (:data:`.comm_logs.REFERENCE_LOGS`): median >= 1 MiB MAPE <= 10%, none above
25%, median < 1 MiB MAPE <= 30%. Logs that are not scored are reported with the reason.

Reference logs: the shipped CC BY 3.0 sweeps and, in a source checkout with a
``../shared/reference/nccl-tests`` folder beside it, the unlicensed ones too (read there,
never shipped; only as pinned: :data:`.comm_logs.POINT_FILES`).
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from dgtraces.errors import Code, DgtracesError
from dgtraces.evaluation.comm_logs import (
    MIB,
    REFERENCE_LOGS,
    SHARED,
    SHIPPED,
    LogCluster,
    reference_points,
)

__all__ = ["LogCluster", "REFERENCE_LOGS", "SHARED", "SHIPPED", "validate", "write_plot"]

# (name, statistic over the scored logs, limit): issue #34 item 4
TARGETS = (("median MAPE >= 1 MiB", "median_large", 0.10),
           ("max MAPE >= 1 MiB", "max_large", 0.25),
           ("median MAPE < 1 MiB", "median_small", 0.30))


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
    inter: str
    nccl: str | None
    points: list[PointError]
    nodes: int = 1
    scored: bool = True
    why: str = ""

    def _mape(self, lo: int, hi: float) -> float | None:
        errs = [abs(p.error) for p in self.points if lo <= p.message_bytes < hi]
        return sum(errs) / len(errs) if errs else None

    @property
    def mape_all(self) -> float:
        return self._mape(0, float("inf")) or 0.0

    @property
    def mape_large(self) -> float | None:
        return self._mape(MIB, float("inf"))

    @property
    def mape_small(self) -> float | None:
        return self._mape(0, MIB)

    @property
    def n_large(self) -> int:
        return sum(p.message_bytes >= MIB for p in self.points)

    @property
    def n_small(self) -> int:
        return len(self.points) - self.n_large


@dataclass(frozen=True)
class Target:
    """A target's statistic over the scored logs that have sizes in its range (``logs`` of
    the ``of`` scored logs expected; None: none has such sizes)."""

    name: str
    value: float | None
    limit: float
    logs: int = 0
    of: int = 0

    @property
    def met(self) -> bool:
        return self.value is not None and self.value <= self.limit


@dataclass
class CommReport:
    algorithm: str
    nccl_time: str
    logs: list[LogResult]
    unscored: list[tuple[str, str]] = field(default_factory=list)  # (log_id, why)
    notes: list[str] = field(default_factory=list)
    expected: int | None = None  # scored logs the targets are meant over (None: those given)

    def _scored(self, attr: str) -> list[float]:
        return [v for x in self.logs if x.scored and (v := getattr(x, attr)) is not None]

    @property
    def median_large(self) -> float | None:
        vals = self._scored("mape_large")
        return statistics.median(vals) if vals else None

    @property
    def max_large(self) -> float | None:
        vals = self._scored("mape_large")
        return max(vals) if vals else None

    @property
    def median_small(self) -> float | None:
        vals = self._scored("mape_small")
        return statistics.median(vals) if vals else None

    def targets(self) -> list[Target]:
        """Each target over the scored logs with sizes in its range, of :attr:`expected`
        (the reference logs scored when all were read; absent ones are not counted)."""
        of = self.expected if self.expected is not None else sum(x.scored for x in self.logs)
        return [Target(name, getattr(self, attr), limit,
                       len(self._scored("mape_small" if attr.endswith("small")
                                        else "mape_large")), of)
                for name, attr, limit in TARGETS]

    def to_dict(self) -> dict:
        return {"algorithm": self.algorithm, "nccl_time": self.nccl_time,
                "median_mape_large": self.median_large, "max_mape_large": self.max_large,
                "median_mape_small": self.median_small,
                "targets": [dict(asdict(t), met=t.met) for t in self.targets()],
                "unscored": [{"log_id": k, "why": w} for k, w in self.unscored],
                "notes": self.notes,
                "logs": [dict(log_id=x.log_id, source=x.source, collective=x.collective,
                              workers=x.workers, nodes=x.nodes, intra=x.intra, inter=x.inter,
                              nccl=x.nccl,
                              scored=x.scored, why=x.why, mape_all=x.mape_all,
                              mape_large=x.mape_large, mape_small=x.mape_small,
                              points=[dict(asdict(p), error=p.error) for p in x.points])
                         for x in self.logs]}


def user_log(path: str, given: LogCluster
             ) -> list[tuple[str, LogCluster, list[tuple[int, float]], str, str]]:
    """A user's nccl-tests log: per block (one run each; several sweeps in one file are
    several blocks), its id, cluster, points and what was read from the log. The options
    win; what they leave open comes from the log: ranks and hosts from its rank lines, GPUs
    per process from its header's ``nGpus`` (else 1), the NCCL release from a printed
    ``NCCL version x.y.z`` line (the newest modelled release not newer, as the reference
    logs' rule; else the newest)."""
    from dgtraces.importers.nccl_tests import collective_of, read_log

    log = read_log(path)
    blocks = [b for b in log.blocks if len(b)]
    if not blocks:
        raise DgtracesError(f"{path}: no size/time table lines (empty or truncated log)",
                            code=Code.EMPTY)
    coll = given.collective or collective_of(log, Path(path), None, given.workers).collective
    out = []
    for k, block in enumerate(blocks, start=1):
        workers = given.workers or len(block.ranks)
        if not workers:
            raise DgtracesError(f"{path}: no rank lines; give --workers", code=Code.BAD_FILE)
        hosts = max(1, len({h for _, h, _ in block.ranks}))
        gpp, nccl, read = _stated(block, given)
        cluster = replace(given, workers=workers,
                          gpus_per_node=given.gpus_per_node or max(1, workers // hosts),
                          collective=coll, gpus_per_process=gpp, nccl=nccl)
        several = len(blocks) > 1
        out.append((Path(path).name + (f"#{k}" if several else ""), cluster,
                    list(zip(block.sizes, block.times_us[0], strict=True)),
                    path + (f" (block {k}, line {block.start})" if several else ""), read))
    return out


def _stated(block, given: LogCluster) -> tuple[int, str | None, str]:
    """GPUs per process and NCCL release of a log's block (the options' when given, else
    what the block states) and what was read from it, as text."""
    from dgtraces.comm.nccl_versions import version_for_release

    read = []
    gpp = given.gpus_per_process
    if block.gpus_per_process is not None:
        used = gpp is None
        gpp = block.gpus_per_process if used else gpp
        read.append(f"nGpus {block.gpus_per_process} (line {block.header_line}) -> "
                    + (f"{gpp} GPUs per process" if used else "not used: --gpus-per-process "
                       "given"))
    nccl = given.nccl
    if block.nccl_version is not None:
        line, printed = block.nccl_version
        if nccl is None:
            nccl = version_for_release(printed).key
            read.append(f"NCCL version {printed} (line {line}) -> {nccl} (the newest modelled "
                        "release not newer)")
        else:
            read.append(f"NCCL version {printed} (line {line}) not used: --nccl given")
    elif nccl is None:
        read.append("no NCCL version line -> the newest modelled release")
    return gpp or 1, nccl, "; ".join(read)


def _evaluate(log_id: str, source: str, c: LogCluster, pts, algorithm: str,
              nccl: str | None, nccl_time: str, sharp: bool = True) -> LogResult:
    from dgtraces.comm.collective_time import predict_collective
    from dgtraces.comm.nccl import MODEL_NAMES
    from dgtraces.comm.nccl_versions import version

    algo = c.algorithm if algorithm == "auto" else algorithm
    if nccl is not None and not version(nccl).has(MODEL_NAMES.get(algo, "ring")):
        algo = "auto"  # an override release without the log's forced algorithm: its choice
    if not sharp:
        c = replace(c, inter=c.inter.replace(",sharp", ""))
    res = predict_collective(c.collective or "allreduce", [n for n, _ in pts],
                             workers=int(c.workers or 1), gpus_per_node=int(c.gpus_per_node or 1),
                             intra=c.intra, inter=c.inter, nics_per_node=c.nics_per_node,
                             algorithm=algo, release=None, nccl=nccl or c.nccl,
                             nccl_time=nccl_time, gpus_per_process=c.gpus_per_process or 1)
    errs = [PointError(n, meas, r.time_us, r.algorithm, r.protocol)
            for (n, meas), r in zip(pts, res.rows, strict=True)]
    return LogResult(log_id, source, res.collective, res.workers, c.intra, c.inter, res.nccl,
                     errs, res.nodes)


def validate(paths=(), given: LogCluster | None = None, *, algorithm: str = "auto",
             nccl: str | None = None, nccl_time: str = "run", sharp: bool = True
             ) -> CommReport:
    """Predict every row of the given logs (or of the reference logs) with ``algorithm``;
    ``nccl`` overrides each log's declared release (None: as declared; a forced algorithm
    the override lacks becomes ``auto``); ``sharp=False`` ignores the logs' SHARP (issue
    #25's model had no CollNet)."""
    results: list[LogResult] = []
    unscored: list[tuple[str, str]] = []
    notes: list[str] = []
    if paths:
        assert given is not None
        for path in paths:
            for log_id, cluster, pts, src, read in user_log(path, given):
                results.append(_evaluate(log_id, src, cluster, pts, algorithm, nccl,
                                         nccl_time, sharp))
                notes.append(f"{log_id}: read from the log: {read}")
    else:
        logs, notes = reference_points()
        for log_id, ref in REFERENCE_LOGS.items():
            if log_id not in logs:
                continue
            src, pts = logs[log_id]
            if ref.cluster is None:
                unscored.append((log_id, ref.why))
                continue
            res = _evaluate(log_id, src, ref.cluster, pts, algorithm, nccl, nccl_time, sharp)
            res.scored, res.why = ref.scored, ref.why
            results.append(res)
            if not ref.scored:
                unscored.append((log_id, ref.why))
    expected = None if paths else sum(r.scored for r in REFERENCE_LOGS.values())
    return CommReport(algorithm, nccl_time, results, unscored, notes, expected)


def write_plot(report: CommReport, path: str) -> None:
    """Time vs size, measured (dots) and predicted (line), log-log, one panel per log."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = max(1, len(report.logs))
    cols = min(4, n)
    rows = -(-n // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.4 * cols, 3.6 * rows), squeeze=False)
    for ax, log in zip(axes.flat, report.logs, strict=False):
        x = [p.message_bytes for p in log.points]
        ax.loglog(x, [p.measured_us for p in log.points], "o", ms=3, label="measured")
        ax.loglog(x, [p.predicted_us for p in log.points], "-",
                  label=f"NCCL {log.nccl or '-'} {report.nccl_time}")
        ax.axvline(MIB, color="grey", lw=0.5, ls=":")
        mark = "" if log.scored else " (not scored)"
        ax.set_title(f"{log.log_id}{mark}\nMAPE {_pct(log.mape_large)} >= 1 MiB, "
                     f"{_pct(log.mape_small)} < 1 MiB", fontsize=7)
        ax.set_xlabel("message bytes", fontsize=7)
        ax.set_ylabel("time (us)", fontsize=7)
        ax.legend(fontsize=6)
    for ax in list(axes.flat)[len(report.logs):]:
        ax.axis("off")
    fig.suptitle("nccl-tests all-reduce: measured vs modelled time", fontsize=10)
    fig.tight_layout()
    from dgtraces.io.files import atomic_file

    with atomic_file(path) as tmp:
        fig.savefig(tmp, format="png", dpi=100)
    plt.close(fig)


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.0%}"
