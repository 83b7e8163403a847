"""Peak memory per configuration of `run_sweep`, measured at two sizes in one run (issue #14
item 8): the CLI's sweep guard (`cli.sweep.SWEEP_BYTES_PER_CONFIG`) comes from this.

The peak is the process's RSS high-water mark above the level after a warm-up, in a fresh
child process per size (so one size's peak cannot hide the other's). Prints bytes per
configuration at each size and the slope between them, and the largest sweep the guard
allows with its memory budget.

    python benchmarks/sweep_memory.py
"""

from __future__ import annotations

import json
import subprocess
import sys

CHILD = r"""
import json, resource, sys
import numpy as np, pandas as pd
from dgtraces.models import layers_frame
from dgtraces.predict import from_frame
from dgtraces.predict.sweep import Grid, run_sweep

n_workers = int(sys.argv[1])
lf = layers_frame("resnet50")
rng = np.random.default_rng(2018)
df = pd.DataFrame({"layer": lf["layer"], "fwd_ms": rng.uniform(0.05, 4.0, len(lf)),
                   "bwd_ms": rng.uniform(0.1, 8.0, len(lf))})
trace = from_frame(df, "resnet50", 64, source="synthetic benchmark times (seed 2018)")
def grid(w):
    return Grid(workers=tuple(range(1, w + 1)), gpus_per_node=(1, 2, 4, 8, 16),
                intra=("pcie3", "nvlink2"), inter=("10gbe", "25gbe", "56gb-ib", "100gb-ib",
                "loopback-gloo"), algorithms=("ring", "tree", "dbtree", "hierarchical", "ps"),
                policies=("naive", "wfbp", "bucketed", "mgwfbp"), io_overlap=(False, True),
                traces={("resnet50", 64): trace})
run_sweep(grid(1))  # warm-up: imports, link table
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
g = grid(n_workers)
out = run_sweep(g)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"configs": g.size(), "peak_bytes": (peak - base) * 1024, "rows": len(out)}))
"""


def measure(workers: int) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, str(workers)], capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    from dgtraces.cli.sweep import SWEEP_BYTES_PER_CONFIG, SWEEP_MEMORY_MIB, max_sweep

    small, large = measure(100), measure(400)
    for m in (small, large):
        print(f"{m['configs']:>9,} configurations: peak +{m['peak_bytes'] / 2**20:7.1f} MiB = "
              f"{m['peak_bytes'] / m['configs']:6.0f} bytes/config")
    slope = (large["peak_bytes"] - small["peak_bytes"]) / (large["configs"] - small["configs"])
    print(f"slope: {slope:.0f} bytes/config; guard uses {SWEEP_BYTES_PER_CONFIG} bytes/config "
          f"and a {SWEEP_MEMORY_MIB} MiB budget -> at most {max_sweep():,} configurations")


if __name__ == "__main__":
    main()
