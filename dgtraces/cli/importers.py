"""``dgtraces import NAME``: recorded elsewhere -> table CSVs, one subcommand per entry of
the importer registry (:data:`dgtraces.importers.registry.IMPORTERS`), whose name and help
come from there (:func:`importer_command`); the options and the summary printed are
declared here, once per importer. Everything they print comes from the files read (GPU,
layer, op and scope names), so it is printed through :func:`dgtraces.cli.echo` (inert).

Each subcommand writes ``<table>.csv`` files into ``--out`` (named after their tables, so
``dgtraces validate OUT/*.csv`` checks them) and never touches data/.
"""

from __future__ import annotations

import re

import click

from dgtraces.errors import Code

from . import OutPath, echo, model_option

OUT = click.option("--out", required=True, type=OutPath(writes=("{}/*.csv",), file_okay=False),
                   help="Folder for the <table>.csv files.")
FORCE = click.option("--force", is_flag=True, help="Overwrite existing table files in --out.")


def _write(frames: dict, out: str, force: bool) -> None:
    from dgtraces.tables.schema import KEYS
    from dgtraces.tables.write import write_tables

    from ..errors import DgtracesError

    for name, df in frames.items():  # e.g. the same log given twice
        key = [c for c in KEYS.get(name, ()) if c in df.columns]
        if key and df.duplicated(subset=key).any():
            raise DgtracesError(f"{name}: the inputs repeat rows (same {', '.join(key)}); give "
                                "each log once", code=Code.DUPLICATE)
    # the importers validated their frames already (each table alone: a layer_timings
    # import may reference runs of another file)
    paths = write_tables(out, frames, fmt="csv", validate=False, into_existing=True,
                         overwrite=force)
    for path, df in zip(paths, frames.values(), strict=False):
        echo(f"wrote {path}  ({len(df)} rows)")


def _group_help() -> str:
    from dgtraces.importers.registry import IMPORTERS

    return ("Import traces recorded elsewhere (" + ", ".join(i.reads for i in IMPORTERS)
            + ") as table CSVs.")


@click.group("import", help=_group_help())
def import_group() -> None:
    pass


def importer_command(name: str):
    """``dgtraces import NAME``: the subcommand of registry entry ``name`` (its help)."""
    from dgtraces.importers.registry import importer

    entry = importer(name)
    return import_group.command(entry.name, help=entry.help)


def _load(name: str):
    """The function registry entry ``name`` names (imported on use)."""
    from dgtraces.importers.registry import importer

    return importer(name).load()


@importer_command("kineto")
@click.argument("trace", type=click.Path(dir_okay=False))
@model_option(required=True)
@click.option("--batch-size", default=None, type=int,
              help="Per-device batch (required with scopes; automap reads it from the ops).")
@click.option("--run-id", default=None,
              help="Default: kineto-<model>-<file stem>-<sha256 prefix>.")
@click.option("--device", default=None, help="Device key (default cpu; required for GPU).")
@click.option("--map", "map_path", default=None, type=click.Path(dir_okay=False),
              help="CSV scope,layer mapping module/annotation scopes to layers.")
@click.option("--source", default=None, help="Where the trace comes from (citation).")
@click.option("--precision", default="fp32", show_default=True)
@OUT
@FORCE
def kineto(trace, model, batch_size, run_id, device, map_path, source, precision, out,
           force) -> None:
    import_trace = _load("kineto")

    res = import_trace(trace, model, batch_size=batch_size, run_id=run_id, device=device,
                       map_path=map_path, source=source, precision=precision)
    run = res.runs.iloc[0]
    echo(f"{len(res.layers)} layer(s) over {res.iterations} iteration(s); mapped fwd "
         f"{res.mapped_fwd_ms:.3f} ms, bwd {res.mapped_bwd_ms:.3f} ms of "
         f"{res.trace_bwd_ms:.3f} ms traced backward; layer sum ratio "
         f"{run['layer_sum_ratio']:.3f}" + ("  FLAGGED" if run["flagged"] else ""))
    if res.coverage is not None:
        share = f"{100 * res.kernel_share:.1f}%" if res.kernel_share is not None else "n/a"
        echo(f"automap ({res.time_basis}): {100 * res.coverage:.1f}% of the spec's "
             f"conv/fc/bn layers mapped; mapped share of the steps' kernel time {share}")
    un = res.unmapped
    echo(f"unmapped: {un.ops} op(s), {un.time_ms:.3f} ms ({100 * un.share:.1f}% of "
         f"attributed + unmapped time)")
    for name, count, ms in un.names[:15]:
        echo(f"  {ms:10.3f} ms  x{count:<5} {name}")
    if len(un.names) > 15:
        echo(f"  ... and {len(un.names) - 15} more op name(s)")
    if un.scopes:
        echo("scopes matching no layer: " + ", ".join(un.scopes[:20]))
    if res.unscoped:
        more = f" ... and {len(res.unscoped) - 20} more" if len(res.unscoped) > 20 else ""
        echo(f"layers without scope (no row): {len(res.unscoped)} of "
             f"{len(res.unscoped) + len(res.layers)}: " + ", ".join(res.unscoped[:20])
             + more)
    _write(res.frames(), out, force)


@importer_command("bcaffe")
@click.argument("log", type=click.Path(dir_okay=False))
@model_option(default="googlenet", show_default=True)
@click.option("--run-id", default=None,
              help="Default: bcaffe-<model>-<file stem>, plus -<sha256 prefix> for a log that "
                   "is not a shipped one.")
@click.option("--source", default=None, help="Citation; required unless a shipped log.")
@click.option("--device", default=None, help="Required unless a shipped log (k80 inferred).")
@click.option("--batch-size", default=None, type=int, help="Required unless a shipped log.")
@click.option("--workers", default=None, type=int)
@OUT
@FORCE
def bcaffe(log, model, run_id, source, device, batch_size, workers, out, force) -> None:
    import_log = _load("bcaffe")

    res = import_log(log, model, run_id=run_id, source=source, device=device,
                     batch_size=batch_size, workers=workers)
    echo(f"{res.blocks_total} block(s): {res.blocks_zero} all-zero skipped, "
         f"{res.blocks_duplicate} re-print(s) merged, {res.blocks_used} used; "
         f"{res.padded_blobs} blob(s) 64-padded; {len(res.layer_timings)} layers")
    if res.inferred:
        echo("INFERRED (not in the log): " + ", ".join(
            f"{k}={v}" for k, v in res.inferred.items()))
    if res.ignored_lines:
        echo(f"ignored {res.ignored_lines} non-blob line(s)")
    _write(res.frames(), out, force)


@importer_command("osu")
@click.argument("logs", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--workers", default=None, type=int,
              help="Process count for logs without that column (default: from the name).")
@click.option("--source", default=None, help="Citation; required unless a shipped log.")
@click.option("--interconnect", default=None, help="Default: unknown (B-Caffe cluster).")
@OUT
@FORCE
def osu(logs, workers, source, interconnect, out, force) -> None:
    from dgtraces.importers.osu import INTERCONNECT

    import_log = _load("osu")

    def header(log, res) -> str:
        how = " (from the file name)" if res.workers_from_name else ""
        return f"{log}: {len(res.comm)} sizes, {res.workers} processes{how}"

    _comm_imports(logs, lambda log: import_log(log, source=source, workers=workers,
                                               interconnect=interconnect or INTERCONNECT),
                  header, lambda f: (f"{f.min_bytes}-{f.max_bytes} B: alpha {f.alpha_us:.2f} "
                                     f"us, {f.bandwidth_gb_s:.3f} GB/s, r2 {f.r2:.3f}"),
                  out, force)


def _comm_imports(logs, run, header, describe_fit, out, force) -> None:
    """Import each log (``run``), report it and its fits, write comm + comm_fits."""
    import pandas as pd

    comm, fits = [], []
    for log in logs:
        res = run(log)
        echo(header(log, res))
        for f in res.comm_fits.itertuples():
            echo("  " + describe_fit(f))
        for note in res.notes:
            echo(f"  note: {note}")
        comm.append(res.comm)
        fits.append(res.comm_fits)
    _write({"comm": pd.concat(comm, ignore_index=True),
            "comm_fits": pd.concat(fits, ignore_index=True)}, out, force)


@importer_command("nccl-tests")
@click.argument("logs", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--collective", default=None,
              type=click.Choice(["allreduce", "allgather", "broadcast", "reduce",
                                 "reduce_scatter"]),
              help="Default: from the <name>_perf in the log or file name, else inferred "
                   "from the columns (busbw/algbw for the ranks, redop, root); a name, "
                   "given or found, that the columns contradict is refused.")
@click.option("--interconnect", default=None,
              help="Link name, e.g. nvlink4 or ib-ndr (default: <gpu>-x<ranks>-intra-node).")
@click.option("--source", default=None, help="Citation (default: file name and sha256).")
@OUT
@FORCE
def nccl_tests(logs, collective, interconnect, source, out, force) -> None:
    import_log = _load("nccl-tests")

    def header(log, res) -> str:
        runs = "" if len(res.blocks) < 2 else (
            f" ({len(res.blocks)} runs, at lines " + ", ".join(
                f"{b.line} ({b.ranks} ranks)" for b in res.blocks) + ")")
        return (f"{log}: {res.collective}, {res.ranks} ranks on {res.hosts} host(s), "
                f"{res.gpu} (device {res.device}), {len(res.comm) // 2} sizes{runs}; "
                f"collective {res.collective_how}")

    def describe_fit(f) -> str:
        placement = "in-place" if "; in-place;" in f.source else "out-of-place"
        block = re.search(r"; (block \d+) of \d+", f.source)
        placement = f"{block[1]}, {placement}" if block else placement
        return (f"{placement}: alpha {f.alpha_us:.2f} us, {f.bandwidth_gb_s:.2f} GB/s, "
                f"r2 {f.r2:.3f}")

    _comm_imports(logs, lambda log: import_log(log, collective=collective,
                                               interconnect=interconnect, source=source),
                  header, describe_fit, out, force)


@importer_command("published")
@OUT
@FORCE
def published(out, force) -> None:
    published_tables = _load("published")

    _write(published_tables(), out, force)


GPU_OPTIONS = (
    model_option(required=True),
    click.option("--batch-size", default=None, type=int,
                 help="Default: from the file (echoed prototxt / activation bytes)."),
    click.option("--device", default=None, help="Device key; required unless a shipped file."),
    click.option("--run-id", default=None, help="Default: <importer>-<model>-<sha256 prefix>."),
    click.option("--source", default=None, help="Citation; required unless a shipped file."),
)


def _gpu_command(name: str, argument: str):
    """``dgtraces import NAME ARGUMENT`` with the shared GPU-importer options."""
    def decorate(fn):
        for option in reversed((click.argument(argument, type=click.Path(dir_okay=False)),
                                *GPU_OPTIONS, OUT, FORCE)):
            fn = option(fn)
        return importer_command(name)(fn)
    return decorate


def _unmatched(label: str, items, extra: str = "") -> None:
    echo(f"{label}: {len(items)}" + (": " + ", ".join(items[:20]) if items else "")
         + (f" ... and {len(items) - 20} more" if len(items) > 20 else "") + extra)


@_gpu_command("caffe-time", "log")
def caffe_time(log, model, batch_size, device, run_id, source, out, force) -> None:
    import_log = _load("caffe-time")

    res = import_log(log, model, batch_size=batch_size, device=device, run_id=run_id,
                     source=source)
    echo(f"{len(res.matched)} layer(s) matched; conv/fc coverage "
         f"{100 * res.coverage:.1f}%; batch {res.batch_size} ({res.batch_basis})")
    _unmatched("log layers not in the spec", [f"{n} ({f + b:.3f} ms)" for n, f, b in
                                              res.unmatched])
    _unmatched("spec layers without time", list(res.spec_without_time))
    _write(res.frames(), out, force)


@_gpu_command("pipedream", "graph")
def pipedream(graph, model, batch_size, device, run_id, source, out, force) -> None:
    import_graph = _load("pipedream")

    res = import_graph(graph, model, batch_size=batch_size, device=device, run_id=run_id,
                       source=source)
    echo(f"{len(res.mapped)} node(s) mapped; batch {res.batch_size} ({res.batch_basis})")
    _unmatched("nodes without a spec layer", [f"{n} {op} ({f + b:.3f} ms)" for n, op, f, b in
                                              res.unmatched])
    _unmatched("spec layers without time", list(res.spec_without_time))
    _write(res.frames(), out, force)


@importer_command("deepbench")
@OUT
@FORCE
def deepbench(out, force) -> None:
    import_deepbench = _load("deepbench")

    res = import_deepbench()
    echo(f"{res.convs} conv and {res.gemms} GEMM rows; {res.matched} of {res.convs} "
         "conv rows are exactly a layer of a shipped model (keyed to layers), the "
         "rest stay without the key")
    _write(res.frames(), out, force)
