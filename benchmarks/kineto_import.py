"""Kineto import cost per MB of trace at two sizes (issue #14 item 6: linear attribution).

Builds, from the shipped V100 ResNet-50 trace (6 ProfilerSteps, ~1.1 MB gzipped), a trace
with the steps repeated k times (each copy shifted past the previous one in time, ids and
correlations offset so nothing collides) for k = 1 and k = FACTOR, writes both as plain
JSON, and times ``import_trace`` (automap: parse, op mapping, kernel attribution, rows) on
each, best of ``--repeat``. Prints seconds per MB (uncompressed JSON) and their ratio:
about 1 means the import grows linearly with the trace; 2 for a 4x trace would mean
quadratic growth somewhere.

    python benchmarks/kineto_import.py [--factor 4] [--repeat 2]
"""

from __future__ import annotations

import argparse
import gzip
import json
import tempfile
import time
from pathlib import Path

from dgtraces import reference
from dgtraces.importers.kineto import import_trace

SRC = "gpu/kineto/resnet50_v100_b32_num_workers_0.pt.trace.json.gz"


def scaled(doc: dict, k: int) -> dict:
    events = doc["traceEvents"]
    timed_ = [e for e in events if "ts" in e]
    t0 = min(float(e["ts"]) for e in timed_)
    span = max(float(e["ts"]) + float(e.get("dur", 0)) for e in timed_) - t0 + 1000
    out = []
    for i in range(k):
        for e in events:
            if i and e.get("ph") == "M":
                continue
            c = dict(e)
            if "ts" in c:
                c["ts"] = float(c["ts"]) + i * span
            if "id" in c and isinstance(c["id"], int):
                c["id"] += i * 10_000_000
            args = c.get("args")
            if isinstance(args, dict) and i:
                args = dict(args)
                for key in ("External id", "external id", "correlation", "Sequence number"):
                    if isinstance(args.get(key), int):
                        args[key] += i * 10_000_000
                c["args"] = args
            out.append(c)
    return {**doc, "traceEvents": out}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--factor", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args(argv)
    doc = json.loads(gzip.decompress(reference.path(SRC).read_bytes()))
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for k in (1, args.factor):
            path = Path(tmp) / f"trace_x{k}.json"
            path.write_text(json.dumps(scaled(doc, k)))
            mb = path.stat().st_size / 1e6
            best = float("inf")
            for _ in range(args.repeat):
                t = time.perf_counter()
                res = import_trace(path, "resnet50-v1.5", batch_size=None, device="v100-dgxs-32gb",
                                   source="benchmark copy")
                best = min(best, time.perf_counter() - t)
            results.append((k, mb, best, res.iterations))
            print(f"x{k}: {mb:7.1f} MB, {res.iterations} steps, {best:6.2f} s, "
                  f"{best / mb:.4f} s/MB")
    (_, mb1, s1, _), (_, mb2, s2, _) = results
    print(f"s/MB ratio (x{args.factor} / x1): {(s2 / mb2) / (s1 / mb1):.2f} "
          f"(1.0 = linear)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
