"""ResNet-50 v1.5 (torchvision): stride 2 in the 3x3 conv of each down-sampling block.

Same 25,557,032 parameters as the Caffe v1 net, more FLOPs. Layer names are torchvision
module paths (``layer1.0.conv1``, ``layer1.0.downsample.0``); a module called more than once
(the block's ``relu``) or a functional op (the residual ``add``) is named by its parent path
plus the module or op name and, when repeated, ``#k`` (1-based call order). Layers are
listed in execution order (the downsample branch runs after ``bn3``), which is the order a
profiler sees them.
"""

from .builder import Builder
from .spec import ModelSpec, Shape

STAGES = ((1, 3, 64, 1), (2, 4, 128, 2), (3, 6, 256, 2), (4, 3, 512, 2))


def _block(b: Builder, p: str, x: str, width: int, stride: int, downsample: bool) -> str:
    y = b.relu(f"{p}.relu#1", b.bn(f"{p}.bn1", b.conv(f"{p}.conv1", x, width, 1, bias=False),
                                   affine=True))
    y = b.conv(f"{p}.conv2", y, width, 3, stride=stride, pad=1, bias=False)
    y = b.relu(f"{p}.relu#2", b.bn(f"{p}.bn2", y, affine=True))
    y = b.bn(f"{p}.bn3", b.conv(f"{p}.conv3", y, 4 * width, 1, bias=False), affine=True)
    shortcut = x
    if downsample:
        shortcut = b.conv(f"{p}.downsample.0", x, 4 * width, 1, stride=stride, bias=False)
        shortcut = b.bn(f"{p}.downsample.1", shortcut, affine=True)
    return b.relu(f"{p}.relu#3", b.eltwise(f"{p}.add", (y, shortcut)))


def build() -> ModelSpec:
    b = Builder()
    x = b.relu("relu", b.bn("bn1", b.conv("conv1", "data", 64, 7, stride=2, pad=3, bias=False),
                            affine=True))
    x = b.pool("maxpool", x, 3, 2, pad=1, ceil=False)
    for stage, blocks, width, stride in STAGES:
        for i in range(blocks):
            x = _block(b, f"layer{stage}.{i}", x, width, stride if i == 0 else 1, i == 0)
    x = b.pool("avgpool", x, pool="ave", global_pool=True)
    b.fc("fc", x, 1000)
    return b.spec("resnet50-v1.5", Shape(3, 224, 224))
