"""A predicted iteration as a multi-rank PyTorch profiler (Kineto) trace folder that Holistic
Trace Analysis (HTA) reads: one ``rank<r>.modelled.pt.trace.json`` per worker.

Each file has what HTA's parser and analyses use: ``distributedInfo`` (rank, world_size;
first key after the schema version, because HTA finds a file's rank with the first
``"rank": N`` in its text), ``deviceProperties``, ``ProfilerStep#k`` annotations on the host
thread, and per task a GPU event (``cat`` ``kernel``, or ``gpu_memcpy`` for the input copy)
on a stream, linked by ``correlation`` to a host ``cuda_runtime`` launch. Compute tasks run on
stream 7; the gradient messages on stream 13 as ``ncclKernel_AllReduce_*`` kernels, the name
HTA classifies as communication. The modelled iteration repeats ``steps`` times back to back
(workers and iterations are identical in the model); HTA drops the last step by default.

Host launches (``cuda_runtime`` events) are stamped when the host can issue the task, not
when it starts. The model has no host-side cost, so the host is never what the GPU waits for,
except behind a host task (the data loader's read): each iteration's GPU work is issued at
the start of the host's profiler step, work behind the read when the read ends
(:func:`launch_ms`). The host's step runs ahead of the GPU's iteration by
:func:`host_lead_us` (the longest a GPU stream sits drained at an iteration's end), so it
issues the next iteration's work on every stream before that stream drains. HTA's idle-time
analysis files a gap under ``host_wait`` when the launch came after the previous kernel on
the stream ended; a kernel that waits for another stream (a message for its gradient, the
update for the last message, the next iteration's first message for its backward) is now
``other``, and ``host_wait`` is left to work the read held back.

Everything is modelled and says so (``dgtraces`` metadata key): launches take no time, and
CPU workers' tasks appear as "kernels" of device 0.
"""

from __future__ import annotations

import json
from pathlib import Path

from dgtraces.io.files import atomic_write_bytes, check_targets

from ..errors import Code, DgtracesError, Failure
from .dag import Prediction, Schedule
from .timeline import MAX_WORKER_TRACKS

HOST_PID, MAIN_TID, LOADER_TID = 1, 1, 2
GPU_PID, COMPUTE_STREAM, COMM_STREAM = 0, 7, 13
STEPS = 3
SUFFIX = ".modelled.pt.trace.json"
H2D_NAME = "Memcpy HtoD (Pageable -> Device)"


def _us(ms: float) -> int:
    """Whole microseconds: HTA rounds times to integers, so rounding both ends here keeps
    back-to-back tasks back to back (rounding start and duration apart opens 1 us gaps)."""
    return round(ms * 1000.0)


def _comm_kernel(algorithm: str) -> str:
    return f"ncclKernel_AllReduce_{algorithm.upper()}_Sum_float"


HOST_KINDS = ("io",)  # tasks that run on the host: GPU work behind them waits for their end


def launch_ms(sched: Schedule) -> dict[str, float]:
    """When the host can issue each task, ms into the iteration: 0 (no wait: the start of the
    host's step), or the end of a predecessor that runs on the host, or the launch of a
    predecessor issued later. Never after the task's start: a task starts after its
    predecessors end."""
    host_end = {t.id: t.end_ms for t in sched.tasks if t.kind in HOST_KINDS}
    out: dict[str, float] = {}
    for t in sched.tasks:  # topological order
        out[t.id] = max([0.0, *(host_end.get(d, out[d]) for d in t.deps)])
    return out


def host_lead_us(sched: Schedule) -> int:
    """How far (us) the host's profiler step runs ahead of the GPU's iteration: the longest
    time a GPU stream sits drained at the end of an iteration (iteration end minus the end of
    its last task), 0 when every stream works to the end."""
    last: dict[str, int] = {}
    for t in sched.tasks:
        if t.kind not in HOST_KINDS and t.end_ms > t.start_ms:
            last[t.stream] = max(last.get(t.stream, 0), _us(t.end_ms))
    return max((_us(sched.iter_ms) - e for e in last.values()), default=0)


def rank_events(sched: Schedule, pred: Prediction, steps: int = STEPS) -> list[dict]:
    """Trace events of one worker over ``steps`` identical iterations (times in us): the
    host's profiler step k at ``k x iteration``, the GPU's iteration k ``host_lead_us`` later."""
    iter_us = _us(sched.iter_ms)
    lead_us = host_lead_us(sched)
    kernel = _comm_kernel(str(pred.cluster["algorithm"]))
    events: list[dict] = [
        {"ph": "M", "name": "process_name", "pid": HOST_PID, "args": {"name": "host"}},
        {"ph": "M", "name": "process_name", "pid": GPU_PID, "args": {"name": "device 0"}},
        {"ph": "M", "name": "thread_name", "pid": HOST_PID, "tid": LOADER_TID,
         "args": {"name": "dataloader"}},
    ]
    corr = 0
    launch = launch_ms(sched)
    for k in range(steps):
        host = k * iter_us  # the host's step k begins
        off = host + lead_us  # the GPU's iteration k begins
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{k + 1}",
                       "pid": HOST_PID, "tid": MAIN_TID, "ts": host, "dur": iter_us,
                       "args": {"External id": k + 1}})
        for t in sched.tasks:
            ts = off + _us(t.start_ms)
            dur = off + _us(t.end_ms) - ts
            if dur <= 0:
                continue
            if t.kind == "io":
                events.append({"ph": "X", "cat": "cpu_op", "name": "dataloader: read + decode "
                               "batch (modelled io)", "pid": HOST_PID, "tid": LOADER_TID,
                               "ts": ts, "dur": dur, "args": {"dgtraces_task": t.id}})
                continue
            corr += 1
            comm = t.kind == "comm"
            copy = t.kind == "h2d"
            events.append({"ph": "X", "cat": "cuda_runtime",
                           "name": "cudaMemcpyAsync" if copy else "cudaLaunchKernel",
                           "pid": HOST_PID, "tid": MAIN_TID,
                           "ts": off + _us(launch[t.id]) if launch[t.id] > 0 else host,
                           "dur": 0,
                           "args": {"correlation": corr, "External id": k + 1}})
            stream = COMM_STREAM if comm else COMPUTE_STREAM
            events.append({"ph": "X", "cat": "gpu_memcpy" if copy else "kernel",
                           "name": kernel if comm else H2D_NAME if copy else t.id,
                           "pid": GPU_PID, "tid": stream, "ts": ts, "dur": dur,
                           "args": {"device": 0, "stream": stream, "correlation": corr,
                                    "External id": k + 1, "dgtraces_task": t.id}})
    return events


def kineto_trace(sched: Schedule, pred: Prediction, rank: int, steps: int = STEPS) -> dict:
    """The Kineto-format document of worker ``rank``."""
    meta = dict(pred.to_dict(), steps=steps, host_lead_us=host_lead_us(sched), note=(
        "modelled by dgtraces, not profiled: every worker runs the same schedule; "
        "iterations repeat back to back; host launches take no modelled time and are "
        "stamped when the host can issue the task (the start of the host's profiler step, "
        "which runs host_lead_us ahead of the GPU's iteration, or the end of the host task "
        "it waits for), not when it starts"))
    return {
        "schemaVersion": 1,
        "distributedInfo": {"backend": "modelled", "rank": rank,
                            "world_size": pred.workers},
        "deviceProperties": [{"id": 0, "name": f"{pred.trace_device or 'device'} (modelled)"}],
        "traceEvents": rank_events(sched, pred, steps),
        "displayTimeUnit": "ms",
        "dgtraces": meta,
    }


def write_kineto_dir(folder: str | Path, sched: Schedule, pred: Prediction,
                     steps: int = STEPS) -> list[Path]:
    """One file per worker (at most MAX_WORKER_TRACKS: the schedules are identical).
    BAD_INPUT if ``folder`` holds other trace files, which HTA would read as more ranks."""
    from dgtraces.values import bad_value as bad

    if isinstance(steps, bool) or not isinstance(steps, int) or not 1 <= steps <= 100:
        raise bad("steps", "must be an integer in [1, 100]", "1..100", steps)
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise bad("kineto_dir", "must be a folder", "a folder", str(folder))
    if folder.is_dir():
        foreign = sorted(p.name for p in folder.iterdir()
                         if p.name.endswith((".json", ".gz")) and not p.name.endswith(SUFFIX))
        if foreign:
            raise DgtracesError(
                f"{folder} holds other trace files that HTA would read as ranks",
                code=Code.BAD_INPUT, hint="write into an empty folder",
                failures=[Failure(Code.BAD_INPUT, "foreign trace file", file=str(folder / n))
                          for n in foreign])
    names = [folder / f"rank{rank}{SUFFIX}" for rank in range(min(pred.workers,
                                                                  MAX_WORKER_TRACKS))]
    check_targets(names, "--kineto-dir")  # every name before any is removed or written (#36)
    if folder.is_dir():
        for stale in folder.glob(f"*{SUFFIX}"):
            stale.unlink()
    paths = []
    for rank, path in enumerate(names):
        doc = kineto_trace(sched, pred, rank, steps)
        atomic_write_bytes(path, json.dumps(doc, default=str).encode())
        paths.append(path)
    return paths
