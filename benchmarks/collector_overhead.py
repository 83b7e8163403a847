"""Collector overhead: per-layer-instrumented iteration time over the uninstrumented one.

    python benchmarks/collector_overhead.py                       # ResNet-50 b16 (target <= 1.05)
    python benchmarks/collector_overhead.py --model alexnet --batch-size 2 --repeats 3

Both iterations are measured side by side in one run, interleaved per repeat on the same
model, optimizer and batch: the instrumented one is ``collect.layers.layerwise_pass``
(every layer timed on its own, then every layer's backward in reverse) plus the SGD update;
the uninstrumented one is the normal fused forward, backward and update. Prints the medians
and their ratio. It waits for /tmp/dgtraces-measure.lock to be free, then holds it.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="collector overhead ratio")
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    from dgtraces.collect.env import measure_lock

    with measure_lock("benchmarks/collector_overhead.py"):  # waits for, then holds, the lock
        inst, plain = measure(args)
    mi, mp = statistics.median(inst), statistics.median(plain)
    print(f"{args.model} b{args.batch_size} threads {args.threads}, {args.repeats} repeats "
          f"(+{args.warmup} warm-up), interleaved")
    print(f"instrumented   median {mi:9.1f} ms  (min {min(inst):.1f}, max {max(inst):.1f})")
    print(f"uninstrumented median {mp:9.1f} ms  (min {min(plain):.1f}, max {max(plain):.1f})")
    ratio = mi / mp
    print(f"overhead ratio {ratio:.3f}  (target <= 1.05: {'met' if ratio <= 1.05 else 'MISSED'})")
    return 0


def measure(args) -> tuple[list[float], list[float]]:
    from dgtraces.collect.layers import layerwise_pass, prepare, whole_pass

    net, opt, x, labels = prepare(args.model, args.batch_size, args.threads)
    inst, plain = [], []
    gc.disable()
    try:
        for i in range(args.warmup + args.repeats):
            fwd = {n: [] for n in net.order}
            bwd = {n: [] for n in net.order}
            opt.zero_grad(set_to_none=True)
            t0 = time.perf_counter()
            layerwise_pass(net, x, labels, fwd, bwd)
            opt.step()
            t_inst = time.perf_counter() - t0
            opt.zero_grad(set_to_none=True)
            t_plain = sum(whole_pass(net, opt, x, labels))
            gc.collect()
            if i >= args.warmup:
                inst.append(t_inst * 1e3)
                plain.append(t_plain * 1e3)
    finally:
        gc.enable()
    return inst, plain


if __name__ == "__main__":
    raise SystemExit(main())
