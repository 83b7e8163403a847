"""Framework-neutral layer specs at Caffe granularity, with shape, parameter and FLOP inference.

Conventions (documented in the dataset card and tested):

* One multiply-add counts as 2 FLOPs. FLOPs and bytes are **per sample** (batch 1).
* ``params`` counts learnable parameters only. Caffe's BatchNorm blobs (running mean,
  running variance and the moving-average factor, ``2*C + 1`` values) are not learnable and
  are counted in ``buffers``; ``grad_bytes`` is ``4 * params`` (fp32 gradients).
* Backward FLOPs of conv/fc layers are the weight gradient plus the input gradient; the
  input gradient is skipped for a layer fed directly by the data layer (Caffe sets
  ``propagate_down`` false there).
* Pooling uses Caffe's ceil rounding of the output size unless ``ceil=False`` (PyTorch's
  default floor rounding, used by the torchvision specs).
* Kernels may be rectangular (``kernel`` x ``kernel_w``, padding ``pad`` x ``pad_w``; ``None``
  means square), as Inception-v3's 1x7 / 7x1 convolutions.
* ``bn`` with ``affine=True`` is PyTorch's ``BatchNorm2d`` (normalisation and the learnable
  per-channel scale and shift in one layer: ``2*C`` parameters); ``affine=False`` is Caffe's
  BatchNorm, which needs a separate ``scale`` layer. Both keep ``2*C + 1`` buffers (running
  mean, variance and Caffe's moving-average factor or PyTorch's ``num_batches_tracked``).
* Average pooling counts one add per window element whether or not padding is included in
  the divisor (``count_include_pad`` changes the divisor, not the FLOP count).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

KINDS = (
    "conv", "relu", "lrn", "pool", "fc", "bn", "scale",
    "concat", "eltwise", "dropout", "softmax",
)
DATA = "data"


@dataclass(frozen=True)
class Layer:
    """One Caffe layer. ``bottoms`` name producing layers (``data`` for the input)."""

    name: str
    kind: str
    bottoms: tuple[str, ...]
    num_output: int = 0
    kernel: int = 1
    stride: int = 1
    pad: int = 0
    group: int = 1
    bias: bool = True
    pool: str = "max"  # max | ave
    global_pool: bool = False
    local_size: int = 5
    aux: bool = False
    kernel_w: int | None = None  # None: square kernel
    pad_w: int | None = None  # None: same as pad
    ceil: bool = True  # pooling output rounding (Caffe ceil; PyTorch floor = False)
    affine: bool = False  # bn only: learnable scale and shift inside the layer (PyTorch)

    @property
    def kw(self) -> int:
        return self.kernel if self.kernel_w is None else self.kernel_w

    @property
    def pw(self) -> int:
        return self.pad if self.pad_w is None else self.pad_w


@dataclass(frozen=True)
class Shape:
    c: int
    h: int
    w: int

    @property
    def numel(self) -> int:
        return self.c * self.h * self.w


@dataclass
class InferredLayer:
    layer: Layer
    index: int
    out: Shape
    in_numel: int
    params: int
    buffers: int
    fwd_flops: int
    bwd_flops: int
    extra: dict = field(default_factory=dict)


@dataclass(frozen=True)
class ModelSpec:
    name: str
    title: str
    source: str
    input_shape: Shape
    layers: tuple[Layer, ...]

    def without_aux(self) -> "ModelSpec":
        return ModelSpec(self.name, self.title, self.source, self.input_shape,
                         tuple(layer for layer in self.layers if not layer.aux))


def _conv_out(size: int, kernel: int, stride: int, pad: int) -> int:
    return (size + 2 * pad - kernel) // stride + 1


def _pool_out(size: int, kernel: int, stride: int, pad: int, ceil: bool = True) -> int:
    if not ceil:
        return (size + 2 * pad - kernel) // stride + 1
    out = int(math.ceil((size + 2 * pad - kernel) / stride)) + 1
    if pad and (out - 1) * stride >= size + pad:  # Caffe clips the last window
        out -= 1
    return out


def _infer_one(layer: Layer, ins: list[Shape], from_data: bool) -> tuple[Shape, int, int, int, int]:
    """Return (out shape, params, buffers, fwd_flops, bwd_flops) per sample."""
    first = ins[0]
    if layer.kind == "conv":
        oh = _conv_out(first.h, layer.kernel, layer.stride, layer.pad)
        ow = _conv_out(first.w, layer.kw, layer.stride, layer.pw)
        out = Shape(layer.num_output, oh, ow)
        if first.c % layer.group or layer.num_output % layer.group:
            raise ValueError(f"{layer.name}: channels not divisible by group {layer.group}")
        if oh < 1 or ow < 1:
            raise ValueError(f"{layer.name}: kernel larger than its padded input {first}")
        k = (first.c // layer.group) * layer.kernel * layer.kw
        weights = layer.num_output * k
        params = weights + (layer.num_output if layer.bias else 0)
        macs = out.numel * k
        fwd = 2 * macs + (out.numel if layer.bias else 0)
        bwd = 2 * macs + (out.numel if layer.bias else 0) + (0 if from_data else 2 * macs)
        return out, params, 0, fwd, bwd
    if layer.kind == "fc":
        k = first.numel
        out = Shape(layer.num_output, 1, 1)
        params = layer.num_output * k + (layer.num_output if layer.bias else 0)
        macs = layer.num_output * k
        fwd = 2 * macs + (layer.num_output if layer.bias else 0)
        bwd = 2 * macs + (layer.num_output if layer.bias else 0) + (0 if from_data else 2 * macs)
        return out, params, 0, fwd, bwd
    if layer.kind == "pool":
        if layer.global_pool:
            out = Shape(first.c, 1, 1)
            window = first.h * first.w
        else:
            out = Shape(first.c,
                        _pool_out(first.h, layer.kernel, layer.stride, layer.pad, layer.ceil),
                        _pool_out(first.w, layer.kw, layer.stride, layer.pw, layer.ceil))
            window = layer.kernel * layer.kw
        return out, 0, 0, out.numel * window, out.numel * window
    if layer.kind == "concat":
        if any((s.h, s.w) != (first.h, first.w) for s in ins):
            raise ValueError(f"{layer.name}: concat inputs differ in spatial size: {ins}")
        return Shape(sum(s.c for s in ins), first.h, first.w), 0, 0, 0, 0
    if layer.kind == "eltwise":
        if any(s != first for s in ins):
            raise ValueError(f"{layer.name}: eltwise inputs differ in shape: {ins}")
        n = first.numel * (len(ins) - 1)
        return first, 0, 0, n, first.numel * len(ins)
    n = first.numel
    if layer.kind == "relu":
        return first, 0, 0, n, n
    if layer.kind == "dropout":
        return first, 0, 0, 2 * n, n
    if layer.kind == "lrn":
        # sum of squares over local_size channels, then scale and power per element
        return first, 0, 0, n * (2 * layer.local_size + 3), n * (4 * layer.local_size + 5)
    if layer.kind == "bn":
        # batch statistics (mean, var) then normalise; running stats are buffers
        if layer.affine:  # PyTorch BatchNorm2d: normalise, then scale and shift
            return first, 2 * first.c, 2 * first.c + 1, 7 * n, 12 * n
        return first, 0, 2 * first.c + 1, 5 * n, 8 * n
    if layer.kind == "scale":
        return first, 2 * first.c, 0, 2 * n, 4 * n
    if layer.kind == "softmax":
        return Shape(1, 1, 1), 0, 0, 5 * n, 2 * n
    raise ValueError(f"{layer.name}: unknown layer kind {layer.kind!r}")


def infer(spec: ModelSpec) -> list[InferredLayer]:
    """Infer shapes, parameters, buffers and FLOPs for every layer of ``spec`` in order."""
    shapes: dict[str, Shape] = {DATA: spec.input_shape}
    seen: set[str] = set()
    out: list[InferredLayer] = []
    for index, layer in enumerate(spec.layers):
        if layer.kind not in KINDS:
            raise ValueError(f"{spec.name}/{layer.name}: unknown kind {layer.kind!r}")
        if layer.name in seen:
            raise ValueError(f"{spec.name}: duplicate layer name {layer.name!r}")
        missing = [b for b in layer.bottoms if b not in shapes]
        if missing:
            raise ValueError(f"{spec.name}/{layer.name}: bottoms {missing} not defined before it")
        ins = [shapes[b] for b in layer.bottoms]
        shape, params, buffers, fwd, bwd = _infer_one(layer, ins, DATA in layer.bottoms)
        shapes[layer.name] = shape
        seen.add(layer.name)
        out.append(InferredLayer(layer, index, shape, sum(s.numel for s in ins),
                                 params, buffers, fwd, bwd))
    return out
