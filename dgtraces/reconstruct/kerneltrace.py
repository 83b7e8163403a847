"""A reconstructed training trace under ``kernels-2.0`` (any GPU with datasheet peaks and an
SM count); called by :func:`dgtraces.reconstruct.reconstruct_trace` with
``method="kernels-2.0"``.
"""

from __future__ import annotations

import numpy as np

from dgtraces.errors import Code, DgtracesError
from dgtraces.tables.runrow import runs_row

METHOD = "dgtraces.reconstruct/kernels"
VERSION = "2.0"
BASIS_TEXT = {
    "throughputs": "kernel constants fitted on DeepBench kernels of seven GPUs; device "
                   "constants (kappa, e_mem, h_us) fitted on its calibration.csv throughputs",
    "kernels": "kernel constants fitted on DeepBench kernels of seven GPUs (this one "
               "included); kappa = 1, e_mem = 0.8, h_us = mean of the calibrated devices",
    "datasheet": "no kernels or throughputs of this GPU: kernel constants from the seven "
                 "DeepBench GPUs, datasheet peaks and SM count; kappa = 1, e_mem = 0.8, "
                 "h_us = mean of the calibrated devices (unconstrained: DeepBench kernels or "
                 "calibration.csv throughputs of this GPU would constrain it)",
}


def method_id() -> str:
    return f"{METHOD}-{VERSION}"


def reconstruct(device: str, model: str, batch_size: int, precision: str,
                timestamp_utc: str):
    """(run row, layer_timings frame, bound frame) of one kernels-2.0 trace."""
    import pandas as pd

    from dgtraces.reconstruct.costmodel import (
        GEMM_KINDS,
        LayerCosts,
        layer_arrays,
        timings_frame,
    )
    from dgtraces.reconstruct.kernelcal import calibrate_kernels
    from dgtraces.reconstruct.kernelmodel import SM_SOURCE, get_gpu
    from dgtraces.reconstruct.kernelnet import net_times, soft_max

    if precision != "fp32":
        raise DgtracesError(f"{method_id()} models fp32 only (DeepBench kernels are fp32); "
                            f"got {precision!r}", code=Code.NO_CALIBRATION)
    gpu = get_gpu(device)  # UNKNOWN_DEVICE, listing the known ones
    cal = calibrate_kernels(device)
    la = layer_arrays(model)
    t = net_times(model, device, cal.params, batch_size, la=la)
    rid = f"rec-{device}-{model}-b{batch_size}-{precision}-v{VERSION}"
    fwd, bwd = float(t.fwd_ms.sum()), float(t.bwd_ms.sum())
    host = t.host_fwd_ms + t.host_bwd_ms + t.host_update_ms
    iter_ms = soft_max(fwd + bwd + t.update_ms, host)
    detail = {
        "method": METHOD, "method_version": VERSION, "precision": precision,
        "params": cal.params.as_dict(), "basis": cal.basis,
        "device_peaks": {"peak_fp32_tflops": gpu.peak_tflops,
                         "mem_bandwidth_gb_s": gpu.bandwidth_gb_s,
                         "sm_count": gpu.sm_count, "source": gpu.source,
                         "sm_source": SM_SOURCE},
        "calibration_rows": list(cal.rows),
        "fit_errors_pct": [round(e, 2) for e in cal.errors_pct],
        "host_dispatch_ms": host, "device_ms": fwd + bwd + t.update_ms,
        "kernels_source": "baidu-research/DeepBench results/train (dgtraces/reference/"
                          "deepbench)",
        "docs": "docs/reconstruction-kernels.md",
    }
    run = runs_row(
        run_id=rid, model=model, device=device, device_kind="gpu", host=gpu.name,
        framework="reconstructed (cuDNN/cuBLAS kernel model)", precision=precision,
        batch_size=batch_size, threads=None, cores=None, provenance="reconstructed",
        source=f"{method_id()} cost model ({BASIS_TEXT[cal.basis]}); peaks: {gpu.source}",
        collector_version=method_id(), timestamp_utc=timestamp_utc,
        fwd_ms=fwd, bwd_ms=bwd, update_ms=t.update_ms, iter_ms=iter_ms,
        layer_sum_ratio=(fwd + bwd + t.update_ms) / iter_ms, flagged=False,
        flag_reason=None, params=detail,
        notes=("per-layer times are modelled device time (host dispatch apart, in "
               "params_json); not measured"))
    zero = np.zeros(len(la.layer))
    costs = LayerCosts(t.fwd_ms, t.bwd_ms, t.update_ms, zero, zero, zero, zero)
    kind = np.where(np.isin(la.kind, GEMM_KINDS), "compute", "memory")
    t0_ms = cal.params.t0_us * 1e-3  # the per-kernel floor: the latency share
    bound = pd.DataFrame({"layer": list(la.layer), "kind": list(la.kind), "fwd_bound": kind,
                          "bwd_bound": kind, "fwd_latency_ms": la.fwd_kernels * t0_ms,
                          "bwd_latency_ms": la.bwd_kernels * t0_ms})
    return run, timings_frame(la, costs, rid), bound
