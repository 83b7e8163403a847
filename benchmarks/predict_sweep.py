"""Benchmark: vectorised sweep vs the reference event simulation, measured in one run.

100,000 configurations of ResNet-50 (the real Caffe-granularity layer list; its layer and
gradient-layer counts are printed), twice: a mixed grid (50 worker counts x 5 gpus/node x 2
intra x 5 inter links x 5 algorithms x 4 policies x 2 io-overlap choices; the comm pass of a
policy serves both io choices) and a worst case of 100,000 distinct comm setups all under
mgwfbp (the dynamic program). Layer times are synthetic (seeded; the timing code does not
depend on their values). The reference simulation is timed on a random subset and scaled.

Targets (issue #5): sweep <= 1 s on 2 cores; >= 50x faster than the reference.

    python benchmarks/predict_sweep.py [--subset 300] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import pandas as pd

from dgtraces.models import layers_frame
from dgtraces.predict import from_frame
from dgtraces.predict.sweep import Grid, comm_grid, reference_row, run_sweep


def timed(grid, repeat: int):
    run_sweep(grid)  # warm-up (imports, link table)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = run_sweep(grid)
        times.append(time.perf_counter() - t0)
    return out, times


def scenario(name, trace, grid, args) -> None:
    assert grid.size() == 100_000
    out, times = timed(grid, args.repeat)
    fast = min(times)
    rows = out.sample(args.subset, random_state=0).to_dict("records")
    t0 = time.perf_counter()
    worst = 0.0
    for row in rows:
        ref = reference_row(trace, row, grid)
        worst = max(worst, abs(ref - row["iter_ms"]) / ref)
    per_ref = (time.perf_counter() - t0) / len(rows)
    ref_total = per_ref * len(out)
    print(f"[{name}] {len(out):,} configurations")
    print(f"  vectorised sweep: best {fast:.3f} s of {args.repeat} (all: "
          + ", ".join(f"{t:.3f}" for t in times) + f"); target <= 1 s: "
          f"{'PASS' if fast <= 1.0 else 'MISS'}")
    print(f"  reference simulation: {per_ref * 1e3:.3f} ms/config on {len(rows)} configs -> "
          f"{ref_total:.1f} s for all (scaled)")
    print(f"  speed-up: {ref_total / fast:.0f}x; target >= 50x: "
          f"{'PASS' if ref_total / fast >= 50 else 'MISS'}")
    print(f"  max relative difference on the subset: {worst:.2e} (tests require <= 1e-9)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--subset", type=int, default=300, help="reference configurations timed")
    ap.add_argument("--repeat", type=int, default=3, help="sweep repetitions (best is kept)")
    args = ap.parse_args()
    lf = layers_frame("resnet50")
    rng = np.random.default_rng(2018)
    df = pd.DataFrame({"layer": lf["layer"], "fwd_ms": rng.uniform(0.05, 4.0, len(lf)),
                       "bwd_ms": rng.uniform(0.1, 8.0, len(lf))})
    trace = from_frame(df, "resnet50", 64, io_ms=60.0, h2d_ms=5.0, update_ms=10.0,
                       source="synthetic benchmark times (seed 2018)")
    links = dict(intra=("pcie3", "nvlink2"),
                 inter=("10gbe", "25gbe", "56gb-ib", "100gb-ib", "loopback-gloo"),
                 algorithms=("ring", "tree", "dbtree", "hierarchical", "ps"),
                 traces={("resnet50", 64): trace})
    print(f"cpus visible: {os.cpu_count()}; load average: {os.getloadavg()}")
    print(f"model: resnet50, {len(trace.layers)} layers, "
          f"{sum(1 for b in trace.grad_bytes if b)} gradient layers")
    mixed = Grid(workers=tuple(range(1, 51)), gpus_per_node=(1, 2, 4, 8, 16),
                 policies=("naive", "wfbp", "bucketed", "mgwfbp"), io_overlap=(False, True),
                 **links)
    scenario(f"mixed: {len(comm_grid(mixed)['a_ms']):,} comm setups x {len(mixed.policies)} "
             f"policies x {len(mixed.io_overlap)} io choices", trace, mixed, args)
    hard = Grid(workers=tuple(range(1, 401)), gpus_per_node=(1, 2, 4, 8, 16),
                policies=("mgwfbp",), **links)
    cg = comm_grid(hard)
    distinct = len(np.unique(np.stack([cg["a_ms"], cg["b_ms_per_byte"]], axis=1), axis=0))
    scenario(f"mgwfbp only: {len(cg['a_ms']):,} comm setups ({distinct:,} distinct costs), "
             f"all mgwfbp", trace, hard, args)
    adversarial(trace, args)
    nccl(trace, args)


def nccl(trace, args) -> None:
    """NCCL's model (auto; issue #25): rows costed once per distinct configuration,
    vectorised over message sizes (predict/fast_nccl.py); no speed target, measured."""
    grid = Grid(workers=(1, 2, 4, 8, 16, 32, 64, 128), gpus_per_node=(1, 2, 4, 8),
                intra=("pcie3", "nvlink2", "nvlink3"), inter=("10gbe", "ib-hdr", "100gbe-roce"),
                algorithms=("auto",), policies=("naive", "wfbp", "bucketed", "mgwfbp"),
                io_overlap=(False, True), traces={("resnet50", 64): trace})
    out, times = timed(grid, args.repeat)
    rows = out.sample(min(args.subset, len(out)), random_state=0).to_dict("records")
    t0 = time.perf_counter()
    worst = max(abs(reference_row(trace, r, grid) - r["iter_ms"]) / r["iter_ms"]
                for r in rows)
    per_ref = (time.perf_counter() - t0) / len(rows)
    print(f"[auto (NCCL's model): {len(out):,} configurations, "
          f"{len(out) // (len(grid.policies) * 2):,} comm setups]")
    print(f"  vectorised sweep: best {min(times):.3f} s of {args.repeat}; reference "
          f"{per_ref * 1e3:.3f} ms/config -> {per_ref * len(out):.1f} s for all (scaled); "
          f"max relative difference {worst:.2e}")


def adversarial(trace, args) -> None:
    """100,000 random, all-distinct collective costs under mgwfbp: no work can be shared."""
    from dgtraces.predict import Cluster, Link, Policy, simulate
    from dgtraces.predict.fast import iter_times, prepare

    rng = np.random.default_rng(7)
    a = rng.uniform(0.001, 2.0, 100_000)  # ms per message
    b = 10 ** rng.uniform(-8, -5, 100_000)  # ms per byte
    prep, policy = prepare(trace), Policy("mgwfbp")
    times = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        out, _ = iter_times(prep, policy, a, b)
        times.append(time.perf_counter() - t0)
    fast = min(times)
    t0 = time.perf_counter()
    worst = 0.0
    for i in range(min(args.subset, 100)):  # as 2-worker rings with that cost
        link = Link("x", a[i] * 500.0, 1.0 / (b[i] * 1e6))
        ref = simulate(trace, Cluster(2, 2, link, link), policy).iter_ms
        worst = max(worst, abs(ref - out[i]) / ref)
    per_ref = (time.perf_counter() - t0) / min(args.subset, 100)
    print("[adversarial: 100,000 random distinct comm costs, all mgwfbp, engine only]")
    print(f"  vectorised: best {fast:.3f} s of {args.repeat} (all: "
          + ", ".join(f"{t:.3f}" for t in times) + f"); target <= 1 s: "
          f"{'PASS' if fast <= 1.0 else 'MISS'}")
    print(f"  reference: {per_ref * 1e3:.3f} ms/config -> speed-up "
          f"{per_ref * 1e5 / fast:.0f}x; max relative difference {worst:.2e}")


if __name__ == "__main__":
    main()
