"""Inception-v3 (Szegedy et al. 2016), torchvision's ``inception_v3`` with its aux classifier.

27,161,264 parameters with ``AuxLogits`` (rows ``aux=True``), 299x299 input. Layer names are
torchvision module paths (``Mixed_5b.branch1x1.conv``); BasicConv2d's functional ReLU is
``<path>.relu``, functional pools and concatenations ``<block>.<op>`` (``#k`` when a block
has several). Every conv is bias-free and followed by BatchNorm2d(eps=0.001).
"""

from .builder import Builder
from .spec import ModelSpec, Shape


def _basic(b: Builder, name: str, x: str, n: int, k, stride: int = 1, pad=0) -> str:
    x = b.conv(f"{name}.conv", x, n, k, stride=stride, pad=pad, bias=False)
    return b.relu(f"{name}.relu", b.bn(f"{name}.bn", x, affine=True))


def _a(b: Builder, p: str, x: str, pool_features: int) -> str:
    b1 = _basic(b, f"{p}.branch1x1", x, 64, 1)
    b5 = _basic(b, f"{p}.branch5x5_2", _basic(b, f"{p}.branch5x5_1", x, 48, 1), 64, 5, pad=2)
    d = _basic(b, f"{p}.branch3x3dbl_1", x, 64, 1)
    d = _basic(b, f"{p}.branch3x3dbl_3", _basic(b, f"{p}.branch3x3dbl_2", d, 96, 3, pad=1),
               96, 3, pad=1)
    bp = b.pool(f"{p}.avg_pool2d", x, 3, 1, pad=1, pool="ave", ceil=False)
    bp = _basic(b, f"{p}.branch_pool", bp, pool_features, 1)
    return b.concat(f"{p}.cat", (b1, b5, d, bp))


def _b(b: Builder, p: str, x: str) -> str:
    b3 = _basic(b, f"{p}.branch3x3", x, 384, 3, stride=2)
    d = _basic(b, f"{p}.branch3x3dbl_1", x, 64, 1)
    d = _basic(b, f"{p}.branch3x3dbl_2", d, 96, 3, pad=1)
    d = _basic(b, f"{p}.branch3x3dbl_3", d, 96, 3, stride=2)
    bp = b.pool(f"{p}.max_pool2d", x, 3, 2, ceil=False)
    return b.concat(f"{p}.cat", (b3, d, bp))


def _c(b: Builder, p: str, x: str, c7: int) -> str:
    b1 = _basic(b, f"{p}.branch1x1", x, 192, 1)
    s = _basic(b, f"{p}.branch7x7_1", x, c7, 1)
    s = _basic(b, f"{p}.branch7x7_2", s, c7, (1, 7), pad=(0, 3))
    s = _basic(b, f"{p}.branch7x7_3", s, 192, (7, 1), pad=(3, 0))
    d = _basic(b, f"{p}.branch7x7dbl_1", x, c7, 1)
    for i, (n, k, pad) in enumerate((((c7, (7, 1), (3, 0))), (c7, (1, 7), (0, 3)),
                                     (c7, (7, 1), (3, 0)), (192, (1, 7), (0, 3))), start=2):
        d = _basic(b, f"{p}.branch7x7dbl_{i}", d, n, k, pad=pad)
    bp = b.pool(f"{p}.avg_pool2d", x, 3, 1, pad=1, pool="ave", ceil=False)
    bp = _basic(b, f"{p}.branch_pool", bp, 192, 1)
    return b.concat(f"{p}.cat", (b1, s, d, bp))


def _d(b: Builder, p: str, x: str) -> str:
    b3 = _basic(b, f"{p}.branch3x3_2", _basic(b, f"{p}.branch3x3_1", x, 192, 1), 320, 3,
                stride=2)
    s = _basic(b, f"{p}.branch7x7x3_1", x, 192, 1)
    s = _basic(b, f"{p}.branch7x7x3_2", s, 192, (1, 7), pad=(0, 3))
    s = _basic(b, f"{p}.branch7x7x3_3", s, 192, (7, 1), pad=(3, 0))
    s = _basic(b, f"{p}.branch7x7x3_4", s, 192, 3, stride=2)
    bp = b.pool(f"{p}.max_pool2d", x, 3, 2, ceil=False)
    return b.concat(f"{p}.cat", (b3, s, bp))


def _e(b: Builder, p: str, x: str) -> str:
    b1 = _basic(b, f"{p}.branch1x1", x, 320, 1)
    t = _basic(b, f"{p}.branch3x3_1", x, 384, 1)
    t = b.concat(f"{p}.cat#1", (_basic(b, f"{p}.branch3x3_2a", t, 384, (1, 3), pad=(0, 1)),
                                _basic(b, f"{p}.branch3x3_2b", t, 384, (3, 1), pad=(1, 0))))
    d = _basic(b, f"{p}.branch3x3dbl_1", x, 448, 1)
    d = _basic(b, f"{p}.branch3x3dbl_2", d, 384, 3, pad=1)
    d = b.concat(f"{p}.cat#2", (_basic(b, f"{p}.branch3x3dbl_3a", d, 384, (1, 3), pad=(0, 1)),
                                _basic(b, f"{p}.branch3x3dbl_3b", d, 384, (3, 1), pad=(1, 0))))
    bp = b.pool(f"{p}.avg_pool2d", x, 3, 1, pad=1, pool="ave", ceil=False)
    bp = _basic(b, f"{p}.branch_pool", bp, 192, 1)
    return b.concat(f"{p}.cat#3", (b1, t, d, bp))


def _aux(b: Builder, x: str) -> None:
    b.aux = True
    y = b.pool("AuxLogits.avg_pool2d", x, 5, 3, pool="ave", ceil=False)
    y = _basic(b, "AuxLogits.conv1", _basic(b, "AuxLogits.conv0", y, 128, 1), 768, 5)
    y = b.pool("AuxLogits.adaptive_avg_pool2d", y, pool="ave", global_pool=True)
    b.fc("AuxLogits.fc", y, 1000)
    b.aux = False


def build() -> ModelSpec:
    b = Builder()
    x = _basic(b, "Conv2d_1a_3x3", "data", 32, 3, stride=2)
    x = _basic(b, "Conv2d_2a_3x3", x, 32, 3)
    x = _basic(b, "Conv2d_2b_3x3", x, 64, 3, pad=1)
    x = b.pool("maxpool1", x, 3, 2, ceil=False)
    x = _basic(b, "Conv2d_3b_1x1", x, 80, 1)
    x = _basic(b, "Conv2d_4a_3x3", x, 192, 3)
    x = b.pool("maxpool2", x, 3, 2, ceil=False)
    for name, pool_features in (("Mixed_5b", 32), ("Mixed_5c", 64), ("Mixed_5d", 64)):
        x = _a(b, name, x, pool_features)
    x = _b(b, "Mixed_6a", x)
    for name, c7 in (("Mixed_6b", 128), ("Mixed_6c", 160), ("Mixed_6d", 160), ("Mixed_6e", 192)):
        x = _c(b, name, x, c7)
    _aux(b, x)
    x = _d(b, "Mixed_7a", x)
    x = _e(b, "Mixed_7b", x)
    x = _e(b, "Mixed_7c", x)
    x = b.pool("avgpool", x, pool="ave", global_pool=True)
    x = b.dropout("dropout", x)
    b.fc("fc", x, 1000)
    return b.spec("inception-v3", Shape(3, 299, 299))
