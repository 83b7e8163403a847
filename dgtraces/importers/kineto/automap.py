"""Kineto stage 2b, attribute without scopes: profiler ops -> spec layers of a torch model.

For traces of torch models with neither layer scopes nor a ``--map`` (e.g. a plain
``torch.profiler`` run of a torchvision model). Per ``ProfilerStep#N`` (required):

1. **Forward ops**: the ops directly inside the step on the step's thread, in time order.
   Each op type of a layer kind (``aten::conv2d`` -> conv, ``aten::batch_norm`` -> bn, ...)
   takes the next spec layer of that kind, in module (execution) order, whose input shape
   (and weight shape for conv/fc) equals the op's ``Input Dims``; at most
   :data:`LOOKAHEAD` spec layers may be skipped per op, so the match is linear. Ops of other
   types, or that fit no layer (the loss, flatten, BN's ``num_batches_tracked += 1``, the
   optimizer), stay unmapped and are listed.
2. **Backward**: outermost ops on other threads with a ``Fwd thread id`` (autograd nodes)
   carry the ``Sequence number`` of the forward op (or one of its children) that created
   them; a number owned by exactly one mapped layer maps the node.
3. **Time**: with GPU kernels, a layer's time is the sum of the kernels its ops launched
   (kernel ``external id`` -> the launching op -> its outermost ancestor); otherwise the
   ops' CPU durations. Kernels belong to the step whose CPU range contains their launch.

Every step is one repetition; coverage (share of the spec's conv/fc/bn layers mapped) and
the mapped share of the step's total kernel time are returned and stored in the run.
All passes are single sweeps over time-sorted events or dict look-ups (n log n overall).
"""

from __future__ import annotations

import bisect
from collections import defaultdict, deque
from dataclasses import dataclass

from dgtraces.errors import Code, DgtracesError, Failure
from dgtraces.importers.kineto.parse import STEP, Event

OP_KIND = {"aten::conv2d": "conv", "aten::batch_norm": "bn", "aten::relu_": "relu",
           "aten::relu": "relu", "aten::max_pool2d": "pool", "aten::avg_pool2d": "pool",
           "aten::adaptive_avg_pool2d": "pool", "aten::linear": "fc", "aten::add_": "eltwise",
           "aten::add": "eltwise", "aten::dropout": "dropout", "aten::cat": "concat"}
COVERED_KINDS = ("conv", "fc", "bn")
LOOKAHEAD = 8


@dataclass(frozen=True)
class SpecLayer:
    name: str
    kind: str
    in_chw: tuple[int, int, int]
    weight: tuple[int, ...] | None  # conv (O, C/g, kh, kw) / fc (O, in)


@dataclass
class AutoMapped:
    fwd: dict[tuple[str, int], float]  # (layer, step) -> ms
    bwd: dict[tuple[str, int], float]
    steps: int
    step_ms: list[float]  # wall time per step
    step_kernel_ms: list[float]  # all kernels launched in each step
    mapped_kernel_ms: list[float]  # of which attributed to a layer
    time_basis: str  # "gpu kernels" | "cpu ops"
    coverage: float  # share of the spec's conv/fc/bn layers mapped
    missing: tuple[str, ...]  # spec conv/fc/bn layers never mapped
    unmapped: list[Event]  # outermost ops attributed to no layer


def spec_layers(model: str) -> list[SpecLayer]:
    from dgtraces.models import get_spec, inferred

    spec = get_spec(model)
    shapes = {"data": spec.input_shape}
    out = []
    for item in inferred(model):
        layer = item.layer
        src = shapes[layer.bottoms[0]]
        shapes[layer.name] = item.out
        weight: tuple[int, ...] | None = None
        if layer.kind == "conv":
            weight = (layer.num_output, src.c // layer.group, layer.kernel, layer.kw)
        elif layer.kind == "fc":
            weight = (layer.num_output, src.numel)
        out.append(SpecLayer(layer.name, layer.kind, (src.c, src.h, src.w), weight))
    return out


def _fits(op: Event, layer: SpecLayer, batch: int) -> bool:
    dims = op.args.get("Input Dims") or []
    if not dims or not isinstance(dims[0], list) or not dims[0] or dims[0][0] != batch:
        return False
    first = tuple(dims[0][1:])
    if layer.kind == "fc":
        numel = 1
        for d in first:
            numel *= d
        return (layer.weight is not None and numel == layer.weight[1] and len(dims) > 1
                and tuple(dims[1]) == layer.weight)
    if first != layer.in_chw:
        return False
    if layer.kind == "conv":
        return len(dims) > 1 and tuple(dims[1]) == layer.weight
    if layer.kind == "eltwise":
        return len(dims) > 1 and dims[1] == dims[0]
    return True


def match_ops(ops: list[Event], layers: list[SpecLayer], batch: int) -> dict[Event, str]:
    """op -> layer: per kind, the next spec layer (skipping at most LOOKAHEAD) that fits."""
    queues: dict[str, deque] = defaultdict(deque)
    for layer in layers:
        queues[layer.kind].append(layer)
    out = {}
    for op in ops:
        q = queues.get(OP_KIND.get(op.name, ""))
        if not q:
            continue
        for k in range(min(LOOKAHEAD + 1, len(q))):
            if _fits(op, q[k], batch):
                for _ in range(k + 1):
                    hit = q.popleft()
                out[op] = hit.name
                break
    return out


def _tree(ops: list[Event]) -> dict[Event, Event | None]:
    """op -> its outermost ancestor on its thread (itself when outermost); one sweep."""
    top: dict[Event, Event | None] = {}
    by_tid: dict[tuple, list[Event]] = defaultdict(list)
    for e in ops:
        by_tid[e.tid].append(e)
    for evs in by_tid.values():
        evs.sort(key=lambda e: (e.ts, -e.dur))
        root: Event | None = None
        for e in evs:
            if root is None or e.ts >= root.end:
                root = e
            top[e] = root
    return top


def automap(events: list[Event], model: str, batch: int) -> AutoMapped:
    ops = [e for e in events if e.cat == "cpu_op" or (e.cat == "user_annotation"
                                                     and STEP.match(e.name))]
    steps = sorted((e for e in ops if STEP.match(e.name)), key=lambda e: e.ts)
    if not steps:
        raise DgtracesError("the trace has no ProfilerStep#N: without layer scopes or --map, "
                            "ops are mapped per profiler step", code=Code.BAD_FILE,
                            failures=[Failure(Code.BAD_FILE, "no ProfilerStep#N event",
                                              expected="ProfilerStep#N", found="none")])
    starts = [s.ts for s in steps]
    step_set = set(steps)
    main = steps[0].tid

    def step_of(ts: float) -> int | None:
        i = bisect.bisect_right(starts, ts) - 1
        return i if i >= 0 and ts < steps[i].end else None

    plain = [e for e in ops if e not in step_set]
    top = _tree(plain)
    fwd_tops = [e for e in plain if e.tid == main and top[e] is e and step_of(e.ts) is not None
                and not e.args.get("Fwd thread id")]
    layers = spec_layers(model)
    owner: dict[Event, tuple[str, int]] = {}
    for i in range(len(steps)):
        in_step = [e for e in fwd_tops if step_of(e.ts) == i]
        for op, layer in match_ops(in_step, layers, batch).items():
            owner[op] = (layer, i)
    seq_owner: dict[int, set] = defaultdict(set)
    for e in plain:
        root = top[e]
        seq = e.args.get("Sequence number")
        if root in owner and seq is not None and e.tid == main:
            seq_owner[int(seq)].add(owner[root])
    for e in plain:  # autograd nodes: outermost ops with a forward thread
        seq = e.args.get("Sequence number")
        if top[e] is e and e.args.get("Fwd thread id") and seq is not None:
            hits = seq_owner.get(int(seq), set())
            if len(hits) == 1:
                owner[e] = next(iter(hits))
    fwd: dict[tuple[str, int], float] = defaultdict(float)
    bwd: dict[tuple[str, int], float] = defaultdict(float)
    kernels = [e for e in events if e.cat == "kernel"]
    n = len(steps)
    step_kernel, mapped_kernel = [0.0] * n, [0.0] * n
    if kernels:
        by_ext = {e.args.get("External id"): e for e in plain
                  if e.args.get("External id") is not None}
        launch = {e.args.get("correlation"): e.ts for e in events if e.cat == "cuda_runtime"}
        for k in kernels:
            launcher = by_ext.get(k.args.get("external id"))
            at = step_of(launch.get(k.args.get("correlation"),
                                    launcher.ts if launcher else k.ts))
            if at is None:
                continue
            step_kernel[at] += k.dur / 1000.0
            root = top.get(launcher) if launcher is not None else None
            key = owner.get(root) if root is not None else None
            if root is not None and key is not None:
                (bwd if root.args.get("Fwd thread id") else fwd)[key] += k.dur / 1000.0
                mapped_kernel[at] += k.dur / 1000.0
    else:
        for op, key in owner.items():
            (bwd if op.args.get("Fwd thread id") else fwd)[key] += op.dur / 1000.0
    mapped = {layer for layer, _ in owner.values()}
    covered = [s.name for s in layers if s.kind in COVERED_KINDS]
    missing = tuple(name for name in covered if name not in mapped)
    unmapped = [e for e in plain if top[e] is e and e not in owner and step_of(e.ts) is not None]
    return AutoMapped(fwd, bwd, n, [s.dur / 1000.0 for s in steps], step_kernel, mapped_kernel,
                      "gpu kernels" if kernels else "cpu ops",
                      1 - len(missing) / len(covered) if covered else 0.0, missing, unmapped)
