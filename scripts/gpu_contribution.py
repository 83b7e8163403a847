"""Assemble the outputs of scripts/gpu_check.sh into one contribution folder and print the
figures.

    python scripts/gpu_contribution.py OUTDIR [--gpu-name NAME]

Reads every ``OUTDIR/*/<table>.parquet`` (runs, layer_timings, iterations, comm), writes
``OUTDIR/contribution/`` with those tables and a ``contribution.yaml`` whose ``devices``
entry comes from the GPU name (``torch.cuda.get_device_name(0)`` unless ``--gpu-name``), and
prints one line per run, the largest message of each comm sweep, each S-SGD row and each
alpha-beta fit (also into ``OUTDIR/figures.txt``).
"""

from __future__ import annotations

import argparse
import platform
from pathlib import Path

import pandas as pd

from dgtraces.reference.devices import device_entry

TABLES = ("runs", "layer_timings", "iterations", "comm")


def assemble(out: Path, gpu: str, software: str, gpus: int) -> dict[str, int]:
    dest = out / "contribution"
    dest.mkdir(exist_ok=True)
    counts = {}
    for name in TABLES:
        parts = [pd.read_parquet(p) for p in sorted(out.glob(f"*/{name}.parquet"))
                 if p.parent != dest]
        if parts:
            df = pd.concat(parts, ignore_index=True)
            df.to_parquet(dest / f"{name}.parquet", index=False)
            counts[name] = len(df)
    entry = device_entry(gpu)
    (dest / "contribution.yaml").write_text(
        f"contributor: dgtraces gpu_check on {platform.node()} <gpu-check@localhost>\n"
        "license: CC-BY-4.0\n"
        f"hardware: {gpus}x {gpu}\n"
        f"software: {software}\n"
        "collection: scripts/gpu_check.sh (collect layers fp32/amp + --profile, collect comm,"
        " collect ssgd)\n"
        "devices:\n"
        f"  - {{device: {entry['device']}, kind: gpu, name: {entry['name']}}}\n",
        encoding="utf-8")
    return counts


def figures(out: Path) -> list[str]:
    dest = out / "contribution"
    lines = []
    runs = pd.read_parquet(dest / "runs.parquet")
    for r in runs.itertuples():
        lines.append(f"{r.run_id}: {r.model} b{r.batch_size} {r.precision} on {r.device}: "
                     f"fwd {r.fwd_ms:.2f} ms, bwd {r.bwd_ms:.2f} ms, iter {r.iter_ms:.2f} ms, "
                     f"layer_sum_ratio {r.layer_sum_ratio:.3f}"
                     + (" FLAGGED" if r.flagged else ""))
    if (dest / "comm.parquet").exists():
        comm = pd.read_parquet(dest / "comm.parquet").sort_values("message_bytes")
        for r in comm.groupby(["backend", "collective"]).tail(1).itertuples():
            lines.append(f"comm {r.backend} {r.collective}, {r.workers} workers, "
                         f"{r.message_bytes} B: {r.time_ms:.3f} ms "
                         f"({r.message_bytes / r.time_ms / 1e6:.1f} GB/s algbw)")
    for p in sorted(out.glob("*/comm_fits.parquet")):
        for r in pd.read_parquet(p).itertuples():
            lines.append(f"fit {r.backend} {r.collective}: alpha {r.alpha_us:.1f} us, "
                         f"{r.bandwidth_gb_s:.2f} GB/s, r2 {r.r2:.3f}")
    if (dest / "iterations.parquet").exists():
        for r in pd.read_parquet(dest / "iterations.parquet").itertuples():
            lines.append(f"ssgd {r.model} {r.policy} ({r.backend}, {r.workers} workers): "
                         f"{r.iter_ms:.2f} ms/iter, {r.throughput_img_s:.0f} img/s")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--gpu-name", default=None)
    ap.add_argument("--figures-only", action="store_true")
    args = ap.parse_args()
    if not args.figures_only:
        if args.gpu_name is None:
            import torch

            gpu, gpus = torch.cuda.get_device_name(0), torch.cuda.device_count()
            software = (f"PyTorch {torch.__version__}, CUDA {torch.version.cuda}, cuDNN "
                        f"{torch.backends.cudnn.version()}")
        else:
            gpu, gpus, software = args.gpu_name, 1, "given on the command line"
        print("contribution tables:", assemble(args.out, gpu, software, gpus))
        return
    text = "\n".join(figures(args.out))
    (args.out / "figures.txt").write_text(text + "\n", encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
