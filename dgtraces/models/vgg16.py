"""VGG-16 (Simonyan and Zisserman 2015, configuration D), torchvision's ``vgg16``.

138,357,544 parameters. Layer names are torchvision module paths (``features.0``,
``classifier.6``). torchvision's ``avgpool`` (``AdaptiveAvgPool2d(7)`` on a 7x7 map: the
identity at 224 input) is left out.
"""

from .builder import Builder
from .spec import ModelSpec, Shape

CFG_D = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M",
         512, 512, 512, "M")


def build() -> ModelSpec:
    b = Builder()
    x, i = "data", 0
    for v in CFG_D:
        if v == "M":
            x = b.pool(f"features.{i}", x, 2, 2, ceil=False)
            i += 1
        else:
            x = b.conv(f"features.{i}", x, int(v), 3, pad=1)
            x = b.relu(f"features.{i + 1}", x)
            i += 2
    x = b.relu("classifier.1", b.fc("classifier.0", x, 4096))
    x = b.dropout("classifier.2", x)
    x = b.relu("classifier.4", b.fc("classifier.3", x, 4096))
    x = b.dropout("classifier.5", x)
    b.fc("classifier.6", x, 1000)
    return b.spec("vgg16", Shape(3, 224, 224))
