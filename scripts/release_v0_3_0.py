"""Build dataset release v0.3.0 = v0.2.0 + reconstructed K80/V100 traces + published rows +
the measured CPU devices row; then write cards/fragments/reconstruction.md.

    python scripts/release_v0_3_0.py [--dry-run] [--threads N]

Needs release v0.2.0 (measured CPU traces) and ``dgtraces.importers.published``; refuses to
build on any other base. Measures the CPU peaks (a few seconds) under the shared
measurement lock /tmp/dgtraces-measure.lock, waiting while another helper measures.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import pandas as pd

from dgtraces import store
from dgtraces.errors import DgtracesError
from dgtraces.reconstruct import method_id, reconstruct_trace, runs_frame
from dgtraces.reconstruct.calibration import calibrate
from dgtraces.collect.env import measure_lock
from dgtraces.reconstruct.cpu import device_row, measure_peaks

VERSION, BASE = "0.3.0", "0.2.0"
REPO = Path(__file__).resolve().parent.parent
FRAGMENTS = Path(os.environ.get("DGTRACES_FRAGMENTS", REPO / "cards" / "fragments"))
BATCHES = {"alexnet": (16, 32, 64, 128, 256, 512), "googlenet": (16, 32, 64, 128),
           "resnet50": (16, 32, 64, 128)}


def reconstructions(stamp: str):
    recs = []
    for device in ("k80", "v100"):
        precisions = ("fp32", "amp") if calibrate(device).amp is not None else ("fp32",)
        for model, batches in BATCHES.items():
            for b in batches:
                for p in precisions:
                    recs.append(reconstruct_trace(device, model, b, p, timestamp_utc=stamp))
    return recs


def concat(*frames):
    return pd.concat([f for f in frames if f is not None and len(f)], ignore_index=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dry-run", action="store_true", help="build and validate, write nothing")
    ap.add_argument("--threads", type=int, nargs="*", default=None,
                    help="thread counts to measure peaks at (default: the measured runs')")
    args = ap.parse_args(argv)
    if BASE not in store.list_releases():
        print(f"release v{BASE} is not there yet (have: {store.list_releases()}); "
              f"v{VERSION} is built on v{BASE} only", file=sys.stderr)
        return 2
    try:
        from dgtraces.importers.published import published_tables
    except ImportError as exc:
        print(f"dgtraces.importers.published is not available: {exc}", file=sys.stderr)
        return 2
    base = store.read_all(BASE)
    pub = published_tables()
    runs = base["runs"]
    cpu_runs = runs[(runs["provenance"] == "measured") & (runs["device_kind"] == "cpu")]
    cores = int(cpu_runs["cores"].max())
    threads = args.threads or sorted(int(t) for t in cpu_runs["threads"].dropna().unique())
    with measure_lock("scripts/release_v0_3_0.py"):
        peaks = [measure_peaks(t) for t in threads]
    cpu_rows = [device_row(p, cores) for p in peaks]
    for p, row in zip(peaks, cpu_rows):
        print(f"{row['device']} peaks ({p['threads']} thread(s)): "
              f"{p['peak_fp32_tflops'] * 1e3:.1f} GFLOP/s, {p['mem_bandwidth_gb_s']:.1f} GB/s "
              f"(loadavg {p['loadavg']})")
    stamp = store.utc_now()
    recs = reconstructions(stamp)
    devices = concat(pub["devices"], pd.DataFrame(cpu_rows))
    if "devices" in base:
        clash = set(base["devices"]["device"]) & set(devices["device"])
        if clash:
            raise DgtracesError(f"v{BASE} already has devices {sorted(clash)}",
                                code="DUPLICATE")
    additions = {
        "runs": concat(runs_frame(recs), pub["runs"]),
        "layer_timings": concat(*(r.layer_timings for r in recs), pub["layer_timings"]),
        "iterations": pub["iterations"], "comm": pub["comm"], "comm_fits": pub["comm_fits"],
        "devices": devices,
    }
    for name, df in additions.items():
        print(f"  + {name:<14} {len(df):>6} rows")
    notes = (f"v{BASE} + {len(recs)} reconstructed K80/V100 traces ({method_id()}), the "
             "published reference rows (calibration throughputs, B-Caffe GoogLeNet traces, "
             "OSU allreduce, datasheet devices) and this CPU's measured peaks")
    if args.dry_run:
        from dgtraces.checks import validate_tables

        validate_tables(store.merge_frames(base, additions))  # what extend_release writes
        print("dry run: valid, nothing written")
        return 0
    path = store.extend_release(VERSION, additions, base=BASE, notes=notes)
    print(f"wrote {path}")
    from dgtraces.reconstruct.fragment import write
    from dgtraces.reconstruct.report import build_report

    rep = build_report(VERSION, loo=True)
    for p in write(rep, FRAGMENTS):
        print(f"wrote {p}")
    print(rep.text())
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except DgtracesError as exc:
        print(exc.report(), file=sys.stderr)
        sys.exit(1)
