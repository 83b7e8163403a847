"""bvlc_alexnet (Krizhevsky et al. 2012, Caffe's reference model): grouped convs, 227 input."""

from .builder import Builder
from .spec import ModelSpec, Shape


def build() -> ModelSpec:
    b = Builder()
    x = b.conv("conv1", "data", 96, 11, stride=4)
    x = b.relu("relu1", x)
    x = b.lrn("norm1", x)
    x = b.pool("pool1", x, 3, 2)
    x = b.conv("conv2", x, 256, 5, pad=2, group=2)
    x = b.relu("relu2", x)
    x = b.lrn("norm2", x)
    x = b.pool("pool2", x, 3, 2)
    x = b.conv("conv3", x, 384, 3, pad=1)
    x = b.relu("relu3", x)
    x = b.conv("conv4", x, 384, 3, pad=1, group=2)
    x = b.relu("relu4", x)
    x = b.conv("conv5", x, 256, 3, pad=1, group=2)
    x = b.relu("relu5", x)
    x = b.pool("pool5", x, 3, 2)
    for i, n in ((6, 4096), (7, 4096)):
        x = b.fc(f"fc{i}", x, n)
        x = b.relu(f"relu{i}", x)
        x = b.dropout(f"drop{i}", x)
    x = b.fc("fc8", x, 1000)
    b.add("loss", "softmax", x)
    return b.spec("alexnet", Shape(3, 227, 227))
