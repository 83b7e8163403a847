"""Architecture specs and the ``layers`` table derived from them (one source of truth).

>>> from dgtraces.models import get_spec, layers_frame
>>> layers_frame("alexnet")["params"].sum()
60965224
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import import_module
from typing import TYPE_CHECKING

from ..errors import UnknownModelError
from .registry import MODELS, REGISTRY, ModelEntry, Role, entry
from .spec import KINDS, InferredLayer, Layer, ModelSpec, Shape, infer

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

BYTES_FP32 = 4

LAYER_COLUMNS = (
    "model", "layer_idx", "layer", "kind", "bottoms", "aux", "out_c", "out_h", "out_w",
    "params", "bias_params", "buffers", "grad_bytes", "fwd_flops", "bwd_flops",
    "in_bytes", "act_bytes",
)


def get_spec(name: str) -> ModelSpec:
    """Return the architecture spec of dataset model ``name`` (one of :data:`MODELS`;
    GoogLeNet includes its aux classifiers). UNKNOWN_MODEL for anything else, the
    fitting-only framework variants included (:func:`build_spec` builds those)."""
    if not isinstance(name, str) or name not in MODELS:  # a list is not hashable
        raise UnknownModelError(name if isinstance(name, str) else repr(name)[:60], MODELS)
    return build_spec(name)


@cache
def build_spec(key: str) -> ModelSpec:
    """The spec of any registry model (dataset or fitting-only), built by its ``builder``."""
    e = entry(key)
    module, func = e.builder.split(":")
    spec: ModelSpec = getattr(import_module(f".{module}", __name__), func)()
    return spec  # tests/models/test_models_registry.py checks every builder names its key


def inferred(name: str) -> tuple[InferredLayer, ...]:
    get_spec(name)  # UNKNOWN_MODEL for anything but a known name
    return _inferred(name)


@cache
def _inferred(name: str) -> tuple[InferredLayer, ...]:
    return tuple(infer(get_spec(name)))


def bias_count(item: InferredLayer) -> int:
    layer = item.layer
    if layer.kind in ("conv", "fc") and layer.bias:
        return layer.num_output
    if layer.kind == "scale" or (layer.kind == "bn" and layer.affine):
        return item.params // 2
    return 0


@dataclass(frozen=True)
class Blob:
    """A learnable parameter blob in Caffe's parameter order (weights, then bias)."""

    index: int
    layer: str
    role: str  # weight | bias
    numel: int
    aux: bool

    def padded(self, align: int = 64) -> int:
        """``numel`` rounded up to a multiple of ``align`` elements (B-Caffe's allocation)."""
        return -(-self.numel // align) * align


def blobs(name: str, aux: bool = True) -> list[Blob]:
    """Learnable blobs of a model in Caffe order, as B-Caffe logs list them."""
    out: list[Blob] = []
    for item in inferred(name):
        if not item.params or (item.layer.aux and not aux):
            continue
        bias = bias_count(item)
        for role, numel in (("weight", item.params - bias), ("bias", bias)):
            if numel:
                out.append(Blob(len(out), item.layer.name, role, numel, item.layer.aux))
    return out


def padded_param_count(name: str, align: int = 64, aux: bool = True) -> int:
    """Parameter count with every blob rounded up to ``align`` elements.

    B-Caffe allocates gradient blobs padded to 64 elements; its logs (and figures quoted
    from them, e.g. 13,379,136 for GoogLeNet with aux) count those padded sizes.
    """
    from ..values import positive_int

    align = positive_int("align", align)
    return sum(b.padded(align) for b in blobs(name, aux=aux))


def layer_records(name: str) -> list[dict]:
    rows = []
    for item in inferred(name):
        layer = item.layer
        rows.append({
            "model": name,
            "layer_idx": item.index,
            "layer": layer.name,
            "kind": layer.kind,
            "bottoms": ",".join(layer.bottoms),
            "aux": layer.aux,
            "out_c": item.out.c,
            "out_h": item.out.h,
            "out_w": item.out.w,
            "params": item.params,
            "bias_params": bias_count(item),
            "buffers": item.buffers,
            "grad_bytes": BYTES_FP32 * item.params,
            "fwd_flops": item.fwd_flops,
            "bwd_flops": item.bwd_flops,
            "in_bytes": BYTES_FP32 * item.in_numel,
            "act_bytes": BYTES_FP32 * item.out.numel,
        })
    return rows


def layers_frame(models: str | list[str] | tuple[str, ...] | None = None) -> "pd.DataFrame":
    """The ``layers`` table for one model, several, or all (default)."""
    if models is None:
        models = MODELS
    elif isinstance(models, str):
        models = (models,)
    elif not isinstance(models, (list, tuple)):
        raise UnknownModelError(repr(models)[:60], MODELS)
    for m in models:
        get_spec(m)  # UNKNOWN_MODEL (before the cache: a list item is not hashable)
    return _layers_frame(tuple(models)).copy()  # a copy: callers may edit theirs


@cache
def _layers_frame(models: tuple[str, ...]) -> "pd.DataFrame":
    """The frame of :func:`layers_frame`, built once per process and tuple of models (the
    specs it derives from are fixed; predictor property tests build thousands of traces)."""
    import pandas as pd

    rows = [r for m in models for r in layer_records(m)]
    df = pd.DataFrame(rows, columns=list(LAYER_COLUMNS))
    for col in ("layer_idx", "out_c", "out_h", "out_w", "params", "bias_params", "buffers",
                "grad_bytes", "fwd_flops", "bwd_flops", "in_bytes", "act_bytes"):
        df[col] = df[col].astype("int64")
    df["aux"] = df["aux"].astype(bool)
    for col in ("model", "layer", "kind", "bottoms"):
        df[col] = df[col].astype(str)
    return df


__all__ = [
    "MODELS", "KINDS", "LAYER_COLUMNS", "REGISTRY", "Blob", "Layer", "ModelEntry", "ModelSpec",
    "Role", "Shape", "blobs", "build_spec", "entry", "get_spec", "inferred", "layer_records",
    "layers_frame", "padded_param_count",
]
