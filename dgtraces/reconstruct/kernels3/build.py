"""Fitting kernels-3 once, when a release is built: K1-K4 per precision on the release's
``kernels`` rows, then stage F on the framework-level sources of the release's runs and
``calibration.csv`` (docs/reconstruction-kernels3.md). The recipe of release 0.6.0 calls
:func:`fit_model`; nothing here runs when a trace is reconstructed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from dgtraces.reconstruct.kernels3 import stagef
from dgtraces.reconstruct.kernels3.devices import get_device
from dgtraces.reconstruct.kernels3.fit import KernelFit, Progress, fit_kernels
from dgtraces.reconstruct.kernels3.kernelrows import KernelRows, digest, kernel_rows
from dgtraces.reconstruct.kernels3.model import Model
from dgtraces.reconstruct.kernels3.price import measured_index
from dgtraces.reconstruct.kernels3.sources import calibration_rows, trace_rows

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


def engine_gpus(rows: KernelRows, precision: str) -> dict:
    """device -> the engine's constants at ``precision`` for every GPU of ``rows``."""
    return {d: get_device(d).gpu(precision) for d in sorted(set(rows.device))}


def fit_kernel_model(kernels: "pd.DataFrame", progress: Progress = lambda what: None
                     ) -> tuple[dict[str, KernelFit], KernelRows]:
    """K1-K4 of every precision of ``kernels``: (precision -> fit, the rows)."""
    rows = kernel_rows(kernels)
    fits = {}
    for prec in sorted(set(rows.precision)):
        sub = rows.select(rows.precision == prec)
        fits[prec] = fit_kernels(sub, engine_gpus(sub, prec), prec, progress)
    return fits, rows


def fit_model(kernels: "pd.DataFrame", runs: "pd.DataFrame", timings: "pd.DataFrame",
              progress: Progress = lambda what: None) -> tuple[Model, stagef.FRows]:
    """The whole model and stage F's observations (the evaluation refits them per fold)."""
    fits, rows = fit_kernel_model(kernels, progress)
    kernel_only = Model(fits, measured_index(rows), None, (0.0, np.inf), digest(kernels))
    progress("kernels-3 stage F observations (traces, B-Caffe, calibration.csv)")
    obs = stagef.FRows.concat([trace_rows(kernel_only, runs, timings),
                               calibration_rows(kernel_only)])
    progress(f"kernels-3 stage F fit: {len(obs)} observations")
    stage = stagef.fit(obs)
    mem = obs.bytes_[obs.mem_only & (obs.bytes_ > 0)]
    return Model(fits, kernel_only.measured, stage, (float(mem.min()), float(mem.max())),
                 kernel_only.digest), obs
