"""``dgtraces sweep`` and ``validate-predictor``: many predictions at once (a vectorised grid
of configurations; every measured or published iterations row)."""

from __future__ import annotations

import math

import click

from ..comm.collectives import ALGORITHMS as ALGOS  # the collective registry
from ..comm.nccl import MODEL_NAMES  # NCCL's tuning model (auto, nccl-*)
from ..predict.policy_registry import POLICY_NAMES as POLICIES  # the policy registry
from . import OutPath, echo_json, model_list
from .options import (
    deprecated_alias,
    explicit,
    framework_option,
    gbit_to_gbyte,
    inter_help,
    inter_list,
    intra_help,
    io_overlap_option,
    link_fit_option,
    nccl_options,
    nics_option,
    overheads_options,
    release_option,
)
from .predict import bucket_bytes_option, check_suffix, gbps_option, h2d_link_option, split_option

NCCL_ALGOS = tuple(MODEL_NAMES)


def _ints(text: str, option: str) -> tuple[int, ...]:
    """'1,2,4' or '1-64' or '2-64:2' -> ints; anything else is BAD_INPUT naming ``option``."""
    from dgtraces.values import bad_value as bad

    out = []
    parts = [x.strip() for x in str(text).split(",")]
    if any(not x for x in parts) and len(parts) > 1:
        raise bad(option, "empty item in the list", "e.g. 1,2,4", text)
    for part in filter(None, parts):
        try:
            if "-" not in part:
                out.append(int(part))
                continue
            span, _, step_text = part.partition(":")
            lo, hi = (int(x) for x in span.split("-", 1))
            step = int(step_text or 1)
        except ValueError:
            raise bad(option, "not an integer or a range LO-HI[:STEP]",
                      "e.g. 1,2,4 or 1-64 or 2-64:2", part) from None
        if step < 1:
            raise bad(option, "range step must be >= 1", ">= 1", part)
        if lo > hi:
            raise bad(option, "empty range (LO > HI)", "LO <= HI", part)
        out.extend(range(lo, hi + 1, step))
    if not out:
        raise bad(option, "no values", "at least one integer", text)
    out = list(dict.fromkeys(out))  # "1-4,2" lists 2 once: one row per configuration
    return tuple(out)


@click.command()
@click.option("--models", default="resnet50", show_default=True, callback=model_list,
              help="Comma list of registry models.")
@click.option("--device", required=True, help="Device key of the traces.")
@click.option("--batch-sizes", default="64", show_default=True, help="Comma list.")
@click.option("--workers", "workers_", default="1,2,4,8,16", show_default=True,
              help="Comma list or ranges (1-64, 2-64:2).")
@click.option("--gpus-per-node", "gpn", default="1", show_default=True, help="Comma list.")
@click.option("--intra", default="pcie3", show_default=True, help=intra_help(plural=True))
@click.option("--inter", default="10gbe", show_default=True, help=inter_help(plural=True))
@click.option("--algorithms", default=None,
              help="Comma list of collective algorithms: " + ", ".join(ALGOS + NCCL_ALGOS)
                   + ". [default: auto for GPU devices when NCCL's model knows the links, "
                     "else ring]")
@nics_option
@nccl_options
@click.option("--policies", default=",".join(POLICIES), show_default=True,
              help="Comma list of policies: " + ", ".join(POLICIES) + ".")
@io_overlap_option(("off", "on", "both"))
@click.option("--servers", default=1, show_default=True, type=int)
@click.option("--bucket-mib", default=25.0, show_default=True, type=float,
              help="Bucket size of the bucketed policy (MiB).")
@deprecated_alias("--bucket-mb", "--bucket-mib", "bucket_mib", type=float)
@click.option("--link-alpha-us", type=float, default=None,
              help="Override every link's latency (us).")
@click.option("--link-bandwidth-gb-s", type=float, default=None,
              help="Override every link's bandwidth (GB/s, as bandwidth_gb_s).")
@deprecated_alias("--link-gbps", "--link-bandwidth-gb-s", "link_bandwidth_gb_s", type=float,
                  convert=gbit_to_gbyte)
@link_fit_option()
@release_option("Release for traces and comm fits ('latest': the newest).")
@h2d_link_option
@click.option("--staging", default=None, help="Link of the copies around each message.")
@click.option("--staging-passes", default=2, show_default=True, type=int)
@click.option("--shared-cpu", is_flag=True, help="Collective on the compute cores.")
@click.option("--calibrate-img-s", type=float, default=None,
              help="Scale compute so that 1 worker runs at this many img/s (one model and "
                   "one batch size only; lets datasheet-only devices such as a100 sweep).")
@framework_option(wins="--policies/--bucket-mib/--algorithms")
@overheads_options
@click.option("--out", type=OutPath(writes=("{}",), dir_okay=False), default=None,
              help="Write all rows to .parquet or .csv.")
def sweep(models, device, batch_sizes, workers_, gpn, intra, inter, algorithms, nics_per_node,
          nccl, nccl_time, policies, io_overlap, servers, bucket_mib, link_alpha_us,
          link_bandwidth_gb_s, link_fit, release, h2d_link, staging,
          staging_passes, shared_cpu, calibrate_img_s, framework, overheads, iteration_cv,
          host_decode_img_s, out) -> None:
    """Predict every combination of the lists (vectorised); modelled numbers."""
    from rich.console import Console
    from rich.progress import Progress

    from ..predict.overheads import Overheads, apply_overheads_frame, check_sweep_measurements
    from ..predict.sweep import PER_ROW, Grid, run_sweep
    from ..reference.frameworks import choose_framework

    choose_framework(framework, None)  # a bad name fails before any work
    spec = Overheads.parse(overheads, iteration_cv=iteration_cv,
                           host_decode_img_s=host_decode_img_s)
    check_sweep_measurements(spec)  # before any work
    given = explicit(click.get_current_context(), {"policies": "policy",
                                                   "bucket_mib": "bucket_bytes",
                                                   "algorithms": "algorithm",
                                                   "shared_cpu": "blocking"})
    batches = _ints(batch_sizes, "--batch-sizes")
    workers_list, gpn_list = _ints(workers_, "--workers"), _ints(gpn, "--gpus-per-node")
    if out:
        check_suffix(out, "--out", (".parquet", ".csv"))
    lists = (models, batches, workers_list, gpn_list, split_option(intra), inter_list(inter),
             split_option(algorithms or PER_ROW), split_option(policies),
             range(2 if io_overlap == "both" else 1))
    _check_size(math.prod(len(x) for x in lists))  # before any trace is read
    traces, chosen = _sweep_traces(device, release, h2d_link, calibrate_img_s, models, batches,
                                   framework)
    profile = chosen.profile
    first, cycle = None, 0.0
    bucket_bytes = bucket_bytes_option(bucket_mib)
    if profile is not None:  # the profile's defaults; explicit options win
        first, cycle = profile.first_bucket_bytes, profile.cycle_ms
        if "policy" not in given:
            policies = profile.policy
        if "bucket_bytes" not in given and profile.bucket_bytes is not None:
            bucket_bytes = profile.bucket_bytes  # in bytes (tf-mirrored's one pack: 2^62)
        if "blocking" not in given and profile.blocking:
            shared_cpu = True
        if "algorithm" not in given and profile.ps_placement == "host-cpu":
            algorithms = "ps"
    from ..comm.fabrics import check_nvlink_alias

    check_nvlink_alias(device, split_option(intra))  # "nvlink" is the V100's (#36)
    intras, inters = split_option(intra), inter_list(inter)
    fit = None
    if link_fit is not None:  # one fitted link in place of both presets (docs/collectives.md)
        intras, inters, fit = _fitted(link_fit, release, intras, inters)
    grid = Grid(models=models, batch_sizes=batches,
                workers=workers_list, gpus_per_node=gpn_list, intra=intras,
                inter=inters, nics_per_node=nics_per_node, nccl=nccl,
                nccl_time=nccl_time,
                algorithms=split_option(algorithms or PER_ROW),
                policies=split_option(policies),
                io_overlap={"off": (False,), "on": (True,), "both": (False, True)}[io_overlap],
                bucket_bytes=bucket_bytes, first_bucket_bytes=first,
                cycle_ms=cycle, servers=servers,
                alpha_us=link_alpha_us, gbps=gbps_option(link_bandwidth_gb_s), staging=staging,
                staging_passes=staging_passes, shared_cpu=shared_cpu,
                release=release or "latest", device=next(iter(traces.values())).device,
                traces=traces)
    console = Console(stderr=True)
    _check_size(grid.size())
    console.print(f"{grid.size():,} configurations")
    if fit is not None:
        from dgtraces.io.terminal_text import inert

        console.print(inert(fit.note(split_option(intra)[0], split_option(inter)[0])),
                      markup=False, highlight=False)
    with Progress(console=console, transient=True) as bar:
        task = bar.add_task("sweep", total=grid.size())
        df = run_sweep(grid, progress=lambda n: bar.advance(task, n))
    df = apply_overheads_frame(df, spec)
    df["framework"] = "none" if profile is None else profile.key
    console.print(f"framework: {chosen.label}")
    counts = df.groupby(["algorithm", "algorithm_why"], sort=False).size()
    for r in counts.reset_index(name="rows").itertuples():  # per row (issue #35)
        console.print(f"algorithm: {r.algorithm} for {r.rows:,} rows ({r.algorithm_why})")
    if io_overlap == "both" and (df["trace_io_ms"] == 0).any():
        console.print("[yellow]warning:[/yellow] --io-overlap both with traces whose io time "
                      "is 0: their on and off rows are identical (give --io-ms or traces "
                      "with an io phase)")
    if out:
        _write_frame(df, out)
        click.echo(f"wrote {len(df)} rows to {out}")
    best = df.sort_values("throughput_img_s", ascending=False).head(10)
    click.echo(f"{len(df)} configurations (modelled); top by throughput:")
    from dgtraces.io.terminal_text import inert

    click.echo(inert(best[["model", "batch_size", "workers", "gpus_per_node", "intra", "inter",
                           "algorithm", "policy", "io_overlap", "iter_ms", "throughput_img_s",
                           "efficiency"]].to_string(index=False,
                                                    float_format=lambda v: f"{v:.4g}"),
                     keep_newlines=True))  # a --link-fit file name is the user's text


def _fitted(spec: str, release: str | None, intra: tuple, inter: tuple) -> tuple:
    """(intra, inter, LinkFit) of ``sweep --link-fit``: the fitted link, its source naming
    the presets it replaces, in place of both lists (one value each at most: several would
    give identical rows under different labels)."""
    from dgtraces.values import bad_value as bad

    from ..comm.linkfit import fit_link

    for option, values in (("--intra", intra), ("--inter", inter)):
        if len(values) > 1:
            raise bad(option, "--link-fit replaces both links: one preset at most",
                      "one value with --link-fit", ",".join(map(str, values)))
    fit = fit_link(spec, release)
    link = fit.replacing(intra[0], inter[0])
    return (link,), (link,), fit


# Peak memory per configuration of run_sweep (x2: the printed top-10 sorts a copy), measured by
# benchmarks/sweep_memory.py (ResNet-50, 100k and 400k configurations); the guard keeps a
# sweep within SWEEP_MEMORY_MIB.
SWEEP_BYTES_PER_CONFIG = 850  # run_sweep ~410 (200k: 413, 800k: 380); the top-10 sort copies it
SWEEP_MEMORY_MIB = 2048


def max_sweep() -> int:
    return SWEEP_MEMORY_MIB * 2**20 // SWEEP_BYTES_PER_CONFIG


def _check_size(size: int) -> None:
    """BAD_INPUT when a sweep of ``size`` configurations would pass the memory limit."""
    from dgtraces.values import bad_value as bad

    if size > max_sweep():
        raise bad("sweep", f"{size:,} configurations; the limit is {max_sweep():,} "
                  f"(about {SWEEP_MEMORY_MIB} MiB at the measured {SWEEP_BYTES_PER_CONFIG} "
                  "bytes per configuration): split the sweep", f"<= {max_sweep():,}", size)


def _sweep_traces(device, release, h2d_link, calibrate_img_s, models, batches, framework):
    """Every trace of ``sweep`` by (model, batch), resolved as ``predict`` does (calibrated
    when asked), and the framework profile: given, or the one all traces' runs imply (none when
    they imply different ones or none)."""
    from dgtraces.store.release import open_if_any
    from dgtraces.values import bad_value as bad

    from ..predict import Policy, calibrate, resolve
    from ..predict.trace import run_row
    from ..reference.frameworks import FrameworkChoice, choose_framework

    if calibrate_img_s is not None and (len(models) > 1 or len(batches) > 1):
        raise bad("calibrate_img_s", "one 1-worker throughput fits one model and one batch "
                  "size", "a single --models and --batch-sizes value", calibrate_img_s)
    rel = open_if_any(release)  # opened once: every (model, batch) trace reads it
    traces = {}
    for model in models:
        for batch in batches:
            trace = resolve(model, device, int(batch), release=rel, h2d_link=h2d_link,
                            shape_only=calibrate_img_s is not None)
            traces[(model, int(batch))] = (trace if calibrate_img_s is None
                                           else calibrate(trace, calibrate_img_s, Policy()))
    by_key: dict = {}
    for t in traces.values():
        c = choose_framework(framework, run_row(t.run_id, rel))
        by_key.setdefault(None if c.profile is None else c.profile.key, c)
    if len(by_key) == 1:
        return traces, next(iter(by_key.values()))
    return traces, FrameworkChoice(None, "not inferable: the traces imply different "
                                         f"profiles ({', '.join(map(str, by_key))})")


def _write_frame(df, out: str) -> None:
    import io

    from dgtraces.io.files import atomic_write_bytes

    buf = io.BytesIO()
    if out.lower().endswith(".csv"):
        buf.write(df.to_csv(index=False).encode())
    else:
        df.to_parquet(buf, index=False)
    atomic_write_bytes(out, buf.getvalue())


@click.command("validate-predictor")
@release_option("Release to validate against ('latest': the newest).")
@click.option("--published", is_flag=True,
              help="Also predict every published multi-GPU row the predictor can represent "
                   "(shipped reference/scaling/published_scaling.csv and "
                   "scaling_published.csv, mapped by evaluation/scaling_mapping.yaml): per "
                   "source and per framework, item 4's targets, the rest with the reason.")
@click.option("--plot", type=OutPath(writes=("{}",), dir_okay=False), default=None,
              help="Write a parity plot PNG to this path (default: no plot).")
@click.option("--out", type=OutPath(writes=("{}",), dir_okay=False), default=None,
              help="Write per-row predictions to .csv or .parquet.")
@click.option("--json", "as_json", is_flag=True,
              help="Print the headline, per-model, per-policy and per-row results as JSON "
                   "(with --published: {measured, published}).")
@framework_option("each published setup's declared profile (evaluation/scaling_mapping.yaml)",
                  wins=None)
@overheads_options
@nccl_options(default_means="each published setup's own release, docs/predictor-published.md")
@click.option("--markdown", is_flag=True,
              help="Print the docs' generated tables (the published evaluation at the "
                   "defaults and before them, the terms against the pre-registered rule; "
                   "docs/predictor-published.md, docs/predictor-overheads.md) and stop.")
def validate_predictor(release, published, plot, out, as_json, framework, overheads,
                       iteration_cv, host_decode_img_s, nccl, nccl_time, markdown) -> None:
    """Predict every measured/published iterations row; print MAPE; optional parity plot.
    With --published, the published multi-GPU results too (--out then writes those rows);
    --framework auto (the default) gives each published row its declared profile; the
    published rows run each setup's own NCCL release (docs/predictor-published.md) unless
    --nccl names one for every row (--nccl 2.7 --nccl-time tuning: the model before #34)."""
    from rich.console import Console
    from rich.progress import Progress

    from dgtraces.evaluation.validation import parity_plot, validate
    from dgtraces.predict.overheads import Overheads

    from ..reference.frameworks import AUTO, get_framework

    if framework != AUTO:
        get_framework(framework, extra=(AUTO,))
    spec = Overheads.parse(overheads, iteration_cv=iteration_cv,
                           host_decode_img_s=host_decode_img_s)
    console = Console(stderr=True)
    if markdown:
        from dgtraces.evaluation.overheads import (
            FRAMEWORK_CHOICES,
            OVERHEAD_CHOICES,
            docs_tables,
        )

        from .progress import working

        with working("predictor variants (framework x overheads)",
                     total=len(FRAMEWORK_CHOICES) * len(OVERHEAD_CHOICES)) as advance:
            blocks = docs_tables(release, on_step=advance, nccl=nccl, nccl_time=nccl_time)
        click.echo("### Published rows (docs/predictor-published.md)\n\n" + blocks["results"]
                   + "\n\n### Terms (docs/predictor-overheads.md)\n\n" + blocks["terms"])
        return
    if out:
        check_suffix(out, "--out", (".parquet", ".csv"))
    if plot:
        check_suffix(plot, "--plot", (".png",))
    res = validate(release, spec)
    pub = None
    if published:
        from dgtraces.evaluation.published import validate_published
        from dgtraces.evaluation.published_mapping import mapped_rows

        with Progress(console=console, transient=True) as bar:
            task = bar.add_task("published rows", total=len(mapped_rows()))
            pub = validate_published(release, framework, spec,
                                     on_step=lambda n: bar.advance(task, n), nccl=nccl,
                                     nccl_time=nccl_time)
    if plot:
        if pub is None:
            parity_plot(res, plot)
        else:
            from dgtraces.evaluation.published import published_plot

            published_plot(res, pub, plot)
    if out:
        _write_frame(res.rows if pub is None else pub.rows, out)
    if as_json:
        doc = res.to_dict() if pub is None else {"measured": res.to_dict(),
                                                  "published": pub.to_dict()}
        echo_json(doc)
        return
    click.echo(res.report())
    if spec.terms:
        click.echo(f"  overheads added after the DAG to every row: {spec.label} "
                   "(docs/predictor-overheads.md)")
    if pub is not None:
        click.echo("")
        click.echo(pub.report())
    if plot:
        click.echo(f"wrote parity plot {plot}")
