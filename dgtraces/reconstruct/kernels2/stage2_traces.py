"""Cost model ``kernels-2.1`` (pre-registered in docs/reconstruction-kernels.md, section
"kernels-2.1"): kernels-2.0's GEMM engine and stage 1 unchanged; stage 2 per device fitted
jointly on the device's per-layer GPU traces in the release and its ``calibration.csv`` rows,
with one efficiency scale per GEMM class and a separate per-kernel floor for memory-bound
kernels. :mod:`dgtraces.evaluation.kernels21` holds the pre-registered evaluation.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import cache

import numpy as np

from dgtraces.errors import Code, DgtracesError
from dgtraces.reconstruct.kernels2.gemm import CLASSES, E_MEM_STAGE1, KernelParams, get_gpu
from dgtraces.reconstruct.kernels2.network import predict_ms
from dgtraces.reconstruct.kernels2.stage1 import T0_US, stage1
from dgtraces.reconstruct.kernels2.stage2 import CALIBRATED, H_US, device_observations, errors_pct
from dgtraces.reconstruct.kernels2.traces import FIT_TRACE_DEVICES, TraceBlock, trace_blocks
from dgtraces.reconstruct.roofline.fit import Observation, levenberg_marquardt

VERSION = "2.1"
E_LOWER = 0.05  # 20x below the weakest stage-1 efficiency: keeps the mapping finite
WINO_UPPER = 4.0 / 2.25  # F(4x4,3x3) on F(2x2,3x3) FLOPs (Lavin & Gray 2016)
# upper bound of each class's device efficiency (CLASSES order): the datasheet peak
E_UPPER = np.array([1.0 if c != "wino" else WINO_UPPER for c in CLASSES])
E_MEM = (0.05, 1.0)
T0_MEM_US = T0_US  # same range as stage-1 t0: no new information sets it
MAX_ITER = 60


@dataclass(frozen=True)
class KernelParams21(KernelParams):
    """Stage-1 constants plus the device's per-class scales and memory-kernel floor."""

    scale: tuple[float, ...] = (1.0,) * len(CLASSES)
    t0_mem_us: float = T0_US[1]

    def eff(self) -> np.ndarray:
        return np.asarray(self.scale) * super().eff()

    def mem_floor_us(self) -> float:
        return self.t0_mem_us

    def device_eff(self) -> dict[str, float]:
        return dict(zip(CLASSES, (float(e) for e in self.eff()), strict=True))


@dataclass(frozen=True)
class Box:
    """Named parameters with bounds, mapped to an unbounded vector by sigmoids."""

    names: tuple[str, ...]
    lo: np.ndarray
    hi: np.ndarray

    def values(self, theta: np.ndarray) -> dict[str, float]:
        s = 1.0 / (1.0 + np.exp(-np.clip(theta, -30.0, 30.0)))
        return dict(zip(self.names, (float(v) for v in self.lo + (self.hi - self.lo) * s),
                        strict=True))

    def theta(self, values: dict[str, float]) -> np.ndarray:
        v = np.array([values[n] for n in self.names], float)
        x = np.clip((v - self.lo) / (self.hi - self.lo), 1e-4, 1 - 1e-4)
        return np.log(x / (1 - x))


def class_box(base: KernelParams, mode: str, with_h: bool) -> Box:
    """Bounds of a stage-2 fit. ``layers``: the five device efficiencies, ``e_mem``,
    ``t0_mem_us`` (and ``h_us``); ``throughputs``: one ``kappa``, ``e_mem``, ``h_us``."""
    e = base.eff()
    if mode == "layers":
        names = (*(f"e_{c}" for c in CLASSES), "e_mem", "t0_mem_us")
        lo = [*[E_LOWER] * len(CLASSES), E_MEM[0], T0_MEM_US[0]]
        hi = [*E_UPPER, E_MEM[1], T0_MEM_US[1]]
    elif mode == "throughputs":
        names = ("kappa", "e_mem")
        lo = [E_LOWER / e.min(), E_MEM[0]]
        hi = [float(np.min(E_UPPER / e)), E_MEM[1]]
    else:
        raise DgtracesError(f"mode must be layers or throughputs, got {mode!r}",
                            code=Code.BAD_INPUT)
    if with_h:
        names, lo, hi = (*names, "h_us"), [*lo, H_US[0]], [*hi, H_US[1]]
    return Box(tuple(names), np.array(lo, float), np.array(hi, float))


def build(base: KernelParams, v: dict[str, float], fixed: dict[str, float]
          ) -> KernelParams21:
    """KernelParams21 from fitted values ``v`` and ``fixed`` ones (t0_mem_us, h_us)."""
    v = {**fixed, **v}
    e = base.eff()
    if "kappa" in v:
        scale = (v["kappa"],) * len(CLASSES)
    else:
        scale = tuple(v[f"e_{c}"] / e[i] for i, c in enumerate(CLASSES))
    fields = {f.name: getattr(base, f.name) for f in dataclasses.fields(KernelParams)}
    fields.update(e_mem=v["e_mem"], h_us=v.get("h_us", 0.0), kappa=1.0)
    return KernelParams21(**fields, scale=tuple(float(s) for s in scale),
                          t0_mem_us=float(v["t0_mem_us"]))


def starts(base: KernelParams, box: Box) -> list[dict[str, float]]:
    """The three pre-registered starts."""
    e = np.minimum(base.eff(), 0.95 * E_UPPER)
    kappa = min(1.0, 0.95 * float(box.hi[0])) if "kappa" in box.names else 1.0
    out = []
    for f, e_mem, t0, h in ((1.0, 0.8, 5.0, 10.0), (0.7, 0.5, 2.0, 30.0),
                            (0.5, 0.9, 15.0, 3.0)):
        d = {f"e_{c}": float(f * e[i]) for i, c in enumerate(CLASSES)}
        d.update(kappa=f * kappa, e_mem=e_mem, t0_mem_us=t0, h_us=h)
        out.append(d)
    return out


def residuals(device: str, p: KernelParams21, obs: list[Observation],
              blocks: tuple[TraceBlock, ...]) -> np.ndarray:
    """Weighted log residuals: each block (the calibration rows; each trace setup) has total
    weight 1."""
    parts = []
    if obs:
        pred = [predict_ms(o.model, device, p, o.batch_size, o.phase) for o in obs]
        parts.append(np.log(np.array(pred) / [o.time_ms for o in obs]) / np.sqrt(len(obs)))
    for b in blocks:
        if len(b.measured_ms):
            parts.append(np.log(b.predict(p, device) / b.measured_ms)
                         / np.sqrt(len(b.measured_ms)))
    return np.concatenate(parts) if parts else np.zeros(0)


def fit21(device: str, obs: list[Observation], blocks: tuple[TraceBlock, ...], mode: str,
          fixed: dict[str, float] | None = None, base: KernelParams | None = None
          ) -> KernelParams21:
    """Stage 2 of ``device`` on ``obs`` and ``blocks`` (stage 1 held fixed). ``fixed``
    supplies what the data do not constrain (``t0_mem_us`` for ``throughputs``; ``h_us``
    without calibration rows)."""
    base = base or stage1().params
    fixed = dict(fixed or {})
    box = class_box(base, mode, with_h=bool(obs))
    n_rows = len(obs) + sum(len(b.measured_ms) for b in blocks)
    missing = {"t0_mem_us"} - set(box.names) - set(fixed)
    if not obs and "h_us" not in fixed:
        missing.add("h_us")
    if missing or n_rows < len(box.names):
        given = f"; not given: {', '.join(sorted(missing))}" if missing else ""
        raise DgtracesError(f"{device}: {n_rows} row(s) cannot determine {len(box.names)} "
                            f"constants{given}", code=Code.NO_CALIBRATION)

    def fun(theta):
        return residuals(device, build(base, box.values(theta), fixed), obs, blocks)

    best = None
    for start in starts(base, box):
        theta, cost, _ = levenberg_marquardt(fun, box.theta(start), max_iter=MAX_ITER,
                                             tol=1e-8)
        if best is None or cost < best[1]:
            best = (theta, cost)
    assert best is not None
    return build(base, box.values(best[0]), fixed)


def trace_fixed(obs: list[Observation]) -> dict[str, float]:
    """What a per-layer trace fit holds fixed: ``h_us`` = 0 placeholder without calibration
    rows (device times do not see host dispatch), nothing with them."""
    return {} if obs else {"h_us": 0.0}


@cache
def layer_fit(device: str) -> KernelParams21:
    """The full stage-2 fit of a device with per-layer traces (:func:`trace_fixed`)."""
    obs = device_observations(device)
    return fit21(device, obs, trace_blocks(device), "layers", fixed=trace_fixed(obs))


def pooled_t0_mem(exclude: tuple[str, ...] = ()) -> float:
    """Mean ``t0_mem_us`` of the devices fitted on per-layer traces (without ``exclude``)."""
    return float(np.mean([layer_fit(d).t0_mem_us for d in FIT_TRACE_DEVICES
                          if d not in exclude]))


def throughput_fit(device: str, obs: list[Observation], t0_mem_us: float) -> KernelParams21:
    return fit21(device, obs, (), "throughputs", fixed={"t0_mem_us": t0_mem_us})


@dataclass(frozen=True)
class Calibration21:
    device: str
    params: KernelParams21
    basis: str  # traces+throughputs | traces | throughputs | kernels | datasheet
    rows: tuple[int, ...]
    errors_pct: tuple[float, ...]


@cache
def calibrate21(device: str) -> Calibration21:
    """The constants ``device`` is reconstructed with under kernels-2.1 (the pre-registered
    rule by what constrains the device); UNKNOWN_DEVICE lists the known devices."""
    from dgtraces.reconstruct.deepbench import seven_devices
    from dgtraces.reconstruct.roofline.calibration import fitted_rows

    get_gpu(device)
    rows = fitted_rows(device)
    obs = device_observations(device)
    if device in FIT_TRACE_DEVICES:
        p = layer_fit(device)
        basis = "traces+throughputs" if obs else "traces"
        if not obs:
            p = dataclasses.replace(p, h_us=mean_h_us())
    elif obs:
        p, basis = throughput_fit(device, obs, pooled_t0_mem()), "throughputs"
    else:
        base = stage1().params
        p = build(base, {"kappa": 1.0, "e_mem": E_MEM_STAGE1},
                  {"t0_mem_us": pooled_t0_mem(), "h_us": mean_h_us()})
        basis = "kernels" if device in seven_devices() else "datasheet"
    return Calibration21(device, p, basis, tuple(r.row for r in rows),
                         errors_pct(device, p, obs))


def mean_h_us() -> float:
    return float(np.mean([calibrate21(d).params.h_us for d in CALIBRATED]))
