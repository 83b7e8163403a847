"""PyTorch-profiler (Kineto) Chrome traces -> ``runs`` + ``layer_timings`` (measured).

Forward: a layer's forward time is the duration of a scope mapped to it, minus mapped scopes
of other layers nested inside it. Scopes are ``record_function`` annotations named exactly
like the model's layers (what our collector emits) or any annotation / ``nn.Module: X_k``
python scope listed in a MAP file (CSV ``scope,layer``).

Backward: autograd nodes (``autograd::engine::evaluate_function: ...`` or ops whose ``Fwd
thread id`` is non-zero, outermost only) carry the ``Sequence number`` of the forward op that
created them; that forward op's innermost mapped scope gives the layer and the iteration.

Iterations are ``ProfilerStep#N`` annotations when present, otherwise the k-th occurrence of
a layer's scope is iteration k. Per layer: median, p10 and p90 over iterations; ``n`` =
iterations. Whatever cannot be attributed (ops outside every mapped scope, backward nodes
without a sequence number such as AccumulateGrad, or whose forward op lies outside the
scopes, e.g. the loss) is counted in :class:`Unmapped`, never dropped silently; model layers
that no scope maps to get no row and are listed (``KinetoImport.unscoped``, ``params_json``
key ``layers_without_scope``). The default run id is ``kineto-<model>-<file stem>-<first 8
hex of the file's sha256>``.

Times are the host (CPU) wall times the trace records; GPU kernel events are counted, not
used, so GPU traces are only meaningful when the run synchronised per layer (noted in the
run). ``runs.fwd_ms`` / ``bwd_ms`` are the median per-iteration spans from the first to the
last mapped forward scope / linked backward node; a layer sum outside 10% of them flags the
run.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
import re
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import DgtracesError, Failure
from ..fitting import RATIO_TOLERANCE, stats
from ..values import positive_int
from . import IMPORTER_VERSION, frame, read_text

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

EVAL = "autograd::engine::evaluate_function:"
MODULE = "nn.Module: "
STEP = re.compile(r"^ProfilerStep#\d+$")


@dataclass(frozen=True)
class Event:
    name: str
    cat: str
    tid: tuple
    ts: float
    dur: float  # kept as recorded: ts + dur - ts loses precision at trace-clock magnitudes
    args: dict = field(compare=False, hash=False)

    @property
    def end(self) -> float:
        return self.ts + self.dur


@dataclass(frozen=True)
class Unmapped:
    """What the importer could not attribute to a layer."""

    ops: int
    time_ms: float
    share: float  # of mapped forward + mapped backward + unmapped time
    names: tuple[tuple[str, int, float], ...]  # (name, count, ms), most time first
    scopes: tuple[str, ...]  # scope names seen that map to no layer


@dataclass
class KinetoImport:
    runs: "pd.DataFrame"
    layer_timings: "pd.DataFrame"
    iterations: int
    layers: tuple[str, ...]
    unmapped: Unmapped
    mapped_fwd_ms: float
    mapped_bwd_ms: float
    trace_bwd_ms: float  # every outermost autograd node, mapped or not
    gpu_events: int
    unscoped: tuple[str, ...] = ()  # model layers no scope maps to (no row for them)


def load_trace(path) -> tuple[list[Event], dict, str]:
    """Complete ('X') events of a .json or .json.gz Chrome trace, its metadata, sha256."""
    import hashlib

    path = Path(path)
    if not path.is_file():
        raise DgtracesError(f"{path}: no such file", code="NOT_FOUND")
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    try:
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
        doc = json.loads(data.decode("utf-8"))
    except (OSError, EOFError, UnicodeDecodeError, ValueError) as exc:
        raise DgtracesError(f"{path}: not a (gzipped) JSON Chrome trace ({exc})",
                            code="BAD_FILE") from None
    raw = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(raw, list):
        raise DgtracesError(f"{path}: no traceEvents list", code="BAD_FILE")
    events = []
    for i, e in enumerate(raw):
        if isinstance(e, dict) and e.get("ph") == "X" and "ts" in e and "dur" in e:
            try:
                ts, dur = float(e["ts"]), float(e["dur"])
            except (TypeError, ValueError):
                ts = dur = float("nan")
            if not (math.isfinite(ts) and math.isfinite(dur) and dur >= 0):
                raise DgtracesError(f"{path}: event {i} ({str(e.get('name'))[:60]!r}) has no "
                                    f"usable ts/dur", code="BAD_FILE",
                                    failures=[Failure("BAD_FILE", "ts/dur not finite numbers",
                                                      file=str(path), row=i,
                                                      found=repr((e["ts"], e["dur"]))[:80])])
            args = e.get("args")
            events.append(Event(str(e.get("name", "")), str(e.get("cat", "")),
                                (e.get("pid"), e.get("tid")), ts, dur,
                                args if isinstance(args, dict) else {}))
    meta = doc if isinstance(doc, dict) else {}
    return events, {k: v for k, v in meta.items() if k != "traceEvents"}, digest


def read_map(path, layers: set[str], model: str) -> dict[str, str]:
    """MAP CSV (columns scope, layer) -> {scope: layer}; unknown layers are UNKNOWN_LAYER."""
    text, _ = read_text(path)
    reader = csv.DictReader(io.StringIO(text))
    if not reader.fieldnames or not {"scope", "layer"} <= set(reader.fieldnames):
        raise DgtracesError(f"{path}: need a CSV header 'scope,layer'", code="BAD_FILE")
    out, failures = {}, []
    for i, row in enumerate(reader):
        scope, layer = (row["scope"] or "").strip(), (row["layer"] or "").strip()
        if layer not in layers:
            failures.append(Failure("UNKNOWN_LAYER", f"not a layer of {model}", file=str(path),
                                    row=i, column="layer", found=repr(layer)))
        out[scope] = layer
    if failures:
        raise DgtracesError(f"{path}: {len(failures)} map row(s) name unknown layers",
                            code="UNKNOWN_LAYER", failures=failures)
    return out


def _by_thread(events):
    groups = defaultdict(list)
    for e in events:
        groups[e.tid].append(e)
    for evs in groups.values():
        evs.sort(key=lambda e: (e.ts, -e.dur))
    return groups


def outermost(events: list[Event]) -> list[Event]:
    """Events not nested inside another event of the same list and thread."""
    out = []
    for evs in _by_thread(events).values():
        end = float("-inf")
        for e in evs:
            if e.ts >= end:
                out.append(e)
                end = e.end
            else:
                end = max(end, e.end)  # nested (or overlapping): not outermost
    return out


def enclosing(items: list[Event], containers: list[Event]) -> dict[Event, Event]:
    """item -> innermost container on its thread that contains it (absent if none)."""
    out = {}
    conts = _by_thread(containers)
    for tid, evs in _by_thread(items).items():
        cs, k, stack = conts.get(tid, []), 0, []
        for e in evs:
            while k < len(cs) and cs[k].ts <= e.ts:
                stack.append(cs[k])
                k += 1
            while stack and stack[-1].end <= e.ts:
                stack.pop()
            for c in reversed(stack):
                if c is not e and c.end >= e.end:
                    out[e] = c
                    break
    return out


def _mapper(layers: set[str], mapping: dict[str, str]):
    def layer_of(name: str) -> str | None:
        if name in mapping:
            return mapping[name]
        if name.startswith(MODULE) and name[len(MODULE):] in mapping:
            return mapping[name[len(MODULE):]]
        return name if name in layers else None
    return layer_of


def attribute(events: list[Event], layers: set[str], mapping: dict[str, str]):
    """Core attribution: (fwd, bwd, spans, unmapped events, unmapped scope names, trace bwd).

    fwd/bwd: {(layer, iteration): ms}; spans: {iteration: ([fwd starts/ends], [bwd ...])};
    the last item lists the ProfilerStep durations (ms), empty without steps.
    """
    layer_of = _mapper(layers, mapping)
    ops = [e for e in events if e.cat == "cpu_op"]
    scopes = [e for e in events if e.cat in ("user_annotation", "python_function")
              and (e.cat == "user_annotation" or e.name.startswith(MODULE))]
    steps = sorted((e for e in scopes if STEP.match(e.name)), key=lambda e: e.ts)
    mapped = [e for e in scopes if layer_of(e.name) is not None]
    stray = sorted({e.name for e in scopes if layer_of(e.name) is None
                    and not STEP.match(e.name)})
    parent = enclosing(mapped, mapped)
    # a scope inside a scope of the same layer (record_function + module) is one occurrence
    occ = [s for s in mapped if not (s in parent and layer_of(parent[s].name) == layer_of(s.name))]
    occ_set = set(occ)
    step_of = enclosing(occ, steps)
    counts: dict[str, int] = defaultdict(int)
    iteration = {}
    for s in sorted(occ, key=lambda e: e.ts):
        layer = layer_of(s.name)
        iteration[s] = steps.index(step_of[s]) if steps and s in step_of else counts[layer]
        counts[layer] += 1
    fwd: dict[tuple[str, int], float] = defaultdict(float)
    spans: dict[int, tuple[list, list]] = defaultdict(lambda: ([], []))
    child: dict[Event, float] = defaultdict(float)
    for s in occ:
        up = parent.get(s)
        while up is not None and up not in occ_set:
            up = parent.get(up)
        if up is not None:
            child[up] += s.dur
    for s in occ:
        fwd[(layer_of(s.name), iteration[s])] += (s.dur - child[s]) / 1000.0
        spans[iteration[s]][0].extend((s.ts, s.end))
    # forward ops -> their (layer, iteration) via the innermost occurrence containing them
    owner = enclosing([o for o in ops if o.args.get("Sequence number") is not None
                       and not o.args.get("Fwd thread id")], occ)
    seq_map: dict[int, set] = defaultdict(set)
    for op, scope in owner.items():
        seq_map[int(op.args["Sequence number"])].add((layer_of(scope.name), iteration[scope]))
    bwd_nodes = outermost([o for o in ops if o.name.startswith(EVAL)
                           or o.args.get("Fwd thread id")])
    bwd: dict[tuple[str, int], float] = defaultdict(float)
    unmapped = []
    for node in bwd_nodes:
        seq = node.args.get("Sequence number")
        hits = seq_map.get(int(seq), set()) if seq is not None else set()
        if len(hits) == 1:
            key = next(iter(hits))
            bwd[key] += node.dur / 1000.0
            spans[key[1]][1].extend((node.ts, node.end))
        else:
            unmapped.append(node)
    bwd_set = set(bwd_nodes)
    in_scope = enclosing(ops, occ)
    unmapped += [o for o in outermost(ops) if o not in bwd_set and o not in in_scope]
    trace_bwd = sum(n.dur for n in bwd_nodes) / 1000.0
    return fwd, bwd, spans, unmapped, stray, trace_bwd, [s.dur / 1000.0 for s in steps]


def _unmapped(events: list[Event], stray: list[str], mapped_ms: float) -> Unmapped:
    agg: dict[str, list] = defaultdict(lambda: [0, 0.0])
    for e in events:
        agg[e.name][0] += 1
        agg[e.name][1] += e.dur / 1000.0
    total = sum(v[1] for v in agg.values())
    names = tuple(sorted(((k, v[0], v[1]) for k, v in agg.items()), key=lambda t: -t[2]))
    share = total / (total + mapped_ms) if total + mapped_ms > 0 else 0.0
    return Unmapped(len(events), total, share, names, tuple(stray))


def _timestamp(meta: dict, events: list[Event]) -> str:
    """Wall time of the first event: baseTimeNanoseconds + ts (us); import time if absent."""
    from datetime import datetime

    base = meta.get("baseTimeNanoseconds")
    first = min((e.ts for e in events), default=0.0)
    when = (datetime.fromtimestamp(int(base) / 1e9 + first / 1e6, UTC) if base
            else datetime.now(UTC))
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def import_trace(path, model: str, *, batch_size: int, run_id: str | None = None,
                 device: str | None = None, map_path=None, source: str | None = None,
                 precision: str = "fp32") -> KinetoImport:
    """Map a Chrome trace onto ``model``'s layers; see the module docstring."""
    from ..models import layer_records

    records = layer_records(model)  # UNKNOWN_MODEL early
    order = [r["layer"] for r in records]
    batch_size = positive_int("batch_size", batch_size, text_ok=True)
    mapping = read_map(map_path, set(order), model) if map_path else {}
    events, meta, digest = load_trace(path)
    gpu = sum(e.cat in ("kernel", "gpu_memcpy", "gpu_memset") for e in events)
    if gpu and not device:
        raise DgtracesError(f"{path}: the trace has GPU events; give --device",
                            code="BAD_INPUT")
    fwd, bwd, spans, stray_events, stray, trace_bwd, step_ms = attribute(
        events, set(order), mapping)
    if not fwd:
        raise DgtracesError(
            f"{path}: no scope maps to a layer of {model} (scopes must be named like the "
            f"layers, or listed in --map)", code="EMPTY",
            failures=[Failure("EMPTY", "unmapped scope", file=str(path), found=name)
                      for name in stray[:20]])
    # the content hash keeps two different traces with the same file name apart
    run_id = run_id or "kineto-{}-{}-{}".format(
        model, re.sub(r"[^A-Za-z0-9._-]", "-", Path(path).name.split(".")[0]), digest[:8])
    scoped = {layer for layer, _ in fwd}
    unscoped = tuple(name for name in order if name not in scoped)
    rows = []
    for layer in (name for name in order if name in scoped):
        f = [v for (name, _), v in sorted(fwd.items()) if name == layer]
        b = [v for (name, _), v in sorted(bwd.items()) if name == layer]
        row = {"run_id": run_id, "layer": layer, "n": len(f)}
        for prefix, vals in (("fwd", f), ("bwd", b)):
            if vals:
                med, p10, p90, _ = stats(vals)
                row.update({f"{prefix}_ms": med, f"{prefix}_p10_ms": p10,
                            f"{prefix}_p90_ms": p90})
        rows.append(row)
    iters = sorted(spans)
    fwd_span = [max(s[0]) - min(s[0]) for s in (spans[i] for i in iters) if s[0]]
    bwd_span = [max(s[1]) - min(s[1]) for s in (spans[i] for i in iters) if s[1]]
    fwd_ms = stats(fwd_span)[0] / 1000.0
    bwd_ms = stats(bwd_span)[0] / 1000.0 if bwd_span else None
    layer_sum = sum((r.get("fwd_ms") or 0.0) + (r.get("bwd_ms") or 0.0) for r in rows)
    ratio = layer_sum / (fwd_ms + (bwd_ms or 0.0)) if fwd_ms + (bwd_ms or 0.0) > 0 else None
    flagged = ratio is None or abs(ratio - 1.0) > RATIO_TOLERANCE
    mapped_fwd, mapped_bwd = sum(fwd.values()), sum(bwd.values())
    unmapped = _unmapped(stray_events, stray, mapped_fwd + mapped_bwd)
    params = {"file": Path(path).name, "sha256": digest, "iterations": len(iters),
              "iteration_basis": "ProfilerStep" if step_ms else "scope occurrence",
              "map_entries": len(mapping), "gpu_events": gpu,
              "layers_without_scope": list(unscoped),
              "unmapped": {"ops": unmapped.ops, "time_ms": unmapped.time_ms,
                           "share": unmapped.share, "scopes": list(stray),
                           "top": [list(t) for t in unmapped.names[:20]]},
              "trace": {k: meta[k] for k in ("schemaVersion", "displayTimeUnit") if k in meta}}
    notes = ("imported PyTorch profiler trace: host wall times of layer scopes (fwd) and of "
             "the autograd nodes linked to them by sequence number (bwd)")
    if gpu:
        notes += "; GPU kernels not used: host times are only meaningful with per-layer sync"
    run = {
        "run_id": run_id, "model": model, "device": device or "cpu",
        "device_kind": "gpu" if gpu else "cpu", "framework": "pytorch (kineto trace)",
        "precision": precision, "batch_size": int(batch_size), "provenance": "measured",
        "source": source or f"PyTorch profiler trace {Path(path).name} (sha256 {digest[:12]})",
        "collector_version": f"dgtraces.importers.kineto {IMPORTER_VERSION}",
        "timestamp_utc": _timestamp(meta, events), "fwd_ms": fwd_ms, "bwd_ms": bwd_ms,
        "iter_ms": stats(step_ms)[0] if step_ms else None,
        "layer_sum_ratio": ratio, "flagged": flagged,
        "flag_reason": (f"layer sum / whole fwd+bwd = {ratio:.3f}, outside 1 +- {RATIO_TOLERANCE}"
                        if flagged and ratio else ("no whole-model time" if flagged else None)),
        "params_json": json.dumps(params, sort_keys=True), "notes": notes,
    }
    return KinetoImport(frame("runs", [run]), frame("layer_timings", rows), len(iters),
                        tuple(r["layer"] for r in rows), unmapped, mapped_fwd, mapped_bwd,
                        trace_bwd, gpu, unscoped)
