"""Timelines of one predicted iteration: Chrome trace-event JSON and a matplotlib Gantt chart.

Workers are homogeneous (see :mod:`.dag`), so every worker track shows the same schedule.
Messages are split into their collective phases on the link each phase uses, one track per
link. Both outputs are modelled, and say so in their metadata / title.

Times in the JSON are microseconds (the trace-event format's unit) that land on whole
nanoseconds in Perfetto: each slice's start and end are rounded to ns first and its duration
is end - start, so back-to-back slices stay back to back. Perfetto's JSON importer turns
``ts`` and ``dur`` into ns separately (``CoerceToTs``: ``llround(us * 1000)`` in current
versions, a truncating cast in older ones); :func:`perfetto_us` writes each value so that both
give the intended ns exactly. Float microseconds rounded apart made slices end 1 ns after
the next began (issue #28).
"""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

from dgtraces.io.files import atomic_write_bytes

from .dag import Prediction, Schedule

MAX_WORKER_TRACKS = 32
COLORS = {"io": "#9e9e9e", "h2d": "#8e6cbf", "fwd": "#4c78a8", "bwd": "#f58518",
          "comm": "#54a24b", "update": "#e45756"}


def ns(ms: float) -> int:
    """Whole nanoseconds of a time in ms."""
    return round(ms * 1e6)


def perfetto_us(n: int) -> int | float:
    """``n`` ns as trace-event microseconds that Perfetto reads back as exactly ``n`` ns: an
    int where n is whole us; else the least double x >= n / 1000 with x * 1000 >= n (so a
    truncating reader gets n too; x * 1000 stays within 1e-6 of n, so rounding gets n)."""
    if n % 1000 == 0:
        return n // 1000
    x = n / 1000
    while x * 1000 < n:
        x = math.nextafter(x, math.inf)
    return x


def _slice(start_ms: float, end_ms: float) -> dict | None:
    """``ts``/``dur`` of a slice from its ends rounded to ns (None when it rounds to 0 ns)."""
    s, e = ns(start_ms), ns(end_ms)
    return {"ts": perfetto_us(s), "dur": perfetto_us(e - s)} if e > s else None


def link_slices(sched: Schedule) -> list[tuple[str, str, float, float]]:
    """(link, label, start_ms, end_ms) for every phase of every message."""
    out = []
    for m in sched.messages:
        task = next(t for t in sched.tasks if t.id == m.task_id)
        t = task.start_ms
        for phase, dur in sched.cost.phase_times(m.nbytes):
            out.append((phase.link, f"m{m.index} {phase.name} ({m.nbytes / 1e6:.3g} MB)",
                        t, t + dur))
            t += dur
    return out


def chrome_trace(sched: Schedule, pred: Prediction) -> dict:
    """Chrome trace-event JSON (opens in Perfetto / chrome://tracing); times in us, on
    whole ns (see :func:`perfetto_us`)."""
    events = []
    shown = min(pred.workers, MAX_WORKER_TRACKS)
    for w in range(shown):
        events.append({"ph": "M", "name": "process_name", "pid": w,
                       "args": {"name": f"worker {w}"}})
        for tid, stream in enumerate(("compute", "io")):
            events.append({"ph": "M", "name": "thread_name", "pid": w, "tid": tid,
                           "args": {"name": stream}})
        for t in sched.tasks:
            times = _slice(t.start_ms, t.end_ms)
            if t.stream == "comm" or times is None:
                continue
            events.append({"ph": "X", "name": t.id, "cat": t.kind, "pid": w,
                           "tid": 0 if t.stream == "compute" else 1, **times})
        events += _overhead_slices(sched, pred, w)
    links = sorted({s[0] for s in link_slices(sched)})
    for k, link in enumerate(links):
        pid = shown + k
        events.append({"ph": "M", "name": "process_name", "pid": pid,
                       "args": {"name": f"link {link}"}})
        for name, label, start, end in link_slices(sched):
            times = _slice(start, end)
            if name == link and times is not None:
                events.append({"ph": "X", "name": label, "cat": "comm", "pid": pid, "tid": 0,
                               **times})
    meta = pred.to_dict()
    meta["worker_tracks"] = shown
    if shown < pred.workers:
        meta["note"] = f"{pred.workers} workers have identical schedules; {shown} shown"
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": meta}


def _overhead_slices(sched: Schedule, pred: Prediction, pid: int) -> list[dict]:
    """The ``--overheads`` terms after the DAG's iteration, on the compute track (what
    ``predict`` adds: the wait for the slowest worker, the exposed input pipeline)."""
    out, t = [], sched.iter_ms
    for key, label in (("sync_ms", "sync: wait for the slowest of P workers"),
                       ("input_ms", "input: node pipeline not hidden")):
        ms = float(pred.breakdown.get(key, 0.0))
        times = _slice(t, t + ms)
        if times is not None:
            out.append({"ph": "X", "name": label, "cat": "overhead", "pid": pid, "tid": 0,
                        **times})
        t += ms
    return out


def write_chrome_trace(path: str | Path, sched: Schedule, pred: Prediction) -> Path:
    data = json.dumps(chrome_trace(sched, pred), indent=1, default=str).encode()
    atomic_write_bytes(path, data)
    return Path(path)


def _links(pred: Prediction) -> str:
    """'pcie3 intra, 10gbe inter' (only the links the cluster crosses)."""
    c = pred.cluster
    gpn = c.get("gpus_per_node", 1)
    used = [("intra", gpn > 1), ("inter", pred.workers > gpn)]
    names = [f"{c[side]['link']} {side}" for side, on in used
             if on and isinstance(c.get(side), dict)]
    return ", ".join(names) or "one worker, no link"


def write_gantt(path: str | Path, sched: Schedule, pred: Prediction,
                max_workers: int = 2) -> Path:
    """A PNG Gantt chart of one iteration (:func:`gantt_figure`) written to ``path``."""
    import matplotlib.pyplot as plt

    fig = gantt_figure(sched, pred, max_workers)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    atomic_write_bytes(path, buf.getvalue())
    return Path(path)


def gantt_figure(sched: Schedule, pred: Prediction, max_workers: int = 2):
    """The Gantt chart's matplotlib Figure: compute/io rows per worker, one row per link; a
    dashed line marks the end of the modelled iteration (named in the legend)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    rows: list[tuple[str, list[tuple[float, float, str]]]] = []
    for w in range(min(pred.workers, max_workers)):
        for stream in ("compute", "io"):
            bars = [(t.start_ms, t.end_ms - t.start_ms, t.kind) for t in sched.tasks
                    if t.stream == stream and t.end_ms > t.start_ms]
            if bars or stream == "compute":
                rows.append((f"worker {w} {stream}", bars))
    slices = link_slices(sched)
    for link in sorted({s[0] for s in slices}):
        rows.append((f"link {link}", [(s, e - s, "comm") for n, _, s, e in slices if n == link]))
    fig, ax = plt.subplots(figsize=(12, 1.0 + 0.55 * len(rows)), dpi=110)
    for y, (_, bars) in enumerate(rows):
        ax.broken_barh([(s, d) for s, d, _ in bars], (y - 0.38, 0.76),
                       facecolors=[COLORS[k] for _, _, k in bars], edgecolor="white",
                       linewidth=0.3)
    ax.set_yticks(range(len(rows)), [r[0] for r in rows])
    ax.invert_yaxis()
    ax.set_xlim(0, sched.iter_ms * 1.01)
    ax.set_xlabel("time within one iteration (ms)")
    end = ax.axvline(sched.iter_ms, color="black", linestyle="--", linewidth=1,
                     label=f"iteration end ({sched.iter_ms:.1f} ms)")
    extra = f", {pred.workers - max_workers} more identical workers" \
        if pred.workers > max_workers else ""
    ax.set_title(f"modelled: {pred.model} batch {pred.batch_size} on {pred.workers} x "
                 f"{pred.trace_device or 'unknown device'} ({_links(pred)}), "
                 f"{pred.policy}{' + io overlap' if pred.io_overlap else ''}, "
                 f"{pred.cluster['algorithm']}: {pred.iter_ms:.1f} ms/iter "
                 f"(comm exposed {pred.breakdown['comm_exposed']:.1f} ms){extra}"
                 + ("; collective shares the compute cores" if pred.cluster["shared_cpu"]
                    else ""), fontsize=10, wrap=True)
    kinds = [k for k in COLORS if any(b[2] == k for _, bars in rows for b in bars)]
    ax.legend(handles=[Patch(color=COLORS[k], label=k) for k in kinds] + [end],
              loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return fig
