"""Stage F's observations from the framework-level sources of issue #33 item 3: the Kineto
V100 runs and the caffe-time Titan X runs per layer and direction (kernels-2.1's blocks and
pre-registered folds), B-Caffe K80 GoogLeNet backward per layer (its logs averaged), and the
fitted ``calibration.csv`` rows of k80 and v100 with their stated framework.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from dgtraces.errors import Code, DgtracesError
from dgtraces.reconstruct.kernels3.devices import get_device
from dgtraces.reconstruct.kernels3.stagef import MEM_DEVICES, POOLED, FRows, frows
from dgtraces.reconstruct.roofline.costmodel import GEMM_KINDS

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from dgtraces.reconstruct.kernels3.model import Model

# the framework a source states (runs.framework, calibration.csv framework) -> its family
SOURCE_FAMILY = (("B-Caffe", "caffe"), ("caffe", "caffe"), ("pytorch", "pytorch"),
                 ("mxnet", "mxnet"), ("tensorflow", "tf"))
BCAFFE = "B-Caffe"
CALIBRATED = ("k80", "v100")  # devices with fitted calibration.csv rows


def family_of(framework: str) -> str:
    """The framework family of a source's stated framework (BAD_INPUT if none matches)."""
    for prefix, family in SOURCE_FAMILY:
        if framework.startswith(prefix):
            return family
    raise DgtracesError(f"no framework family for {framework!r}", code=Code.BAD_INPUT)


def trace_rows(model: "Model", runs: "pd.DataFrame", timings: "pd.DataFrame") -> FRows:
    """The per-layer rows of the Kineto V100 and caffe-time Titan X runs (one block per
    measurement setup, with kernels-2.1's folds) and B-Caffe K80's backward rows."""
    from dgtraces.reconstruct.kernels2.traces import blocks_from

    frameworks = dict(zip(runs["run_id"].astype(str), runs["framework"].astype(str),
                          strict=True))
    parts = []
    for device in MEM_DEVICES:
        bw = get_device(device).bandwidth_gb_s
        for b in blocks_from(runs, timings, device):
            p = model.parts(b.model, device, "fp32", b.batch)
            d, i = b.bwd.astype(int), b.index
            parts.append(frows(
                b.setup, device, family_of(frameworks[str(b.run[0])]), p.gemm_ms[d, i],
                p.bytes_[d, i], bw, p.kernels[d, i], 1.0, b.measured_ms, b.fold,
                [f"{r} {n} {'bwd' if k else 'fwd'}" for r, n, k in zip(b.run, b.layer, b.bwd,
                                                                        strict=True)],
                ~np.isin(b.kind, GEMM_KINDS)))
    bc = bcaffe_rows(model, runs, timings)
    return FRows.concat(parts + ([bc] if bc is not None else []))


def bcaffe_rows(model: "Model", runs: "pd.DataFrame", timings: "pd.DataFrame"
                ) -> FRows | None:
    """B-Caffe GoogLeNet on K80: backward per layer, averaged over its logs (batch as
    imported, 64, inferred); the K80's memory constants are the pooled ones."""
    from dgtraces.reconstruct.roofline.costmodel import layer_arrays

    pub = runs[(runs["provenance"] == "published")
               & runs["framework"].astype(str).str.startswith(BCAFFE)]
    if pub.empty:
        return None
    device, name = str(pub["device"].iloc[0]), str(pub["model"].iloc[0])
    batch = int(pub["batch_size"].iloc[0])
    lt = timings[timings["run_id"].isin(pub["run_id"])].dropna(subset=["bwd_ms"])
    meas = lt.groupby("layer")["bwd_ms"].mean()
    meas = meas[meas > 0]
    la = layer_arrays(name)
    pos = {str(n): i for i, n in enumerate(la.layer)}
    idx = np.array([pos[str(n)] for n in meas.index], int)
    p = model.parts(name, device, "fp32", batch)
    return frows(f"{BCAFFE} {name} b{batch} on {device}", POOLED, "caffe", p.gemm_ms[1, idx],
                 p.bytes_[1, idx], get_device(device).bandwidth_gb_s, p.kernels[1, idx], 1.0,
                 meas.to_numpy(float), None, [f"bcaffe {n} bwd" for n in meas.index],
                 ~np.isin(la.kind[idx], GEMM_KINDS))


def calibration_rows(model: "Model") -> FRows:
    """Each fitted ``calibration.csv`` row of k80 and v100 as one whole-model observation, on
    the architecture its framework ran; one block per (device, family)."""
    from dgtraces.reconstruct.roofline.calibration import fitted_rows, observation

    out = []
    for device in CALIBRATED:
        bw = get_device(device).bandwidth_gb_s
        for r in fitted_rows(device):
            o = observation(r)
            training = o.phase != "inference"
            p = model.parts(o.model, device, "fp32", o.batch_size, training)
            family = family_of(r.framework)
            out.append(frows(
                f"calibration.csv {device} {family}",
                device if device in MEM_DEVICES else POOLED, family, p.gemm_ms.sum(),
                p.bytes_.sum() + p.update_bytes, bw, p.kernels.sum() + p.update_kernels,
                p.layers * (2 if training else 1), [o.time_ms], None,
                [f"calibration.csv row {r.row}"]))
    return FRows.concat(out)
