"""Peak memory of the bounded reader on a Parquet file whose footer lies (issue #29 high).

    python benchmarks/lying_footer.py                    # 40M rows behind a 1-row footer
    python benchmarks/lying_footer.py --rows 100000000

Writes ``runs.parquet`` holding ``--rows`` rows of two constant columns in one row group
(RLE: a few hundred kB on disk), rewrites its footer to claim 1 row (the row group keeps
its own count, as in the review's 1.87 MB file), then reads it with
``contribute.intake.read_bounded`` in a child process and prints the file size, the outcome
and the child's peak RSS (``VmHWM``: ``ru_maxrss`` would count the parent's pages the
fork copied). Before the page walk the reader decoded every row
(2.78 GB in the review); with it the file is refused from its headers.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = """
import sys
from pathlib import Path
from dgtraces.contribute.intake import read_bounded
from dgtraces.errors import DgtracesError
try:
    df = read_bounded(Path(sys.argv[1]))
    outcome = f"read {len(df)} rows"
except DgtracesError as exc:
    outcome = f"refused {exc.code}: {exc.failures[0].message}"
print(outcome)
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM")][0].split()[1]
print(int(hwm) // 1024)
"""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="bounded reader vs a lying Parquet footer")
    ap.add_argument("--rows", type=int, default=40_000_000)
    args = ap.parse_args(argv)
    import pyarrow as pa
    import pyarrow.parquet as pq

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from parquet_forge import lie

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "runs.parquet"
        n = args.rows
        pq.write_table(pa.table({"batch_size": pa.array([32] * n, pa.int64()),
                                 "fwd_ms": pa.array([1.0] * n)}),
                       path, compression="zstd", row_group_size=n)
        lie(path, rows=1, footer_only=True)
        out = subprocess.run([sys.executable, "-c", CHILD, str(path)], capture_output=True,
                             text=True, check=True).stdout.split("\n")
        print(f"file {path.stat().st_size / 1e6:.2f} MB, {n} rows behind a 1-row footer")
        print(f"{out[0]}; peak RSS {int(out[1])} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
