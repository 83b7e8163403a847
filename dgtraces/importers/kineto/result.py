"""Kineto stage 3, shared by scope mode (:mod:`.rows`) and automap (:mod:`.autorows`): the
import result, the run id, the trace's wall time and the per-layer rows."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from dgtraces.fitting import stats
from dgtraces.importers.base import TraceImport
from dgtraces.importers.kineto.parse import Event


@dataclass(frozen=True)
class Unmapped:
    """What the importer could not attribute to a layer."""

    ops: int
    time_ms: float
    share: float  # of mapped forward + mapped backward + unmapped time
    names: tuple[tuple[str, int, float], ...]  # (name, count, ms), most time first
    scopes: tuple[str, ...]  # scope names seen that map to no layer


@dataclass
class KinetoImport(TraceImport):
    iterations: int
    layers: tuple[str, ...]
    unmapped: Unmapped
    mapped_fwd_ms: float
    mapped_bwd_ms: float
    trace_bwd_ms: float  # every outermost autograd node, mapped or not
    gpu_events: int
    unscoped: tuple[str, ...] = ()  # model layers no scope maps to (no row for them)
    time_basis: str = "host wall time of scopes"  # or "gpu kernels" / "cpu ops" (automap)
    coverage: float | None = None  # automap: share of the spec's conv/fc/bn layers mapped
    kernel_share: float | None = None  # automap: mapped / all kernel time of the steps


def trace_timestamp(meta: dict, events: list[Event]) -> str:
    """Wall time of the first event: baseTimeNanoseconds + ts (us); import time if absent."""
    from datetime import UTC, datetime

    base = meta.get("baseTimeNanoseconds")
    first = min((e.ts for e in events), default=0.0)
    if base:
        when = datetime.fromtimestamp(int(base) / 1e9 + first / 1e6, UTC)
    elif first > 1e15:  # older traces: ts are microseconds since the epoch
        when = datetime.fromtimestamp(first / 1e6, UTC)
    else:
        when = datetime.now(UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def layer_rows(run_id: str, order: list[str], fwd: dict, bwd: dict) -> list[dict]:
    """One row per layer with a forward time: median, p10, p90 over iterations (linear)."""
    groups: dict[str, tuple[list, list]] = {}
    for which, times in ((0, fwd), (1, bwd)):
        for (layer, _), ms in sorted(times.items(), key=lambda kv: kv[0][1]):
            groups.setdefault(layer, ([], []))[which].append(ms)
    rows = []
    for layer in (name for name in order if name in groups and groups[name][0]):
        f, b = groups[layer]
        row = {"run_id": run_id, "layer": layer, "n": len(f)}
        for prefix, vals in (("fwd", f), ("bwd", b)):
            if vals:
                med, p10, p90, _ = stats(vals)
                row.update({f"{prefix}_ms": med, f"{prefix}_p10_ms": p10,
                            f"{prefix}_p90_ms": p90})
        rows.append(row)
    return rows


def default_run_id(model: str, path, digest: str) -> str:
    # the content hash keeps two different traces with the same file name apart
    return "kineto-{}-{}-{}".format(
        model, re.sub(r"[^A-Za-z0-9._-]", "-", Path(path).name.split(".")[0]), digest[:8])
