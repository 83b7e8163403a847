"""Time the cuDNN convolutions of the shipped models' layers on the local GPU, one kernel at a
time, as DeepBench does: forward, data gradient and weight gradient kept apart.

    python scripts/gpu_kernels.py OUT.csv --commit SHA [--batches 16,32]
        [--precisions fp32,fp16] [--repeats 10] [--budget-s 150]

Shapes: every ungrouped convolution shape of the shipped models
(``dgtraces.importers.deepbench.layer_shapes``: input C x H x W, K, R x S, pads, strides), at
each batch size. Per shape, batch and precision: ``torch.backends.cudnn.benchmark`` on (cuDNN
picks its fastest algorithm, as DeepBench's cudnnFind does), 3 warm-up calls of each pass
(the algorithm search happens there), then ``--repeats`` calls each bracketed by two CUDA
events; the median is kept. ``fp32`` is strict FP32 (TF32 off, as DeepBench's FP32 sheets);
``fp16`` is FP16 inputs and outputs with FP32 accumulation (PyTorch's cuDNN convolution
descriptor), the case of DeepBench's ``FP16_ip_Mixed_math`` sheet; ``tf32`` is PyTorch's
default FP32 convolution on Ampere and later (TF32 tensor cores).

The CSV has the ``kernels`` table's columns (provenance ``measured``, the repository, this
script's path and the given commit as the source), plus ``math`` (fp32 | tf32 | fp16-fp32acc).
A JSON sidecar ``OUT.csv.json`` holds the GPU, driver, clocks, torch/CUDA/cuDNN versions and
how many configurations the budget allowed. The run stops cleanly at ``--budget-s``: what was
measured is written, and the sidecar says where it stopped.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

COLUMNS = ("kernel_id", "device", "op", "precision", "batch_size", "in_c", "in_h", "in_w",
           "out_c", "out_h", "out_w", "kernel_h", "kernel_w", "pad_h", "pad_w", "stride_h",
           "stride_w", "gemm_m", "gemm_n", "gemm_k", "trans_a", "trans_b", "fwd_ms",
           "dgrad_ms", "wgrad_ms", "algorithm", "cuda_version", "cudnn_version", "model",
           "layer", "provenance", "repository", "path", "commit", "source", "math")
MATH = {"fp32": "fp32", "tf32": "tf32", "fp16": "fp16-fp32acc"}
PRECISION = {"fp32": "fp32", "tf32": "fp32", "fp16": "fp16"}


def smi(query: str) -> str:
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20, check=False)
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        return f"unavailable: {exc}"


def timed(torch, fn, repeats: int) -> float:
    for _ in range(3):
        fn()
    pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
             for _ in range(repeats)]
    for start, end in pairs:
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in pairs)


def passes(torch, shape, batch: int, mode: str):
    import torch.nn.functional as F

    c, h, w, k, r, s, ph, pw, sh, sw = shape
    dtype = torch.float16 if mode == "fp16" else torch.float32
    dev = torch.device("cuda:0")
    x = torch.randn(batch, c, h, w, device=dev, dtype=dtype)
    wt = torch.randn(k, c, r, s, device=dev, dtype=dtype)
    y = F.conv2d(x, wt, None, (sh, sw), (ph, pw))
    gy = torch.randn_like(y)
    back = torch.ops.aten.convolution_backward

    def fwd():
        F.conv2d(x, wt, None, (sh, sw), (ph, pw))

    def dgrad():
        back(gy, x, wt, None, [sh, sw], [ph, pw], [1, 1], False, [0, 0], 1,
             [True, False, False])

    def wgrad():
        back(gy, x, wt, None, [sh, sw], [ph, pw], [1, 1], False, [0, 0], 1,
             [False, True, False])

    return tuple(y.shape[2:]), fwd, dgrad, wgrad


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--commit", required=True, help="40-hex commit of this checkout")
    ap.add_argument("--batches", default="16,32")
    ap.add_argument("--precisions", default="fp32,fp16")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--budget-s", type=float, default=150.0)
    ap.add_argument("--device-key", default=None, help="devices key (default: from the name)")
    args = ap.parse_args(argv)

    import torch

    from dgtraces.importers.deepbench import layer_shapes
    from dgtraces.reference.devices import device_key

    if not torch.cuda.is_available():
        print("no CUDA device visible", file=sys.stderr)
        return 3
    deadline = time.monotonic() + args.budget_s
    name = torch.cuda.get_device_name(0)
    key = args.device_key or device_key(name)
    props = torch.cuda.get_device_properties(0)
    torch.backends.cudnn.benchmark = True
    shapes = sorted(layer_shapes().items())
    batches = [int(b) for b in args.batches.split(",")]
    modes = args.precisions.split(",")
    unknown = [m for m in modes if m not in MATH]
    if unknown:
        print(f"unknown precision(s) {unknown}; known: {sorted(MATH)}", file=sys.stderr)
        return 2
    meta = {"gpu": name, "device_key": key, "sm_count": props.multi_processor_count,
            "memory_gib": round(props.total_memory / 2**30, 1),
            "compute_capability": f"{props.major}.{props.minor}",
            "torch": torch.__version__, "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version(),
            "driver": smi("driver_version"),
            "clocks_before": smi("clocks.sm,clocks.mem,clocks.max.sm,clocks.max.mem,"
                                 "power.limit,temperature.gpu"),
            "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "shapes": len(shapes), "batches": batches, "precisions": modes,
            "repeats": args.repeats, "budget_s": args.budget_s}
    rows = []
    planned = len(shapes) * len(batches) * len(modes)
    stopped = None
    source = (f"dgtraces scripts/gpu_kernels.py on {name} (torch {torch.__version__}, CUDA "
              f"{torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}), "
              f"{meta['started_utc'][:10]}")
    for mode in modes:
        torch.backends.cudnn.allow_tf32 = mode == "tf32"
        for batch in batches:
            for shape, (model, layer) in shapes:
                if time.monotonic() > deadline:
                    stopped = f"budget reached after {len(rows)} of {planned} configurations"
                    break
                (oh, ow), fwd, dgrad, wgrad = passes(torch, shape, batch, mode)
                f_ms, d_ms, w_ms = (timed(torch, fn, args.repeats)
                                    for fn in (fwd, dgrad, wgrad))
                c, h, w, k, r, s, ph, pw, sh, sw = shape
                rows.append({
                    "kernel_id": f"gpukernels-{key}-{mode}-b{batch}-{len(rows)}",
                    "device": key, "op": "conv", "precision": PRECISION[mode],
                    "batch_size": batch, "in_c": c, "in_h": h, "in_w": w, "out_c": k,
                    "out_h": oh, "out_w": ow, "kernel_h": r, "kernel_w": s, "pad_h": ph,
                    "pad_w": pw, "stride_h": sh, "stride_w": sw, "gemm_m": "", "gemm_n": "",
                    "gemm_k": "", "trans_a": "", "trans_b": "", "fwd_ms": f"{f_ms:.6g}",
                    "dgrad_ms": f"{d_ms:.6g}", "wgrad_ms": f"{w_ms:.6g}",
                    "algorithm": "cudnn.benchmark (fastest found)",
                    "cuda_version": torch.version.cuda,
                    "cudnn_version": str(torch.backends.cudnn.version()),
                    "model": model, "layer": layer, "provenance": "measured",
                    "repository": "dgtraces", "path": "scripts/gpu_kernels.py",
                    "commit": args.commit, "source": source, "math": MATH[mode]})
                del fwd, dgrad, wgrad
            if stopped:
                break
        if stopped:
            break
        print(f"{mode}: {len(rows)} configurations so far", file=sys.stderr, flush=True)
    torch.backends.cudnn.allow_tf32 = True
    meta["clocks_after"] = smi("clocks.sm,clocks.mem,temperature.gpu")
    meta["measured"] = len(rows)
    meta["planned"] = planned
    meta["stopped"] = stopped
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    Path(f"{args.out}.json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(meta, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
