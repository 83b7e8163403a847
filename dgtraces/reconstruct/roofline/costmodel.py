"""Per-layer cost model: a soft roofline with per-kind efficiency, launch overhead and a
saturation term in the work per kernel.

For layer ``l`` in direction ``d`` (fwd/bwd) at batch ``B``::

    t = kernels(l, d) * launch_us
        + softmax_p( F / (eff_kind * peak), M / (eff_mem * bw) ) * (1 + n_half / W)

* ``F`` = B * {fwd,bwd}_flops (the ``layers`` table, per sample, 1 MAC = 2 FLOPs).
* ``M`` = bytes moved: fwd ``B*(in+act) + w``; bwd ``B*(2*in+act) + 2*w`` (read the top
  diff and the bottom data, write the bottom diff; read weights, write weight diff), with
  ``w`` the weight bytes (``grad_bytes``); eltwise and concat backward are copies and read
  no bottom data. Under ``amp`` activations and weights move as fp16.
* ``eff_kind`` is ``eff_gemm`` for conv and fc (times ``eff_bwd`` in backward: weight and
  data gradients run slower than the forward GEMM); other kinds are elementwise /
  reductions and run at peak compute (they are memory bound anyway), so only ``eff_mem``
  matters for them. Under ``amp`` conv/fc run at ``eff_tensor`` x the tensor-core peak.
* ``W`` = elements a kernel works on (fwd ``B*max(in, out)``; bwd ``B*in + params``): a
  kernel with little parallel work cannot fill the device (latency bound), half-speed at
  ``n_half``.
* ``softmax_p`` is the p-norm (p = 4) soft maximum of the two roofline terms.
* ``kernels(l, d)`` is a fixed structural count (see :func:`kernel_counts`), no free parameter.

An iteration adds the momentum-SGD update: one kernel per learnable blob, reading weights,
gradient and momentum and writing weights and momentum (5 x grad_bytes, fp32 master copy).
Free parameters per device: eff_gemm, eff_bwd, eff_mem, launch_us, n_half (+ eff_tensor
for the tensor-core variant). Efficiencies are bounded to (0, 1]. Optional sixth
parameter ``wino`` in [1, 2.25] (fp32 only): 3x3 stride-1 convolutions run ``wino`` times
faster than their direct FLOPs allow (cuDNN's Winograd transforms; F(2x2, 3x3) needs 2.25x
fewer multiplies); used only where leave-one-out cross-validation over the calibration rows
supports it (:data:`dgtraces.reconstruct.roofline.calibration.WINOGRAD_DEVICES`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from dgtraces.errors import Code

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

SOFT_P = 4.0
PARAM_NAMES = ("eff_gemm", "eff_bwd", "eff_mem", "launch_us", "n_half")
GEMM_KINDS = ("conv", "fc")
COPY_KINDS = ("eltwise", "concat")  # backward copies the top diff, reads no bottom data

# Where the host dispatch term ``kernels * launch_us`` is charged (pre-registered rule of
# docs/gpu-traces.md): "layer" (roofline-1.1: inside each layer's time) or "iteration"
# (rule ``device-time``: a layer's time is its device time, dispatch is per-iteration host
# overhead outside the layers). Whole-model times are the same under both.
DISPATCH_RULES = ("layer", "iteration")
_dispatch = {"rule": "layer"}


def dispatch_rule() -> str:
    """The rule in force (see :data:`DISPATCH_RULES`)."""
    return _dispatch["rule"]


@contextmanager
def use_dispatch(rule: str) -> Iterator[None]:
    """Evaluate under another dispatch rule (before/after comparisons)."""
    from dgtraces.errors import DgtracesError

    if rule not in DISPATCH_RULES:
        raise DgtracesError(f"dispatch rule must be one of {', '.join(DISPATCH_RULES)}, got "
                            f"{rule!r}", code=Code.BAD_INPUT)
    old = _dispatch["rule"]
    _dispatch["rule"] = rule
    try:
        yield
    finally:
        _dispatch["rule"] = old


@dataclass(frozen=True)
class Device:
    """Peak figures the model is scaled against (from the ``devices`` table)."""

    device: str
    peak_tflops: float
    bandwidth_gb_s: float
    tensor_tflops: float | None = None
    kind: str = "gpu"
    name: str = ""
    source: str = ""
    provenance: str = "published"


@dataclass(frozen=True)
class Params:
    """Fitted parameters of one device (fp32); ``eff_tensor`` only for the amp variant."""

    eff_gemm: float
    eff_bwd: float
    eff_mem: float
    launch_us: float
    n_half: float
    eff_tensor: float | None = None
    wino: float | None = None  # fp32 speed-up of 3x3 stride-1 convs (fitted where used)

    def as_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None}

    def describe(self, code: bool = False) -> str:
        """``eff_gemm=0.61, ...`` (Markdown code names with ``code``)."""
        q = "`" if code else ""
        sep = " = " if code else "="
        return ", ".join(f"{q}{k}{q}{sep}{v:.4g}" for k, v in self.as_dict().items())


@dataclass(frozen=True)
class LayerArrays:
    """The ``layers`` columns the model needs, as numpy arrays (one model)."""

    model: str
    layer: np.ndarray
    kind: np.ndarray
    fwd_flops: np.ndarray
    bwd_flops: np.ndarray
    in_bytes: np.ndarray
    act_bytes: np.ndarray
    grad_bytes: np.ndarray
    params: np.ndarray
    fwd_kernels: np.ndarray
    bwd_kernels: np.ndarray
    winograd: np.ndarray  # conv 3x3 stride 1: cuDNN may run it as a Winograd transform
    blobs: int

    # masks of ``kind``, worked out once per arrays (the fits evaluate the model thousands
    # of times on the same arrays; issue #36)
    @cached_property
    def is_bn(self) -> np.ndarray:
        return self.kind == "bn"

    @cached_property
    def is_gemm(self) -> np.ndarray:
        return (self.kind == "conv") | (self.kind == "fc")

    @cached_property
    def is_copy(self) -> np.ndarray:
        return np.isin(self.kind, COPY_KINDS)

    @cached_property
    def is_dropout(self) -> np.ndarray:
        return self.kind == "dropout"

    @cached_property
    def traffic_kept(self) -> dict[tuple, tuple[np.ndarray, ...]]:
        """:func:`traffic` by (batch, bwd, amp, training), for :func:`_direction` only (which
        never writes into them): it does not depend on the parameters a fit varies."""
        return {}


def kernel_counts(kind: str, n_bottoms: int, has_bias: bool, from_data: bool) -> tuple[int, int]:
    """Kernels launched by a layer (fwd, bwd) in a cuDNN/MKL-style implementation.

    conv/fc: fwd GEMM (+ bias add); bwd weight GEMM, data GEMM (not for a layer fed by the
    data layer, as in Caffe) and bias reduction. bn: statistics + normalisation. concat:
    one copy per bottom. Everything else: one kernel each way.
    """
    if kind in GEMM_KINDS:
        return 1 + has_bias, 1 + (not from_data) + has_bias
    if kind == "bn":
        return 2, 2
    if kind == "concat":
        return n_bottoms, n_bottoms
    return 1, 1


def layer_arrays(model: str) -> LayerArrays:
    """Arrays for ``model``: a Caffe spec of :data:`dgtraces.models.MODELS` (the ``layers``
    table) or a fitting-only variant of :mod:`dgtraces.reconstruct.variants`."""
    from dgtraces.reconstruct.variants import records

    rows, n_blobs = records(model)
    counts = [kernel_counts(r["kind"], len(r["bottoms"].split(",")), r["bias_params"] > 0
                            and r["kind"] in GEMM_KINDS, r["bottoms"] == "data")
              for r in rows]

    def col(name, dtype=float):
        return np.array([r[name] for r in rows], dtype=dtype)

    return LayerArrays(
        model=model, layer=col("layer", object), kind=col("kind", object),
        fwd_flops=col("fwd_flops"), bwd_flops=col("bwd_flops"), in_bytes=col("in_bytes"),
        act_bytes=col("act_bytes"), grad_bytes=col("grad_bytes"), params=col("params"),
        fwd_kernels=np.array([c[0] for c in counts], float),
        bwd_kernels=np.array([c[1] for c in counts], float),
        winograd=col("winograd", bool), blobs=n_blobs)


def subset(la: LayerArrays, names) -> LayerArrays:
    """Only the layers in ``names`` (e.g. those a measured run timed), in model order.
    ``blobs`` (update kernels) is kept: the update covers the whole model."""
    import dataclasses

    keep = np.isin(la.layer, list(names))
    arrays = {f.name: getattr(la, f.name)[keep] for f in dataclasses.fields(la)
              if isinstance(getattr(la, f.name), np.ndarray)}
    return dataclasses.replace(la, **arrays)


def soft_max(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a ** SOFT_P + b ** SOFT_P) ** (1.0 / SOFT_P)


@dataclass(frozen=True)
class LayerCosts:
    """Per-layer times (ms) and the share of each that is latency (launch + under-fill)."""

    fwd_ms: np.ndarray
    bwd_ms: np.ndarray
    update_ms: float
    fwd_latency_ms: np.ndarray
    bwd_latency_ms: np.ndarray
    fwd_bound: np.ndarray  # "compute" | "memory" | "latency" per layer
    bwd_bound: np.ndarray
    host_fwd_ms: float = 0.0  # dispatch charged outside the layers (rule "iteration")
    host_bwd_ms: float = 0.0


def traffic(la: LayerArrays, batch: float, bwd: bool, amp: bool = False,
            training: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per layer of one direction: (FLOPs, bytes moved, elements of work, kernels); the
    bytes rule of the module docstring (shared with the kernel methods)."""
    flops = batch * (la.bwd_flops if bwd else la.fwd_flops)
    act_scale = 0.5 if amp else 1.0
    is_bn = la.is_bn
    if bwd:
        # read the top diff, write the bottom diff, and read the bottom data except for
        # pure copies (eltwise sum, concat); bn also reduces over x and dy first
        reads_in = np.where(la.is_copy, 0.0, la.in_bytes)
        extra = np.where(is_bn, la.in_bytes + la.act_bytes, 0.0)
        moved = act_scale * (batch * (la.in_bytes + reads_in + la.act_bytes + extra)
                             + 2 * la.grad_bytes)
        work = batch * la.in_bytes / 4 + la.params
        kernels = la.bwd_kernels
    else:
        # training-mode bn reads its input once more for the batch statistics; inference
        # uses running statistics (one pass, one kernel) and dropout is the identity
        extra = np.where(is_bn, la.in_bytes, 0.0) if training else np.zeros_like(la.in_bytes)
        moved = act_scale * (batch * (la.in_bytes + la.act_bytes + extra) + la.grad_bytes)
        work = batch * np.maximum(la.in_bytes, la.act_bytes) / 4
        kernels = la.fwd_kernels
        if not training:
            kernels = np.where(is_bn, 1.0, kernels)
            off = la.is_dropout
            kernels, moved, flops = (np.where(off, 0.0, a) for a in (kernels, moved, flops))
    return flops, moved, work, kernels


def _direction(la: LayerArrays, p: Params, dev: Device, batch: float, bwd: bool,
               amp: bool, training: bool = True, bounds: bool = True):
    """(total, latency, bound, launch) per layer; ``bound`` is empty without ``bounds``."""
    key = (batch, bwd, amp, training)
    kept = la.traffic_kept.get(key)
    if kept is None:
        kept = la.traffic_kept[key] = traffic(la, batch, bwd, amp, training)
    flops, moved, work, kernels = kept
    peak = dev.peak_tflops * 1e12
    if amp:
        tensor = (dev.tensor_tflops or dev.peak_tflops) * 1e12 * (p.eff_tensor or 1.0)
        eff_rate = np.where(la.is_gemm, tensor, peak)
    else:
        eff_rate = np.where(la.is_gemm, p.eff_gemm * peak, peak)
        if p.wino:
            eff_rate = np.where(la.winograd, eff_rate * p.wino, eff_rate)
    if bwd:
        eff_rate = eff_rate * p.eff_bwd
    t_compute = flops / eff_rate
    t_memory = moved / (p.eff_mem * dev.bandwidth_gb_s * 1e9)
    roof = soft_max(t_compute, t_memory)
    fill = roof * p.n_half / np.maximum(work, 1.0)
    launch = kernels * p.launch_us * 1e-6
    total = launch + roof + fill
    latency = launch + fill
    bound = _NO_BOUNDS if not bounds else np.where(
        latency > roof, "latency", np.where(t_compute >= t_memory, "compute", "memory"))
    return total * 1e3, latency * 1e3, bound, launch * 1e3


_NO_BOUNDS = np.empty(0, dtype=object)  # whole-model times (predict_ms) need no labels


def layer_costs(la: LayerArrays, p: Params, dev: Device, batch: float,
                precision: str = "fp32", training: bool = True) -> LayerCosts:
    """Per-layer forward/backward times in ms for one batch size (``training=False``:
    inference-mode forward)."""
    return _layer_costs(la, p, dev, batch, precision, training, True)


def _layer_costs(la: LayerArrays, p: Params, dev: Device, batch: float, precision: str,
                 training: bool, bounds: bool) -> LayerCosts:
    amp = precision == "amp"
    f, fl, fb, f_launch = _direction(la, p, dev, batch, False, amp, training, bounds)
    b, bl, bb, b_launch = _direction(la, p, dev, batch, True, amp, True, bounds)
    update = (la.blobs * p.launch_us * 1e-6
              + 5 * la.grad_bytes.sum() / (p.eff_mem * dev.bandwidth_gb_s * 1e9)) * 1e3
    if dispatch_rule() == "iteration":
        return LayerCosts(f - f_launch, b - b_launch, float(update), fl - f_launch,
                          bl - b_launch, fb, bb, float(f_launch.sum()), float(b_launch.sum()))
    return LayerCosts(f, b, float(update), fl, bl, fb, bb)


def predict_ms(la: LayerArrays, p: Params, dev: Device, batch: float, phase: str,
               precision: str = "fp32") -> float:
    """Whole-model time: ``inference`` = forward; ``train`` = fwd + bwd + update;
    ``fwd`` / ``bwd`` = one direction (for measured totals)."""
    c = _layer_costs(la, p, dev, batch, precision, phase != "inference", False)
    fwd = float(c.fwd_ms.sum()) + c.host_fwd_ms
    bwd = float(c.bwd_ms.sum()) + c.host_bwd_ms
    if phase in ("inference", "fwd"):
        return fwd
    if phase == "bwd":
        return bwd
    if phase == "fwdbwd":
        return fwd + bwd
    return fwd + bwd + c.update_ms


def timings_frame(la: LayerArrays, costs: LayerCosts, run_id: str) -> "pd.DataFrame":
    """A ``layer_timings`` frame (reconstructed: n = 1, no spread)."""
    import pandas as pd

    n = len(la.layer)
    nan = [None] * n
    return pd.DataFrame({
        "run_id": [run_id] * n, "layer": list(la.layer),
        "fwd_ms": costs.fwd_ms.astype(float), "bwd_ms": costs.bwd_ms.astype(float),
        "fwd_p10_ms": nan, "fwd_p90_ms": nan, "bwd_p10_ms": nan, "bwd_p90_ms": nan,
        "comm_ms": nan, "n": [1] * n,
    }).astype({c: "float64" for c in ("fwd_p10_ms", "fwd_p90_ms", "bwd_p10_ms",
                                      "bwd_p90_ms", "comm_ms")})
