"""How release v0.1.0 was made: the ``layers`` table computed from the architecture specs."""

from dgtraces import store
from dgtraces.models import layers_frame

if __name__ == "__main__":
    path = store.write_release("0.1.0", {"layers": layers_frame()},
                               notes="layers table for alexnet, googlenet (with aux), resnet50")
    print(path)
