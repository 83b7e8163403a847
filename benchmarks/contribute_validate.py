"""Benchmark: validating a ~100,000-row layer_timings contribution (target <= 3 s, 2 cores).

The contribution is 439 ResNet-50 runs x 228 layers = 100,092 layer_timings rows, built
from the template (FLOP-derived example times, each run scaled differently so no two runs
are duplicates), written as CSV and as Parquet into a temp folder; the store is a temp copy
of every release in data/releases (its runs are fingerprinted for the duplicate check).
Each repeat times the whole `validate_contribution` (read, schemas, keys, structure,
plausibility, duplicate fingerprints) and, in the same run, its phases (layer_timings is
checked in chunks: contribute/stream.py).

    python benchmarks/contribute_validate.py [--repeat 3] [--runs 439]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

TARGET_S = 3.0
REPO = Path(__file__).resolve().parent.parent


def build(folder: Path, n_runs: int, fmt: str) -> int:
    import pandas as pd

    from dgtraces.contribute.template import (
        EXAMPLE_META,
        EXAMPLE_SOURCE,
        PLACEHOLDER_CONTRIBUTOR,
        template_frames,
    )

    runs0, lt0 = template_frames("resnet50", 32)
    runs, lts = [], []
    for i in range(n_runs):
        scale = 1.0 + i / 1000.0
        r, t = runs0.copy(), lt0.copy()
        rid = f"bench-{i:04d}"
        r["run_id"], t["run_id"] = rid, rid
        # the template's markers replaced, as a contributor must (else PLAUSIBILITY/METADATA)
        r["source"] = r["source"].str.replace(EXAMPLE_SOURCE, "benchmark", regex=False)
        for col in ("fwd_ms", "bwd_ms", "fwd_p10_ms", "fwd_p90_ms", "bwd_p10_ms", "bwd_p90_ms"):
            t[col] = t[col] * scale
        for col in ("fwd_ms", "bwd_ms", "iter_ms"):
            r[col] = r[col] * scale
        runs.append(r)
        lts.append(t)
    runs, lt = pd.concat(runs, ignore_index=True), pd.concat(lts, ignore_index=True)
    folder.mkdir(parents=True)
    meta = EXAMPLE_META.replace(PLACEHOLDER_CONTRIBUTOR, "Benchmark <bench@example.org>")
    (folder / "contribution.yaml").write_text(meta, encoding="utf-8")
    for name, df in (("runs", runs), ("layer_timings", lt)):
        if fmt == "csv":
            df.to_csv(folder / f"{name}.csv", index=False)
        else:
            df.to_parquet(folder / f"{name}.parquet", index=False)
    return len(lt)


def phases(folder: Path, root: Path) -> dict[str, float]:
    """Time the steps of validate_contribution separately (same code path as
    ``validate.check``: small tables, layer_timings pass 1, store keys, pass 2)."""
    from dgtraces.contribute import stream
    from dgtraces.contribute.intake import read_contribution
    from dgtraces.contribute.staging import staged_known
    from dgtraces.contribute.validate import _per_run, store_known
    from dgtraces.tables.checks import check_tables

    t = {}
    t0 = time.perf_counter()
    contrib = read_contribution(folder)
    t["read"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    frames, _ = check_tables(dict(contrib.frames), files=contrib.files)
    t["runs schema+keys"] = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as spool_dir:
        t0 = time.perf_counter()
        sp = stream.spool(contrib.streamed["layer_timings"], "layer_timings",
                          contrib.files["layer_timings"], frames["runs"], contrib.limits,
                          Path(spool_dir), stream.Failures(), stream.Failures())
        t["layer_timings pass 1 (schema, keys, values)"] = time.perf_counter() - t0
        assert sp is not None
        t0 = time.perf_counter()
        known = store_known(root, stream.run_sums(sp)).update(staged_known(root))
        t["store+staging keys"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        _per_run(sp, frames["runs"], contrib.files, False, known, stream.Failures(), {})
        t["layer_timings pass 2 (per run, fingerprints, digest)"] = time.perf_counter() - t0
    contrib.close()
    return t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--runs", type=int, default=439)
    args = ap.parse_args()
    import os

    from dgtraces.contribute.validate import validate_contribution

    tmp = Path(tempfile.mkdtemp(prefix="dgtraces-bench-"))
    try:
        root = tmp / "data"
        from dgtraces.store import manifest as store
        from dgtraces.store.shards import copy_release

        for version in store.list_releases(REPO / "data"):
            copy_release(version, root, REPO / "data")
        os.environ["DGTRACES_DATA"] = str(root)

        print(f"cores available: {len(os.sched_getaffinity(0))}; store copy: releases "
              f"{', '.join(store.list_releases(root))}")
        for fmt in ("parquet", "csv"):
            folder = tmp / fmt
            rows = build(folder, args.runs, fmt)
            validate_contribution(folder, root=root)  # warm imports and caches
            walls = []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                checked = validate_contribution(folder, root=root)
                walls.append(time.perf_counter() - t0)
            med = statistics.median(walls)
            print(f"{fmt:8s} {rows} layer_timings rows, {len(checked.fingerprints)} runs: "
                  f"validate median {med:.3f} s (min {min(walls):.3f}, n={args.repeat}); "
                  f"target {TARGET_S} s -> {med / TARGET_S:.2f} of budget, "
                  f"{'PASS' if med <= TARGET_S else 'MISS'}")
            parts = phases(folder, root)
            print("         phases: " + ", ".join(f"{k} {v:.3f} s" for k, v in parts.items()))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
