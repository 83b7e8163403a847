"""Benchmark: how contribute, release, storage, cold `sql` and cold `load` scale with the
store (issue #18).

A temp store starts as a copy of the shipped releases (migrated to shards if needed). It is
grown by contributions of ``--step`` layer_timings rows each, built from the template
contribution (ResNet-50, 228 layers per run; every run scaled differently so no two runs are
duplicates; the template's placeholder contributor and source replaced as a contributor
must), written as Parquet: ``contribute`` then ``release`` per step. Each command runs in a
fresh process that reports its own wall time and peak RSS (VmHWM). Storage growth
per release is the growth of ``releases/`` + ``shards/`` divided by the contribution's own
Parquet bytes (pandas ``to_parquet``). When the store reaches each size in ``--sizes``, a
cold ``dgtraces sql`` and a cold ``dgtraces.load("layer_timings")`` run in fresh processes
(wall time including interpreter start).

    python benchmarks/store_scale.py --sizes 1000000,5000000,20000000 [--step 1000000]
    python benchmarks/store_scale.py --contribution 10000000

``--contribution N`` instead times one contribution of N layer_timings rows into a copy
of the shipped store, written run by run (as collectors write) and in random row order
(the intake then sorts by run): contribute and release wall time and peak RSS.

Goals (issue #18): release time and memory follow the new rows only; contribute/release
peak RSS under 1 GB at 20M; storage growth per release under 1.5x the new rows' Parquet;
a 10M-row contribution validated within 1 GB peak.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SQL = "SELECT count(*) AS n, avg(fwd_ms) AS fwd FROM layer_timings"
CHILD = {
    "contribute": "from dgtraces.contribute import contribute; contribute(sys.argv[2])",
    # the card regeneration inside release is timed apart (it summarises the whole release)
    "release": "import dgtraces.publish.card as c\n_w = c.write_card\nT = {}\n"
               "def w(*a, **k):\n    t = time.perf_counter(); r = _w(*a, **k)\n"
               "    T['card_s'] = time.perf_counter() - t; return r\n"
               "c.write_card = w\n"
               "from dgtraces.contribute.release import build_release\n"
               "build_release(sys.argv[2])",
    "sql": f"from dgtraces.query import sql; sql({SQL!r})",
    "load": "import dgtraces; dgtraces.load('layer_timings')",
}


def child(kind: str, arg: str, env: dict) -> dict:
    """Run one command in a fresh interpreter; its wall time (inside and outside) and peak
    RSS. The peak is the child's VmHWM (its own address space since exec): ``ru_maxrss``
    would carry over the benchmark's own peak from before the fork."""
    code = ("import sys, time, json; t0 = time.perf_counter()\n"
            f"{CHILD[kind]}\n"
            "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM')]\n"
            "print('@@' + json.dumps({'wall_s': time.perf_counter() - t0, 'rss_mb': "
            "int(hwm[0].split()[1]) / 1024, **globals().get('T', {})}))")
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-c", code, kind, arg], capture_output=True,
                         text=True, env=env, check=False)
    outer = time.perf_counter() - t0
    # DuckDB progress bars may share the line: take what follows the last marker
    marked = [res.stdout.rsplit("@@", 1)[1].splitlines()[0]] if "@@" in res.stdout else []
    if not marked:
        raise SystemExit(f"{kind} failed (exit {res.returncode}):\n{res.stderr[-3000:]}")
    out = json.loads(marked[-1])
    if res.returncode != 0:  # finished its work, then died on the way out: say so
        print(f"note: {kind} {arg} reported its figures, then exited with "
              f"{res.returncode}: {res.stderr[-300:]!r}", flush=True)
    out["cold_s"] = outer
    return out


def build(folder: Path, rows: int, first_run: int, shuffle: bool = False) -> tuple[int, int]:
    """A template-based contribution of about ``rows`` layer_timings rows (``shuffle``: in
    random row order, not run by run); returns (runs, Parquet bytes)."""
    import numpy as np
    import pandas as pd

    from dgtraces.contribute.template import (
        EXAMPLE_META,
        EXAMPLE_SOURCE,
        PLACEHOLDER_CONTRIBUTOR,
        template_frames,
    )

    runs0, lt0 = template_frames("resnet50", 32)
    n = max(1, -(-rows // len(lt0)))  # whole runs, at least ``rows`` rows
    ids = np.array([f"scale-{first_run + i:07d}" for i in range(n)], dtype=object)
    scale = 1.0 + (first_run + np.arange(n)) / 1e7
    lt = pd.DataFrame({c: np.tile(lt0[c].to_numpy(), n) for c in lt0.columns})
    lt["run_id"] = np.repeat(ids, len(lt0))
    per_row = np.repeat(scale, len(lt0))
    for col in ("fwd_ms", "bwd_ms", "fwd_p10_ms", "fwd_p90_ms", "bwd_p10_ms", "bwd_p90_ms"):
        lt[col] = lt[col].to_numpy() * per_row
    runs = pd.DataFrame({c: np.repeat(runs0[c].to_numpy(), n) for c in runs0.columns})
    runs["run_id"] = ids
    runs["source"] = runs["source"].str.replace(EXAMPLE_SOURCE, "store_scale benchmark",
                                                regex=False)
    for col in ("fwd_ms", "bwd_ms", "iter_ms"):
        runs[col] = runs[col].to_numpy() * scale
    folder.mkdir(parents=True)
    meta = EXAMPLE_META.replace(PLACEHOLDER_CONTRIBUTOR, "Benchmark <bench@example.org>")
    (folder / "contribution.yaml").write_text(meta, encoding="utf-8")
    runs.to_parquet(folder / "runs.parquet", index=False)
    if shuffle:
        lt = lt.take(np.random.default_rng(first_run).permutation(len(lt)))
    lt.to_parquet(folder / "layer_timings.parquet", index=False)
    return n, sum(p.stat().st_size for p in folder.glob("*.parquet"))


def stored_bytes(root: Path) -> int:
    return sum(p.stat().st_size for d in ("releases", "shards") if (root / d).is_dir()
               for p in (root / d).rglob("*") if p.is_file())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000000,5000000,20000000",
                    help="store sizes (layer_timings rows) at which to time cold sql/load")
    ap.add_argument("--step", type=int, default=1_000_000, help="rows per contribution")
    ap.add_argument("--contribution", type=int, default=0,
                    help="time one contribution of this many rows instead")
    args = ap.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    from dgtraces.store import manifest as store
    from dgtraces.store import release
    from dgtraces.store.migrate import migrate
    from dgtraces.store.shards import copy_release

    tmp = Path(tempfile.mkdtemp(prefix="dgtraces-scale-"))
    root = tmp / "data"
    for version in store.list_releases(REPO / "data"):
        copy_release(version, root, REPO / "data")
    migrate(root)
    env = dict(os.environ, DGTRACES_DATA=str(root), PYTHONPATH=str(REPO),
               DGTRACES_CHANGELOG=str(tmp / "CHANGELOG.md"), DGTRACES_CARDS=str(tmp / "cards"))
    if args.contribution:
        one_contribution(args.contribution, tmp, root, env)
        return
    print(f"cores available: {len(os.sched_getaffinity(0))}; step {args.step:,} rows; "
          f"sizes {', '.join(f'{s:,}' for s in sizes)}")
    print("| store rows after | contribute s / MB | release s / MB | of which card s | "
          "growth B | growth / new Parquet |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    major, minor, run = 10, 0, 0
    try:
        rows = release.tables(root=root)["layer_timings"]["rows"]
        cold = []
        for target in sizes:
            while rows < target:
                folder = tmp / f"c{run}"
                n_runs, pq_bytes = build(folder, min(args.step, target - rows), run)
                run += n_runs
                c = child("contribute", str(folder), env)
                before = stored_bytes(root)
                minor += 1
                r = child("release", f"{major}.{minor}.0", env)
                growth = stored_bytes(root) - before
                rows = release.tables(root=root)["layer_timings"]["rows"]
                shutil.rmtree(folder)
                print(f"| {rows:,} | {c['wall_s']:.1f} / {c['rss_mb']:.0f} | "
                      f"{r['wall_s']:.1f} / {r['rss_mb']:.0f} | {r.get('card_s', 0):.1f} | "
                      f"{growth:,} | "
                      f"{growth / pq_bytes:.2f} |", flush=True)
            s, ld = child("sql", "", env), child("load", "", env)
            cold.append((rows, s, ld))
        print("\n| store rows | cold sql s (peak MB) | cold load s (peak MB) |\n"
              "| ---: | ---: | ---: |")
        total = stored_bytes(root)
        for rows, s, ld in cold:
            print(f"| {rows:,} | {s['cold_s']:.2f} ({s['rss_mb']:.0f}) | "
                  f"{ld['cold_s']:.2f} ({ld['rss_mb']:.0f}) |")
        print(f"\nfinal store: {total:,} B in releases/ + shards/; "
              f"{len(store.list_releases(root))} releases")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def one_contribution(rows: int, tmp: Path, root: Path, env: dict) -> None:
    """Contribute and release ``rows`` rows, run by run and in random row order."""
    print(f"cores available: {len(os.sched_getaffinity(0))}; one contribution of "
          f"{rows:,} layer_timings rows")
    print("| row order | Parquet MB | contribute s / peak MB | release s / peak MB |")
    print("| --- | ---: | ---: | ---: |")
    try:
        for minor, shuffle in enumerate((False, True), start=1):
            folder = tmp / f"one-{minor}"
            _, pq_bytes = build(folder, rows, minor * 10_000_000, shuffle=shuffle)
            c = child("contribute", str(folder), env)
            r = child("release", f"10.{minor}.0", env)
            shutil.rmtree(folder)
            print(f"| {'random' if shuffle else 'run by run'} | {pq_bytes / 1e6:.0f} | "
                  f"{c['wall_s']:.1f} / {c['rss_mb']:.0f} | {r['wall_s']:.1f} / "
                  f"{r['rss_mb']:.0f} |", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
