"""How release v0.2.0 was made: the full measured CPU collection, then the release.

    python scripts/release_v0_2_0.py            # ~15-20 min on 2 cores, writes data/releases/v0.2.0
    python scripts/release_v0_2_0.py --plan     # print the plan only
    python scripts/release_v0_2_0.py --quick --root /tmp/store   # tiny smoke run elsewhere

Equivalent CLI, one step each (the script calls the same library functions in-process):

    dgtraces collect layers --model M --batch-size B --threads T --repeats 15 --warmup 2 --out DIR
    dgtraces collect comm --workers 2 --sizes 4B..64MiB --factor 4 --repeats 20 --out DIR
    dgtraces collect ssgd --model M --batch-size 8 --workers 2 --threads-per-worker 1 \\
        --policy naive --policy wfbp --policy bucketed --bucket-mb 25 --iters 10 --trace DIR --out DIR

While it runs, /tmp/dgtraces-measure.lock exists (removed in ``finally``, also on failure or
SIGTERM) so other CPU work on the machine pauses. Every step's tables are also written to
the work folder (default /tmp/dgtraces-v0.2.0-work) for inspection. Flagged runs (per-layer
sum outside 10% of the whole pass) are kept with ``flagged=True`` and their reason.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

MODELS = ("alexnet", "googlenet", "resnet50")
# model -> batch sizes at threads=1 (the ssgd batch 8 included) and at threads=2
LAYER_BATCHES = {
    "alexnet": ((4, 8, 16), (4, 16)),
    "googlenet": ((4, 8, 16), (4, 16)),
    "resnet50": ((4, 8), (4, 8)),
}
FULL = {"repeats": 15, "warmup": 2, "comm_repeats": 20, "comm_sizes": "4B..64MiB",
        "ssgd_batch": 8, "ssgd_iters": 10, "ssgd_warmup": 2, "bucket_mb": 25.0}
QUICK = {"repeats": 2, "warmup": 1, "comm_repeats": 3, "comm_sizes": "4B..64KiB",
         "ssgd_batch": 1, "ssgd_iters": 2, "ssgd_warmup": 0, "bucket_mb": 25.0}


def plan(quick: bool) -> list[tuple]:
    cfg = QUICK if quick else FULL
    steps = []
    for model in MODELS:
        if quick:
            steps.append(("layers", model, cfg["ssgd_batch"], 1))
            continue
        t1, t2 = LAYER_BATCHES[model]
        steps += [("layers", model, b, 1) for b in t1]
        steps += [("layers", model, b, 2) for b in t2]
    steps.append(("comm",))
    steps += [("ssgd", model) for model in (("alexnet",) if quick else MODELS)]
    return steps


def collect(steps, cfg, work: Path) -> dict:
    import pandas as pd

    from dgtraces.collect.comm import collect_comm, parse_sizes
    from dgtraces.collect.env import write_tables
    from dgtraces.collect.layers import collect_layers
    from dgtraces.collect.ssgd import collect_ssgd

    parts: dict[str, list] = {"runs": [], "layer_timings": [], "iterations": [],
                              "comm": [], "comm_fits": []}
    trace_ids: dict[tuple[str, int], str] = {}
    for i, step in enumerate(steps, 1):
        t0 = time.time()
        if step[0] == "layers":
            _, model, batch, threads = step
            tr = collect_layers(model, batch, repeats=cfg["repeats"], warmup=cfg["warmup"],
                                threads=threads)
            frames = tr.frames()
            if threads == 1:
                trace_ids[(model, batch)] = tr.run_id
            r = tr.runs.iloc[0]
            what = (f"fwd {r.fwd_ms:.1f} bwd {r.bwd_ms:.1f} ratio {r.layer_sum_ratio:.3f}"
                    + (" FLAGGED" if r.flagged else ""))
        elif step[0] == "comm":
            frames = collect_comm(workers=2, sizes=parse_sizes(cfg["comm_sizes"]),
                                  repeats=cfg["comm_repeats"])
            what = "; ".join(f"{f.collective} alpha {f.alpha_us:.0f}us "
                             f"{f.bandwidth_gb_s:.2f}GB/s R2 {f.r2:.3f}"
                             for f in frames["comm_fits"].itertuples())
        else:
            model = step[1]
            df = collect_ssgd(model, workers=2, threads_per_worker=1,
                              policies=("naive", "wfbp", "bucketed"),
                              bucket_mb=cfg["bucket_mb"], iters=cfg["ssgd_iters"],
                              warmup=cfg["ssgd_warmup"], batch_size=cfg["ssgd_batch"],
                              trace_run_id=trace_ids.get((model, cfg["ssgd_batch"])))
            frames = {"iterations": df}
            what = ", ".join(f"{r.policy} {r.iter_ms:.0f}ms" for r in df.itertuples())
        runs = pd.concat(parts["runs"]) if parts["runs"] else None
        write_tables(work / f"{i:02d}-{'-'.join(map(str, step))}", frames, known_runs=runs)
        for name, df in frames.items():
            parts[name].append(df)
        print(f"[{i}/{len(steps)}] {' '.join(map(str, step))}: {what} "
              f"({time.time() - t0:.0f} s)", flush=True)
    return {name: pd.concat(dfs, ignore_index=True) for name, dfs in parts.items() if dfs}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plan", action="store_true", help="print the steps and exit")
    ap.add_argument("--quick", action="store_true", help="tiny settings (smoke test)")
    ap.add_argument("--root", default=None, help="data root (default: the store's)")
    ap.add_argument("--version", default="0.2.0")
    ap.add_argument("--work", default="/tmp/dgtraces-v0.2.0-work")
    args = ap.parse_args(argv)
    cfg = QUICK if args.quick else FULL
    steps = plan(args.quick)
    if args.plan:
        for step in steps:
            print(" ".join(map(str, step)))
        return 0
    from dgtraces import store

    work = Path(args.work) / store.utc_now(store.STAMP_UTC)
    from dgtraces.collect.env import measure_lock

    started = time.time()
    with measure_lock("scripts/release_v0_2_0.py"):  # waits for, then holds, the lock
        frames = collect(steps, cfg, work)
    notes = ("v0.1.0 + measured CPU traces (PyTorch, layer timings at threads 1 and 2), "
             "gloo loopback comm sweep with alpha-beta fits, measured 2-worker S-SGD "
             f"iterations (naive, wfbp, bucketed); collection took {time.time() - started:.0f} s"
             + (" [QUICK smoke settings]" if args.quick else ""))
    path = store.extend_release(args.version, frames, base="0.1.0", root=args.root,
                                notes=notes)
    print(f"wrote {path}; work tables in {work}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
