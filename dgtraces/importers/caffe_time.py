"""``caffe time`` logs -> ``runs`` + ``layer_timings`` (provenance ``published`` for shipped logs).

A ``caffe time`` run prints, after ``Average time per layer:``, one ``<layer> forward: X ms.``
and one ``<layer> backward: Y ms.`` line per layer (averages over ``Testing for N
iterations``), then ``Average Forward pass``, ``Average Backward pass`` and ``Average
Forward-Backward`` lines. Caffe synchronises after every layer, so small layers look slower
than in a fused iteration (said in the run's notes).

Layers are matched to the model's spec **by name**. Log layers the spec does not have (the
input layer, Caffe's automatically inserted ``*_split`` layers) are listed with their times in
:attr:`CaffeTimeImport.unmatched` and the run's ``params_json``; their time stays in the
run's whole-pass figures, so nothing is dropped. A log whose layers do not cover the spec's
conv/fc layers is another net: MODEL_MISMATCH. A log cut before the Average lines, or a
layer without its backward line, is BAD_FILE; nothing is returned or written then.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from dgtraces.errors import Code, DgtracesError, Failure
from dgtraces.importers.base import TraceImport, frame, gpu_run_row, read_text
from dgtraces.importers.shipped import GpuSource, resolve, shipped
from dgtraces.values import positive_int

NUM = r"([-+]?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)"
LAYER_LINE = re.compile(rf"\]\s*(\S+)\s+(forward|backward): {NUM} ms\.\s*$", re.ASCII)
AVERAGE = re.compile(rf"Average (Forward pass|Backward pass|Forward-Backward): {NUM} ms\.",
                     re.ASCII)
ITERS = re.compile(r"Testing for (\d+) iterations", re.ASCII)
DIM = re.compile(r"^\s*(?:dim|input_dim|batch_size):\s*(\d+)\s*$", re.ASCII)
MIN_COVERAGE = 0.9  # share of the spec's (non-aux) conv/fc layers a log must name


@dataclass
class CaffeTimeImport(TraceImport):
    matched: tuple[str, ...]
    unmatched: tuple[tuple[str, float, float], ...]  # (log layer, fwd ms, bwd ms)
    spec_without_time: tuple[str, ...]
    coverage: float  # share of the spec's conv/fc layers timed
    batch_size: int
    batch_basis: str


@dataclass(frozen=True)
class ParsedLog:
    layers: dict[str, tuple[float | None, float | None]]  # in log order
    averages: dict[str, float]
    iterations: int | None
    batch_size: int | None


def parse(text: str, path: str = "log") -> ParsedLog:
    """The per-layer averages and whole-pass lines of a ``caffe time`` log (see module doc)."""
    layers: dict[str, list] = {}
    averages: dict[str, float] = {}
    iterations = batch = None
    failures = []
    for i, line in enumerate(text.splitlines(), 1):
        m = LAYER_LINE.search(line)
        if m:
            name, direction, value = m.group(1), m.group(2), float(m.group(3))
            slot = layers.setdefault(name, [None, None])
            if slot[direction == "backward"] is not None:  # which one is right? (#29)
                failures.append(Failure(Code.BAD_FILE, f"layer {direction} line given twice",
                                        file=path, row=i, expected="one line per layer "
                                        "and direction", found=line.strip()[:80]))
            slot[direction == "backward"] = value
            continue
        m = AVERAGE.search(line)
        if m and m.group(1) in averages:
            failures.append(Failure(Code.BAD_FILE, "whole-pass average given twice", file=path,
                                    row=i, found=line.strip()[:80]))
            continue
        m = AVERAGE.search(line)
        if m:
            averages[m.group(1)] = float(m.group(2))
            continue
        m = ITERS.search(line)
        if m:
            iterations = int(m.group(1))
            continue
        m = DIM.match(line)
        if m and batch is None:  # the first dim of the input shape is the batch
            batch = int(m.group(1))
        elif ("forward:" in line or "backward:" in line) and "caffe.cpp" in line:
            failures.append(Failure(Code.BAD_FILE, "unreadable per-layer line", file=path, row=i,
                                    found=line.strip()[:80]))
    if failures:
        raise DgtracesError(f"{path}: {len(failures)} malformed per-layer line(s)",
                            code=Code.BAD_FILE, failures=failures)
    if not layers:
        raise DgtracesError(f"{path}: no per-layer 'forward:/backward:' lines: not a caffe "
                            f"time log", code=Code.BAD_FILE)
    half = [name for name, (f, b) in layers.items() if f is None or b is None]
    if half:
        raise DgtracesError(f"{path}: layer(s) without both forward and backward lines "
                            f"(truncated log?): {half[:5]}", code=Code.BAD_FILE,
                            failures=[Failure(Code.BAD_FILE, "forward or backward line missing",
                                              file=path, found=n) for n in half[:20]])
    if "Forward-Backward" not in averages:
        raise DgtracesError(f"{path}: no 'Average Forward-Backward' line (truncated log?)",
                            code=Code.BAD_FILE)
    return ParsedLog({k: (v[0], v[1]) for k, v in layers.items()}, averages, iterations, batch)


def _coverage(model: str, names: set[str]) -> tuple[float, list[str]]:
    from dgtraces.models import inferred

    gemm = [i.layer.name for i in inferred(model)
            if i.layer.kind in ("conv", "fc") and not i.layer.aux]
    missing = [n for n in gemm if n not in names]
    return 1 - len(missing) / len(gemm), missing


def import_log(path, model: str, *, batch_size: int | None = None, device: str | None = None,
               run_id: str | None = None, source: str | None = None) -> CaffeTimeImport:
    """Map a ``caffe time`` log onto ``model``'s spec (see the module docstring)."""
    from dgtraces.models import layer_records

    order = [r["layer"] for r in layer_records(model)]  # UNKNOWN_MODEL first
    text, digest = read_text(path)
    parsed = parse(text, str(path))
    known: GpuSource | None = shipped(digest)
    if known is not None and known.model != model:
        raise DgtracesError(f"{path} is the shipped log of {known.model}, not {model}",
                            code=Code.MODEL_MISMATCH)
    coverage, missing = _coverage(model, set(parsed.layers))
    if coverage < MIN_COVERAGE:
        raise DgtracesError(
            f"{path}: the log names {100 * coverage:.0f}% of {model}'s conv/fc layers "
            f"(need {100 * MIN_COVERAGE:.0f}%): a log of another net?", code=Code.MODEL_MISMATCH,
            failures=[Failure(Code.MODEL_MISMATCH, "spec layer not in the log", file=str(path),
                              found=n) for n in missing[:20]])
    if batch_size is not None:
        batch, basis = positive_int("batch_size", batch_size), "given (--batch-size)"
    elif parsed.batch_size:
        batch, basis = parsed.batch_size, "first input dim of the prototxt echoed in the log"
    else:
        raise DgtracesError(f"{path}: no batch size in the echoed prototxt; give --batch-size",
                            code=Code.BAD_INPUT)
    cited, device = resolve(known, path, source, device)
    run_id = run_id or f"caffe-time-{model}-{digest[:8]}"
    rows = [{"run_id": run_id, "layer": name, "fwd_ms": parsed.layers[name][0],
             "bwd_ms": parsed.layers[name][1], "n": parsed.iterations or 1}
            for name in order if name in parsed.layers]
    unmatched = tuple((n, f or 0.0, b or 0.0) for n, (f, b) in parsed.layers.items()
                      if n not in set(order))
    fwd, bwd = parsed.averages.get("Forward pass"), parsed.averages.get("Backward pass")
    layer_sum = sum(r["fwd_ms"] + r["bwd_ms"] for r in rows)
    total = parsed.averages["Forward-Backward"]
    ratio = layer_sum / total if total > 0 else None
    without = [n for n in order if n not in parsed.layers]
    params = {"file": Path(path).name, "sha256": digest, "batch_basis": basis,
              "iterations": parsed.iterations, "averages_ms": parsed.averages,
              "unmatched_layers": [list(u) for u in unmatched],
              "unmatched_ms": sum(f + b for _, f, b in unmatched),
              "spec_layers_without_time": without,
              "conv_fc_coverage": coverage}
    run = gpu_run_row(run_id=run_id, model=model, device=device, known=known,
                  framework="caffe (caffe time)", batch_size=batch, source=cited,
                  importer="caffe_time", params=params, fwd_ms=fwd, bwd_ms=bwd, iter_ms=total,
                  layer_sum_ratio=ratio,
                  notes="caffe time: per-layer averages with a device sync per layer (small "
                        "layers inflated vs a fused iteration); unmatched log layers (input, "
                        "*_split) are in params_json and in the whole-pass times")
    return CaffeTimeImport(frame("runs", [run]), frame("layer_timings", rows),
                           tuple(r["layer"] for r in rows), unmatched,
                           tuple(without), coverage, batch, basis)

