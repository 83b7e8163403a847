"""Published calibration: device peaks (``devices.csv``) and single-GPU throughputs
(``calibration.csv``), both shipped byte-for-byte in :mod:`dgtraces.reference`.

Which rows are fitted:

* fp32 ``train`` and ``inference`` rows of alexnet and resnet50 with a batch size, one GPU.
  ``train`` time = batch / img_per_s (fwd + bwd + update); ``inference`` = forward only.
* Each row is compared with the architecture its framework actually ran
  (:func:`dgtraces.reconstruct.variants.architecture`: TensorFlow's tf_cnn_benchmarks
  AlexNet, MXNet's ungrouped AlexNet and pre-activation ResNet-50, ...), not with our Caffe
  spec of the same name; the fitted parameters then reconstruct the Caffe specs.
* ``resnet50v1.5`` rows (V100, NVIDIA DeepLearningExamples) state no batch size, so they
  are never fitted as absolute times. Their amp/fp32 ratio (1200 / 367 = 3.27x) is the
  only tensor-core figure available and sets the single amp parameter ``eff_tensor`` on
  the v1.5 architecture (assuming both runs used the same batch, taken as ``AMP_BATCH``);
  the fp32 figure is kept as an out-of-sample check.
* The sixth parameter ``wino`` (3x3 convolutions faster than direct FLOPs) is fitted only
  on ``WINOGRAD_DEVICES``: the devices where leave-one-out cross-validation over their
  rows (:func:`loo`) showed a lower held-out error with it than without.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from dgtraces import reference
from dgtraces.errors import Code, DgtracesError
from dgtraces.models.registry import fitted
from dgtraces.reconstruct.roofline.costmodel import Device, Params
from dgtraces.reconstruct.roofline.fit import FitResult, Observation, fit, fit_tensor_efficiency
from dgtraces.reconstruct.variants import architecture

FITTED_MODELS = fitted()  # from the model registry (``fitted=True``)
AMP_MODEL = "resnet50v1.5"
AMP_BATCH = 128
WINOGRAD_DEVICES = ("v100",)
DEVICES_SOURCE = "dgtraces/reference/devices.csv"
CALIBRATION_SOURCE = "dgtraces/reference/calibration.csv"


def devices() -> dict[str, Device]:
    """Published device peaks, key -> :class:`Device`."""
    out = {}
    for r in reference.device_rows():
        tensor = float(r["peak_fp16_tensor_tflops"]) if r["peak_fp16_tensor_tflops"] else None
        out[r["device"]] = Device(r["device"], float(r["peak_fp32_tflops"]),
                                  float(r["mem_bandwidth_gb_s"]), tensor, "gpu", r["name"],
                                  r["source"], "published")
    return out


def get_device(device: str) -> Device:
    from dgtraces.errors import Code
    from dgtraces.names import match

    known = devices()
    return known[match(device, known, what="device", code=Code.UNKNOWN_DEVICE)]


@dataclass(frozen=True)
class CalibrationRow:
    row: int  # 1-based data row of calibration.csv
    device: str
    model: str
    framework: str
    phase: str
    precision: str
    batch_size: int | None
    img_per_s: float
    source: str

    def as_dict(self) -> dict:
        return {"row": self.row, "device": self.device, "model": self.model,
                "framework": self.framework, "phase": self.phase,
                "precision": self.precision, "batch_size": self.batch_size,
                "img_per_s": self.img_per_s}


def calibration_rows(device: str | None = None) -> list[CalibrationRow]:
    rows = []
    for i, r in enumerate(reference.rows("calibration.csv"), start=1):
        if device is not None and r["device"] != device:
            continue
        rows.append(CalibrationRow(i, r["device"], r["model"], r["framework"], r["phase"],
                                   r["precision"],
                                   int(r["batch_size"]) if r["batch_size"] else None,
                                   float(r["img_per_s"]), r["source"]))
    return rows


def fitted_rows(device: str) -> list[CalibrationRow]:
    return [r for r in calibration_rows(device) if r.model in FITTED_MODELS
            and r.precision == "fp32" and r.batch_size and r.phase in ("train", "inference")]


def observation(r: CalibrationRow, variants: bool = True) -> Observation:
    """The row as a time to fit, on the architecture it ran (``variants``) or, for the
    before/after comparison only, on our Caffe spec of the same name."""
    if not r.batch_size or not r.img_per_s:
        raise DgtracesError(f"calibration.csv row {r.row} has no batch size or throughput to "
                            "fit", code=Code.NO_CALIBRATION)
    arch = architecture(r.framework, r.model) if variants else r.model
    return Observation(arch, r.batch_size, r.phase, 1000.0 * r.batch_size / r.img_per_s,
                       f"calibration.csv row {r.row}")


@cache
def loo(device: str, variants: bool = True, winograd: bool = False) -> tuple[float, ...]:
    """Leave-one-out: signed error (%) of each fitted row of ``device`` predicted by the
    same fit on the other rows (row order of :func:`fitted_rows`)."""
    from dgtraces.reconstruct.roofline.costmodel import layer_arrays, predict_ms

    dev = get_device(device)
    obs = [observation(r, variants) for r in fitted_rows(device)]
    out = []
    for i, o in enumerate(obs):
        p = fit(dev, obs[:i] + obs[i + 1:], winograd=winograd).params
        out.append(100.0 * (predict_ms(layer_arrays(o.model), p, dev, o.batch_size,
                                       o.phase) / o.time_ms - 1.0))
    return tuple(out)


@dataclass(frozen=True)
class Calibration:
    """A device's fitted model: the fit, rows used, and the amp variant if available."""

    device: Device
    result: FitResult
    rows: tuple[CalibrationRow, ...]
    amp: Params | None
    amp_rows: tuple[CalibrationRow, ...]
    amp_fit: dict | None = None

    def params(self, precision: str) -> Params:
        if precision == "fp32":
            return self.result.params
        if precision == "amp" and self.amp is not None:
            return self.amp
        raise DgtracesError(f"{self.device.device}: no calibration for precision "
                            f"{precision!r} (have: fp32{', amp' if self.amp else ''})",
                            code=Code.NO_CALIBRATION)


@cache
def calibrate(device: str) -> Calibration:
    """Fit ``device`` on its published rows (cached per process)."""
    dev = get_device(device)
    rows = tuple(fitted_rows(device))
    if not rows:
        raise DgtracesError(f"no fp32 calibration rows for device {device!r} in "
                            f"{CALIBRATION_SOURCE}: its whole-model fp32 throughputs there "
                            "would constrain roofline-1.1 (`dgtraces reconstruct --method "
                            "kernels-3` models any GPU with datasheet peaks and an SM count)",
                            code=Code.NO_CALIBRATION)
    result = fit(dev, [observation(r) for r in rows], winograd=device in WINOGRAD_DEVICES)
    amp_rows = tuple(r for r in calibration_rows(device) if r.model == AMP_MODEL)
    by_prec = {r.precision: r for r in amp_rows if r.phase == "train"}
    amp, amp_fit = None, None
    if dev.tensor_tflops and {"amp", "fp32"} <= set(by_prec):
        target = by_prec["amp"].img_per_s / by_prec["fp32"].img_per_s
        arch = architecture(by_prec["amp"].framework, AMP_MODEL)
        amp, reached = fit_tensor_efficiency(dev, result.params, arch, AMP_BATCH, target)
        amp_fit = {"target_speedup": target, "reached_speedup": reached,
                   "assumed_batch_size": AMP_BATCH, "model_used": arch}
    return Calibration(dev, result, rows, amp, amp_rows if amp else (), amp_fit)
