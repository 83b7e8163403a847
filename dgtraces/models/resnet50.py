"""ResNet-50 (He et al. 2016), the original Caffe definition (stride 2 in branch2a, v1)."""

from .builder import Builder
from .spec import ModelSpec, Shape

STAGES = ((2, 3, 64), (3, 4, 128), (4, 6, 256), (5, 3, 512))


def _conv_bn(b: Builder, suffix: str, x: str, n: int, k: int, stride: int = 1, pad: int = 0,
             relu: bool = True) -> str:
    x = b.conv(f"res{suffix}", x, n, k, stride=stride, pad=pad, bias=False)
    x = b.add(f"bn{suffix}", "bn", x)
    x = b.add(f"scale{suffix}", "scale", x)
    return b.relu(f"res{suffix}_relu", x) if relu else x


def build() -> ModelSpec:
    b = Builder()
    x = b.conv("conv1", "data", 64, 7, stride=2, pad=3, bias=False)
    x = b.add("bn_conv1", "bn", x)
    x = b.add("scale_conv1", "scale", x)
    x = b.relu("conv1_relu", x)
    x = b.pool("pool1", x, 3, 2)
    for stage, blocks, width in STAGES:
        for i in range(blocks):
            blk = f"{stage}{chr(ord('a') + i)}"
            stride = 2 if (i == 0 and stage > 2) else 1
            shortcut = x
            if i == 0:
                shortcut = _conv_bn(b, f"{blk}_branch1", x, 4 * width, 1, stride, relu=False)
            y = _conv_bn(b, f"{blk}_branch2a", x, width, 1, stride)
            y = _conv_bn(b, f"{blk}_branch2b", y, width, 3, 1, pad=1)
            y = _conv_bn(b, f"{blk}_branch2c", y, 4 * width, 1, relu=False)
            x = b.add(f"res{blk}", "eltwise", (shortcut, y))
            x = b.relu(f"res{blk}_relu", x)
    x = b.pool("pool5", x, 7, 1, pool="ave")
    x = b.fc("fc1000", x, 1000)
    b.add("prob", "softmax", x)
    return b.spec("resnet50", Shape(3, 224, 224))
