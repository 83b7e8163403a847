"""bvlc_googlenet (Szegedy et al. 2015): Inception v1 with optional auxiliary classifiers."""

from .builder import Builder
from .spec import ModelSpec, Shape

# name: (in-module 1x1, 3x3 reduce, 3x3, 5x5 reduce, 5x5, pool proj)
INCEPTIONS = {
    "3a": (64, 96, 128, 16, 32, 32),
    "3b": (128, 128, 192, 32, 96, 64),
    "4a": (192, 96, 208, 16, 48, 64),
    "4b": (160, 112, 224, 24, 64, 64),
    "4c": (128, 128, 256, 24, 64, 64),
    "4d": (112, 144, 288, 32, 64, 64),
    "4e": (256, 160, 320, 32, 128, 128),
    "5a": (256, 160, 320, 32, 128, 128),
    "5b": (384, 192, 384, 48, 128, 128),
}


def _inception(b: Builder, name: str, x: str, cfg: tuple[int, ...]) -> str:
    n1, n3r, n3, n5r, n5, npool = cfg
    p = f"inception_{name}"
    a = b.relu(f"{p}/relu_1x1", b.conv(f"{p}/1x1", x, n1, 1))
    r3 = b.relu(f"{p}/relu_3x3_reduce", b.conv(f"{p}/3x3_reduce", x, n3r, 1))
    c3 = b.relu(f"{p}/relu_3x3", b.conv(f"{p}/3x3", r3, n3, 3, pad=1))
    r5 = b.relu(f"{p}/relu_5x5_reduce", b.conv(f"{p}/5x5_reduce", x, n5r, 1))
    c5 = b.relu(f"{p}/relu_5x5", b.conv(f"{p}/5x5", r5, n5, 5, pad=2))
    pp = b.pool(f"{p}/pool", x, 3, 1, pad=1)
    pr = b.relu(f"{p}/relu_pool_proj", b.conv(f"{p}/pool_proj", pp, npool, 1))
    return b.add(f"{p}/output", "concat", (a, c3, c5, pr))


def _aux(b: Builder, k: int, x: str) -> None:
    b.aux = True
    p = f"loss{k}"
    y = b.pool(f"{p}/ave_pool", x, 5, 3, pool="ave")
    y = b.relu(f"{p}/relu_conv", b.conv(f"{p}/conv", y, 128, 1))
    y = b.relu(f"{p}/relu_fc", b.fc(f"{p}/fc", y, 1024))
    y = b.dropout(f"{p}/drop_fc", y)
    y = b.fc(f"{p}/classifier", y, 1000)
    b.add(f"{p}/loss", "softmax", y)
    b.aux = False


def build() -> ModelSpec:
    """GoogLeNet including both auxiliary classifiers; rows of those carry ``aux=True``."""
    b = Builder()
    x = b.relu("conv1/relu_7x7", b.conv("conv1/7x7_s2", "data", 64, 7, stride=2, pad=3))
    x = b.pool("pool1/3x3_s2", x, 3, 2)
    x = b.lrn("pool1/norm1", x)
    x = b.relu("conv2/relu_3x3_reduce", b.conv("conv2/3x3_reduce", x, 64, 1))
    x = b.relu("conv2/relu_3x3", b.conv("conv2/3x3", x, 192, 3, pad=1))
    x = b.lrn("conv2/norm2", x)
    x = b.pool("pool2/3x3_s2", x, 3, 2)
    x = _inception(b, "3a", x, INCEPTIONS["3a"])
    x = _inception(b, "3b", x, INCEPTIONS["3b"])
    x = b.pool("pool3/3x3_s2", x, 3, 2)
    for name in ("4a", "4b", "4c", "4d", "4e"):
        x = _inception(b, name, x, INCEPTIONS[name])
        if name == "4a":
            _aux(b, 1, x)
        if name == "4d":
            _aux(b, 2, x)
    x = b.pool("pool4/3x3_s2", x, 3, 2)
    x = _inception(b, "5a", x, INCEPTIONS["5a"])
    x = _inception(b, "5b", x, INCEPTIONS["5b"])
    x = b.pool("pool5/7x7_s1", x, 7, 1, pool="ave")
    x = b.dropout("pool5/drop_7x7_s1", x)
    x = b.fc("loss3/classifier", x, 1000)
    b.add("loss3/loss3", "softmax", x)
    return b.spec("googlenet", Shape(3, 224, 224))
