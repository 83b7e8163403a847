"""FLOPs and bytes of each task of the predictor's iteration: what a roofline model needs.

ASTRA-sim 2.x times a compute node by a roofline when its system configuration enables one
(``roofline-enabled: 1``): ``Workload::issue_comp`` reads the node's ``num_ops`` and
``tensor_size`` attributes, takes ``num_ops / tensor_size`` as the operational intensity and
runs the node for ``num_ops / min(peak-perf, local-mem-bw x intensity)``. A compute node
without them stops the run (``Attribute num_ops not found in node 0``). This module gives
each task of :func:`dgtraces.predict.dag.simulate` those two numbers, from the ``layers``
table (per sample; fp32 tensors; 1 multiply-add = 2 FLOPs), for one worker's batch of
``B`` samples:

* ``fwd/<layer>``: ops ``B x fwd_flops``; bytes ``B x (in_bytes + act_bytes) + grad_bytes``
  (reads its input and weights, writes its output; the weights are as large as their
  fp32 gradient).
* ``bwd/<layer>``: ops ``B x bwd_flops``; bytes ``B x (act_bytes + 2 in_bytes) +
  2 grad_bytes`` (reads the output gradient, the input and the weights, writes the input
  gradient and the weight gradient).
* ``update``: ops ``2 x parameters`` (plain SGD: a multiply and an add per parameter,
  parameters = gradient bytes / 4); bytes ``3 x gradient bytes`` (reads weights and
  gradients, writes weights).
* ``io`` and ``h2d``: ops 1, bytes ``B x in_bytes`` of the first layer (the input batch); a
  roofline then times them as a copy of that many bytes at the memory bandwidth
  (ASTRA-sim replays ``io``, a CPU node, from its duration in any case).

Every count is at least 1: ASTRA-sim divides by both, and a node with zero FLOPs would take
``0 / 0`` seconds.

:func:`task_tensors` names the tensors behind those bytes, what ASTRA-sim 2.x's local memory
tracker (``track-local-mem: 1``, ``LocalMemUsageTracker::recordReads``/``recordWrites``)
reads from every node's ``inputs`` and ``outputs`` attributes: ``act/<layer>`` (a layer's
output, ``B x act_bytes``), ``grad_in/<layer>`` (the gradient of its input, ``B x
in_bytes``), ``weight/<layer>`` and ``grad/<layer>`` (``grad_bytes``), ``reduced/m<k>`` (a
message's all-reduced gradients), ``weight_next/<layer>`` (the updated weights),
``input/host`` and ``input/batch`` (the input batch read and copied). The predictor runs the
layers as a chain, so a layer reads the previous layer's ``act`` (the first reads
``input/batch``) and its backward the next layer's ``grad_in`` (the last reads
``loss_grad``). Each tensor is written by one task; for the layer tasks and the update the
bytes add up to ``tensor_size`` above.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from ..predict.trace import Trace

FP32_BYTES = 4


@dataclass(frozen=True)
class TaskWork:
    """Roofline inputs of one task: FLOPs (Chakra ``num_ops``) and bytes (``tensor_size``)."""

    num_ops: int
    tensor_size: int


def task_work(trace: Trace) -> dict[str, TaskWork]:
    """:class:`TaskWork` of every task id the predictor schedules for ``trace``."""
    from dgtraces.models import layers_frame

    rows = layers_frame(trace.model).set_index("layer").loc[list(trace.layers)]
    batch = int(trace.batch_size)
    out: dict[str, TaskWork] = {}
    for name, r in rows.iterrows():
        w, x, y = int(r["grad_bytes"]), int(r["in_bytes"]), int(r["act_bytes"])
        out[f"fwd/{name}"] = _work(batch * int(r["fwd_flops"]), batch * (x + y) + w)
        out[f"bwd/{name}"] = _work(batch * int(r["bwd_flops"]), batch * (y + 2 * x) + 2 * w)
    grad = int(sum(trace.grad_bytes))
    out["update"] = _work(2 * (grad // FP32_BYTES), 3 * grad)
    batch_in = batch * int(rows["in_bytes"].iloc[0]) if len(rows) else 0
    out["io"] = out["h2d"] = _work(1, batch_in)
    return out


Tensor = tuple[str, int]  # name, bytes


@dataclass(frozen=True)
class TaskTensors:
    """The tensors one task reads (``inputs``) and writes (``outputs``)."""

    inputs: tuple[Tensor, ...]
    outputs: tuple[Tensor, ...]


def task_tensors(trace: Trace, messages=()) -> dict[str, TaskTensors]:
    """:class:`TaskTensors` of every task id the predictor schedules for ``trace``, the
    collectives of ``messages`` (:class:`dgtraces.predict.policies.Message`) included."""
    from dgtraces.models import layers_frame

    rows = layers_frame(trace.model).set_index("layer").loc[list(trace.layers)]
    batch, names = int(trace.batch_size), list(trace.layers)
    grads = {name: int(w) for name, w in rows["grad_bytes"].items()}
    batch_in = batch * int(rows["in_bytes"].iloc[0]) if len(rows) else 0
    out = {"io": TaskTensors((), (("input/host", batch_in),)),
           "h2d": TaskTensors((("input/host", batch_in),), (("input/batch", batch_in),))}
    for i, (name, r) in enumerate(rows.iterrows()):
        x, y, w = batch * int(r["in_bytes"]), batch * int(r["act_bytes"]), grads[name]
        src = (f"act/{names[i - 1]}" if i else "input/batch", x)
        weight = ((f"weight/{name}", w),) if w else ()
        out[f"fwd/{name}"] = TaskTensors((src, *weight), ((f"act/{name}", y),))
        dy = (f"grad_in/{names[i + 1]}" if i + 1 < len(names) else "loss_grad", y)
        grad = ((f"grad/{name}", w),) if w else ()
        out[f"bwd/{name}"] = TaskTensors((dy, src, *weight), ((f"grad_in/{name}", x), *grad))
    for m in messages:
        out[m.task_id] = TaskTensors(tuple((f"grad/{name}", grads[name]) for name in m.layers),
                                     ((f"reduced/m{m.index}", int(m.nbytes)),))
    learned = [name for name in names if grads[name]]
    out["update"] = TaskTensors(
        (*((f"reduced/m{m.index}", int(m.nbytes)) for m in messages),
         *((f"weight/{name}", grads[name]) for name in learned)),
        tuple((f"weight_next/{name}", grads[name]) for name in learned))
    return out


def _work(num_ops: int, tensor_size: int) -> TaskWork:
    return TaskWork(max(1, num_ops), max(1, tensor_size))
