"""``dgtraces sweep`` and ``validate-predictor``: many predictions at once (a vectorised grid
of configurations; every measured or published iterations row)."""

from __future__ import annotations

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
    io_overlap_option,
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
@click.option("--intra", default="pcie3", show_default=True, help="Comma list of presets.")
@click.option("--inter", default="10gbe", show_default=True, help="Comma list of presets.")
@click.option("--algorithms", default=None,
              help="Comma list of collective algorithms: " + ", ".join(ALGOS + NCCL_ALGOS)
                   + ". [default: auto for GPU devices when NCCL's model knows the links, "
                     "else ring]")
@click.option("--nics-per-node", default=1, show_default=True, type=int,
              help="NICs (rails) per node, for auto/nccl-*.")
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
@release_option("Release for traces and comm fits ('latest': the newest).")
@h2d_link_option
@click.option("--staging", default=None, help="Link of the copies around each message.")
@click.option("--staging-passes", default=2, show_default=True, type=int)
@click.option("--shared-cpu", is_flag=True, help="Collective on the compute cores.")
@click.option("--calibrate-img-s", type=float, default=None,
              help="Scale compute so that 1 worker runs at this many img/s (one model and "
                   "one batch size only; lets datasheet-only devices such as a100 sweep).")
@framework_option()
@overheads_options
@click.option("--out", type=OutPath(dir_okay=False), default=None,
              help="Write all rows to .parquet or .csv.")
def sweep(models, device, batch_sizes, workers_, gpn, intra, inter, algorithms, nics_per_node,
          policies, io_overlap, servers, bucket_mib, link_alpha_us, link_bandwidth_gb_s, release,
          h2d_link, staging,
          staging_passes, shared_cpu, calibrate_img_s, framework, overheads, iteration_cv,
          host_decode_img_s, out) -> None:
    """Predict every combination of the lists (vectorised); modelled numbers."""
    from rich.console import Console
    from rich.progress import Progress

    from ..predict.frameworks import get_framework
    from ..predict.overheads import Overheads, apply_overheads_frame, check_sweep_measurements
    from ..predict.sweep import Grid, run_sweep

    profile = get_framework(framework)
    spec = Overheads.parse(overheads, iteration_cv=iteration_cv,
                           host_decode_img_s=host_decode_img_s)
    check_sweep_measurements(spec)  # before any work
    given = explicit(click.get_current_context(), {"policies": "policy",
                                                   "bucket_mib": "bucket_bytes",
                                                   "algorithms": "algorithm",
                                                   "shared_cpu": "blocking"})
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
    workers_list, gpn_list = _ints(workers_, "--workers"), _ints(gpn, "--gpus-per-node")
    from ..comm.nccl import check_nvlink_alias

    check_nvlink_alias(device, split_option(intra))  # "nvlink" is the V100's (#36)
    why = None
    if algorithms is None:  # the device's default (comm.algorithm_default)
        from itertools import product

        from ..comm.algorithm_default import default_algorithm

        choice = default_algorithm(device, split_option(intra), split_option(inter),
                                   list(product(workers_list, gpn_list)),
                                   overridden=(link_alpha_us, link_bandwidth_gb_s) != (None,
                                                                                       None))
        algorithms, why = choice.algorithm, choice.why

    grid = Grid(models=models, batch_sizes=_ints(batch_sizes, "--batch-sizes"),
                workers=workers_list, gpus_per_node=gpn_list, intra=split_option(intra),
                inter=split_option(inter), nics_per_node=nics_per_node,
                algorithms=split_option(algorithms), policies=split_option(policies),
                io_overlap={"off": (False,), "on": (True,), "both": (False, True)}[io_overlap],
                bucket_bytes=bucket_bytes, first_bucket_bytes=first,
                cycle_ms=cycle, servers=servers,
                alpha_us=link_alpha_us, gbps=gbps_option(link_bandwidth_gb_s), staging=staging,
                staging_passes=staging_passes, shared_cpu=shared_cpu,
                release=release or "latest")
    if out:
        check_suffix(out, "--out", (".parquet", ".csv"))
    console = Console(stderr=True)
    if grid.size() > max_sweep():
        from dgtraces.values import bad_value as bad

        raise bad("sweep", f"{grid.size():,} configurations; the limit is {max_sweep():,} "
                  f"(about {SWEEP_MEMORY_MIB} MiB at the measured {SWEEP_BYTES_PER_CONFIG} "
                  "bytes per configuration): split the sweep", f"<= {max_sweep():,}",
                  grid.size())
    console.print(f"{grid.size():,} configurations")
    if why is not None:
        console.print(f"algorithm: {algorithms} ({why})")
    with Progress(console=console, transient=True) as bar:
        task = bar.add_task("sweep", total=grid.size())
        df = run_sweep(grid, _sweep_loader(device, release, h2d_link, calibrate_img_s, grid),
                       progress=lambda n: bar.advance(task, n))
    df = apply_overheads_frame(df, spec)
    df["framework"] = "none" if profile is None else profile.key
    if io_overlap == "both" and (df["trace_io_ms"] == 0).any():
        console.print("[yellow]warning:[/yellow] --io-overlap both with traces whose io time "
                      "is 0: their on and off rows are identical (give --io-ms or traces "
                      "with an io phase)")
    if out:
        _write_frame(df, out)
        click.echo(f"wrote {len(df)} rows to {out}")
    best = df.sort_values("throughput_img_s", ascending=False).head(10)
    click.echo(f"{len(df)} configurations (modelled); top by throughput:")
    click.echo(best[["model", "batch_size", "workers", "gpus_per_node", "intra", "inter",
                     "algorithm", "policy", "io_overlap", "iter_ms", "throughput_img_s",
                     "efficiency"]].to_string(index=False, float_format=lambda v: f"{v:.4g}"))


# Peak memory per configuration of run_sweep (x2: the printed top-10 sorts a copy), measured by
# benchmarks/sweep_memory.py (ResNet-50, 100k and 400k configurations); the guard keeps a
# sweep within SWEEP_MEMORY_MIB.
SWEEP_BYTES_PER_CONFIG = 850  # run_sweep ~410 (200k: 413, 800k: 380); the top-10 sort copies it
SWEEP_MEMORY_MIB = 2048


def max_sweep() -> int:
    return SWEEP_MEMORY_MIB * 2**20 // SWEEP_BYTES_PER_CONFIG


def _sweep_loader(device, release, h2d_link, calibrate_img_s, grid):
    """Trace loader of ``sweep``: ``resolve`` as ``predict`` does, calibrated when asked."""
    from dgtraces.values import bad_value as bad

    from ..predict import Policy, calibrate, resolve

    if calibrate_img_s is not None and (len(grid.models) > 1 or len(grid.batch_sizes) > 1):
        raise bad("calibrate_img_s", "one 1-worker throughput fits one model and one batch "
                  "size", "a single --models and --batch-sizes value", calibrate_img_s)

    from dgtraces.store.release import open_if_any

    rel = open_if_any(release)  # opened once: every (model, batch) trace reads it

    def load(model: str, batch: int):
        trace = resolve(model, device, batch, release=rel, h2d_link=h2d_link,
                        shape_only=calibrate_img_s is not None)
        return trace if calibrate_img_s is None else calibrate(trace, calibrate_img_s,
                                                               Policy())
    return load


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
              help="Also predict every published multi-GPU row (shipped "
                   "reference/scaling_published.csv): per-row and per-source error and MAPE.")
@click.option("--plot", type=OutPath(dir_okay=False), default=None,
              help="Write a parity plot PNG to this path (default: no plot).")
@click.option("--out", type=OutPath(dir_okay=False), default=None,
              help="Write per-row predictions to .csv or .parquet.")
@click.option("--json", "as_json", is_flag=True,
              help="Print the headline, per-model, per-policy and per-row results as JSON "
                   "(with --published: {measured, published}).")
@framework_option(("auto",))
@overheads_options
@click.option("--markdown", is_flag=True,
              help="Print the docs' tables of every framework/overheads variant against the "
                   "pre-registered rule (docs/predictor-overheads.md) and stop.")
def validate_predictor(release, published, plot, out, as_json, framework, overheads,
                       iteration_cv, host_decode_img_s, markdown) -> None:
    """Predict every measured/published iterations row; print MAPE; optional parity plot.
    With --published, the published multi-GPU results too (--out then writes those rows);
    --framework auto gives each published row its declared profile."""
    from dgtraces.evaluation.validation import parity_plot, validate
    from dgtraces.predict.overheads import Overheads

    if framework != "auto":
        from ..predict.frameworks import get_framework

        get_framework(framework, extra=("auto",))
    spec = Overheads.parse(overheads, iteration_cv=iteration_cv,
                           host_decode_img_s=host_decode_img_s)
    if markdown:
        from dgtraces.evaluation.overheads import (
            FRAMEWORK_CHOICES,
            OVERHEAD_CHOICES,
            evaluate_terms,
        )

        from .progress import working

        with working("predictor variants (framework x overheads)",
                     total=len(FRAMEWORK_CHOICES) * len(OVERHEAD_CHOICES)) as advance:
            ev = evaluate_terms(release, on_step=advance)
        click.echo(ev.to_markdown())
        return
    if out:
        check_suffix(out, "--out", (".parquet", ".csv"))
    if plot:
        check_suffix(plot, "--plot", (".png",))
    res = validate(release, spec)
    pub = None
    if published:
        from dgtraces.evaluation.published import validate_published

        pub = validate_published(release, framework, spec)
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
