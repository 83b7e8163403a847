"""``dgtraces collect layers|comm|ssgd``: measure traces with PyTorch on this machine."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from dgtraces.errors import Code

from ..predict.policy_registry import COLLECTED_POLICIES
from . import NEW_FOLDER, OutPath, model_option
from .options import deprecated_alias, split_list

if TYPE_CHECKING:  # pragma: no cover
    from dgtraces.tables.write import Format


def _progress(label: str):
    """A rich progress bar and the (done, total, what) callback that drives it."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(),
                   TextColumn("{task.completed}/{task.total} {task.fields[what]}"),
                   TimeElapsedColumn(), transient=False)
    task = bar.add_task(label, total=None, what="")

    def update(done: int, total: int, what: str) -> None:
        bar.update(task, completed=done, total=total, what=what)

    return bar, update


def _written(paths) -> None:
    for p in paths:
        click.echo(f"wrote {p}")


@click.group()
def collect() -> None:
    """Measure layer timings, collectives and S-SGD iterations (needs dgtraces[collect])."""


def _aux_only_with_aux(model: str, aux: bool) -> None:
    from ..models.registry import entry

    if aux and not entry(model).aux:
        from ..errors import DgtracesError

        raise DgtracesError(f"--aux applies to models with auxiliary classifiers only, not "
                            f"{model}", code=Code.BAD_INPUT)


def _eager_device(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """--device: a CUDA device on a machine without one is NO_CUDA at once, before click
    reports a missing option or anything is measured (an eager callback)."""
    from ..collect.gpu import parse_device, require_cuda

    if ctx.resilient_parsing:
        return value
    target = parse_device(value)
    if target.cuda:
        require_cuda(f"collect {ctx.info_name} --device {value}", target.index)
    return value


def _eager_backend(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """--backend nccl: NO_CUDA at once on a machine without CUDA (an eager callback; the
    collector checks the GPU count against --workers later)."""
    if value == "nccl" and not ctx.resilient_parsing:
        from ..collect.gpu import require_cuda

        require_cuda(f"collect {ctx.info_name} --backend nccl")
    return value


def _backend_option():
    return click.option("--backend", type=click.Choice(["gloo", "nccl"]), default="gloo",
                        show_default=True, is_eager=True, callback=_eager_backend,
                        help="nccl: one process per GPU (needs --workers GPUs)")


def _fmt(csv: bool) -> Format:
    return "csv" if csv else "parquet"


@collect.command()
@model_option(required=True)
@click.option("--batch-size", type=int, required=True)
@click.option("--repeats", type=int, default=10, show_default=True)
@click.option("--warmup", type=int, default=2, show_default=True)
@click.option("--threads", type=int, default=1, show_default=True, help="intra-op threads")
@click.option("--aux", is_flag=True, help="GoogLeNet: include the auxiliary classifiers.")
@click.option("--device", default="cpu", show_default=True, is_eager=True,
              callback=_eager_device, help="cpu, cuda or cuda:N (CUDA-event timing on that GPU)")
@click.option("--precision", type=click.Choice(["fp32", "amp"]), default="fp32",
              show_default=True, help="amp: fp16 autocast + GradScaler (GPU only)")
@click.option("--profile", "profile_trace", default=None,
              type=OutPath(writes=("{}",), dir_okay=False),
              help="also capture the run with torch.profiler into this Chrome trace "
                   "(.json or .json.gz) and add its imported run to the output")
@click.option("--out", required=True, type=OutPath(writes=NEW_FOLDER, file_okay=False),
              help="new folder for runs.parquet + layer_timings.parquet")
@click.option("--csv", is_flag=True, help="Write CSV instead of Parquet.")
def layers(model, batch_size, repeats, warmup, threads, aux, device, precision,
           profile_trace, out, csv) -> None:
    """Caffe-time-style per-layer forward/backward timing plus the whole iteration."""
    from dgtraces.io.files import check_out
    from dgtraces.tables.write import write_tables

    from ..collect.gpu import check_precision, parse_device
    from ..collect.layers import collect_layers
    from ..models import get_spec
    from ..values import positive_int

    _aux_only_with_aux(model, aux)
    get_spec(model)
    positive_int("batch size", batch_size)
    target = parse_device(device)
    check_precision(precision, target)
    # a CUDA --device without CUDA was refused (NO_CUDA) by its eager callback
    check_out(out)  # before measuring: a used --out must not cost the measurement
    if not target.cuda:  # MISSING_DEPENDENCY before any progress bar is drawn
        from ..collect.env import require_torch

        require_torch("layer collection")
    bar, update = _progress(f"{model} b{batch_size} {device} {precision}")
    with bar:
        trace = collect_layers(model, batch_size, repeats=repeats, warmup=warmup,
                               threads=threads, aux=aux, device=device, precision=precision,
                               progress=update)
    frames = trace.frames()
    prof = None
    if profile_trace:
        import pandas as pd

        from ..collect.profile import profile_layers

        prof = profile_layers(model, batch_size, profile_trace, device=device,
                              precision=precision, iterations=max(2, min(repeats, 10)),
                              warmup=warmup, threads=threads, aux=aux)
        frames = {"runs": pd.concat([trace.runs, prof.runs], ignore_index=True),
                  "layer_timings": pd.concat([trace.layer_timings, prof.layer_timings],
                                             ignore_index=True)}
    run = trace.runs.iloc[0]
    _written(write_tables(out, frames, fmt=_fmt(csv)))
    click.echo(f"run {run.run_id}: fwd {run.fwd_ms:.1f} ms, bwd {run.bwd_ms:.1f} ms, "
               f"update {run.update_ms:.1f} ms, layer_sum_ratio {run.layer_sum_ratio:.3f}")
    if run.flagged:
        click.echo(f"FLAGGED: {run.flag_reason}", err=True)
    if prof is not None:
        p = prof.runs.iloc[0]
        click.echo(f"profiled run {p.run_id}: fwd {p.fwd_ms:.1f} ms, bwd {p.bwd_ms:.1f} ms, "
                   f"layer_sum_ratio {p.layer_sum_ratio:.3f} (trace {profile_trace})")
    if trace.device is not None:
        _device_note(trace.device)


def _device_note(entry: dict) -> None:
    """Print the GPU's devices entry for contribution.yaml."""
    known = "datasheet figures known" if entry["datasheet"] else "no datasheet figures"
    click.echo(f"device {entry['device']} ({entry['name']}; {known}); for contribution.yaml "
               f"if the store lacks it:\n  devices:\n    - {{device: {entry['device']}, "
               f"kind: gpu, name: {entry['name']}}}")


@collect.command()
@_backend_option()
@click.option("--workers", type=int, default=2, show_default=True)
@click.option("--sizes", default="4B..64MiB", show_default=True,
              help="range LO..HI (x --factor) or a comma list")
@click.option("--factor", type=int, default=4, show_default=True)
@click.option("--repeats", type=int, default=20, show_default=True)
@click.option("--warmup", type=int, default=3, show_default=True)
@click.option("--collectives", default="allreduce,broadcast", show_default=True,
              help="Comma list.")
@deprecated_alias("--collective", "--collectives", "collectives", multiple=True)
@click.option("--out", required=True, type=OutPath(writes=NEW_FOLDER, file_okay=False))
@click.option("--csv", is_flag=True, help="Write CSV instead of Parquet.")
def comm(backend, workers, sizes, factor, repeats, warmup, collectives, out, csv) -> None:
    """Time collectives across message sizes on 127.0.0.1; fit alpha-beta with R^2."""
    from dgtraces.io.files import check_out
    from dgtraces.tables.write import write_tables

    from ..collect.comm import collect_comm, parse_sizes

    collectives = split_list(collectives)
    parsed = parse_sizes(sizes, factor)
    check_out(out)
    click.echo(f"{len(parsed)} sizes x {len(collectives)} collective(s), {workers} workers")
    frames = collect_comm(workers=workers, sizes=parsed, repeats=repeats, warmup=warmup,
                          backend=backend, collectives=tuple(collectives))
    _written(write_tables(out, frames, fmt=_fmt(csv)))
    fitted = set()
    if "comm_fits" in frames:
        for fit in frames["comm_fits"].itertuples():
            fitted.add(fit.collective)
            click.echo(f"{fit.collective}: alpha {fit.alpha_us:.1f} us, "
                       f"{fit.bandwidth_gb_s:.3f} GB/s, R^2 {fit.r2:.3f}")
    for coll in sorted(set(collectives) - fitted):
        click.echo(f"{coll}: no alpha-beta fit (one size, or times that do not grow with "
                   "size: bandwidth unresolved); its points are in comm")


@collect.command()
@model_option(required=True)
@click.option("--workers", type=int, default=2, show_default=True)
@click.option("--threads-per-worker", type=int, default=1, show_default=True)
@click.option("--policies", default="naive", show_default=True,
              help="Comma list of " + " | ".join((*COLLECTED_POLICIES, "ddp"))
                   + " (ddp = torch DistributedDataParallel, stored as bucketed).")
@deprecated_alias("--policy", "--policies", "policies", multiple=True)
@_backend_option()
@click.option("--bucket-mib", type=float, default=25.0, show_default=True,
              help="Bucket size of the bucketed and ddp policies (MiB).")
@deprecated_alias("--bucket-mb", "--bucket-mib", "bucket_mib", type=float)
@click.option("--iters", type=int, default=10, show_default=True)
@click.option("--warmup", type=int, default=2, show_default=True)
@click.option("--batch-size", type=int, default=8, show_default=True)
@click.option("--aux", is_flag=True, help="GoogLeNet: include the auxiliary classifiers.")
@click.option("--trace", type=click.Path(file_okay=False), default=None,
              help="output folder of a `collect layers` run (threads=1, same model and batch)"
                   " whose run id becomes trace_run_id")
@click.option("--out", required=True, type=OutPath(writes=NEW_FOLDER, file_okay=False))
@click.option("--csv", is_flag=True, help="Write CSV instead of Parquet.")
def ssgd(model, workers, threads_per_worker, policies, backend, bucket_mib, iters, warmup,
         batch_size, aux, trace, out, csv) -> None:
    """Real synchronous data-parallel SGD (gloo on localhost, or NCCL on GPUs) -> iterations
    rows."""
    from dgtraces.io.files import check_out
    from dgtraces.tables.write import write_tables

    from ..collect.ssgd import collect_ssgd

    _aux_only_with_aux(model, aux)
    policies = _policies(policies)
    check_out(out)
    runs = trace_id = None
    if trace:
        from ..collect.ssgd import find_trace

        runs, trace_id = find_trace(trace, model, batch_size)
    df = collect_ssgd(model, workers=workers, threads_per_worker=threads_per_worker,
                      policies=policies, bucket_mb=bucket_mib, iters=iters, warmup=warmup,
                      batch_size=batch_size, aux=aux, trace_run_id=trace_id,
                      backend=backend)
    _written(write_tables(out, {"iterations": df}, fmt=_fmt(csv),
                          known={"runs": runs} if runs is not None else None))
    for row in df.itertuples():
        click.echo(f"{row.policy}: {row.iter_ms:.1f} ms/iter "
                   f"(p10 {row.iter_p10_ms:.1f}, p90 {row.iter_p90_ms:.1f}, n {row.n})")


def _policies(text) -> tuple[str, ...]:
    """--policies as a tuple of collected policy names (UNKNOWN values: BAD_INPUT)."""
    from dgtraces.values import bad_value as bad

    names = split_list(text)
    for name in names:
        if name not in (*COLLECTED_POLICIES, "ddp"):
            raise bad("policies", "not a policy the collector implements",
                      " | ".join((*COLLECTED_POLICIES, "ddp")), name)
    if not names:
        raise bad("policies", "no policy", "at least one", text)
    return names
