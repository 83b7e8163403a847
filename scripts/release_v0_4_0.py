"""Build dataset release v0.4.0 = v0.3.0 + published GPU per-layer traces + 4 architectures.

    python scripts/release_v0_4_0.py [--dry-run]

Adds (issue #13): the ``layers`` rows of alexnet-owt, resnet50-v1.5, vgg16 and inception-v3;
``runs`` + ``layer_timings`` of every shipped GPU file (convnet-benchmarks ``caffe time``
logs, PipeDream profiles, Kineto traces; provenance published, each source naming
repository, path, commit and licence); the Titan X (Maxwell) and V100-DGXS-32GB device rows
(``reference/devices_datasheet.csv``). Refuses to build on anything but v0.3.0.
"""

from __future__ import annotations

import argparse
import sys

from dgtraces import store
from dgtraces.importers.gpu_sources import gpu_tables
from dgtraces.importers.published import devices_frame
from dgtraces.models import layers_frame

VERSION, BASE = "0.4.0", "0.3.0"
NEW_MODELS = ("alexnet-owt", "resnet50-v1.5", "vgg16", "inception-v3")


def additions() -> dict:
    base = store.read_all(BASE)
    devices = devices_frame()
    devices = devices[~devices["device"].isin(base["devices"]["device"])].reset_index(drop=True)
    return {"layers": layers_frame(list(NEW_MODELS)), "devices": devices, **gpu_tables()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dry-run", action="store_true", help="build and validate, write nothing")
    args = ap.parse_args(argv)
    if BASE not in store.list_releases():
        print(f"release v{BASE} is missing; v{VERSION} is built on v{BASE} only",
              file=sys.stderr)
        return 2
    add = additions()
    for name, df in add.items():
        print(f"+ {name}: {len(df)} rows")
    if args.dry_run:
        frames = store.merge_frames(store.read_all(BASE), add, ())
        from dgtraces.checks import validate_tables

        validate_tables(frames)
        print("dry run: valid, nothing written")
        return 0
    path = store.extend_release(VERSION, add, base=BASE,
                                notes="v0.3.0 + published GPU per-layer traces (caffe time, "
                                      "PipeDream, Kineto), alexnet-owt/resnet50-v1.5/vgg16/"
                                      "inception-v3 layers, Titan X and V100-DGXS devices")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
