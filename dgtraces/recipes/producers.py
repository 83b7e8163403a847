"""Producers that recipes name: ``producer(ctx, **kwargs) -> {table: DataFrame}``.

Each one calls the same library functions as the CLI command its step names. They may
record facts for the release notes in ``ctx.facts`` (e.g. how many traces were built).
Heavy dependencies (pandas, torch) are imported inside the functions.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from dgtraces.errors import Code

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from .build import Context

Frames = dict[str, "pd.DataFrame"]


def layers(ctx: "Context", models: Sequence[str]) -> Frames:
    """The ``layers`` rows of registry models (computed from their specs)."""
    from ..models import layers_frame

    return {"layers": layers_frame(tuple(models))}


def published(ctx: "Context") -> Frames:
    """Every published reference table (`dgtraces import published`)."""
    from ..importers.published import published_tables

    return dict(published_tables())


def gpu_traces(ctx: "Context") -> Frames:
    """``runs`` + ``layer_timings`` of every shipped real GPU trace (caffe time, PipeDream,
    Kineto; provenance published): `dgtraces import caffe-time|pipedream|kineto`."""
    from ..importers.gpu_sources import gpu_tables

    return dict(gpu_tables())


CONTRIBUTIONS = Path(__file__).resolve().parents[1] / "contributions"


def contribution(ctx: "Context", folder: str) -> Frames:
    """The tables of a contribution shipped in ``dgtraces/contributions/<folder>`` (CSV, as
    ``dgtraces contribute`` validated and staged them), read with the same strict reader and
    schema: the rows a ``dgtraces release`` of that staged contribution adds."""
    from dgtraces.tables.checks import read_file, validate_frame

    base = CONTRIBUTIONS / folder
    out = {}
    for table in ("runs", "layer_timings", "iterations", "comm"):
        path = base / f"{table}.csv"
        if path.is_file():
            out[table] = validate_frame(table, read_file(path, table), file=path.name)
    ctx.facts["contributed_runs"] = int(len(out["runs"]))
    return out


def deepbench_kernels(ctx: "Context", sheets: Sequence[str]) -> Frames:
    """The ``kernels`` rows of the named shipped DeepBench sheets (`dgtraces import
    deepbench` imports all of them)."""
    from ..importers.deepbench import import_deepbench

    res = import_deepbench(tuple(sheets))
    ctx.facts.update(kernel_convs=res.convs, kernel_gemms=res.gemms, kernels_keyed=res.matched)
    return res.frames()


def kernels3_params(ctx: "Context") -> Frames:
    """kernels-3 fitted once (K1-K4 on the release's ``kernels`` rows, stage F on its
    published per-layer GPU runs and calibration.csv) and its pre-registered evaluation: the
    ``method_params`` table (docs/reconstruction-kernels3.md). Minutes; progress on stderr."""
    from dgtraces.evaluation.kernels3 import method_params

    kernels, runs, timings = (ctx.frame(t) for t in ("kernels", "runs", "layer_timings"))
    df = method_params(kernels, runs, timings, ctx.progress)
    ctx.facts.update(method_params=len(df))
    return {"method_params": df}


def datasheet_devices(ctx: "Context", devices: Sequence[str]) -> Frames:
    """``devices`` rows of the named datasheet devices (``reference/devices*.csv``)."""
    from .. import reference
    from ..errors import DgtracesError
    from ..importers.published import devices_frame

    df = devices_frame(reference.DEVICE_FILES)
    missing = sorted(set(devices) - set(df["device"]))
    if missing:
        raise DgtracesError(f"no datasheet row for {missing}", code=Code.UNKNOWN_DEVICE)
    return {"devices": df[df["device"].isin(list(devices))].reset_index(drop=True)}


def reconstructions(ctx: "Context", devices: Sequence[str],
                    batches: Mapping[str, Sequence[int]]) -> Frames:
    """Reconstructed traces of every device x model x batch (x amp where calibrated)."""
    import pandas as pd

    from ..reconstruct import method_id, reconstruct_trace, runs_frame
    from ..reconstruct.roofline.calibration import calibrate

    recs = []
    for device in devices:
        precisions = ("fp32", "amp") if calibrate(device).amp is not None else ("fp32",)
        for model, sizes in batches.items():
            for b in sizes:
                for p in precisions:
                    recs.append(reconstruct_trace(device, model, b, p,
                                                  timestamp_utc=ctx.stamp))
                    ctx.progress(f"{device} {model} b{b} {p}")
    ctx.facts.update(reconstructed=len(recs), method=method_id())
    return {"runs": runs_frame(recs),
            "layer_timings": pd.concat([r.layer_timings for r in recs], ignore_index=True)}


def cpu_devices(ctx: "Context", threads: Sequence[int] | None = None) -> Frames:
    """This CPU's measured peaks, one ``devices`` row per thread count of the base
    release's measured CPU runs (under the shared measurement lock)."""
    import pandas as pd

    from ..collect.env import measure_lock
    from ..reconstruct.roofline.cpu import device_row, measure_peaks

    runs = ctx.base_frames()["runs"]
    cpu = runs[(runs["provenance"] == "measured") & (runs["device_kind"] == "cpu")]
    cores = int(cpu["cores"].max())
    threads = threads or sorted(int(t) for t in cpu["threads"].dropna().unique())
    with measure_lock(f"dgtraces recipe {ctx.version}"):
        peaks = [measure_peaks(t) for t in threads]
    return {"devices": pd.DataFrame([device_row(p, cores) for p in peaks])}


def cpu_collection(ctx: "Context", models: Sequence[str],
                   layer_batches: Mapping[str, tuple[Sequence[int], Sequence[int]]],
                   repeats: int, warmup: int, comm_repeats: int, comm_sizes: str,
                   ssgd_batch: int, ssgd_iters: int, ssgd_warmup: int, bucket_mb: float,
                   policies: Sequence[str]) -> Frames:
    """The measured CPU collection: layer timings per model, batch and thread count, a
    2-worker comm sweep, 2-worker S-SGD iterations per model. Every step's tables are also
    written to ``ctx.work`` for inspection."""
    import pandas as pd

    from dgtraces.tables.write import write_tables

    from ..collect.comm import collect_comm, parse_sizes
    from ..collect.env import measure_lock
    from ..collect.layers import collect_layers
    from ..collect.ssgd import collect_ssgd

    parts: dict[str, list] = {"runs": [], "layer_timings": [], "iterations": [],
                              "comm": [], "comm_fits": []}
    trace_ids: dict[tuple[str, int], str] = {}

    def keep(name: str, frames: Frames) -> None:
        runs = pd.concat(parts["runs"]) if parts["runs"] else None
        write_tables(Path(ctx.work) / name, frames,
                     known={"runs": runs} if runs is not None else None)
        for table, df in frames.items():
            parts[table].append(df)
        ctx.progress(name)

    started = time.time()
    with measure_lock(f"dgtraces recipe {ctx.version}"):
        for model in models:
            for threads, sizes in zip((1, 2), layer_batches[model], strict=True):
                for b in sizes:
                    tr = collect_layers(model, b, repeats=repeats, warmup=warmup,
                                        threads=threads)
                    if threads == 1:
                        trace_ids[(model, b)] = tr.run_id
                    keep(f"layers-{model}-b{b}-t{threads}", tr.frames())
        keep("comm", collect_comm(workers=2, sizes=parse_sizes(comm_sizes),
                                  repeats=comm_repeats))
        for model in models:
            df = collect_ssgd(model, workers=2, threads_per_worker=1, policies=tuple(policies),
                              bucket_mb=bucket_mb, iters=ssgd_iters, warmup=ssgd_warmup,
                              batch_size=ssgd_batch,
                              trace_run_id=trace_ids.get((model, ssgd_batch)))
            keep(f"ssgd-{model}", {"iterations": df})
    ctx.facts["elapsed_s"] = time.time() - started
    return {t: pd.concat(dfs, ignore_index=True) for t, dfs in parts.items() if dfs}


def reconstruction_fragment(ctx: "Context") -> list[Path]:
    """After v0.3.0: rewrite cards/fragments/reconstruction.md from the new release."""
    from dgtraces.evaluation.fragment import write
    from dgtraces.evaluation.reconstruction import build_report
    from dgtraces.store.release import Release

    rep = build_report(ctx.version, frames=Release.open(ctx.version, ctx.root).tables(),
                       loo=True)
    return write(rep, ctx.fragments)
