"""The architectures the published calibration rows actually ran, for fitting only.

The throughputs in ``calibration.csv`` were measured on each framework's *own* model
definitions, not on the Caffe specs of the ``layers`` table. The fit compares each row
with the architecture it ran (:func:`architecture`); the reconstructed K80/V100 traces of
the dataset stay on the Caffe specs (that is what the dataset describes). These specs are
never added to :data:`dgtraces.models.MODELS` nor to the ``layers`` table.

Conventions as in :mod:`dgtraces.models.spec` (Caffe granularity: a framework BatchNorm
with learnable gamma/beta is a ``bn`` + ``scale`` pair, as in our resnet50 spec, so only the
architecture differs, not the kernel accounting). ``spec.infer`` rounds pooling outputs up
(Caffe); MXNet's default ``pooling_convention='valid'`` rounds down, so MXNet pools are
written with the kernel/pad that give MXNet's output size under Caffe rounding (noted per
layer; pooling FLOPs are negligible and pools are memory bound).

Each variant states its source (repository + file, as recalled: no network here) and a
confidence; see also the card fragment.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

from ..models import MODELS, BYTES_FP32, _bias, get_spec
from ..models.builder import Builder
from ..models.spec import ModelSpec, Shape, infer


@dataclass(frozen=True)
class Variant:
    name: str
    title: str
    source: str
    confidence: str  # high | medium | low, with the doubt spelled out in ``notes``
    notes: str
    build: Callable[[], ModelSpec]


def _alexnet_tf() -> ModelSpec:
    # tf_cnn_benchmarks alexnet_model.py: image 224 + 3 = 227, VALID conv1, no LRN, no groups
    b = Builder()
    x = b.conv("conv1", "data", 64, 11, stride=4)
    x = b.relu("relu1", x)
    x = b.pool("pool1", x, 3, 2)  # 55 -> 27 (VALID = floor = Caffe ceil here)
    x = b.relu("relu2", b.conv("conv2", x, 192, 5, pad=2))
    x = b.pool("pool2", x, 3, 2)  # 27 -> 13
    x = b.relu("relu3", b.conv("conv3", x, 384, 3, pad=1))
    x = b.relu("relu4", b.conv("conv4", x, 384, 3, pad=1))
    x = b.relu("relu5", b.conv("conv5", x, 256, 3, pad=1))
    x = b.pool("pool5", x, 3, 2)  # 13 -> 6: fc6 sees 256 * 6 * 6
    return _fc_head(b, x, "alexnet-tf", "AlexNet (tf_cnn_benchmarks)", Shape(3, 227, 227),
                    classes=1001)


def _alexnet_mxnet() -> ModelSpec:
    # MXNet example/image-classification/symbols/alexnet.py: LRN, no num_group, 224 input
    b = Builder()
    x = b.conv("conv1", "data", 96, 11, stride=4)  # 224 -> 54
    x = b.lrn("norm1", b.relu("relu1", x))
    x = b.pool("pool1", x, 4, 2)  # MXNet k3 s2 valid: 54 -> 26 (k4 gives 26 under ceil)
    x = b.lrn("norm2", b.relu("relu2", b.conv("conv2", x, 256, 5, pad=2)))
    x = b.pool("pool2", x, 4, 2)  # 26 -> 12
    x = b.relu("relu3", b.conv("conv3", x, 384, 3, pad=1))
    x = b.relu("relu4", b.conv("conv4", x, 384, 3, pad=1))
    x = b.relu("relu5", b.conv("conv5", x, 256, 3, pad=1))
    x = b.pool("pool5", x, 4, 2)  # 12 -> 5: fc1 sees 256 * 5 * 5
    return _fc_head(b, x, "alexnet-mxnet", "AlexNet (MXNet symbols/alexnet.py)",
                    Shape(3, 224, 224), classes=1000)


def _fc_head(b: Builder, x: str, name: str, title: str, shape: Shape, classes: int
             ) -> ModelSpec:
    for i in (6, 7):
        x = b.dropout(f"drop{i}", b.relu(f"relu{i}", b.fc(f"fc{i}", x, 4096)))
    b.add("loss", "softmax", b.fc("fc8", x, classes))
    return ModelSpec(name, title, VARIANTS[name].source, shape, tuple(b.layers))


def _bn(b: Builder, name: str, x: str, scale: bool = True) -> str:
    x = b.add(f"{name}_bn", "bn", x)
    return b.add(f"{name}_scale", "scale", x) if scale else x


STAGES = ((3, 64), (4, 128), (6, 256), (3, 512))


def _resnet50_v15() -> ModelSpec:
    # v1 (post-activation, He et al.) with the stride on the 3x3 of the first bottleneck
    b = Builder()
    x = b.relu("conv1_relu", _bn(b, "conv1", b.conv("conv1", "data", 64, 7, 2, 3, bias=False)))
    x = b.pool("pool1", x, 3, 2)  # 112 -> 56 (PyTorch k3 s2 p1 floor)
    for s, (blocks, width) in enumerate(STAGES):
        for i in range(blocks):
            u = f"s{s + 1}u{i + 1}"
            stride = 2 if (i == 0 and s > 0) else 1
            short = x
            if i == 0:
                short = _bn(b, f"{u}_sc", b.conv(f"{u}_sc", x, 4 * width, 1, stride,
                                                 bias=False))
            y = b.relu(f"{u}_relu1", _bn(b, f"{u}_c1", b.conv(f"{u}_c1", x, width, 1,
                                                              bias=False)))
            y = b.relu(f"{u}_relu2", _bn(b, f"{u}_c2", b.conv(f"{u}_c2", y, width, 3,
                                                              stride, 1, bias=False)))
            y = _bn(b, f"{u}_c3", b.conv(f"{u}_c3", y, 4 * width, 1, bias=False))
            x = b.relu(f"{u}_relu", b.add(f"{u}_add", "eltwise", (short, y)))
    return _resnet_head(b, x, "resnet50-v1.5", "ResNet-50 v1.5 (NVIDIA DLE)")


def _resnet50_mxnet() -> ModelSpec:
    # MXNet symbols/resnet.py (num_layers=50): pre-activation (He et al. 2016b), stride on
    # the 3x3, projection shortcut from the first unit's BN-ReLU output
    b = Builder()
    x = _bn(b, "bn_data", "data", scale=False)  # fix_gamma=True: beta only
    x = b.relu("relu0", _bn(b, "bn0", b.conv("conv0", x, 64, 7, 2, 3, bias=False)))
    x = b.pool("pool0", x, 3, 2)  # MXNet k3 s2 p1 valid: 112 -> 56 (p0 gives 56 under ceil)
    for s, (blocks, width) in enumerate(STAGES):
        for i in range(blocks):
            u = f"stage{s + 1}_unit{i + 1}"
            stride = 2 if (i == 0 and s > 0) else 1
            act1 = b.relu(f"{u}_relu1", _bn(b, f"{u}_bn1", x))
            y = b.conv(f"{u}_conv1", act1, width, 1, bias=False)
            y = b.relu(f"{u}_relu2", _bn(b, f"{u}_bn2", y))
            y = b.conv(f"{u}_conv2", y, width, 3, stride, 1, bias=False)
            y = b.relu(f"{u}_relu3", _bn(b, f"{u}_bn3", y))
            y = b.conv(f"{u}_conv3", y, 4 * width, 1, bias=False)
            short = b.conv(f"{u}_sc", act1, 4 * width, 1, stride, bias=False) if i == 0 else x
            x = b.add(f"{u}_plus", "eltwise", (y, short))
    x = b.relu("relu1", _bn(b, "bn1", x))
    return _resnet_head(b, x, "resnet50-mxnet", "ResNet-50 v2 (MXNet symbols/resnet.py)")


def _resnet_head(b: Builder, x: str, name: str, title: str) -> ModelSpec:
    x = b.pool("pool5", x, 7, 1, pool="ave")
    b.add("prob", "softmax", b.fc("fc1000", x, 1000))
    return ModelSpec(name, title, VARIANTS[name].source, Shape(3, 224, 224), tuple(b.layers))


VARIANTS = {v.name: v for v in (
    Variant("alexnet-tf", "AlexNet, 'one weird trick' layout", "tensorflow/benchmarks "
            "scripts/tf_cnn_benchmarks/alexnet_model.py (2017)", "medium",
            "conv 64/192/384/384/256, 227 input (224 + 3, VALID conv1), no LRN, no groups, "
            "1001 classes, default batch 512 (matches the row). The conv3-5 widths are "
            "recalled, not checked: torchvision's and tensorflow/models' alexnet_benchmark.py "
            "use 384/256/256 (15% fewer forward FLOPs)", _alexnet_tf),
    Variant("alexnet-mxnet", "AlexNet without grouped convolutions", "apache/mxnet "
            "example/image-classification/symbols/alexnet.py (1.2)", "high",
            "conv 96/256/384/384/256 with no num_group (conv2/4/5 2x bvlc_alexnet's FLOPs), "
            "LRN after conv1/conv2, 224 input (benchmark_score.py and train_imagenet.py "
            "default 3,224,224), 'valid' (floor) pooling: fc1 sees 256 x 5 x 5", _alexnet_mxnet),
    Variant("resnet50-mxnet", "ResNet-50 v2 (pre-activation)", "apache/mxnet "
            "example/image-classification/symbols/resnet.py (1.2)", "high",
            "pre-activation bottlenecks (BN-ReLU-conv), stride on the 3x3, projection "
            "shortcut on the first unit of each stage, bn_data on the input, final BN-ReLU",
            _resnet50_mxnet),
    Variant("resnet50-v1.5", "ResNet-50 v1.5", "NVIDIA/DeepLearningExamples "
            "PyTorch/Classification/ConvNets/resnet50v1.5 README", "high",
            "v1 with the downsampling stride on the 3x3 instead of the first 1x1 (the README "
            "states exactly this difference); used for the amp ratio and the fp32 check "
            "only, never fitted as a time", _resnet50_v15),
)}

# (framework family, model in calibration.csv) -> architecture actually run
ROW_ARCHITECTURE = {
    ("tensorflow", "alexnet"): "alexnet-tf",
    ("tensorflow", "resnet50"): "resnet50",  # tf_cnn_benchmarks resnet_model.py: v1 (medium)
    ("mxnet", "alexnet"): "alexnet-mxnet",
    ("mxnet", "resnet50"): "resnet50-mxnet",
    ("pytorch", "resnet50v1.5"): "resnet50-v1.5",
}
TF_RESNET_NOTE = ("tensorflow/benchmarks scripts/tf_cnn_benchmarks/resnet_model.py (2017): v1 "
                  "bottlenecks with the stride on the first 1x1, as our Caffe spec (medium "
                  "confidence; later versions added a separate resnet50_v1.5)")


def architecture(framework: str, model: str) -> str:
    """The architecture a calibration row ran; our Caffe spec when no variant is known."""
    family = framework.split("-")[0]
    return ROW_ARCHITECTURE.get((family, model), model)


@lru_cache(maxsize=None)
def get_variant_spec(name: str) -> ModelSpec:
    return get_spec(name) if name in MODELS else VARIANTS[name].build()


@lru_cache(maxsize=None)
def records(name: str) -> tuple[tuple[dict, ...], int]:
    """The cost-model columns of every layer of architecture ``name`` (a Caffe spec or a
    variant), and its number of learnable blobs (weights and biases)."""
    rows, n_blobs = [], 0
    for item in infer(get_variant_spec(name)):
        bias = _bias(item)
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
