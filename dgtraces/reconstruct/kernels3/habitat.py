"""The K80 transfer of kernels-3: Habitat's roofline wave scaling (Yu, Gao, Golikov, Pekhimenko,
"Habitat: A Runtime-Based Computational Performance Predictor for Deep Neural Network
Training", USENIX ATC 2021; geoffxy/habitat ``analyzer/habitat/analysis/wave_scaling/
roofline.py``), with the kernel's FLOPs and bytes from the GEMM engine in place of Habitat's
profiled metrics, boost clocks, and one thread block per SM at a time
(docs/reconstruction-kernels3.md, "Devices").
"""

from __future__ import annotations

import numpy as np

from dgtraces.reconstruct.kernels3.devices import Device


def memory_share(flops: np.ndarray, bytes_: np.ndarray, dest: Device) -> np.ndarray:
    """Habitat's gamma: 1 - 0.5 I/R up to the destination's ridge point R = P/B, 0.5 R/I
    beyond (I: the kernel's FLOPs per byte); 1 for a kernel without FLOPs."""
    ridge = dest.peak_fp32_tflops * 1e12 / (dest.bandwidth_gb_s * 1e9)
    safe = np.where(bytes_ > 0, bytes_, 1.0)
    inten = np.where(bytes_ > 0, flops / safe, np.inf)
    gamma = np.where(inten <= ridge, 1.0 - 0.5 * inten / ridge,
                     0.5 * ridge / np.maximum(inten, 1e-300))
    return np.where(flops > 0, np.clip(gamma, 0.0, 1.0), 1.0)


def scale(t_origin: np.ndarray, flops: np.ndarray, bytes_: np.ndarray, blocks: np.ndarray,
          origin: Device, dest: Device) -> np.ndarray:
    """Each kernel's time on ``dest`` from its time on ``origin`` (same units)."""
    gamma = memory_share(flops, bytes_, dest)
    f_clk = origin.boost_mhz / dest.boost_mhz
    small = (blocks < origin.sm_count) & (blocks < dest.sm_count)  # under one wave on both
    partial = (f_clk * np.ceil(blocks / dest.sm_count)
               / np.ceil(blocks / origin.sm_count)) ** (1.0 - gamma)
    full = ((origin.bandwidth_gb_s / dest.bandwidth_gb_s) ** gamma
            * (f_clk * origin.sm_count / dest.sm_count) ** (1.0 - gamma))
    return t_origin * np.where(small, partial, full)
