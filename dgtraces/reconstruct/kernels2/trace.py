"""A reconstructed training trace under ``kernels-2.0`` or ``kernels-2.1`` (any GPU with
datasheet peaks and an SM count); called by :func:`dgtraces.reconstruct.reconstruct_trace`
with ``method="kernels-2.0"`` / ``"kernels-2.1"``.
"""

from __future__ import annotations

import numpy as np

from dgtraces.errors import Code, DgtracesError
from dgtraces.reconstruct.kernels2.traces import TRACE_RELEASE
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

TRACES = (f"per-layer GPU traces of release v{TRACE_RELEASE} (Kineto V100, caffe-time "
          "Titan X)")
BASIS_TEXT_21 = {
    "traces+throughputs": "kernel constants fitted on DeepBench kernels of seven GPUs; "
                          "device constants (per-class efficiencies, e_mem, t0_mem, h_us) "
                          f"fitted on its {TRACES} and calibration.csv throughputs",
    "traces": "kernel constants fitted on DeepBench kernels of seven GPUs; device constants "
              f"(per-class efficiencies, e_mem, t0_mem) fitted on its {TRACES}; h_us = mean "
              "of the calibrated devices",
    "throughputs": "kernel constants fitted on DeepBench kernels of seven GPUs; device "
                   "constants (kappa, e_mem, h_us) fitted on its calibration.csv "
                   "throughputs; t0_mem = mean of the trace-fitted devices",
    "kernels": BASIS_TEXT["kernels"] + "; t0_mem = mean of the trace-fitted devices",
    "datasheet": BASIS_TEXT["datasheet"] + "; t0_mem = mean of the trace-fitted devices",
}


def method_id(version: str = VERSION) -> str:
    return f"{METHOD}-{version}"


def _calibration(device: str, version: str):
    """(calibration, basis text) of ``device`` under kernels-``version``."""
    if version == "2.1":
        from dgtraces.reconstruct.kernels2.stage2_traces import calibrate21

        cal21 = calibrate21(device)
        return cal21, BASIS_TEXT_21[cal21.basis]
    from dgtraces.reconstruct.kernels2.stage2 import calibrate_kernels

    cal = calibrate_kernels(device)
    return cal, BASIS_TEXT[cal.basis]


def reconstruct(device: str, model: str, batch_size: int, precision: str,
                timestamp_utc: str, version: str = VERSION):
    """(run row, layer_timings frame, bound frame) of one kernels-``version`` trace."""
    import pandas as pd

    from dgtraces.reconstruct.kernels2.gemm import SM_SOURCE, get_gpu
    from dgtraces.reconstruct.kernels2.network import gemm_counts, net_times, soft_max
    from dgtraces.reconstruct.roofline.costmodel import (
        GEMM_KINDS,
        LayerCosts,
        layer_arrays,
        timings_frame,
    )

    if precision != "fp32":
        raise DgtracesError(f"{method_id(version)} models fp32 only (DeepBench kernels "
                            f"are fp32); got {precision!r}", code=Code.NO_CALIBRATION)
    gpu = get_gpu(device)  # UNKNOWN_DEVICE, listing the known ones
    cal, basis_text = _calibration(device, version)
    la = layer_arrays(model)
    t = net_times(model, device, cal.params, batch_size, la=la)
    rid = f"rec-{device}-{model}-b{batch_size}-{precision}-v{version}"
    fwd, bwd = float(t.fwd_ms.sum()), float(t.bwd_ms.sum())
    host = t.host_fwd_ms + t.host_bwd_ms + t.host_update_ms
    iter_ms = soft_max(fwd + bwd + t.update_ms, host)
    detail = {
        "method": METHOD, "method_version": version, "precision": precision,
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
        source=f"{method_id(version)} cost model ({basis_text}); peaks: {gpu.source}",
        collector_version=method_id(version), timestamp_utc=timestamp_utc,
        fwd_ms=fwd, bwd_ms=bwd, update_ms=t.update_ms, iter_ms=iter_ms,
        layer_sum_ratio=(fwd + bwd + t.update_ms) / iter_ms, flagged=False,
        flag_reason=None, params=detail,
        notes=("per-layer times are modelled device time (host dispatch apart, in "
               "params_json); not measured"))
    zero = np.zeros(len(la.layer))
    costs = LayerCosts(t.fwd_ms, t.bwd_ms, t.update_ms, zero, zero, zero, zero)
    kind = np.where(np.isin(la.kind, GEMM_KINDS), "compute", "memory")
    # the latency share: each GEMM kernel's floor t0, every other kernel's (a conv's or fc's
    # bias kernel too) the memory-bound floor, as net_times charges them
    t0_ms, floor_ms = cal.params.t0_us * 1e-3, cal.params.mem_floor_us() * 1e-3
    gemm_fwd, gemm_bwd = gemm_counts(model, device, batch_size, len(la.layer))
    bound = pd.DataFrame({"layer": list(la.layer), "kind": list(la.kind), "fwd_bound": kind,
                          "bwd_bound": kind,
                          "fwd_latency_ms": la.fwd_kernels * floor_ms
                          + gemm_fwd * (t0_ms - floor_ms),
                          "bwd_latency_ms": la.bwd_kernels * floor_ms
                          + gemm_bwd * (t0_ms - floor_ms)})
    return run, timings_frame(la, costs, rid), bound
