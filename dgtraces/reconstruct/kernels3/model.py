"""The fitted kernels-3 model as one object: the kernel fits per precision, the published
kernels it prices from, stage F's memory constants and framework overheads; which path prices
a device (own kernels, the K80 transfer, or the shared prior) and a network's layer times
(docs/reconstruction-kernels3.md). Built by :func:`~dgtraces.reconstruct.kernels3.build.fit_model`
when a release is built, or read back from the release's ``method_params`` table
(:mod:`~dgtraces.reconstruct.kernels3.params`).
"""

from __future__ import annotations

from dataclasses import dataclass

from dgtraces.errors import Code, DgtracesError
from dgtraces.reconstruct.kernels3.devices import (
    TRANSFERRED,
    closest,
    data_device,
    get_device,
)
from dgtraces.reconstruct.kernels3.fit import KernelFit
from dgtraces.reconstruct.kernels3.layers import LayerTimes, Parts, compose, parts
from dgtraces.reconstruct.kernels3.price import Measured, Pricer, Transfer
from dgtraces.reconstruct.kernels3.stagef import StageF

VERSION = "3"
METHOD = "kernels-3"


@dataclass(frozen=True)
class Model:
    """Everything a kernels-3 trace is priced with. ``mem_range``: (min, max) bytes of the
    memory-bound layer rows stage F was fitted on (outside: an extrapolation); ``digest``: of
    the ``kernels`` rows the kernel fits were made on."""

    fits: dict[str, KernelFit]
    measured: dict[tuple[str, str], Measured]
    stage: StageF | None  # None while stage F is being fitted (kernel pricing only)
    mem_range: tuple[float, float]
    digest: str

    def measured_gpus(self, precision: str = "fp32") -> tuple[str, ...]:
        fit = self.fits.get(precision)
        return tuple(sorted(fit.theta)) if fit else ()

    def basis(self, device: str, precision: str = "fp32") -> str:
        """kernels (its own), ``transfer:<origin>`` (the K80), or prior (datasheet only)."""
        self.pricer(device, precision)  # the typed refusals
        data = data_device(device)
        if data in self.measured_gpus(precision):
            return "kernels"
        if device in TRANSFERRED:
            return f"transfer:{closest(device, self.measured_gpus('fp32'))}"
        return "prior"

    def pricer(self, device: str, precision: str = "fp32") -> Pricer | Transfer:
        """How ``device``'s GEMM-class kernels are priced at ``precision``. UNKNOWN_DEVICE
        (listing the known devices) without datasheet peaks or an SM count; NO_CALIBRATION
        for a precision the device has no kernels for (amp: V100 only)."""
        dev = get_device(device)
        data = data_device(device)
        fit = self.fits.get(precision)
        if fit is None:
            raise DgtracesError(f"kernels-3 has no {precision} kernel fit (have: "
                                f"{', '.join(sorted(self.fits))})", code=Code.NO_CALIBRATION)
        if data in fit.theta:
            return Pricer(fit, get_device(data).gpu(precision), fit.theta[data],
                          self.measured.get((data, precision), {}))
        if precision != "fp32":
            raise DgtracesError(f"kernels-3 prices {precision} only on GPUs with their own "
                                f"{precision} kernels ({', '.join(sorted(fit.theta))}); "
                                f"{device} has none", code=Code.NO_CALIBRATION)
        if device in TRANSFERRED:
            origin = closest(device, self.measured_gpus("fp32"))
            return Transfer(self.pricer(origin, "fp32"), get_device(origin), dev)  # type: ignore[arg-type]
        return Pricer(fit, dev.gpu("fp32"), fit.theta0, {})

    def parts(self, model: str, device: str, precision: str, batch: int,
              training: bool = True) -> Parts:
        return parts(model, batch, training, self.pricer(device, precision),
                     amp=precision == "amp")

    def times(self, p: Parts, device: str, family: str | None) -> LayerTimes:
        """Layer times of ``p`` on ``device`` with ``family``'s overhead (``none``: 0)."""
        e_mem, floor = self.memory(device)
        return compose(p, e_mem, floor, get_device(device).bandwidth_gb_s,
                       self._stage().overhead(family))

    def memory(self, device: str) -> tuple[float, float]:
        """(e_mem, floor_us) that price ``device``: stage F's constants of its same part (the
        one lookup for times() and the trace's params_json)."""
        return self._stage().memory(data_device(device))

    def _stage(self) -> StageF:
        if self.stage is None:
            raise DgtracesError("kernels-3 model without stage F", code=Code.NO_CALIBRATION)
        return self.stage

    def memory_extrapolated(self, p: Parts) -> list[str]:
        """Layers with a memory-bound direction whose bytes lie outside the fitted range."""
        from dgtraces.reconstruct.roofline.costmodel import GEMM_KINDS

        lo, hi = self.mem_range
        out = []
        for i, kind in enumerate(p.kind):
            if kind in GEMM_KINDS:
                continue
            b = p.bytes_[: 2 if p.training else 1, i]
            if ((b > 0) & ((b < lo) | (b > hi))).any():
                out.append(str(p.layer[i]))
        return out
