"""Exports of layer traces to simulators: ASTRA-sim 1.0 text workloads and Chakra execution
traces (ASTRA-sim 2.0). Predicted timelines for Holistic Trace Analysis live with the other
timelines in :mod:`dgtraces.predict.kineto`.

Every export reads its trace through the predictor's trace machinery
(:func:`dgtraces.predict.trace.resolve`), so measured, reconstructed and published runs all
work, and carries the trace's provenance and source next to what it writes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import Code, DgtracesError, Failure

if TYPE_CHECKING:  # pragma: no cover
    from dgtraces.store.release import Release

    from ..predict.trace import Trace

MAX_WORKERS = 4096  # per-NPU files / NPUs named in an export; far beyond the traced clusters

SPLIT_NOTE = ("backward split into input-gradient and weight-gradient compute by the layers "
              "table's FLOPs: weight-gradient FLOPs = the layer's fwd_flops (same multiply-adds "
              "as its forward pass) for layers with gradients, input-gradient FLOPs = bwd_flops "
              "minus that; each layer's bwd_ms is shared in that ratio (the traces "
              "time the backward pass as one total)")


@dataclass(frozen=True)
class BackwardSplit:
    """Per-layer backward time split into input-gradient (ig) and weight-gradient (wg) ms."""

    ig_ms: tuple[float, ...]
    wg_ms: tuple[float, ...]
    note: str = SPLIT_NOTE


def check_workers(workers: int) -> int:
    """An integer NPU count in [1, MAX_WORKERS] (BAD_INPUT otherwise)."""
    from ..values import whole_number

    return whole_number("workers", workers, least=1, most=MAX_WORKERS)


def load_run_trace(run_id: str, release: "Release | str | None" = None, *,
                   whole: bool = True, h2d_link: str | None = None) -> Trace:
    """The Trace of a stored run of ``release`` (a Release or a version, default latest) as
    the predictor reads it: with ``h2d_link`` (``predict``'s default ``"host"``, the GPU's
    own host link, as the export commands pass it) a GPU trace without a stored copy time
    gets ``predict``'s modelled input copy over that link, so an export and ``predict``
    agree (#36); None leaves the copy as stored (the library default: layer compute only).
    NOT_FOUND for an unknown run, NO_LAYER_TIMINGS for a run that has only whole-model
    figures."""
    from dgtraces.store.release import as_release

    from ..predict.trace import resolve

    if not isinstance(run_id, str) or not run_id:
        raise DgtracesError("run id must be a non-empty string", code=Code.BAD_INPUT,
                            failures=[Failure(Code.BAD_INPUT, "bad run id", column="run_id",
                                              found=repr(run_id)[:40])])
    rel = as_release(release)
    runs = rel.cached("runs")
    if not (runs["run_id"] == run_id).any():
        raise DgtracesError(f"run {run_id!r} not in runs of release "
                            f"{rel.version}", code=Code.NOT_FOUND,
                            failures=[Failure(Code.NOT_FOUND, "unknown run", column="run_id",
                                              found=repr(run_id))],
                            hint="list runs with: dgtraces sql \"select run_id from runs\"")
    timings = rel.cached("layer_timings")
    if not (timings["run_id"] == run_id).any():
        raise DgtracesError(f"run {run_id!r} has no layer timings (whole-model figures only); "
                            "an export needs per-layer times", code=Code.NO_LAYER_TIMINGS,
                            failures=[Failure(Code.NO_LAYER_TIMINGS, "no layer_timings rows",
                                              column="run_id", found=repr(run_id))])
    return resolve(None, None, None, run_id=run_id, release=rel, whole=whole,
                   h2d_link=h2d_link)


def split_backward(trace: Trace) -> BackwardSplit:
    """Input-gradient / weight-gradient shares of each layer's backward time (see
    :data:`SPLIT_NOTE`); the two parts of a layer always sum to its ``bwd_ms``."""
    from ..models import layers_frame

    flops = layers_frame(trace.model).set_index("layer").loc[list(trace.layers)]
    ig, wg = [], []
    for b, nbytes, fwd_f, bwd_f in zip(trace.bwd_ms, trace.grad_bytes, flops["fwd_flops"],
                                       flops["bwd_flops"], strict=True):
        wg_flops = min(int(fwd_f), int(bwd_f)) if nbytes > 0 else 0
        share = wg_flops / int(bwd_f) if int(bwd_f) > 0 else 0.0
        wg.append(b * share)
        ig.append(b - b * share)
    return BackwardSplit(tuple(ig), tuple(wg))
