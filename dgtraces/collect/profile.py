"""``collect layers --profile TRACE``: the fused iteration captured with torch.profiler
(Kineto) and imported with :func:`dgtraces.importers.kineto.import_trace`, so the profiler's
per-layer figures sit beside the CUDA-event (or host-clock) ones of the same machine.

Each layer's forward runs in a ``record_function`` scope named like the layer (what the
kineto importer maps without a MAP file); on a GPU every scope ends with a device
synchronize, because the importer uses host wall times. Backward ops are attributed by the
importer through autograd sequence numbers. Iterations are ``ProfilerStep#N`` annotations
(``schedule(wait=0, warmup=W, active=N)``). The trace is written to TRACE (gzip when the name
ends in ``.gz``); the imported run is a separate ``runs`` row (``kineto-...`` id).
"""

from __future__ import annotations

import gzip
import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from . import env, gpu

if TYPE_CHECKING:  # pragma: no cover
    from ..importers.kineto import KinetoImport


def scoped_iteration(net, opt, x, labels, sync, precision) -> None:
    """One training iteration with a ``record_function`` scope per layer forward."""
    from torch.profiler import record_function

    blobs = {"data": x}
    with precision.autocast():
        for name in net.order:
            with record_function(name):
                blobs[name] = net.run_layer(name, [blobs[b] for b in net.bottoms[name]],
                                            labels)
                sync()
        loss = sum(w * blobs[name] for name, w in net.loss_weights.items())
    loss.backward()
    sync()
    opt.step()
    opt.zero_grad(set_to_none=True)


def _export(prof, trace_path: Path) -> None:
    """Write the Chrome trace to ``trace_path`` atomically (gzip for ``.gz``)."""
    from dgtraces.io.files import atomic_file

    with tempfile.TemporaryDirectory(prefix="dgtraces-kineto-") as tmp:
        raw = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(raw))
        with atomic_file(trace_path) as out, open(raw, "rb") as src:
            if trace_path.name.endswith(".gz"):
                with gzip.GzipFile(fileobj=out, mode="wb", mtime=0) as dst:
                    shutil.copyfileobj(src, dst)
            else:
                shutil.copyfileobj(src, out)


def profile_layers(model: str, batch_size: int, trace_path: str | os.PathLike, *,
                   device: str = "cpu", precision: str = "fp32", iterations: int = 5,
                   warmup: int = 2, threads: int = 1, aux: bool = False, seed: int = 0
                   ) -> "KinetoImport":
    """Profile ``iterations`` scoped iterations (after ``warmup``) and import the trace."""
    from ..importers.kineto import import_trace
    from .layers import prepare, process_state_kept

    env.positive_int("iterations", iterations)
    env.nonneg_int("warmup", warmup)
    target = gpu.parse_device(device)
    gpu.check_precision(precision, target)
    torch = (gpu.require_cuda("collect layers --profile --device cuda", target.index)
             if target.cuda else env.require_torch("layer profiling"))
    from torch.profiler import ProfilerActivity, profile, schedule

    trace_path = Path(trace_path)
    with process_state_kept(torch), gpu.on_device(target, torch):
        net, opt, x, labels = prepare(model, batch_size, threads, aux, seed, target)
        where = gpu.place(target)
        amp = gpu.Precision(precision, "cuda" if where != "cpu" else "cpu")
        sync = gpu.synchronizer(target, torch)
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if target.cuda
                                               else [])
        with profile(activities=activities,
                     schedule=schedule(wait=0, warmup=warmup, active=iterations),
                     on_trace_ready=lambda p: _export(p, trace_path)) as prof:
            for _ in range(warmup + iterations):
                scoped_iteration(net, opt, x, labels, sync, amp)
                prof.step()
    key = env.DEVICE
    if target.cuda:
        from dgtraces.reference.devices import device_key

        key = device_key(torch.cuda.get_device_name(target.index))
    return import_trace(trace_path, model, batch_size=batch_size, device=key,
                        precision=precision,
                        source=(f"dgtraces collect layers --profile: torch.profiler trace of "
                                f"{iterations} iterations after {warmup} warm-up on "
                                f"{target.label} ({key}), per-layer record_function scopes"
                                + (", synchronized per layer" if target.cuda else "")))
