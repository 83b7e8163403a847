"""`dgtraces --help` process time (target <= 0.3 s), next to a bare interpreter start.

Fresh processes, interleaved, N times each; prints median wall and child CPU time.

    python benchmarks/help_time.py [--n 20]
"""

from __future__ import annotations

import argparse
import resource
import shutil
import statistics
import subprocess
import sys
import time


def timed(cmd: list[str]) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, capture_output=True, check=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20)
    args = ap.parse_args()
    exe = shutil.which("dgtraces")
    cmds = {"dgtraces --help": ([exe] if exe else [sys.executable, "-m", "dgtraces"])
            + ["--help"], "python -c pass": [sys.executable, "-c", "pass"]}
    for cmd in cmds.values():
        timed(cmd)
    res = {k: [] for k in cmds}
    for _ in range(args.n):
        for k, cmd in cmds.items():
            res[k].append(timed(cmd))
    for k, v in res.items():
        w, c = statistics.median(x for x, _ in v), statistics.median(y for _, y in v)
        print(f"  {k:<16} wall median {w * 1000:7.1f} ms   cpu median {c * 1000:7.1f} ms")
    w = statistics.median(x for x, _ in res["dgtraces --help"])
    print(f"dgtraces --help: {w:.3f} s (target <= 0.300 s): {'PASS' if w <= 0.3 else 'MISS'}")


if __name__ == "__main__":
    main()
