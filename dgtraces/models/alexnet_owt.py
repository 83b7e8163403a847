"""AlexNet "One Weird Trick" (Krizhevsky 2014): torchvision's and convnet-benchmarks' AlexNet.

Conv widths 64-192-384-256-256, no LRN, no groups, 224 input; 61,100,840 parameters.
Layer names are those of convnet-benchmarks' ``caffe/imagenet_winners/alexnet.prototxt``
(the net of the shipped ``caffe time`` log); the classifier's dropout and ReLU layers, which
that benchmark net leaves out, are torchvision's and named in the same style. torchvision's
``avgpool`` (``AdaptiveAvgPool2d(6)`` on a 6x6 map: the identity at 224 input) is left out.
"""

from .builder import Builder
from .spec import ModelSpec, Shape


def build() -> ModelSpec:
    b = Builder()
    x = b.relu("conv1/relu", b.conv("conv1", "data", 64, 11, stride=4, pad=2))
    x = b.pool("pool1/3x3_s2", x, 3, 2, ceil=False)
    x = b.relu("conv2/relu", b.conv("conv2/5x5_s1", x, 192, 5, pad=2))
    x = b.pool("pool2/3x3_s2", x, 3, 2, ceil=False)
    x = b.relu("conv3/relu", b.conv("conv3/3x3_s1", x, 384, 3, pad=1))
    x = b.relu("conv4/relu", b.conv("conv4/3x3_s1", x, 256, 3, pad=1))
    x = b.relu("conv5/relu", b.conv("conv5/3x3_s1", x, 256, 3, pad=1))
    x = b.pool("pool5/3x3_s2", x, 3, 2, ceil=False)
    for i in (6, 7):
        x = b.dropout(f"drop{i}", x)
        x = b.relu(f"fc{i}/relu", b.fc(f"fc{i}", x, 4096))
    b.fc("fc8", x, 1000)
    return b.spec("alexnet-owt", Shape(3, 224, 224))
