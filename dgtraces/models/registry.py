"""The model registry: every architecture declared once, as plain data.

Everything that names models reads this tuple: :data:`dgtraces.models.MODELS` (and so the
``layers`` table and the schema's ``model`` check), every ``--model`` option of the CLI
(``click.Choice``), the dataset card's model list, the reconstruction (which models the
cost model is fitted on, which fitting-only framework variants exist) and the tests.

This module imports nothing heavy (no pandas, no torch, not even the spec code): the CLI
reads it to build its choices while ``python -m dgtraces --help`` stays fast. A spec is
built only when :func:`dgtraces.models.get_spec` asks for it, by importing ``builder``
(``"module:function"``, relative to ``dgtraces.models``).

Adding a model: write ``dgtraces/models/<key>.py`` with ``build() -> ModelSpec``, add one
:class:`ModelEntry` line below, add its tests. See docs/DEVELOPING.md, "Adding a model".
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Role(StrEnum):
    """What a model is for."""

    DATASET = "dataset"  # in MODELS, the ``layers`` table, every --model option
    FITTING = "fitting"  # a framework's own definition, used only to fit the cost model


@dataclass(frozen=True)
class ModelEntry:
    """One model. ``builder`` is ``"module:function"`` (module relative to
    ``dgtraces.models``) returning a :class:`~dgtraces.models.spec.ModelSpec` named ``key``."""

    key: str
    builder: str
    name: str  # display name in the card and the docs (AlexNet, ResNet-50, ...)
    title: str
    citation: str
    family: str  # the architecture family its variants share (alexnet, resnet50, ...)
    role: Role = Role.DATASET
    aux: bool = False  # has auxiliary classifiers (the collectors' --aux applies)
    fitted: bool = False  # its published whole-model totals fit the reconstruction cost model
    confidence: str = "high"  # of the architecture as recalled from ``citation``
    notes: str = ""  # what differs from the family's Caffe spec (fitting variants)


REGISTRY: tuple[ModelEntry, ...] = (
    ModelEntry("alexnet", "alexnet:build", "AlexNet", "AlexNet (bvlc_alexnet)",
               "BVLC Caffe models/bvlc_alexnet/train_val.prototxt (Krizhevsky, Sutskever, "
               "Hinton 2012)", "alexnet", fitted=True),
    ModelEntry("googlenet", "googlenet:build", "GoogLeNet", "GoogLeNet (bvlc_googlenet)",
               "BVLC Caffe models/bvlc_googlenet/train_val.prototxt (Szegedy et al. 2015)",
               "googlenet", aux=True),
    ModelEntry("resnet50", "resnet50:build", "ResNet-50", "ResNet-50 (He et al. 2016)",
               "KaimingHe/deep-residual-networks prototxt/ResNet-50-deploy.prototxt (He et "
               "al. 2016)", "resnet50", fitted=True),
    # torchvision architectures of the published GPU traces (issue #13; docs/gpu-traces.md)
    ModelEntry("alexnet-owt", "alexnet_owt:build", "AlexNet OWT",
               "AlexNet, One Weird Trick variant (torchvision)", "torchvision "
               "models/alexnet.py (AlexNet, Krizhevsky 2014 'One weird trick'); layer names "
               "from soumith/convnet-benchmarks caffe/imagenet_winners/alexnet.prototxt",
               "alexnet"),
    ModelEntry("resnet50-v1.5", "resnet50_v15:build", "ResNet-50 v1.5",
               "ResNet-50 v1.5 (torchvision)", "torchvision models/resnet.py resnet50 "
               "(Bottleneck, stride on conv2: v1.5)", "resnet50"),
    ModelEntry("vgg16", "vgg16:build", "VGG-16", "VGG-16 (torchvision)",
               "torchvision models/vgg.py vgg16 (cfg 'D', Simonyan and Zisserman 2015)",
               "vgg16"),
    ModelEntry("inception-v3", "inception_v3:build", "Inception-v3",
               "Inception-v3 (torchvision, with AuxLogits)", "torchvision models/inception.py "
               "inception_v3 (aux_logits=True; Szegedy et al. 2016)", "inception-v3",
               aux=True),
    # fitting-only: the architectures the published calibration rows ran
    ModelEntry("alexnet-tf", "framework_variants:alexnet_tf", "AlexNet (TensorFlow)",
               "AlexNet, 'one weird trick' layout", "tensorflow/benchmarks "
               "scripts/tf_cnn_benchmarks/models/alexnet_model.py (AlexnetModel; 2017, "
               "read at commit 2088ec3e)", "alexnet", Role.FITTING,
               confidence="medium", notes=(
                   "conv 64/192/384/384/256, 227 input (224 + 3, VALID conv1), no LRN, no "
                   "groups, 1001 classes, default batch 512 (matches the row), as in "
                   "tf_cnn_benchmarks/models/alexnet_model.py AlexnetModel.add_inference; "
                   "torchvision's and tensorflow/models' alexnet_benchmark.py use "
                   "384/256/256 for conv3-5 (15% fewer forward FLOPs)")),
    ModelEntry("alexnet-mxnet", "framework_variants:alexnet_mxnet", "AlexNet (MXNet)",
               "AlexNet without grouped convolutions", "apache/mxnet "
               "example/image-classification/symbols/alexnet.py (1.2)", "alexnet",
               Role.FITTING, notes=(
                   "conv 96/256/384/384/256 with no num_group (conv2/4/5 2x bvlc_alexnet's "
                   "FLOPs), LRN after conv1/conv2, 224 input (benchmark_score.py and "
                   "train_imagenet.py default 3,224,224), 'valid' (floor) pooling: fc1 sees "
                   "256 x 5 x 5")),
    ModelEntry("resnet50-mxnet", "framework_variants:resnet50_mxnet", "ResNet-50 (MXNet)",
               "ResNet-50 v2 (pre-activation)", "apache/mxnet "
               "example/image-classification/symbols/resnet.py (1.2)", "resnet50",
               Role.FITTING, notes=(
                   "pre-activation bottlenecks (BN-ReLU-conv), stride on the 3x3, projection "
                   "shortcut on the first unit of each stage, bn_data on the input, final "
                   "BN-ReLU")),
    ModelEntry("resnet50-v1.5-dle", "framework_variants:resnet50_v15", "ResNet-50 v1.5 (DLE)",
               "ResNet-50 v1.5, Caffe granularity (bn + scale)",
               "NVIDIA/DeepLearningExamples PyTorch/Classification/ConvNets/resnet50v1.5 "
               "README", "resnet50", Role.FITTING, notes=(
                   "v1 with the downsampling stride on the 3x3 instead of the first 1x1 (the "
                   "README states exactly this difference); used for the amp ratio and the "
                   "fp32 check only, never fitted as a time. The same architecture as the "
                   "dataset spec resnet50-v1.5, written as the fit was developed on it")),
)

_BY_KEY = {e.key: e for e in REGISTRY}


def keys(role: Role | None = Role.DATASET) -> tuple[str, ...]:
    """Registry keys in declaration order; ``role=None`` for every entry."""
    return tuple(e.key for e in REGISTRY if role is None or e.role is role)


def entries(role: Role | None = Role.DATASET) -> tuple[ModelEntry, ...]:
    return tuple(e for e in REGISTRY if role is None or e.role is role)


def entry(key: str) -> ModelEntry:
    """The entry of ``key`` (any role); UNKNOWN_MODEL otherwise."""
    found = _BY_KEY.get(key) if isinstance(key, str) else None
    if found is None:
        from ..errors import UnknownModelError

        raise UnknownModelError(repr(key)[:60] if not isinstance(key, str) else key,
                                keys(None))
    return found


def fitted() -> tuple[str, ...]:
    """Dataset models whose published totals the reconstruction cost model is fitted to."""
    return tuple(e.key for e in entries() if e.fitted)


def with_aux() -> tuple[str, ...]:
    """Dataset models with auxiliary classifiers."""
    return tuple(e.key for e in entries() if e.aux)


MODELS = keys()

__all__ = ["MODELS", "REGISTRY", "ModelEntry", "Role", "entries", "entry", "fitted", "keys",
           "with_aux"]
