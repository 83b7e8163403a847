"""Torch modules built from a :class:`~dgtraces.models.ModelSpec`: one module per Caffe layer.

Only import this module after ``errors.require("torch", ...)`` succeeded (it imports torch at
the top). Layer names are the Caffe names of the ``layers`` table, so timings map 1:1.

Caffe semantics kept: grouped convolution; LRN ACROSS_CHANNELS (local_size 5, alpha 1e-4,
beta 0.75, k 1, alpha divided by the window as in Caffe); pooling with Caffe's ceil rounding
(torch ``ceil_mode`` clips the last window exactly like ``spec._pool_out``) and average pooling
dividing by the padded window; BatchNorm without affine (batch statistics; running mean/var
and the counter are the ``2C+1`` buffers) followed by a separate Scale layer (gamma, beta);
concat on channels; eltwise sum; ReLU and Dropout as their own layers (not in place, so each
layer's backward can be timed on its own); SoftmaxWithLoss as the cross-entropy of the
flattened logits. Auxiliary GoogLeNet losses are weighted 0.3 as in bvlc_googlenet.
Dropout uses ratio 0.5 everywhere (the spec does not carry ratios; the cost does not depend
on it).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..models import get_spec
from ..models.spec import InferredLayer, ModelSpec, infer

AUX_LOSS_WEIGHT = 0.3
LRN_ALPHA, LRN_BETA, LRN_K = 1e-4, 0.75, 1.0
BN_EPS = 1e-5


class InnerProduct(nn.Linear):
    """Caffe InnerProduct: flattens C x H x W before the matrix product."""

    def forward(self, x):
        return super().forward(x.flatten(1))


class Scale(nn.Module):
    """Caffe Scale layer with bias: per-channel gamma and beta."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(channels))
        self.bias = nn.Parameter(torch.zeros(channels))

    def forward(self, x):
        shape = (1, -1) + (1,) * (x.dim() - 2)
        return x * self.weight.view(shape) + self.bias.view(shape)


class Concat(nn.Module):
    def forward(self, *xs):
        return torch.cat(xs, dim=1)


class Eltwise(nn.Module):
    """Caffe Eltwise SUM."""

    def forward(self, *xs):
        out = xs[0]
        for x in xs[1:]:
            out = out + x
        return out


class SoftmaxWithLoss(nn.Module):
    def forward(self, logits, labels):
        return F.cross_entropy(logits.flatten(1), labels)


def make_module(item: InferredLayer, in_c: int, in_numel: int) -> nn.Module:
    """The torch module of one spec layer (input channels / numel of its first bottom)."""
    layer = item.layer
    kind = layer.kind
    if kind == "conv":
        return nn.Conv2d(in_c, layer.num_output, (layer.kernel, layer.kw), layer.stride,
                         (layer.pad, layer.pw), groups=layer.group, bias=layer.bias)
    if kind == "fc":
        return InnerProduct(in_numel, layer.num_output, bias=layer.bias)
    if kind == "pool":
        if layer.global_pool:
            return nn.AdaptiveMaxPool2d(1) if layer.pool == "max" else nn.AdaptiveAvgPool2d(1)
        if layer.pool == "max":
            return nn.MaxPool2d((layer.kernel, layer.kw), layer.stride, (layer.pad, layer.pw),
                                ceil_mode=layer.ceil)
        return nn.AvgPool2d((layer.kernel, layer.kw), layer.stride, (layer.pad, layer.pw),
                            ceil_mode=layer.ceil,
                            count_include_pad=True)
    if kind == "relu":
        return nn.ReLU()
    if kind == "lrn":
        return nn.LocalResponseNorm(layer.local_size, LRN_ALPHA, LRN_BETA, LRN_K)
    if kind == "bn":
        return nn.BatchNorm2d(in_c, eps=BN_EPS, affine=layer.affine)
    if kind == "scale":
        return Scale(in_c)
    if kind == "concat":
        return Concat()
    if kind == "eltwise":
        return Eltwise()
    if kind == "dropout":
        return nn.Dropout(0.5)
    if kind == "softmax":
        return SoftmaxWithLoss()
    raise ValueError(f"{layer.name}: no torch module for kind {kind!r}")


class CaffeNet(nn.Module):
    """A spec executed layer by layer; ``forward(x, labels)`` returns the weighted total loss.

    ``run_layer(name, inputs, labels)`` runs one layer on given input tensors (used by the
    per-layer timer). ``order`` lists layer names in execution order, ``bottoms[name]`` the
    producing layers ('data' = input), ``loss_weights`` the softmax layers and weights.
    """

    def __init__(self, spec: ModelSpec, aux: bool = False) -> None:
        super().__init__()
        self.spec = spec if aux else spec.without_aux()
        self.items = tuple(infer(self.spec))
        self.order = [it.layer.name for it in self.items]
        self.kinds = {it.layer.name: it.layer.kind for it in self.items}
        self.bottoms = {it.layer.name: it.layer.bottoms for it in self.items}
        shapes = {"data": self.spec.input_shape}
        self.layers = nn.ModuleDict()
        for it in self.items:
            first = shapes[it.layer.bottoms[0]]
            self.layers[self.key(it.layer.name)] = make_module(it, first.c, first.numel)
            shapes[it.layer.name] = it.out
        self.loss_weights = {it.layer.name: (AUX_LOSS_WEIGHT if it.layer.aux else 1.0)
                             for it in self.items if it.layer.kind == "softmax"}
        # torchvision specs end at the classifier (the loss is outside the model): without
        # softmax layers, cross-entropy on every output no layer consumes (aux weighted)
        used = {b for it in self.items for b in it.layer.bottoms}
        self.heads = {} if self.loss_weights else {
            it.layer.name: (AUX_LOSS_WEIGHT if it.layer.aux else 1.0)
            for it in self.items if it.layer.name not in used}

    @staticmethod
    def key(name: str) -> str:
        """ModuleDict key of a layer: torch refuses '.' (torchvision module paths use it)."""
        return name.replace(".", "\u00b7")

    def run_layer(self, name: str, inputs, labels):
        module = self.layers[self.key(name)]
        if self.kinds[name] == "softmax":
            return module(inputs[0], labels)
        return module(*inputs)

    def forward(self, x, labels):
        blobs = {"data": x}
        for name in self.order:
            blobs[name] = self.run_layer(name, [blobs[b] for b in self.bottoms[name]], labels)
        if self.heads:
            return sum(w * F.cross_entropy(blobs[name].flatten(1), labels)
                       for name, w in self.heads.items())
        return sum(w * blobs[name] for name, w in self.loss_weights.items())

    def layer_params(self) -> dict[str, list]:
        """Layer name -> its learnable parameters (in Caffe blob order: weight, bias)."""
        return {name: list(self.layers[self.key(name)].parameters()) for name in self.order
                if any(True for _ in self.layers[self.key(name)].parameters())}


def build(model: str, aux: bool = False, seed: int = 0) -> CaffeNet:
    """A freshly initialised :class:`CaffeNet` of ``model`` (deterministic for ``seed``)."""
    torch.manual_seed(seed)
    return CaffeNet(get_spec(model), aux=aux)


def synthetic_batch(net: CaffeNet, batch_size: int, seed: int = 0):
    """Random input of the spec's shape and random labels (synthetic data, no I/O)."""
    gen = torch.Generator().manual_seed(seed)
    s = net.spec.input_shape
    x = torch.randn(batch_size, s.c, s.h, s.w, generator=gen)
    last_fc = [it for it in net.items if it.layer.kind == "fc"][-1].layer.num_output
    labels = torch.randint(0, last_fc, (batch_size,), generator=gen)
    return x, labels
