"""Cold `dgtraces sql "select count(*) from layer_timings"` vs a bare duckdb one-liner.

Both run as fresh processes on the same Parquet file, interleaved, N times each; prints the
median wall time, median child CPU time (user+sys) and their ratios. Target: ratio <= 1.5.
Uses the real latest release if it has `layer_timings`, else a temp store with a synthetic
(clearly fake, benchmark-only) layer_timings table of every layer of the three models.

    python benchmarks/sql_cold.py [--n 15]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dgtraces.store import shards


def synthetic_store(root: Path, runs_per_model: int = 20) -> None:
    import pandas as pd

    from dgtraces.models import MODELS, layers_frame
    from dgtraces.tables.runrow import runs_row

    layers = layers_frame()
    runs, timings = [], []
    for model in MODELS:
        names = layers.loc[layers.model == model, "layer"]
        for i in range(runs_per_model):
            rid = f"bench-{model}-{i}"
            runs.append(runs_row(run_id=rid, model=model, device="cpu-bench",
                                 device_kind="cpu", framework="none", batch_size=1,
                                 provenance="measured",
                                 source="synthetic benchmark rows (not data)",
                                 collector_version="benchmarks/sql_cold.py",
                                 timestamp_utc="2026-01-01T00:00:00Z"))
            timings += [dict(run_id=rid, layer=n, fwd_ms=1.0, bwd_ms=2.0, fwd_p10_ms=None,
                             fwd_p90_ms=None, bwd_p10_ms=None, bwd_p90_ms=None, comm_ms=None,
                             n=1) for n in names]
    shards.write_release("0.0.1", {"layers": layers, "runs": pd.DataFrame(runs),
                                  "layer_timings": pd.DataFrame(timings)}, root=root,
                        notes="benchmark-only synthetic store")


def timed(cmd: list[str], env: dict) -> tuple[float, float, str]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        raise SystemExit(f"failed: {cmd}\n{out.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, out.stdout


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=15)
    args = ap.parse_args()
    from dgtraces.store import manifest as store
    from dgtraces.store import release

    tmp = None
    env = dict(os.environ)
    try:
        if "layer_timings" in release.tables() if store.list_releases() else False:
            root, label = store.data_root(), f"real release {store.latest()}"
        else:
            tmp = Path(tempfile.mkdtemp(prefix="dgtraces-bench-"))
            root, label = tmp / "data", "synthetic temp store"
            synthetic_store(root)
            env["DGTRACES_DATA"] = str(root)
        parquet = store.release_path(root=root) / "layer_timings.parquet"
        rows = release.tables(root=root)["layer_timings"]["rows"]
        exe = shutil.which("dgtraces")
        ours = ([exe] if exe else [sys.executable, "-m", "dgtraces"]) + \
            ["sql", "select count(*) from layer_timings"]
        bare = [sys.executable, "-c", "import duckdb; print(duckdb.sql(\"select count(*) from "
                f"read_parquet('{parquet}')\").fetchall())"]
        timed(ours, env), timed(bare, env)  # warm the OS file cache for both
        res = {"dgtraces sql": [], "bare duckdb": []}
        for _ in range(args.n):
            res["dgtraces sql"].append(timed(ours, env)[:2])
            res["bare duckdb"].append(timed(bare, env)[:2])
        assert str(rows) in timed(ours, env)[2]
        print(f"layer_timings: {rows} rows ({label}); n={args.n} interleaved runs each")
        med = {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v))
               for k, v in res.items()}
        for k, (w, c) in med.items():
            print(f"  {k:<13} wall median {w * 1000:7.1f} ms   cpu median {c * 1000:7.1f} ms")
        (ow, oc), (bw, bc) = med["dgtraces sql"], med["bare duckdb"]
        print(f"ratio wall {ow / bw:.2f}  cpu {oc / bc:.2f}  (target <= 1.50): "
              f"{'PASS' if ow / bw <= 1.5 else 'MISS'}")
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
