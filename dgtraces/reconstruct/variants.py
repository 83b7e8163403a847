"""The architectures the published calibration rows actually ran, for fitting only.

The throughputs in ``calibration.csv`` were measured on each framework's *own* model
definitions, not on the Caffe specs of the ``layers`` table. The fit compares each row
with the architecture it ran (:func:`architecture`); the reconstructed K80/V100 traces of
the dataset stay on the Caffe specs (that is what the dataset describes). These specs are
never in :data:`dgtraces.models.MODELS` nor in the ``layers`` table.

The specs are in :mod:`dgtraces.models.framework_variants`, registered with
``Role.FITTING`` in :mod:`dgtraces.models.registry`.

Each variant states its source (repository + file, as recalled: no network here) and a
confidence; see also the card fragment.
"""

from __future__ import annotations

from functools import cache

from dgtraces.models import BYTES_FP32, bias_count, build_spec
from dgtraces.models.registry import Role, entries
from dgtraces.models.spec import ModelSpec, infer

# the fitting-only architectures (citation, confidence, notes), from the model registry
VARIANTS = {e.key: e for e in entries(Role.FITTING)}


# (framework family, model in calibration.csv) -> architecture actually run
ROW_ARCHITECTURE = {
    ("tensorflow", "alexnet"): "alexnet-tf",
    ("tensorflow", "resnet50"): "resnet50",  # tf_cnn_benchmarks resnet_model.py: v1 (medium)
    ("mxnet", "alexnet"): "alexnet-mxnet",
    ("mxnet", "resnet50"): "resnet50-mxnet",
    ("pytorch", "resnet50v1.5"): "resnet50-v1.5-dle",
}
TF_RESNET_NOTE = ("tensorflow/benchmarks scripts/tf_cnn_benchmarks/resnet_model.py (2017): v1 "
                  "bottlenecks with the stride on the first 1x1, as our Caffe spec (medium "
                  "confidence; later versions added a separate resnet50_v1.5)")


def architecture(framework: str, model: str) -> str:
    """The architecture a calibration row ran; our Caffe spec when no variant is known."""
    family = framework.split("-")[0]
    return ROW_ARCHITECTURE.get((family, model), model)


def get_variant_spec(name: str) -> ModelSpec:
    """The spec of any registry model, fitting-only variants included."""
    return build_spec(name)


@cache
def records(name: str) -> tuple[tuple[dict, ...], int]:
    """The cost-model columns of every layer of architecture ``name`` (a Caffe spec or a
    variant), and its number of learnable blobs (weights and biases)."""
    rows, n_blobs = [], 0
    for item in infer(get_variant_spec(name)):
        bias = bias_count(item)
        n_blobs += (item.params - bias > 0) + (bias > 0)
        rows.append({"layer": item.layer.name, "kind": item.layer.kind,
                     "bottoms": ",".join(item.layer.bottoms), "params": item.params,
                     "bias_params": bias, "grad_bytes": BYTES_FP32 * item.params,
                     "fwd_flops": item.fwd_flops, "bwd_flops": item.bwd_flops,
                     "in_bytes": BYTES_FP32 * item.in_numel,
                     "act_bytes": BYTES_FP32 * item.out.numel,
                     "winograd": (item.layer.kind == "conv" and item.layer.kernel == 3
                                  and item.layer.stride == 1)})
    return tuple(rows), n_blobs
