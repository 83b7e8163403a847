"""Kineto stage 2a, attribute by scopes: layer scopes (record_function named like the layers,
or ``--map``-listed module scopes) give forward times; autograd nodes linked by sequence
number give backward times. One sweep per thread over time-sorted events (n log n)."""

from __future__ import annotations

from collections import defaultdict

from dgtraces.importers.kineto.parse import EVAL, MODULE, STEP, Event
from dgtraces.importers.kineto.result import Unmapped


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
    step_index = {s: i for i, s in enumerate(steps)}
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
        iteration[s] = step_index[step_of[s]] if steps and s in step_of else counts[layer]
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


def unmapped_summary(events: list[Event], stray: list[str], mapped_ms: float) -> Unmapped:
    agg: dict[str, list] = defaultdict(lambda: [0, 0.0])
    for e in events:
        agg[e.name][0] += 1
        agg[e.name][1] += e.dur / 1000.0
    total = sum(v[1] for v in agg.values())
    names = tuple(sorted(((k, v[0], v[1]) for k, v in agg.items()), key=lambda t: -t[2]))
    share = total / (total + mapped_ms) if total + mapped_ms > 0 else 0.0
    return Unmapped(len(events), total, share, names, tuple(stray))


