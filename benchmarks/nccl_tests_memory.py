"""Peak memory per line of `import nccl-tests`, at two file sizes side by side in one run
(issue #36 item 4: the importer read the whole log into a string, split it and built a dict
per row, ~3.2 KB per line; it now streams the file and keeps four numbers per table row).

Two kinds of synthetic logs (one all_reduce_perf run over 8 ranks, sizes swept by
``step: 8(bytes)``): ``rows`` = a table of N rows; ``noise`` = a table of 64 rows with N
NCCL INFO lines inside it (counted and reported, not kept). Each import runs in a fresh child
process; the peak is the process's RSS high-water mark above the level after a warm-up
import of a small log. Prints bytes per line at each size and the slope between the sizes
(what one more line costs: for ``noise`` it should be ~0, for ``rows`` the comm rows the
import returns, two per line).

    python benchmarks/nccl_tests_memory.py [--small 20000] [--large 200000]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HEAD = ("$ mpirun -np 8 ./build/all_reduce_perf -b 8 -e {end} -i 8 -g 1\n"
        "# nThread 1 nGpus 1 minBytes 8 maxBytes {end} step: 8(bytes) warmup iters: 5 "
        "iters: 20 agg iters: 1 validation: 1 graph: 0\n#\n# Using devices\n"
        + "".join(f"#  Rank {r:2d} Group  0 Pid  {41200 + r} on   node-a device  {r} "
                  f"[0x{r + 18:02x}] NVIDIA H100 80GB HBM3\n" for r in range(8))
        + "#\n#       size         count      type   redop    root     time   algbw   busbw "
          "#wrong     time   algbw   busbw #wrong\n")
INFO = "node-a:41200:41300 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read\n"


def _row(size: int) -> str:
    t = 20.0 + size / 170e3  # us: 20 us + 170 GB/s
    algbw = size / (t * 1e3)
    return (f"{size:>12}  {size // 4:>12}     float     sum      -1  {t:7.2f}  {algbw:6.2f}  "
            f"{algbw * 1.75:6.2f}       0  {t:7.2f}  {algbw:6.2f}  {algbw * 1.75:6.2f}       0\n")


def write_log(path: Path, kind: str, n: int) -> int:
    """A log of ``kind`` with ``n`` lines of that kind; returns its line count."""
    rows = n if kind == "rows" else 64
    lines = 0
    with path.open("w") as fh:
        fh.write(HEAD.format(end=8 * rows))
        for k in range(rows):
            fh.write(_row(8 * (k + 1)))
            if kind == "noise" and k == 0:
                fh.writelines(INFO for _ in range(n))
                lines += n
            lines += 1
        fh.write("# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 1.0\n#\n")
    return lines


CHILD = r"""
import json, resource, sys
from dgtraces.importers.nccl_tests import import_log
import_log(sys.argv[2])  # warm-up: imports, pandera schemas
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
res = import_log(sys.argv[1])
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"peak_bytes": (peak - base) * 1024, "rows": len(res.comm)}))
"""


def measure(kind: str, n: int, folder: Path) -> dict:
    log, warm = folder / f"{kind}-{n}.log", folder / "warm.log"
    lines = write_log(log, kind, n)
    write_log(warm, "rows", 64)
    out = subprocess.run([sys.executable, "-c", CHILD, str(log), str(warm)],
                         capture_output=True, text=True, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    return {**got, "lines": lines, "file_bytes": log.stat().st_size}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--small", type=int, default=20_000)
    ap.add_argument("--large", type=int, default=200_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for kind in ("rows", "noise"):
            small, large = (measure(kind, n, Path(tmp)) for n in (args.small, args.large))
            for m in (small, large):
                print(f"{kind:>5}: {m['lines']:>9,} lines ({m['file_bytes'] / 2**20:6.1f} MiB): "
                      f"peak +{m['peak_bytes'] / 2**20:7.1f} MiB = "
                      f"{m['peak_bytes'] / m['lines']:7.0f} bytes/line")
            slope = ((large["peak_bytes"] - small["peak_bytes"])
                     / (large["lines"] - small["lines"]))
            print(f"{kind:>5}: slope {slope:.0f} bytes per added line")


if __name__ == "__main__":
    main()
