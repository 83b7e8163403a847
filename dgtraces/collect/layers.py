"""Caffe-``time``-style per-layer forward/backward timing on the CPU -> ``runs`` +
``layer_timings``.

Per repeat, two passes are made back to back (interleaved, so drift hits both alike):

* **layer-wise pass**: layers run one by one in execution order, each on *detached* copies of
  its inputs that require grad (the data input does not: Caffe's propagate_down is false
  there), keeping each layer's local graph; then each layer's backward runs in reverse order
  with its upstream gradient (summed over consumers, like Caffe's Split layers; the summing
  itself is not timed). Every call is timed with ``time.perf_counter``.
* **whole pass**: the normal fused forward, ``loss.backward()`` and an SGD-momentum step.

Self-consistency: ``layer_sum_ratio`` = sum over layers of (median fwd + median bwd) over
(median whole fwd + median whole bwd); outside [0.9, 1.1] the run is stored with
``flagged=True`` and a ``flag_reason``, never dropped or silently kept.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dgtraces.tables.runrow import runs_row

from ..models import get_spec
from . import env, gpu

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

Progress = Callable[[int, int, str], None]


@dataclass
class LayerTrace:
    """Result of one collection: a one-row ``runs`` frame and its ``layer_timings``."""

    runs: "pd.DataFrame"
    layer_timings: "pd.DataFrame"
    device: dict | None = None  # the devices row of a GPU run (datasheet figures if known)

    @property
    def run_id(self) -> str:
        return str(self.runs["run_id"].iloc[0])

    def frames(self) -> dict[str, "pd.DataFrame"]:
        return {"runs": self.runs, "layer_timings": self.layer_timings}


def layerwise_pass(net, x, labels, fwd: dict, bwd: dict, clock=None, precision=None
                   ) -> float:
    """One instrumented iteration; appends seconds to ``fwd[name]``/``bwd[name]``.
    Returns the wall time of the whole instrumented iteration (seconds). ``clock`` marks
    times (host clock by default; CUDA events on a GPU, read after one sync at the end);
    ``precision`` wraps each layer's forward in its autocast."""
    import torch

    clock = clock or gpu.CpuClock()
    cast = precision.autocast if precision is not None else contextlib.nullcontext
    marks_f: list[tuple[str, object, object]] = []
    marks_b: list[tuple[str, object, object]] = []
    start = clock.mark()
    blobs = {"data": x}
    local = {}
    for name in net.order:
        bottoms = net.bottoms[name]
        inputs = [blobs[b].detach().requires_grad_(b != "data") for b in bottoms]
        t0 = clock.open(("fwd", name))
        with cast():
            out = net.run_layer(name, inputs, labels)
        marks_f.append((name, t0, clock.close(("fwd", name))))
        blobs[name] = out
        local[name] = (inputs, out)
    del blobs  # like the fused pass, free each activation once its consumers' backward ran
    grads = {name: torch.tensor(w, device=x.device) for name, w in net.loss_weights.items()}
    params = net.layer_params()
    for name in reversed(net.order):
        inputs, out = local.pop(name)
        upstream = grads.pop(name, None)
        if upstream is None:  # output consumed by nobody (not the case in the shipped specs)
            continue
        wanted = [t for t in inputs if t.requires_grad] + params.get(name, [])
        t0 = clock.open(("bwd", name))
        got = torch.autograd.grad(out, wanted, upstream.to(out.dtype))
        marks_b.append((name, t0, clock.close(("bwd", name))))
        got = iter(got)
        for b, inp in zip(net.bottoms[name], inputs, strict=True):
            if inp.requires_grad:
                g = next(got)
                grads[b] = grads[b] + g if b in grads else g
        for p, g in zip(params.get(name, []), got, strict=True):
            p.grad = g if p.grad is None else p.grad + g.to(p.dtype)
    end = clock.mark()
    clock.sync()
    for marks, into in ((marks_f, fwd), (marks_b, bwd)):
        for name, t0, t1 in marks:
            into[name].append(clock.seconds(t0, t1))
    return clock.seconds(start, end)


def whole_pass(net, opt, x, labels, sync=None, clock=None, precision=None
               ) -> tuple[float, float, float, float]:
    """One normal training iteration; returns (fwd, bwd, sync, update) seconds, where
    ``sync()`` (e.g. waiting for gradient allreduces) runs between backward and update.
    With ``precision`` amp the forward runs under autocast and a GradScaler scales the
    loss and steps the optimizer."""
    clock = clock or gpu.CpuClock()
    scaler = precision.scaler() if precision is not None else None
    cast = precision.autocast if precision is not None else contextlib.nullcontext
    t0 = clock.mark()
    with cast():
        loss = net(x, labels)
    t1 = clock.mark()
    (scaler.scale(loss) if scaler is not None else loss).backward()
    t2 = clock.mark()
    if sync is not None:
        sync()
    t3 = clock.mark()
    if scaler is not None:
        scaler.step(opt)
        scaler.update()
    else:
        opt.step()
    t4 = clock.mark()
    clock.sync()
    return (clock.seconds(t0, t1), clock.seconds(t1, t2), clock.seconds(t2, t3),
            clock.seconds(t3, t4))


def prepare(model: str, batch_size: int, threads: int, aux: bool = False, seed: int = 0,
            target: "gpu.Target | None" = None):
    """Check arguments, set threads, build the net, optimizer and a synthetic batch (on
    ``target``'s device)."""
    torch = env.require_torch("layer collection")
    get_spec(model)  # UNKNOWN_MODEL before any work
    env.positive_int("batch size", batch_size)
    env.positive_int("threads", threads)
    torch.set_num_threads(int(threads))
    torch.set_flush_denormal(True)
    from . import net as tnet

    where = gpu.place(target) if target is not None else "cpu"
    net = tnet.build(model, aux=aux, seed=seed).to(where)
    net.train()
    opt = torch.optim.SGD(net.parameters(), lr=1e-4, momentum=0.9)
    x, labels = tnet.synthetic_batch(net, batch_size, seed=seed)
    return net, opt, x.to(where), labels.to(where)


@dataclass(frozen=True)
class Setup:
    """How one collection runs: arguments plus the device, clock and precision."""

    model: str
    batch_size: int
    repeats: int
    warmup: int
    threads: int
    aux: bool
    seed: int
    target: "gpu.Target"
    precision: str

    def clock(self):
        return gpu.clock_for(self.target)

    def amp(self) -> "gpu.Precision":
        return gpu.Precision(self.precision, "cuda" if gpu.place(self.target) != "cpu"
                             else "cpu")


def collect_layers(model: str, batch_size: int, *, repeats: int = 10, warmup: int = 2,
                   threads: int = 1, aux: bool = False, seed: int = 0,
                   device: str = "cpu", precision: str = "fp32",
                   progress: Progress | None = None) -> LayerTrace:
    """Measure per-layer and whole-model times of ``model``; see the module docstring.
    ``device`` ``cuda[:N]`` times with CUDA events (NO_CUDA at once where there is none);
    ``precision`` ``amp`` (GPU only) runs forward passes under fp16 autocast."""
    get_spec(model)  # UNKNOWN_MODEL / BAD_INPUT before anything else
    env.positive_int("batch size", batch_size)
    env.positive_int("threads", threads)
    env.positive_int("repeats", repeats)
    env.nonneg_int("warmup", warmup)
    target = gpu.parse_device(device)
    gpu.check_precision(precision, target)
    torch = (gpu.require_cuda("collect layers --device cuda", target.index) if target.cuda
             else env.require_torch("layer collection"))
    setup = Setup(model, int(batch_size), int(repeats), int(warmup), int(threads), aux, seed,
                  target, precision)
    with process_state_kept(torch), gpu.on_device(target, torch):
        return _measure(setup, progress)


@contextlib.contextmanager
def process_state_kept(torch):
    """Leave the calling process as it was after :func:`prepare` (intra-op threads, and
    FTZ/DAZ: process-global CPU state under which later float code, e.g. Hypothesis,
    cannot represent subnormals)."""
    threads_before = torch.get_num_threads()
    try:
        yield
    finally:
        torch.set_flush_denormal(False)
        torch.set_num_threads(threads_before)


def _measure(st: Setup, progress) -> LayerTrace:
    net, opt, x, labels = prepare(st.model, st.batch_size, st.threads, st.aux, st.seed,
                                  st.target)
    clock, amp = st.clock(), st.amp()
    load_before = env.loadavg()
    started = env.utc_now()
    fwd: dict[str, list[float]] = {n: [] for n in net.order}
    bwd: dict[str, list[float]] = {n: [] for n in net.order}
    whole: list[tuple[float, ...]] = []
    instrumented: list[float] = []
    total = st.warmup + st.repeats
    gc.collect()
    gc.disable()
    try:
        for i in range(total):
            keep = i >= st.warmup
            f, b = (fwd, bwd) if keep else ({n: [] for n in net.order},
                                            {n: [] for n in net.order})
            opt.zero_grad(set_to_none=True)
            wall = layerwise_pass(net, x, labels, f, b, clock, amp)
            opt.zero_grad(set_to_none=True)
            w = whole_pass(net, opt, x, labels, clock=clock, precision=amp)
            if keep:
                instrumented.append(wall)
                whole.append(w)
            gc.collect()
            if progress:
                progress(i + 1, total, "warmup" if not keep else "timed")
    finally:
        gc.enable()
    return _tables(net, st, fwd, bwd, whole, instrumented, load_before, started)


def _device_info(st: Setup) -> tuple[str, str, dict, dict | None, str]:
    """(device key, kind, params_json additions, devices entry, where-text) of a setup."""
    if not st.target.cuda:
        return env.DEVICE, "cpu", {}, None, env.cpu_model()
    import torch

    from dgtraces.reference.devices import device_entry

    meta = gpu.gpu_metadata(torch, st.target.index)
    entry = device_entry(meta["gpu"], meta["gpu_memory_gb"])
    meta.update({"device_row": entry, "timing": "CUDA events around each layer call (each "
                 "opened behind a GPU spin as long as the host's launch of that call, so "
                 "the pair times the GPU's work, not the host's dispatch) and each phase, "
                 "read after one synchronize per pass",
                 "amp": "torch.autocast fp16 per layer forward; fused pass with GradScaler; "
                        "layer-wise backward unscaled" if st.precision == "amp" else None})
    return entry["device"], "gpu", meta, entry, f"{meta['gpu']} ({st.target.label})"


def _tables(net, st: Setup, fwd, bwd, whole, instrumented, load_before, started
            ) -> LayerTrace:
    ms = 1000.0
    rows = []
    layer_sum = 0.0
    for name in net.order:
        f = env.stats([s * ms for s in fwd[name]])
        b = env.stats([s * ms for s in bwd[name]]) if bwd[name] else None
        layer_sum += f[0] + (b[0] if b else 0.0)
        rows.append({"layer": name, "fwd_ms": f[0], "fwd_p10_ms": f[1], "fwd_p90_ms": f[2],
                     "bwd_ms": b[0] if b else None, "bwd_p10_ms": b[1] if b else None,
                     "bwd_p90_ms": b[2] if b else None, "comm_ms": None, "n": f[3]})
    wf = env.stats([w[0] * ms for w in whole])
    wb = env.stats([w[1] * ms for w in whole])
    wu = env.stats([w[3] * ms for w in whole])
    wi = env.stats([sum(w) * ms for w in whole])
    ratio = layer_sum / (wf[0] + wb[0]) if wf[0] + wb[0] > 0 else None
    flagged, reason = env.consistency_flag(ratio)
    device, kind, gpu_info, entry, where = _device_info(st)
    run_id = env.new_id("pytorch", st.model, f"b{st.batch_size}",
                        f"t{st.threads}" if kind == "cpu" else f"{device}-{st.precision}")
    info = env.environment(st.threads)
    info.update({
        "repeats": st.repeats, "warmup": st.warmup, "aux": st.aux, "seed": st.seed,
        "loadavg_before": load_before, "loadavg_after": env.loadavg(),
        "started_utc": started, "optimizer": "SGD(lr=1e-4, momentum=0.9)",
        "whole_p10_p90_ms": {"fwd": wf[1:3], "bwd": wb[1:3], "update": wu[1:3],
                             "iter": wi[1:3]},
        "instrumented_iter_ms": env.stats([s * ms for s in instrumented])[0],
        "method": "layer-wise detached-input fwd then reverse-order bwd per layer; "
                  "whole fused pass interleaved",
        **gpu_info,
    })
    what = "PyTorch CPU" if kind == "cpu" else f"PyTorch CUDA {st.precision}"
    run = runs_row(
        run_id=run_id, model=st.model, device=device, device_kind=kind,
        host=env.cpu_model(), framework=env.framework(), precision=st.precision,
        batch_size=st.batch_size, threads=st.threads, cores=env.cores(),
        provenance="measured",
        source=(f"dgtraces collect layers: {what}, synthetic input, median of "
                f"{st.repeats} repeats after {st.warmup} warm-up on {where}"),
        collector_version=env.collector_version("collect.layers"),
        timestamp_utc=env.utc_now(), fwd_ms=wf[0], bwd_ms=wb[0],
        update_ms=wu[0], iter_ms=wi[0], layer_sum_ratio=ratio,
        flagged=flagged, flag_reason=reason, params=info,
        notes="aux classifiers included" if st.aux else None)
    lt = env.frame([{"run_id": run_id, **r} for r in rows])
    return LayerTrace(env.frame([run]), lt, entry)
