"""ASTRA-sim 1.0 text workload of a layer trace (data-parallel training loop).

The format, as the ASTRA-sim 1.0 code base (branch ``ASTRA-sim-1.0`` of astra-sim/astra-sim)
parses it (``Workload::initialize_workload`` in ``astra-sim/workload/Workload.cc``, which reads
whitespace-separated tokens with ``>>``): line 1 the parallelism (``DATA``), line 2 the layer
count, then one line per layer::

    name reserved fwd_cycles fwd_comm fwd_bytes ig_cycles ig_comm ig_bytes
         wg_cycles wg_comm wg_bytes update_cycles

Compute times are cycles, communication sizes bytes. ASTRA-sim 1.0 applies a layer's update
delay after that layer's own weight-gradient collective (``Layer::call`` on
``Wight_Grad_Comm_Finished``), and only if the layer has a collective; the DATA loop issues the
collectives from the last layer to the first. So by default the whole update goes on the
first layer (forward order) with a gradient: its collective is issued last, and the update
then follows the last gradient exchange, as the predictor's DAG has it (see
:class:`UpdatePlacement`). ASTRA-sim's analytical network counts
time in ns (link latency in ns, bandwidth in GB/s = bytes/ns), so one cycle is one ns there:
we convert at ``clock_ghz`` = 1.0 unless told otherwise. The format has no comments, so the
provenance, units and the backward split go to a JSON sidecar (``<out>.meta.json``).

No update delay is 0 (#36 item 9): ``Layer::call`` registers a layer's update delay
unconditionally when its collective ends (``Sys::register_event`` with that many cycles),
and the analytical backend's event queue asserts that every event lies strictly after the
current time (``EventQueue::add_event``, ``src/event-queue/EventQueue.cc`` of
astra-sim/astra-network-analytical at d27635bc, the ASTRA-sim-1.0 branch's submodule): a
0-cycle update aborts the simulation. Every update is therefore at least
:data:`MIN_UPDATE_CYCLES` (1 cycle, 1 ns at 1 GHz), on layers without a collective too
(ASTRA-sim ignores those).

The input read and copy (``io_ms``, ``h2d_ms``: a GPU trace's modelled input copy, as
``predict`` adds it, #36 item 12) have no column; ``predict`` runs them, by default
(``--io-overlap off``), one after the other right before the first layer's forward on the
compute stream, so they are added to the first layer's forward compute, and the sidecar
says how much (``input_ms``). The workload then runs what ``predict`` predicts.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

from dgtraces.values import bad_value as bad

from . import check_workers, split_backward

if TYPE_CHECKING:  # pragma: no cover
    from ..predict.trace import Trace

PARALLELISMS = ("DATA",)  # what a single-model layer trace can describe
RESERVED = -1  # the "reserved variable" column; ASTRA-sim's own examples write -1
MIN_UPDATE_CYCLES = 1  # a 0-cycle update is an event at the current time: ASTRA-sim aborts
FORMAT_DOC = ("ASTRA-sim 1.0 text workload: astra-sim/astra-sim branch ASTRA-sim-1.0, "
              "parser Workload::initialize_workload and DATA loop "
              "Workload::iterate_data_parallel in astra-sim/workload/Workload.cc, update delay "
              "Layer::call in astra-sim/workload/Layer.cc")


class UpdatePlacement(StrEnum):
    """Where the run's whole-model ``update_ms`` goes in the per-layer update column.

    ``first-layer`` (default): all of it on the first layer (forward order) that has a
    gradient; ASTRA-sim 1.0 starts it when that layer's collective, the last one issued,
    ends, so the update follows the gradient exchange as in ``dgtraces predict``.
    ``by-grad-bytes``: shared among the layers by gradient bytes (each share starts when
    its own layer's collective ends, so most of the update hides under the backward pass:
    the iteration comes out shorter than the predictor's by up to ``update_ms``)."""

    FIRST_LAYER = "first-layer"
    BY_GRAD_BYTES = "by-grad-bytes"


UPDATE_NOTES = {
    UpdatePlacement.FIRST_LAYER: "the run's whole-model update_ms on the first layer (forward "
                                 "order) with a gradient: ASTRA-sim 1.0 starts a layer's update "
                                 "when its own collective ends, and this layer's is issued "
                                 "last, so the update follows the gradient exchange",
    UpdatePlacement.BY_GRAD_BYTES: "the run's whole-model update_ms shared among layers by "
                                   "gradient bytes; each share starts when its layer's "
                                   "collective ends, so most of it overlaps the backward pass",
}


@dataclass(frozen=True)
class AstraLayer:
    name: str
    fwd_cycles: int
    ig_cycles: int
    wg_cycles: int
    wg_comm: str  # ALLREDUCE | NONE
    wg_bytes: int
    update_cycles: int

    def line(self) -> str:
        return (f"{self.name}\t{RESERVED}\t{self.fwd_cycles}\tNONE\t0\t{self.ig_cycles}\tNONE\t0"
                f"\t{self.wg_cycles}\t{self.wg_comm}\t{self.wg_bytes}\t{self.update_cycles}")


@dataclass(frozen=True)
class AstraWorkload:
    parallelism: str
    layers: tuple[AstraLayer, ...]
    meta: dict

    def text(self) -> str:
        return "\n".join([self.parallelism, str(len(self.layers))]
                         + [x.line() for x in self.layers]) + "\n"


def _cycles(ms: float, clock_ghz: float) -> int:
    return round(ms * clock_ghz * 1e6)


def update_shares_ms(trace: Trace, placement: UpdatePlacement) -> list[float]:
    """Per-layer update delay (ms) under ``placement``; zero on layers without a gradient
    (ASTRA-sim 1.0 applies no update delay where there is no collective)."""
    total = sum(trace.grad_bytes)
    if placement is UpdatePlacement.BY_GRAD_BYTES:
        return [trace.update_ms * b / total if total else 0.0 for b in trace.grad_bytes]
    first = next((i for i, b in enumerate(trace.grad_bytes) if b > 0), None)
    return [trace.update_ms if i == first else 0.0 for i in range(len(trace.layers))]


def _placement(update: str | UpdatePlacement) -> UpdatePlacement:
    try:
        return UpdatePlacement(update)
    except ValueError:
        raise bad("update", "unknown update placement",
                  " | ".join(p.value for p in UpdatePlacement), update) from None


def astra_workload(trace: Trace, *, workers: int = 1, parallelism: str = "DATA",
                   clock_ghz: float = 1.0,
                   update: str | UpdatePlacement = UpdatePlacement.FIRST_LAYER,
                   extra: dict | None = None) -> AstraWorkload:
    """The ASTRA-sim 1.0 workload of ``trace``: forward, input-gradient and weight-gradient
    compute per layer (cycles at ``clock_ghz``), the weight gradient all-reduced (its bytes
    from the ``layers`` table), and the trace's update time placed by ``update`` (see
    :class:`UpdatePlacement`; default on the first layer with a gradient). ``extra`` (e.g.
    :func:`dgtraces.export.terms.export_terms`) joins the sidecar's metadata."""
    check_workers(workers)
    placement = _placement(update)
    if parallelism not in PARALLELISMS:
        raise bad("parallelism", "a layer trace describes data-parallel training only",
                  " | ".join(PARALLELISMS), parallelism)
    if isinstance(clock_ghz, bool) or not isinstance(clock_ghz, (int, float)) \
            or not 0 < clock_ghz < 1e3:
        raise bad("clock_ghz", "must be a clock frequency in GHz, > 0", "e.g. 1.0", clock_ghz)
    for name in trace.layers:
        if not name or any(c.isspace() for c in name):
            raise bad("layer", "ASTRA-sim reads layer names as single tokens",
                      "no whitespace", name)
    split = split_backward(trace)
    total_grad = sum(trace.grad_bytes)
    layers = []
    input_ms = float(trace.io_ms + trace.h2d_ms)  # before the first forward, as in predict
    fwd_ms = [f + (input_ms if i == 0 else 0.0) for i, f in enumerate(trace.fwd_ms)]
    for name, f, ig, wg, nbytes, update_ms in zip(
            trace.layers, fwd_ms, split.ig_ms, split.wg_ms, trace.grad_bytes,
            update_shares_ms(trace, placement), strict=True):
        layers.append(AstraLayer(name, _cycles(f, clock_ghz), _cycles(ig, clock_ghz),
                                 _cycles(wg, clock_ghz), "ALLREDUCE" if nbytes else "NONE",
                                 int(nbytes),
                                 max(MIN_UPDATE_CYCLES, _cycles(update_ms, clock_ghz))))
    meta = {
        "format": FORMAT_DOC,
        "parallelism": parallelism,
        "workers": workers,
        "workers_note": "the workload file is the same for every NPU; the NPU count is set by "
                        "ASTRA-sim's network configuration, which must have this many NPUs",
        "clock_ghz": clock_ghz,
        "units": {"compute": f"cycles at {clock_ghz:g} GHz ({clock_ghz * 1e6:g} cycles per "
                             "ms; 1 cycle = 1 ns at 1 GHz, the analytical backend's tick)",
                  "communication": "bytes"},
        "model": trace.model, "batch_size": trace.batch_size, "layers": len(layers),
        "trace_provenance": trace.provenance, "trace_source": trace.source,
        "trace_run_id": trace.run_id, "trace_device": trace.device,
        "backward_split": split.note,
        "update_placement": placement.value,
        "update": UPDATE_NOTES[placement],
        "update_min_cycles": MIN_UPDATE_CYCLES,
        "update_min_note": "no update delay is 0: ASTRA-sim 1.0 registers each layer's update "
                           "when its collective ends, and its analytical event queue aborts "
                           "on an event at the current time (EventQueue.cc:20); layers given "
                           "no update get 1 cycle, at most one cycle per layer in all",
        "input_phases_ms": {"io": float(trace.io_ms), "h2d": float(trace.h2d_ms)},
        "input": "the input read and host-to-device copy (h2d: predict's modelled copy of a "
                 "GPU trace unless stored or given) are added to the first layer's forward "
                 "compute: the format has no column for them, and predict runs them right "
                 "before that forward (--io-overlap off)",
        "totals_ms": {"fwd": float(sum(trace.fwd_ms)), "input_grad": float(sum(split.ig_ms)),
                      "weight_grad": float(sum(split.wg_ms)), "update": trace.update_ms,
                      "grad_bytes": int(total_grad)},
        **(extra or {}),
    }
    return AstraWorkload(parallelism, tuple(layers), meta)


def nccl_reference(workload: AstraWorkload, *, workers: int, gpus_per_node: int, intra: str,
                   inter: str, nics_per_node: int | None = None, nccl: str | None = None,
                   nccl_time: str = "run") -> AstraWorkload:
    """The workload with NCCL's modelled all-reduce of each layer's gradient in its sidecar
    (``nccl_reference``: release, links, time per layer): a figure to compare ASTRA-sim's own
    network model against; the workload file does not change."""
    from dgtraces.comm.nccl import KINDS, collective_us, fabric_view, model, topology

    m = model(nccl, nccl_time)
    t = topology(workers, gpus_per_node, intra, inter, nics_per_node)
    sizes = [x.wg_bytes for x in workload.layers]
    times, algos, protos = collective_us(KINDS["allreduce"], t, sizes, "auto", m)
    ref = {"model": m.label, "nccl": m.version.key, "time": m.time, "workers": workers,
           "gpus_per_node": gpus_per_node, "nics_per_node": t.nics_per_node,
           "links": fabric_view(m, t), "provenance": "modelled",
           "note": "each layer's gradient all-reduced alone under NCCL's model (no overlap, "
                   "no bucketing); not read by ASTRA-sim",
           "layers": [{"name": x.name, "grad_bytes": x.wg_bytes, "allreduce_us": float(us),
                       "algorithm": a, "protocol": p}
                      for x, us, a, p in zip(workload.layers, times.tolist(), algos, protos,
                                             strict=True)]}
    return AstraWorkload(workload.parallelism, workload.layers,
                         dict(workload.meta, nccl_reference=ref))


def meta_path(out: str | Path) -> Path:
    return Path(f"{out}.meta.json")


def write_astra(out: str | Path, workload: AstraWorkload) -> tuple[Path, Path]:
    """Write the workload and its ``.meta.json`` sidecar (each atomically)."""
    from dgtraces.io.files import atomic_write_all

    side = meta_path(out)
    meta = dict(workload.meta, layer_rows=[asdict(x) for x in workload.layers])
    atomic_write_all({side: json.dumps(meta, indent=1).encode(),
                      Path(out): workload.text().encode()})
    return Path(out), side
