"""PipeDream profiler graphs (``graph.txt``) -> ``runs`` + ``layer_timings``.

A node line reads ``nodeN -- Op(args) -- forward_compute_time=F, backward_compute_time=B,
activation_size=A, parameter_size=P`` (ms, ms, bytes, bytes); a line ``\\tnodeA -- nodeB``
is an edge. Nodes are put in topological order (ties by node number, which is the order the
profiler created them) and mapped onto the spec's layers **by op type, order and size**: each
node takes the next spec layer of its kind (Conv2d -> conv, BatchNorm2d -> bn, Linear -> fc,
...) whose parameter bytes equal ``parameter_size`` and whose output bytes times the batch
equal ``activation_size``; spec layers skipped that way get no row and are listed. Nodes of
ops the spec has no layer for (Input, Size, View) or that find no layer are listed with
their times (:attr:`PipeDreamImport.unmatched`), never dropped.

The batch is ``--batch-size`` or, when not given, ``activation_size`` over the output bytes
per sample of the first conv/fc node, which must then agree for every mapped node.
"""

from __future__ import annotations

import re
from collections import defaultdict, deque
from dataclasses import dataclass
from pathlib import Path

from dgtraces.errors import Code, DgtracesError, Failure
from dgtraces.importers.base import TraceImport, frame, gpu_run_row, read_text
from dgtraces.importers.shipped import resolve, shipped
from dgtraces.values import positive_int

NUM = r"([-+]?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)"
NODE = re.compile(rf"^(node\d+) -- (.*) -- forward_compute_time={NUM}, backward_compute_time="
                  rf"{NUM}, activation_size={NUM}, parameter_size={NUM}\s*$", re.ASCII)
EDGE = re.compile(r"^\s+(node\d+) -- (node\d+)\s*$", re.ASCII)
OP_KIND = {"Conv2d": "conv", "BatchNorm2d": "bn", "ReLU": "relu", "MaxPool2d": "pool",
           "AvgPool2d": "pool", "Linear": "fc", "Dropout": "dropout", "Add": "eltwise",
           "Concat": "concat", "Cat": "concat"}
SIZED = ("conv", "fc")


@dataclass(frozen=True)
class Node:
    node: str
    op: str  # op type (Conv2d)
    desc: str  # full op text
    fwd_ms: float
    bwd_ms: float
    act_bytes: float
    param_bytes: float


@dataclass
class PipeDreamImport(TraceImport):
    mapped: dict[str, str]  # node -> spec layer
    unmatched: tuple[tuple[str, str, float, float], ...]  # node, op, fwd, bwd ms
    spec_without_time: tuple[str, ...]
    batch_size: int
    batch_basis: str


def parse(text: str, path: str = "graph.txt") -> list[Node]:
    """Nodes in topological order (ties by node number); BAD_FILE on malformed lines."""
    nodes: dict[str, Node] = {}
    edges: list[tuple[str, str]] = []
    failures = []
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        m = NODE.match(line)
        if m:
            name, desc = m.group(1), m.group(2)
            nums = [float(m.group(k)) for k in range(3, 7)]
            nodes[name] = Node(name, re.split(r"[(\s]", desc, maxsplit=1)[0], desc, *nums)
            continue
        m = EDGE.match(line)
        if m:
            edges.append((m.group(1), m.group(2)))
            continue
        failures.append(Failure(Code.BAD_FILE, "neither a node nor an edge line", file=path,
                                row=i, found=line.strip()[:80]))
    dangling = sorted({n for e in edges for n in e if n not in nodes})
    failures += [Failure(Code.BAD_FILE, "edge names an undefined node (truncated file?)",
                         file=path, found=n) for n in dangling[:20]]
    if failures or not nodes:
        raise DgtracesError(f"{path}: not a readable PipeDream graph ({len(failures)} bad "
                            f"line(s), {len(nodes)} node(s))", code=Code.BAD_FILE,
                            failures=failures[:50])
    return _topological(nodes, edges, path)


def _topological(nodes: dict[str, Node], edges: list[tuple[str, str]], path: str) -> list[Node]:
    import heapq

    indeg = {n: 0 for n in nodes}
    succ = defaultdict(list)
    for a, b in edges:
        succ[a].append(b)
        indeg[b] += 1

    def key(n: str) -> int:
        return int(n[4:])

    ready = [(key(n), n) for n, d in indeg.items() if d == 0]
    heapq.heapify(ready)
    out = []
    while ready:
        _, n = heapq.heappop(ready)
        out.append(nodes[n])
        for m in succ[n]:
            indeg[m] -= 1
            if indeg[m] == 0:
                heapq.heappush(ready, (key(m), m))
    if len(out) != len(nodes):
        raise DgtracesError(f"{path}: the graph has a cycle", code=Code.BAD_FILE)
    return out


def _batch(nodes: list[Node], records: list[dict], given: int | None) -> tuple[int, str]:
    if given is not None:
        return positive_int("batch_size", given), "given (--batch-size)"
    for node in nodes:
        kind = OP_KIND.get(node.op)
        if kind in SIZED:
            for r in records:
                if r["kind"] == kind and 4 * r["params"] == node.param_bytes:
                    batch = node.act_bytes / r["act_bytes"]
                    if batch >= 1 and batch == int(batch):
                        return int(batch), (f"activation_size of {node.node} / output bytes "
                                            f"per sample of {r['layer']}")
    if any(OP_KIND.get(n.op) in SIZED for n in nodes):  # sized nodes, none of the spec's
        raise DgtracesError("no conv/fc node has the parameter size of a layer of this model "
                            "(a profile of another net?)", code=Code.MODEL_MISMATCH)
    raise DgtracesError("no conv/fc node to infer the batch from; give --batch-size",
                        code=Code.BAD_INPUT)


def match(nodes: list[Node], records: list[dict], batch: int) -> tuple[dict[str, str], list]:
    """node -> spec layer: per kind, the next spec layer (in spec order) of equal parameter
    bytes and output bytes x batch; linear in nodes + layers."""
    queues: dict[str, deque] = defaultdict(deque)
    for r in records:
        queues[r["kind"]].append(r)
    mapped, unmatched = {}, []
    for node in nodes:
        kind = OP_KIND.get(node.op)
        q = queues.get(kind) if kind else None
        hit = None
        skipped = []
        while q:
            r = q.popleft()
            if 4 * r["params"] == node.param_bytes and r["act_bytes"] * batch == node.act_bytes:
                hit = r
                break
            skipped.append(r)
        if hit is None:  # nothing fits: the node stays unmatched, the queue is restored
            if q is not None:
                q.extendleft(reversed(skipped))
            unmatched.append(node)
        else:
            mapped[node.node] = hit["layer"]
    return mapped, unmatched


def import_graph(path, model: str, *, batch_size: int | None = None, device: str | None = None,
                 run_id: str | None = None, source: str | None = None) -> PipeDreamImport:
    """Map a PipeDream ``graph.txt`` onto ``model``'s spec (see the module docstring)."""
    from dgtraces.models import layer_records

    records = layer_records(model)  # UNKNOWN_MODEL first
    text, digest = read_text(path)
    nodes = parse(text, str(path))
    known = shipped(digest)
    if known is not None and known.model != model:
        raise DgtracesError(f"{path} is the shipped profile of {known.model}, not {model}",
                            code=Code.MODEL_MISMATCH)
    batch, basis = _batch(nodes, records, batch_size)
    mapped, unmatched = match(nodes, records, batch)
    sized = [n for n in nodes if OP_KIND.get(n.op) in SIZED]
    lost = [n for n in sized if n.node not in mapped]
    if not sized or len(lost) > 0.1 * len(sized):
        raise DgtracesError(f"{path}: {len(lost)} of {len(sized)} conv/fc nodes fit no layer "
                            f"of {model} (another net, or the wrong batch?)",
                            code=Code.MODEL_MISMATCH,
                            failures=[Failure(Code.MODEL_MISMATCH, "no spec layer of this op, "
                                              "parameter and activation size", file=str(path),
                                              found=f"{n.node}: {n.desc[:60]}")
                                      for n in lost[:20]])
    cited, device = resolve(known, path, source, device)
    run_id = run_id or f"pipedream-{model}-{digest[:8]}"
    by_layer = {layer: node for node, layer in mapped.items()}
    node_of = {n.node: n for n in nodes}
    rows = [{"run_id": run_id, "layer": r["layer"], "fwd_ms": node_of[by_layer[r["layer"]]].fwd_ms,
             "bwd_ms": node_of[by_layer[r["layer"]]].bwd_ms, "n": 1}
            for r in records if r["layer"] in by_layer]
    without = tuple(r["layer"] for r in records if r["layer"] not in by_layer)
    un = tuple((n.node, n.desc[:60], n.fwd_ms, n.bwd_ms) for n in unmatched)
    compute = [n for n in nodes if n.op != "Input"]  # Input = data loading, kept apart
    fwd = sum(n.fwd_ms for n in compute)
    bwd = sum(n.bwd_ms for n in compute)
    layer_sum = sum(r["fwd_ms"] + r["bwd_ms"] for r in rows)
    params = {"file": Path(path).name, "sha256": digest, "batch_basis": basis,
              "nodes": len(nodes), "mapped_nodes": len(mapped),
              "unmatched_nodes": [list(u) for u in un],
              "unmatched_ms": sum(u[2] + u[3] for u in un),
              "input_ms": sum(n.fwd_ms for n in nodes if n.op == "Input"),
              "spec_layers_without_time": list(without),
              "gpu": "not stated by the source" if device == "gpu-unstated" else device}
    run = gpu_run_row(run_id=run_id, model=model, device=device, known=known,
                  framework="pytorch (PipeDream profiler)", batch_size=batch, source=cited,
                  importer="pipedream", params=params, fwd_ms=fwd, bwd_ms=bwd,
                  layer_sum_ratio=layer_sum / (fwd + bwd) if fwd + bwd > 0 else None,
                  notes="PipeDream profile: per-node forward/backward compute ms (synchronised "
                        "per layer; n=1: one averaged figure per node, repetitions not stated); "
                        "fwd_ms/bwd_ms are sums over all nodes incl. unmatched ones except Input "
                        "(data loading: params_json input_ms); device 'gpu-unstated': the "
                        "source names no GPU")
    return PipeDreamImport(frame("runs", [run]), frame("layer_timings", rows), mapped, un,
                           without, batch, basis)
