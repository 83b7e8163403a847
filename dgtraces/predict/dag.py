"""The reference predictor: an explicit task DAG per iteration, scheduled by longest path.

Tasks of one worker: ``io`` (read + decode of the batch), ``h2d`` (host-to-device copy),
``fwd/<layer>`` in order, ``bwd/<layer>`` in reverse order (one compute stream), the
messages ``comm/m<k>`` of the policy (one communication stream shared by the collective),
and ``update``. Edges: the compute chain; message k after the backward of its last gradient
and after message k-1; update after the backward pass and the last message. Without io
overlap, ``h2d`` waits for ``io``; with it, ``io`` prefetches the next batch in parallel and
the iteration ends when both the update and the prefetch are done.

Workers are homogeneous and the collective synchronises them, so every worker has the same
schedule; the DAG of worker 0 is simulated and the others are copies (timelines show all).
The iteration time is the longest path; the critical path follows, from the last task
back, the predecessor that finished last.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import asdict, dataclass, field, replace

from ..comm.collectives import CommCost
from ..values import finite_results
from .captions import kind_of, validation_note
from .cluster import Cluster, Policy
from .policies import Message, messages
from .policy_registry import Grouping, grouping
from .trace import Trace


@dataclass(frozen=True)
class Task:
    id: str
    kind: str  # io | h2d | fwd | bwd | comm | update
    stream: str  # compute | io | comm
    start_ms: float
    end_ms: float
    deps: tuple[str, ...] = ()  # ids of the tasks it waits for (the DAG's edges)


@dataclass(frozen=True)
class Schedule:
    """One simulated iteration: tasks with times, the messages, and the critical path."""

    tasks: tuple[Task, ...]
    messages: tuple[Message, ...]
    iter_ms: float
    critical_path: tuple[str, ...]
    breakdown: dict
    cost: CommCost


class _Dag:
    def __init__(self) -> None:
        self.tasks: dict[str, tuple[str, str, float, tuple[str, ...]]] = {}
        self.end: dict[str, float] = {}
        self.start: dict[str, float] = {}
        self.order: dict[str, int] = {}

    def add(self, tid: str, kind: str, stream: str, dur: float, deps=(),
            not_before: float = 0.0) -> str:
        deps = tuple(d for d in deps if d is not None)
        start = max(max((self.end[d] for d in deps), default=0.0), not_before)
        self.tasks[tid] = (kind, stream, dur, deps)
        self.order[tid] = len(self.order)
        self.start[tid], self.end[tid] = start, start + dur
        return tid

    def critical_path(self, sink: str) -> list[str]:
        path = [sink]
        while self.tasks[path[-1]][3]:
            deps = self.tasks[path[-1]][3]
            path.append(max(deps, key=lambda d: (self.end[d], -self.order[d])))
        return path[::-1]


# Schedules already simulated, most recent last (issue #36: the evaluations and sweeps ask
# for the same trace, cost, policy and worker count again and again; 1,868 calls, 400
# distinct, in one evaluate_terms). Everything simulate() reads is in the key; a key that
# cannot be hashed is simulated each time.
_SCHEDULES: OrderedDict[tuple, Schedule] = OrderedDict()
SCHEDULES_KEPT = 1024


def simulate(trace: Trace, cluster: Cluster, policy: Policy) -> Schedule:
    """Schedule one iteration of ``trace`` on ``cluster`` under ``policy``.

    A repeated call returns the kept schedule (frozen) with a breakdown dict of its own."""
    cost = cluster.comm_cost()
    shared = cluster.shared_cpu and bool(cost.phases)
    key = (trace, cost, cluster.workers, shared, policy)
    try:
        sched = _SCHEDULES.get(key)
    except TypeError:  # an unhashable field (a list in a hand-built trace)
        return _simulate(trace, cluster, policy, cost, shared)
    if sched is None:
        sched = _SCHEDULES[key] = _simulate(trace, cluster, policy, cost, shared)
        if len(_SCHEDULES) > SCHEDULES_KEPT:
            _SCHEDULES.popitem(last=False)
    else:
        _SCHEDULES.move_to_end(key)
    return replace(sched, breakdown=dict(sched.breakdown))


def _simulate(trace: Trace, cluster: Cluster, policy: Policy, cost: CommCost,
              shared: bool) -> Schedule:
    g = _Dag()
    io = g.add("io", "io", "io", trace.io_ms)
    prev = g.add("h2d", "h2d", "compute", trace.h2d_ms, () if policy.io_overlap else (io,))
    for name, f in zip(trace.layers, trace.fwd_ms, strict=True):
        prev = g.add(f"fwd/{name}", "fwd", "compute", f, (prev,))
    t = bwd_start = g.end[prev]
    grads = []  # (name, bytes, nominal ready time) in backward order
    for name, b, nbytes in zip(reversed(trace.layers), reversed(trace.bwd_ms),
                               reversed(trace.grad_bytes), strict=True):
        t += b
        if nbytes > 0:
            grads.append((name, nbytes, t))
    bwd_end = t  # without interleaved communication
    msgs = messages(policy, [n for n, _, _ in grads], [b for _, b, _ in grads],
                    [r for _, _, r in grads], bwd_end, cost, shared=shared,
                    bwd_start=bwd_start)
    after = grouping(policy.name) is Grouping.AFTER_BACKWARD
    closing = {} if after else {m.layers[-1]: m for m in msgs}
    task_of, last_msg = {}, None
    for name, b in zip(reversed(trace.layers), reversed(trace.bwd_ms), strict=True):
        prev = task_of[name] = g.add(f"bwd/{name}", "bwd", "compute", b, (prev,))
        if shared and name in closing:  # the collective takes this worker's core
            m = closing[name]
            prev = last_msg = g.add(m.task_id, "comm", "comm", cost.time_ms(m.nbytes), (prev,))
    bwd_last = prev
    for m in msgs:
        if shared and not after:
            continue
        ready_dep = bwd_last if after else task_of[m.layers[-1]]
        # a fusion cycle sends at the cycle's end; one worker sends nothing, so it never
        # waits for a cycle (Horovod skips the all-reduce when size() == 1)
        last_msg = g.add(m.task_id, "comm", "comm", cost.time_ms(m.nbytes),
                         (ready_dep, last_msg), not_before=m.ready_ms
                         if policy.cycle_ms and cluster.workers > 1 else 0.0)
        if shared:
            bwd_last = last_msg
    update = g.add("update", "update", "compute", trace.update_ms, (bwd_last, last_msg))
    sinks = [update, io] if policy.io_overlap else [update]
    sink = max(sinks, key=lambda t: (g.end[t], g.order[t]))
    comm_total = sum(g.end[m.task_id] - g.start[m.task_id] for m in msgs)
    breakdown = {
        "io": trace.io_ms,
        "io_exposed": trace.io_ms if not policy.io_overlap
        else max(0.0, g.end[io] - g.end[update]),
        "h2d": trace.h2d_ms,
        "fwd": float(sum(trace.fwd_ms)),
        "bwd": float(sum(trace.bwd_ms)),
        "comm_total": comm_total,
        "comm_exposed": max(0.0, g.start[update] - bwd_end),
        "update": trace.update_ms,
        "messages": len(msgs),
    }
    tasks = tuple(Task(tid, kind, stream, g.start[tid], g.end[tid], deps)
                  for tid, (kind, stream, _, deps) in g.tasks.items())
    return Schedule(tasks, tuple(msgs), g.end[sink], tuple(g.critical_path(sink)), breakdown,
                    cost)


@dataclass(frozen=True)
class Prediction:
    """A modelled iteration time with its breakdown and the provenance of every input."""

    model: str
    batch_size: int
    workers: int
    policy: str
    io_overlap: bool
    iter_ms: float
    throughput_img_s: float
    speedup_vs_1: float
    efficiency: float
    breakdown: dict
    critical_path: tuple[str, ...]
    cluster: dict
    trace_provenance: str
    trace_source: str
    trace_run_id: str | None
    trace_device: str | None
    provenance: str = "modelled"
    method: str = "dgtraces.predict DAG longest path (Shi, Wang, Chu, Li 2018)"
    notes: tuple[str, ...] = field(default_factory=tuple)
    package_version: str = ""
    dataset_release: str | None = None  # release whose traces / comm fits were read
    bucket_bytes: int | None = None  # bucketed policy only
    framework: dict | None = None  # the --framework profile applied (frameworks.py)
    overheads: dict = field(default_factory=dict)  # --overheads terms (overheads.py)
    dataset_digest: str | None = None  # manifest digest of dataset_release (cite it)
    inputs: dict = field(default_factory=dict)  # every input that shaped the number

    def to_dict(self) -> dict:
        out = asdict(self)
        out["critical_path"] = list(self.critical_path)
        out["notes"] = list(self.notes)
        return out


def predict_trace(trace: Trace, cluster: Cluster, policy: Policy,
                  notes: tuple[str, ...] = ()) -> tuple[Prediction, Schedule]:
    """Predict from a resolved Trace; returns the Prediction and its Schedule."""
    sched = simulate(trace, cluster, policy)
    single = sched if cluster.workers == 1 else simulate(trace, cluster.with_workers(1), policy)
    finite_results("modelled iteration", {"iter_ms": sched.iter_ms, "iter_ms (1 worker)":
                                          single.iter_ms, **{k: v for k, v in
                                                            sched.breakdown.items()
                                                            if isinstance(v, float)}})
    speedup = cluster.workers * single.iter_ms / sched.iter_ms if sched.iter_ms > 0 else 1.0
    throughput = cluster.workers * trace.batch_size * 1000.0 / sched.iter_ms \
        if sched.iter_ms > 0 else float("inf")
    if trace.provenance == "reconstructed" and "on the fly" in trace.source:
        notes = notes + ("no stored trace matched; the trace was reconstructed on the fly",)
    described = cluster.describe()
    if cluster.workers > 1:  # the measured signed error of the matching validation
        notes = notes + (validation_note(kind_of(trace.device), "none", described),)
    spare = cluster.workers % cluster.gpus_per_node
    if spare and cluster.workers > cluster.gpus_per_node:
        notes = notes + (f"{cluster.workers} workers do not fill nodes of "
                         f"{cluster.gpus_per_node}: {cluster.nodes} nodes, the last with "
                         f"{spare} worker{'s' if spare != 1 else ''}",)
    pred = Prediction(trace.model, trace.batch_size, cluster.workers, policy.name,
                      policy.io_overlap, sched.iter_ms, throughput, speedup,
                      speedup / cluster.workers, dict(sched.breakdown), sched.critical_path,
                      described, trace.provenance, trace.source, trace.run_id,
                      trace.device, notes=tuple(notes), **reproducibility(cluster, policy))
    return pred, sched


def reproducibility(cluster: Cluster, policy: Policy) -> dict:
    """What a prediction needs to be reproduced, beside its trace and link figures: the
    package version, the dataset release read with its manifest digest, and the bucket size
    (bucketed policy)."""
    from dgtraces._version import __version__
    from dgtraces.store import manifest as store
    from dgtraces.store.release import Release

    asked = cluster.release
    release: str | None
    digest: str | None
    if isinstance(asked, Release):  # an open handle: its version and digest
        release, digest = asked.version, asked.digest
    else:
        release = store.latest_or_none() if asked in (None, "latest") else asked
        digest = None if release is None else store.read_manifest(release).get("digest")
    return {"package_version": __version__, "dataset_release": release,
            "dataset_digest": digest,
            "bucket_bytes": policy.bucket_bytes if grouping(policy.name) is Grouping.BUCKET
            else None}
