"""Framework-specific architectures the published calibration rows ran (fitting only).

Registered with ``Role.FITTING`` in :mod:`dgtraces.models.registry` (with their citation,
confidence and what differs); never in :data:`dgtraces.models.MODELS` nor the ``layers``
table. Conventions as in :mod:`dgtraces.models.spec` (Caffe granularity: a framework
BatchNorm with learnable gamma/beta is a ``bn`` + ``scale`` pair, as in our resnet50 spec,
so only the architecture differs, not the kernel accounting). ``spec.infer`` rounds pooling
outputs up (Caffe); MXNet's default ``pooling_convention='valid'`` rounds down, so MXNet
pools are written with the kernel/pad that give MXNet's output size under Caffe rounding
(noted per layer; pooling FLOPs are negligible and pools are memory bound).
"""

from __future__ import annotations

from .builder import Builder
from .spec import ModelSpec, Shape


def alexnet_tf() -> ModelSpec:
    # tf_cnn_benchmarks alexnet_model.py: image 224 + 3 = 227, VALID conv1, no LRN, no groups
    b = Builder()
    x = b.conv("conv1", "data", 64, 11, stride=4)
    x = b.relu("relu1", x)
    x = b.pool("pool1", x, 3, 2)  # 55 -> 27 (VALID = floor = Caffe ceil here)
    x = b.relu("relu2", b.conv("conv2", x, 192, 5, pad=2))
    x = b.pool("pool2", x, 3, 2)  # 27 -> 13
    x = _convs_3_to_5(b, x, pool5_kernel=3)  # 13 -> 6: fc6 sees 256 * 6 * 6
    return _fc_head(b, x, "alexnet-tf", Shape(3, 227, 227), classes=1001)


def alexnet_mxnet() -> ModelSpec:
    # MXNet example/image-classification/symbols/alexnet.py: LRN, no num_group, 224 input
    b = Builder()
    x = b.conv("conv1", "data", 96, 11, stride=4)  # 224 -> 54
    x = b.lrn("norm1", b.relu("relu1", x))
    x = b.pool("pool1", x, 4, 2)  # MXNet k3 s2 valid: 54 -> 26 (k4 gives 26 under ceil)
    x = b.lrn("norm2", b.relu("relu2", b.conv("conv2", x, 256, 5, pad=2)))
    x = b.pool("pool2", x, 4, 2)  # 26 -> 12
    x = _convs_3_to_5(b, x, pool5_kernel=4)  # 12 -> 5: fc1 sees 256 * 5 * 5
    return _fc_head(b, x, "alexnet-mxnet", Shape(3, 224, 224), classes=1000)


def _convs_3_to_5(b: Builder, x: str, pool5_kernel: int) -> str:
    """conv3-5 (384/384/256, 3x3, ungrouped) with their ReLUs, then pool5 (stride 2)."""
    for i, n in ((3, 384), (4, 384), (5, 256)):
        x = b.relu(f"relu{i}", b.conv(f"conv{i}", x, n, 3, pad=1))
    return b.pool("pool5", x, pool5_kernel, 2)


def _fc_head(b: Builder, x: str, name: str, shape: Shape, classes: int) -> ModelSpec:
    for i in (6, 7):
        x = b.dropout(f"drop{i}", b.relu(f"relu{i}", b.fc(f"fc{i}", x, 4096)))
    b.add("loss", "softmax", b.fc("fc8", x, classes))
    return b.spec(name, shape)


def _bn(b: Builder, name: str, x: str, scale: bool = True) -> str:
    x = b.add(f"{name}_bn", "bn", x)
    return b.add(f"{name}_scale", "scale", x) if scale else x


STAGES = ((3, 64), (4, 128), (6, 256), (3, 512))


def resnet50_v15() -> ModelSpec:
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
    return _resnet_head(b, x, "resnet50-v1.5-dle")


def resnet50_mxnet() -> ModelSpec:
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
    return _resnet_head(b, x, "resnet50-mxnet")


def _resnet_head(b: Builder, x: str, name: str) -> ModelSpec:
    x = b.pool("pool5", x, 7, 1, pool="ave")
    b.add("prob", "softmax", b.fc("fc1000", x, 1000))
    return b.spec(name, Shape(3, 224, 224))
