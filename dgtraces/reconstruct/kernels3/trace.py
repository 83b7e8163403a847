"""One reconstructed training trace under kernels-3, priced with the parameters shipped in a
release (never refitted); called by :func:`dgtraces.reconstruct.reconstruct_trace` with
``method="kernels-3"`` (docs/reconstruction-kernels3.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from dgtraces.errors import Code, DgtracesError
from dgtraces.reconstruct.kernels3.model import METHOD, Model

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from dgtraces.store.release import Release

COLLECTOR = f"dgtraces.reconstruct/{METHOD}"
# the default --framework per device (docs/reconstruction-kernels3.md): the family of the
# device's per-layer source; every other GPU takes DEFAULT_FRAMEWORK
DEVICE_FRAMEWORK = {"k80": "caffe-mpi", "titanx-maxwell": "caffe-mpi",
                    "v100": "pytorch-ddp", "v100-dgxs-32gb": "pytorch-ddp"}
DEFAULT_FRAMEWORK = "pytorch-ddp"
BASIS_TEXT = {"kernels": "its own published kernels, the model fitted per GPU on them with "
                         "shared priors (K1-K4)",
              "prior": "no kernels of this GPU: the shared prior of the eight DeepBench GPUs "
                       "and their shape effects, its datasheet peaks and SM count",
              "transfer": "no kernels of this generation: each kernel priced on {origin} and "
                          "transferred by Habitat's wave scaling (SMs, clock, bandwidth)"}
_MODELS: dict[tuple, Model] = {}


def default_framework(device: str) -> str:
    return DEVICE_FRAMEWORK.get(device, DEFAULT_FRAMEWORK)


def model_of(rel: "Release") -> Model:
    """The release's model, read and checked once per process and manifest digest."""
    from dgtraces.reconstruct.kernels3.params import load

    key = (str(rel.path), rel.digest)
    if key not in _MODELS:
        _MODELS[key] = load(rel)
    return _MODELS[key]


@dataclass(frozen=True)
class Trace:
    run: dict
    layer_timings: "pd.DataFrame"
    bound: "pd.DataFrame"
    pricing: "pd.DataFrame"  # layer, kind, fwd_priced_by, bwd_priced_by, extrapolated


def reconstruct(device: str, model: str, batch_size: int, precision: str,
                timestamp_utc: str, framework: str | None, rel: "Release") -> Trace:
    """One kernels-3 trace of ``model`` on ``device`` with ``framework``'s per-layer overhead
    (a name of the framework registry, ``none``, or None: the device's default)."""
    import pandas as pd

    from dgtraces.reconstruct.kernels3.devices import get_device
    from dgtraces.reconstruct.roofline.costmodel import LayerCosts, layer_arrays, timings_frame
    from dgtraces.reference.frameworks import get_framework

    dev = get_device(device)  # UNKNOWN_DEVICE, listing the known ones
    fw = framework or default_framework(device)
    profile = get_framework(fw)  # UNKNOWN_FRAMEWORK with the registry's names
    family = "none" if profile is None else profile.family
    m = model_of(rel)
    basis = m.basis(device, precision)  # NO_CALIBRATION for amp without amp kernels
    p = m.parts(model, device, precision, batch_size)
    t = m.times(p, device, family)
    mem_extra = m.memory_extrapolated(p)
    extra = sorted({*(str(x) for x in p.layer[p.extrapolated]), *mem_extra})
    rid = f"rec-{device}-{model}-b{batch_size}-{precision}-k3-{fw}"
    fwd, bwd = float(t.fwd_ms.sum()), float(t.bwd_ms.sum())
    e_mem, floor = m.memory(device)  # the constants times() priced with
    kind_, _, origin = basis.partition(":")
    detail = {
        "method": METHOD, "precision": precision, "framework": fw,
        "framework_family": family, "overhead_us_per_layer": m.stage.overhead(family)
        if m.stage else None, "basis": basis,
        "device_peaks": {"peak_fp32_tflops": dev.peak_fp32_tflops,
                         "peak_fp16_tensor_tflops": dev.peak_tensor_tflops,
                         "mem_bandwidth_gb_s": dev.bandwidth_gb_s, "sm_count": dev.sm_count,
                         "boost_mhz": dev.boost_mhz, "source": dev.source},
        "memory": {"e_mem": e_mem, "floor_us": floor},
        "priced_by": {str(n): list(tags) for n, tags in zip(p.layer, p.tags, strict=True)},
        "extrapolated_layers": extra, "release": rel.version, "release_digest": rel.digest,
        "kernels_digest": m.digest, "docs": "docs/reconstruction-kernels3.md",
    }
    flag = f"{len(extra)} layer(s) priced outside the fitted ranges" if extra else None
    run = _runs_row(rid, model, device, dev.name, fw, precision, batch_size,
                    BASIS_TEXT[kind_].format(origin=origin), timestamp_utc, fwd, bwd,
                    t.update_ms, detail, flag)
    la = layer_arrays(model)
    zero = np.zeros(p.layers)
    costs = LayerCosts(t.fwd_ms, t.bwd_ms, t.update_ms, zero, zero, zero, zero)
    fwd_tag = [f for f, _ in p.tags]
    bwd_tag = [b for _, b in p.tags]
    bound = pd.DataFrame({"layer": list(p.layer), "kind": list(p.kind), "fwd_bound": fwd_tag,
                          "bwd_bound": bwd_tag, "fwd_latency_ms": zero, "bwd_latency_ms": zero})
    pricing = pd.DataFrame({"layer": list(p.layer), "kind": list(p.kind),
                            "fwd_priced_by": fwd_tag, "bwd_priced_by": bwd_tag,
                            "extrapolated": [str(n) in extra for n in p.layer]})
    return Trace(run, timings_frame(la, costs, rid), bound, pricing)


def _runs_row(rid, model, device, host, fw, precision, batch, basis_text, stamp, fwd, bwd,
              update, detail, flag) -> dict:
    from dgtraces.tables.runrow import runs_row

    if not np.isfinite(fwd + bwd + update):
        raise DgtracesError(f"{rid}: the model gave a non-finite time", code=Code.BAD_INPUT)
    notes = ("per-layer times are modelled, not measured: published kernels of the same shape "
             "where they exist, the fitted kernel model elsewhere, bytes for memory-bound "
             f"layers, plus {fw}'s per-layer overhead (params_json: priced_by)")
    if flag:
        notes += f"; {flag}: extrapolated (params_json: extrapolated_layers)"
    return runs_row(
        run_id=rid, model=model, device=device, device_kind="gpu", host=host,
        framework=f"reconstructed ({fw} per-layer overhead)", precision=precision,
        batch_size=batch, threads=None, cores=None, provenance="reconstructed",
        source=f"{COLLECTOR} cost model: {basis_text}; framework overhead fitted per family "
               "(docs/reconstruction-kernels3.md)", collector_version=COLLECTOR,
        timestamp_utc=stamp, fwd_ms=fwd, bwd_ms=bwd, update_ms=update,
        iter_ms=fwd + bwd + update, layer_sum_ratio=1.0, flagged=False, flag_reason=None,
        params=detail, notes=notes)
