"""Chakra execution traces (ASTRA-sim 2.0 input) of the predictor's iteration DAG.

One file per NPU, ``<prefix>.<rank>.et``, as ASTRA-sim's ``--workload-configuration`` prefix
expects. Each file is Chakra's length-delimited protobuf stream: a varint32 byte count before
every message, the ``GlobalMetadata`` first, then the ``Node`` messages in topological order
(the order of :func:`dgtraces.predict.dag.simulate`). Nodes: ``COMP_NODE`` per forward and
backward layer task, the update and (when timed) the input read and host-to-device copy, with
``duration_micros`` and the roofline inputs ``num_ops`` (FLOPs, int64) and ``tensor_size``
(bytes, uint64) of :mod:`dgtraces.export.work`, so ASTRA-sim 2.x runs them with
``roofline-enabled`` on or off; ``COMM_COLL_NODE`` (``ALL_REDUCE``) per gradient message of
the policy with ``comm_size`` in bytes; ``data_deps`` are the DAG's edges. Every node names
the tensors it reads and writes (:func:`dgtraces.export.work.task_tensors`) twice: as the
``inputs``/``outputs`` attributes (string lists of name, bytes, name, bytes, ...) that
ASTRA-sim 2.x's local memory tracker reads (``track-local-mem: 1``; without them every NPU
stopped at ``Attribute 'inputs' not found in node 0``, #36), and in Chakra's own
``Node.inputs``/``outputs`` (``IOInfo``: JSON lists of the names, their 1-D fp32 shapes and
types). The schema is
Chakra's ``et_def.proto`` (MIT, see ``LICENSE.chakra``; the commit it was checked against is
:data:`SCHEMA_COMMIT`) compiled with protobuf (extra ``[sim]``).
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import Code, DgtracesError, Failure, require
from .. import check_workers

if TYPE_CHECKING:  # pragma: no cover
    from ...predict.cluster import Cluster, Policy
    from ...predict.dag import Prediction, Schedule
    from ...predict.trace import Trace

SCHEMA = "1.0.2-chakra.0.0.4"  # the GlobalMetadata "schema" attribute Chakra's converters set
# mlcommons/chakra commit whose schema/protobuf/et_def.proto the vendored subset was checked
# against (also named in et_def.proto's header and written to every trace's metadata): the
# last commit on Chakra's main to touch the file ("Reorganize directories", 2024-05-09; #36)
SCHEMA_COMMIT = "a1120ddcb50bb3f436a94c8abb40654907f263a6"
COMM_NOTE = ("COMM_COLL_NODE durations are the dgtraces predictor's modelled collective times; "
             "ASTRA-sim simulates each collective from its comm_size on its own network model")
TENSOR_NOTE = ("node inputs/outputs: tensors modelled from the layers table for the worker's "
               "batch (dgtraces.export.work.task_tensors: a chain of layers, fp32), as "
               "name/bytes string lists for ASTRA-sim's track-local-mem and as IOInfo")
ROOFLINE_NOTE = ("COMP_NODE num_ops (FLOPs) and tensor_size (bytes) are modelled from the "
                 "layers table for the worker's batch (dgtraces.export.work); with "
                 "roofline-enabled ASTRA-sim times them by its roofline, not duration_micros")


def _pb() -> Any:
    require("google.protobuf", "sim", "writing Chakra execution traces")
    from . import et_def_pb2

    return et_def_pb2


@dataclass(frozen=True)
class EtGraph:
    """The Chakra messages of one NPU's iteration (all NPUs run the same DAG)."""

    metadata: Any  # et_def_pb2.GlobalMetadata
    nodes: tuple[Any, ...]  # et_def_pb2.Node, topological order
    iter_ms: float


def _attr(pb, name: str, value) -> Any:
    if isinstance(value, bool):
        return pb.AttributeProto(name=name, bool_val=value)
    if isinstance(value, int):
        return pb.AttributeProto(name=name, int64_val=value)
    if isinstance(value, float):
        return pb.AttributeProto(name=name, double_val=value)
    return pb.AttributeProto(name=name, string_val=str(value))


def _io(pb, node, tensors) -> None:
    """Set ``node``'s tensors (:class:`dgtraces.export.work.TaskTensors`): the ``inputs`` and
    ``outputs`` attributes ASTRA-sim's memory tracker reads, and Chakra's ``IOInfo`` fields."""
    import json

    for field, pairs in (("inputs", tensors.inputs), ("outputs", tensors.outputs)):
        flat = [str(v) for pair in pairs for v in pair]
        node.attr.append(pb.AttributeProto(name=field, string_list=pb.StringList(values=flat)))
        getattr(node, field).CopyFrom(pb.IOInfo(
            values=json.dumps([n for n, _ in pairs]),
            shapes=json.dumps([[b // 4] for _, b in pairs]),
            types=json.dumps(["Tensor(float)"] * len(pairs))))


def build_et(trace: Trace, cluster: Cluster, policy: Policy,
             extra: dict | None = None,
             simulated: tuple[Prediction, Schedule] | None = None) -> EtGraph:
    """Simulate one iteration of ``trace`` (or take ``simulated``, ``predict_trace``'s result
    for the same arguments) and turn its DAG into Chakra nodes; ``extra`` (e.g.
    :func:`dgtraces.export.terms.export_terms`) joins the global metadata."""
    from dgtraces.export.work import task_tensors, task_work

    from ..._version import __version__
    from ...predict.dag import predict_trace

    pb = _pb()
    check_workers(cluster.workers)
    pred, sched = predict_trace(trace, cluster, policy) if simulated is None else simulated
    work = task_work(trace)
    tensors = task_tensors(trace, sched.messages)
    sizes = {m.task_id: m.nbytes for m in sched.messages}
    ids: dict[str, list[int]] = {}  # task -> node ids it stands for (dropped: its deps)
    nodes: list[Any] = []
    for t in sched.tasks:
        deps = sorted({i for d in t.deps for i in ids[d]})
        dur_ms = t.end_ms - t.start_ms
        if t.kind in ("io", "h2d") and dur_ms <= 0:
            ids[t.id] = deps  # an untimed phase: its successors wait for its predecessors
            continue
        node = pb.Node(id=len(nodes), name=t.id, data_deps=deps,
                       start_time_micros=round(t.start_ms * 1000),
                       duration_micros=round(dur_ms * 1000))
        if t.kind == "comm":
            node.type = pb.COMM_COLL_NODE
            node.name = f"{t.id} all_reduce {int(sizes[t.id])} B"
            node.attr.extend([_attr(pb, "comm_type", int(pb.ALL_REDUCE)),
                              _attr(pb, "comm_size", int(sizes[t.id]))])
        else:
            node.type = pb.COMP_NODE
            w = work[t.id]
            node.attr.extend([_attr(pb, "is_cpu_op", t.kind == "io"),
                              pb.AttributeProto(name="num_ops", int64_val=w.num_ops),
                              pb.AttributeProto(name="tensor_size", uint64_val=w.tensor_size)])
        node.attr.append(_attr(pb, "dgtraces_kind", t.kind))
        _io(pb, node, tensors[t.id])
        ids[t.id] = [node.id]
        nodes.append(node)
    meta = pb.GlobalMetadata(version="0.0.4", attr=[_attr(pb, k, v) for k, v in {
        "schema": SCHEMA, "generator": f"dgtraces {__version__}", "provenance": "modelled",
        "method": pred.method, "model": pred.model, "batch_size": pred.batch_size,
        "workers": pred.workers, "policy": pred.policy, "algorithm": cluster.algorithm,
        "algorithm_why": cluster.algorithm_why or "given",
        "iter_ms": float(pred.iter_ms), "trace_provenance": trace.provenance,
        "trace_source": trace.source, "trace_run_id": trace.run_id or "",
        "trace_device": trace.device or "", "time_unit": "microseconds (duration_micros)",
        "comm_note": COMM_NOTE, "roofline_note": ROOFLINE_NOTE, "tensor_note": TENSOR_NOTE,
        "chakra_schema_commit": SCHEMA_COMMIT, **_flat(extra or {})}.items()])
    return EtGraph(meta, tuple(nodes), float(pred.iter_ms))


def _flat(extra: dict) -> dict:
    """Nested metadata as flat attributes (``framework.policy``); None as empty text."""
    out: dict = {}
    for k, v in extra.items():
        if isinstance(v, dict):
            out.update({f"{k}.{kk}": vv for kk, vv in _flat(v).items()})
        else:
            out[k] = "" if v is None else v
    return out


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def encode(graph: EtGraph) -> bytes:
    """Chakra's stream: varint32 length + GlobalMetadata, then each Node likewise."""
    buf = io.BytesIO()
    for msg in (graph.metadata, *graph.nodes):
        data = msg.SerializeToString()
        buf.write(_varint(len(data)))
        buf.write(data)
    return buf.getvalue()


def et_paths(prefix: str | Path, workers: int) -> list[Path]:
    return [Path(f"{prefix}.{rank}.et") for rank in range(check_workers(workers))]


def write_et(prefix: str | Path, graph: EtGraph, workers: int) -> list[Path]:
    """Write ``<prefix>.<rank>.et`` for every rank (same DAG; each file atomically)."""
    from dgtraces.io.files import atomic_write_all

    data = encode(graph)
    return atomic_write_all(dict.fromkeys(et_paths(prefix, workers), data))


def read_et(path: str | Path) -> tuple[Any, list[Any]]:
    """(GlobalMetadata, Nodes) of a Chakra ET file; BAD_FILE if its framing is broken."""
    pb = _pb()
    data = Path(path).read_bytes()
    messages, pos = [], 0
    while pos < len(data):
        size = shift = 0
        while True:
            if pos >= len(data):
                raise DgtracesError(f"{path}: truncated length prefix", code=Code.BAD_FILE,
                                    failures=[Failure(Code.BAD_FILE, "truncated varint",
                                                      file=str(path))])
            byte = data[pos]
            pos += 1
            size |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        if pos + size > len(data):
            raise DgtracesError(f"{path}: message runs past the end", code=Code.BAD_FILE,
                                failures=[Failure(Code.BAD_FILE, "truncated message",
                                                  file=str(path))])
        messages.append(data[pos:pos + size])
        pos += size
    if not messages:
        raise DgtracesError(f"{path}: empty execution trace", code=Code.BAD_FILE)
    meta = pb.GlobalMetadata.FromString(messages[0])
    return meta, [pb.Node.FromString(m) for m in messages[1:]]
