"""The CPU cost of one kernels-3 trace beside a bare ``import pandas, pyarrow.parquet`` (issue #33
item 5: at most 2x), both timed side by side in one run.

Every command runs as a fresh interpreter, N rounds, the commands of a round in a rotating
order (a burst of load on a shared machine hits each alike); prints the median wall and child
CPU (user + sys) time of each and the CPU ratio to the bare import:

* ``bare``: ``python -c "import pandas, pyarrow.parquet"``;
* ``v100`` / ``k80``: ``dgtraces reconstruct --method kernels-3 --device D --model resnet50
  --batch-size 32`` (the V100 prices from its own kernels, the K80 through the M40 and the
  Habitat transfer): read the release's ``method_params`` and ``kernels`` tables (checked
  against the manifest, warm hash cache), price every layer, print the summary. No refit.

For reference it also times ``roofline-1.1`` on the same trace (its fit runs in the process).
Like ``cold_start.py`` it compiles the dgtraces it runs first (``compileall``), so dgtraces is
timed as installed.

    python benchmarks/reconstruct_cost.py [--n 9] [--data DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from cold_start import dgtraces_cmd, load
from sql_cold import timed

TARGET = 2.0
TRACE = ["reconstruct", "--model", "resnet50", "--batch-size", "32"]


def cases() -> dict[str, list[str]]:
    ours = dgtraces_cmd()
    return {"bare": [sys.executable, "-c", "import pandas, pyarrow.parquet"],
            "kernels-3 v100": ours + TRACE + ["--device", "v100", "--method", "kernels-3"],
            "kernels-3 k80": ours + TRACE + ["--device", "k80", "--method", "kernels-3"],
            "roofline-1.1 v100": ours + TRACE + ["--device", "v100"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=9)
    ap.add_argument("--data", type=Path, help="data folder (default: dgtraces' own store)")
    args = ap.parse_args()
    import dgtraces
    from dgtraces.store.manifest import data_root

    data = (args.data or data_root()).resolve()
    package = Path(dgtraces.__file__).parent
    base = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(package)], check=False,
                   env=base)
    warm = Path(tempfile.mkdtemp(prefix="dgtraces-warm-cache-"))
    env = dict(base, DGTRACES_DATA=str(data), DGTRACES_CACHE=str(warm))
    print(f"dgtraces from {package}; data {data}; load average before: {load()}", flush=True)
    runs = cases()
    try:
        for cmd in runs.values():  # the OS file cache and the warm hash cache
            timed(cmd, env)
        labels = list(runs)
        res: dict[str, list[tuple[float, float]]] = {k: [] for k in labels}
        for i in range(args.n):
            k = i % len(labels)
            for label in labels[k:] + labels[:k]:
                wall, cpu, _ = timed(runs[label], env)
                res[label].append((wall, cpu))
    finally:
        shutil.rmtree(warm, ignore_errors=True)
    med = {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v))
           for k, v in res.items()}
    bw, bc = med["bare"]
    print(f"n={args.n} rounds, medians")
    for label, (w, c) in med.items():
        tail = "" if label == "bare" else f"   ratio wall {w / bw:.2f}  cpu {c / bc:.2f}"
        print(f"  {label:<18} wall {w * 1000:7.1f} ms  cpu {c * 1000:7.1f} ms{tail}")
    worst = max(med[k][1] / bc for k in med if k.startswith("kernels-3"))
    print(f"  target: one kernels-3 trace <= {TARGET}x the bare import's CPU: "
          f"{'PASS' if worst <= TARGET else 'MISS'} (worst {worst:.2f}x)")
    print(f"load average after: {load()}")


if __name__ == "__main__":
    main()
