"""``dgtraces predict``: one DAG-model prediction of an S-SGD iteration, and the options and
value checks it shares with ``sweep`` (:mod:`.sweep`)."""

from __future__ import annotations

from collections.abc import Callable

import click

from dgtraces.errors import Code

from ..comm.collectives import ALGORITHMS as ALGOS  # the collective registry
from ..comm.fabrics import default_nics
from ..comm.nccl import MODEL_NAMES as NCCL_ALGOS  # NCCL's tuning model (auto)
from ..predict.policy_registry import POLICY_NAMES as POLICIES  # the policy registry
from ..predict.tracedef import H2D_LINK
from ..reference.devices import UNKNOWN_HOST_LINK
from . import OutPath, echo, echo_json, model_option
from .options import (
    deprecated_alias,
    explicit,
    framework_option,
    gbit_to_gbyte,
    inter_help,
    intra_help,
    io_overlap_option,
    link_fit_option,
    nccl_options,
    nics_option,
    overheads_options,
    release_option,
    split_list,
)

h2d_link_option = click.option(
    "--h2d-link", default=H2D_LINK, show_default=True,
    help=f"Host link of the modelled input copy of GPU traces: a link preset, or "
         f"'{H2D_LINK}' = the GPU's own host interface (dgtraces/reference/host_links.csv: "
         f"pcie3 for K80/P100/V100, pcie4 for A100, pcie5 for H100/H200; "
         f"{UNKNOWN_HOST_LINK} for a GPU without a row).")
io_ms_option = click.option("--io-ms", type=float, default=None,
                            help="Input read+decode time per batch.")
h2d_ms_option = click.option("--h2d-ms", type=float, default=None,
                             help="Host-to-device copy per batch (GPU default: fp32 input "
                                  "batch over --h2d-link).")


def with_phases(trace, io_ms: float | None, h2d_ms: float | None):
    """``trace`` with the ``--io-ms``/``--h2d-ms`` given on the command line (None: as
    resolved: stored, or the modelled copy of a GPU trace); ``predict`` and the exports read
    their traces through it, so they agree for the same options (#36)."""
    if io_ms is None and h2d_ms is None:
        return trace
    from dataclasses import replace

    from dgtraces.predict.tracedef import nonneg

    return replace(trace, io_ms=trace.io_ms if io_ms is None else nonneg(
                       "io_ms", _given("--io-ms", io_ms)),
                   h2d_ms=trace.h2d_ms if h2d_ms is None else nonneg(
                       "h2d_ms", _given("--h2d-ms", h2d_ms)))


def cluster_options(f):
    opts: list[Callable] = [
        click.option("--gpus-per-node", default=1, show_default=True, type=int),
        click.option("--algorithm", default=None,
                     type=click.Choice(ALGOS + tuple(NCCL_ALGOS)),
                     help="auto: NCCL's algorithm and protocol per message size "
                          "(docs/collectives.md); nccl-*: that NCCL algorithm forced. "
                          "[default: auto for GPU devices when NCCL's model knows the links, "
                          "else ring]"),
        nics_option,
        nccl_options,
        click.option("--servers", default=1, show_default=True, type=int,
                     help="Parameter servers (algorithm ps)."),
        click.option("--bucket-mib", default=25.0, show_default=True, type=float,
                     help="Bucket size of the bucketed policy (MiB)."),
        deprecated_alias("--bucket-mb", "--bucket-mib", "bucket_mib", type=float),
        click.option("--link-alpha-us", type=float, default=None,
                     help="Override every link's latency (us)."),
        click.option("--link-bandwidth-gb-s", type=float, default=None,
                     help="Override every link's bandwidth (GB/s, as bandwidth_gb_s)."),
        deprecated_alias("--link-gbps", "--link-bandwidth-gb-s", "link_bandwidth_gb_s",
                         type=float, convert=gbit_to_gbyte),
        release_option("Release for traces and comm fits ('latest': the newest)."),
        click.option("--staging", default=None,
                     help="Link of the copies around each message (cpu-memcpy, pcie3)."),
        click.option("--staging-passes", default=2, show_default=True, type=int,
                     help="Copies of each message over --staging."),
        click.option("--shared-cpu", is_flag=True,
                     help="The collective runs on the compute cores (no overlap)."),
        link_fit_option(),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


@click.command()
@model_option(default=None, help="[required unless --run-id]")
@click.option("--device", default=None,
              help="Device key (e.g. k80, v100, a CPU key). [required unless --run-id]")
@click.option("--batch-size", type=int, default=None,
              help="Per-worker batch size. [required unless --run-id]")
@click.option("--run-id", default=None, help="Use this stored run's layer trace.")
@click.option("--precision", default="fp32", show_default=True)
@click.option("--workers", default=1, show_default=True, type=int)
@click.option("--intra", default="pcie3", show_default=True, help=intra_help())
@click.option("--inter", default="10gbe", show_default=True, help=inter_help())
@click.option("--policy", default="wfbp", show_default=True, type=click.Choice(POLICIES))
@io_overlap_option()
@io_ms_option
@h2d_ms_option
@h2d_link_option
@click.option("--calibrate-img-s", type=float, default=None,
              help="Scale compute so that 1 worker runs at this many img/s.")
@click.option("--raw-layer-times", is_flag=True,
              help="Do not scale layer times to the run's whole-model medians.")
@cluster_options
@framework_option()
@overheads_options
@click.option("--timeline", type=OutPath(writes=("{}",), dir_okay=False), default=None,
              help="Write Chrome trace-event JSON (Perfetto) of one iteration.")
@click.option("--gantt", type=OutPath(writes=("{}",), dir_okay=False), default=None,
              help="Write a PNG Gantt chart of one iteration.")
@click.option("--kineto-dir", type=OutPath(writes=("{}/*.json",), file_okay=False), default=None,
              help="Write one Kineto trace per worker (Holistic Trace Analysis, Perfetto).")
@click.option("--json", "as_json", is_flag=True, help="Print the prediction as JSON.")
def predict(model, device, batch_size, run_id, precision, workers, intra, inter, policy,
            io_overlap, io_ms, h2d_ms, h2d_link, calibrate_img_s, raw_layer_times,
            gpus_per_node, algorithm, nics_per_node, nccl, nccl_time, servers, bucket_mib,
            link_alpha_us, link_bandwidth_gb_s,
            release, staging, staging_passes, shared_cpu, link_fit, framework, overheads,
            iteration_cv, host_decode_img_s, timeline, gantt, kineto_dir,
            as_json) -> None:
    """Predict one S-SGD iteration (modelled) from a stored or reconstructed layer trace.

    Give --model, --device and --batch-size (the best stored run is used, else a trace is
    reconstructed on the fly), or --run-id alone.

    \b
    Example (ResNet-50 on 2 nodes x 4 V100, PCIe inside a node, 10 GbE between):
      dgtraces predict --model resnet50 --device v100 --batch-size 64 --workers 8 \\
          --gpus-per-node 4 --intra pcie3 --inter 10gbe --policy mgwfbp --gantt gantt.png
    """
    from dataclasses import replace

    from dgtraces.values import bad_value as bad

    from ..predict import Cluster, Policy, calibrate, predict_trace, resolve
    from ..predict.captions import kind_of, requote
    from ..predict.overheads import Overheads, apply_overheads
    from ..predict.trace import run_row
    from ..reference.frameworks import apply_framework, choose_framework

    choose_framework(framework, None)  # a bad name fails before any work
    spec = Overheads.parse(overheads, iteration_cv=iteration_cv,
                           host_decode_img_s=host_decode_img_s)

    if servers != 1 and algorithm != "ps":
        raise bad("servers", "parameter servers need --algorithm ps", "1 without ps", servers)
    if timeline:
        check_suffix(timeline, "--timeline", (".json",))
    if gantt:
        check_suffix(gantt, "--gantt", (".png",))
    if run_id is None:
        for name, value in (("model", model), ("device", device), ("batch_size", batch_size)):
            if value is None:
                raise bad(name, "needed unless --run-id is given", "a value", None)
    else:
        for name, value in (("model", model), ("device", device), ("batch_size", batch_size),
                            ("precision", None if precision == "fp32" else precision)):
            if value is not None:
                raise bad(name, "a --run-id fixes model, device, batch size and precision",
                          "not given with --run-id", value)
    from dgtraces.store.release import open_if_any

    rel = open_if_any(release)  # opened once: the trace and a --link-fit read it
    trace = resolve(model, device, batch_size, precision=precision, run_id=run_id,
                    release=rel, whole=not raw_layer_times,
                    h2d_link=h2d_link if h2d_ms is None else None,
                    shape_only=calibrate_img_s is not None)
    trace = with_phases(trace, io_ms, h2d_ms)
    chosen = choose_framework(framework, run_row(trace.run_id, rel))  # given or inferred
    profile = chosen.profile
    pol = Policy(policy, io_overlap == "on", bucket_bytes_option(bucket_mib))
    given = explicit(click.get_current_context(), {"policy": "policy",
                                                   "bucket_mib": "bucket_bytes",
                                                   "algorithm": "algorithm"})
    _, pol = apply_framework(profile, Cluster(1), pol, given)  # before calibrating
    if calibrate_img_s is not None:
        trace = calibrate(trace, calibrate_img_s, pol)
    cluster, fit, presets = option_cluster(
        trace, rel, workers, gpus_per_node, intra, inter, nics_per_node, nccl, nccl_time,
        algorithm=algorithm, servers=servers, link_alpha_us=link_alpha_us,
        link_bandwidth_gb_s=link_bandwidth_gb_s, release=release, staging=staging,
        staging_passes=staging_passes, shared_cpu=shared_cpu, link_fit=link_fit)
    cluster = framework_cluster(profile, cluster, pol, given)
    pred, sched = predict_trace(trace, cluster, pol)
    if fit is not None:  # the fit and what it replaced, and a message beyond its range
        pred = replace(pred, notes=pred.notes + fit.notes(
            *presets, max((m.nbytes for m in sched.messages), default=0)))
    pred = replace(apply_overheads(pred, trace, spec), framework=chosen.describe())
    pred = replace(pred, notes=requote(pred.notes, kind_of(trace.device), spec.label,
                                       pred.cluster, None if profile is None else profile.key))
    if timeline:
        from ..predict.timeline import write_chrome_trace

        write_chrome_trace(timeline, sched, pred)
    if gantt:
        from ..predict.timeline import write_gantt

        write_gantt(gantt, sched, pred)
    if kineto_dir:
        from ..predict.kineto import write_kineto_dir

        write_kineto_dir(kineto_dir, sched, pred)
    from dgtraces.cli.reproduce import command_line, inputs

    from ..comm.nccl_versions import DEFAULT_VERSION
    from ..reference.devices import host_link

    ctx = click.get_current_context()
    used = {"bucket_mib": bucket_mib, "link_bandwidth_gb_s": link_bandwidth_gb_s,
            "release": pred.dataset_release,  # deprecated spellings applied, release pinned
            "device": device if device is None else pred.trace_device,  # V100 -> v100
            "algorithm": cluster.algorithm,  # the device's default, resolved
            "framework": "none" if profile is None else profile.key,  # as given or inferred
            "overheads": spec.label, "nccl": nccl or DEFAULT_VERSION,
            "h2d_link": host_link(trace.device)[0] if h2d_link == H2D_LINK else h2d_link}
    pred = replace(pred, inputs=inputs(ctx, used))
    # the pinned profile decides policy and bucket unless they were given
    decided = frozenset(() if profile is None else {
        name for name, field in (("policy", "policy"), ("bucket_mib", "bucket_bytes"))
        if field not in given})
    command = command_line(ctx, used, decided)
    if as_json:
        fitted = {} if fit is None else {"link_fit": fit.to_dict(*presets)}
        echo_json({**pred.to_dict(), **fitted, "reproduce": command})
        return
    _print_prediction(pred, timeline, gantt, kineto_dir, command)


def option_cluster(trace, rel, workers, gpus_per_node, intra, inter, nics_per_node, nccl,
                   nccl_time, *, algorithm=None, servers=1, link_alpha_us=None,
                   link_bandwidth_gb_s=None, release, staging=None, staging_passes=2,
                   shared_cpu=False, link_fit=None):
    """The cluster ``predict``'s options describe (the keyword defaults are its option
    defaults), before any framework profile: a link fit replaces both presets, the
    algorithm is ``--algorithm`` or the device's default, the NICs the preset's count. With
    the fit and the presets it replaced (None and (intra, inter) without --link-fit)."""
    from ..predict import Cluster

    fit, presets = None, (intra, inter)
    if link_fit is not None:
        from ..comm.linkfit import fit_link

        fit = fit_link(link_fit, rel)
        intra = inter = fit.replacing(*presets)  # both presets: docs/collectives.md
    choice = algorithm_for(trace.device, workers, gpus_per_node, intra, inter, algorithm,
                           link_alpha_us, link_bandwidth_gb_s, link_fit)
    cluster = Cluster(workers, gpus_per_node, intra, inter, choice.algorithm, servers,
                      link_alpha_us, gbps_option(link_bandwidth_gb_s), release or "latest", staging,
                      staging_passes, shared_cpu, default_nics(inter, nics_per_node), choice.why,
                      nccl, nccl_time)
    return cluster, fit, presets


def algorithm_for(device, workers, gpus_per_node, intra, inter, algorithm, link_alpha_us,
                  link_bandwidth_gb_s, link_fit):
    """The algorithm of ``predict``/``export-chakra``: ``--algorithm`` when given, else the
    default of the device (``comm.algorithm_default``)."""
    from ..comm.algorithm_default import default_algorithm
    from ..comm.fabrics import check_nvlink_alias

    check_nvlink_alias(device, [intra])  # "nvlink" is the V100's (#36)
    overridden = (link_alpha_us, link_bandwidth_gb_s, link_fit) != (None, None, None)
    return default_algorithm(device, [intra], [inter], [(workers, gpus_per_node)],
                             overridden=overridden, given=algorithm)


def framework_cluster(profile, cluster, pol, given):
    """The cluster after a framework profile (a host-CPU parameter server sets ``ps`` unless
    --algorithm was given), its ``algorithm_why`` saying so."""
    from dataclasses import replace

    from ..reference.frameworks import apply_framework

    out, _ = apply_framework(profile, cluster, pol, given)
    if out.algorithm != cluster.algorithm:
        out = replace(out, algorithm_why=f"framework profile {profile.key}: parameter "
                                         "server on the host CPU")
    return out


def _print_prediction(pred, timeline, gantt, kineto_dir=None, command: str = "") -> None:
    b = pred.breakdown
    click.echo(f"modelled iteration: {pred.iter_ms:.3f} ms  ({pred.throughput_img_s:.1f} img/s "
               f"on {pred.workers} worker{'s' if pred.workers != 1 else ''}; speedup "
               f"{pred.speedup_vs_1:.2f}, efficiency {pred.efficiency:.1%})")
    click.echo("breakdown (ms): " + ", ".join(f"{k} {v:.3f}" if isinstance(v, float)
                                              else f"{k} {v}" for k, v in b.items()))
    click.echo(f"critical path: {len(pred.critical_path)} tasks, ends "
               + " -> ".join(pred.critical_path[-3:]))
    # the trace's source is a contributor's text once released (#29 M7)
    echo(f"trace: {pred.trace_provenance} ({pred.trace_run_id}); {pred.trace_source}")
    click.echo(f"cite: dgtraces {pred.package_version}, dataset release "
               f"{pred.dataset_release or 'none'} (manifest digest "
               f"{pred.dataset_digest or 'none'}); BibTeX: `dgtraces cite --release "
               f"{pred.dataset_release}`")
    echo(f"reproduce: {command}")  # a --link-fit path is the user's text
    click.echo(f"algorithm: {pred.cluster['algorithm']} "
               f"({pred.cluster.get('algorithm_why') or 'given'})")
    nccl = pred.cluster.get("nccl")
    if nccl:
        click.echo(f"nccl: {nccl['model']}")
    for side in ("intra", "inter"):
        link = pred.cluster[side]
        if side == "inter" and pred.cluster["nodes"] == 1:
            click.echo("inter: unused (one node)")
            continue
        if nccl:  # NCCL's model uses its own view of the fabric (docs/collectives.md)
            f = nccl[side]
            extra = (f", achieved {f['achieved_gb_s']:.4g} GB/s x {f['nics_per_node']} per "
                     f"node ({f.get('achieved_source') or 'no source'})"
                     if f.get("achieved_gb_s") else "")
            echo(f"{side}: {f['link']} ({f['class']}) {f['bandwidth_gb_s']:.4g} GB/s "
                 f"in NCCL {nccl['version']}{extra} ({f['source']})")
            continue
        # a --link-fit link: its name and source are the fit file's text (#36 item 6)
        echo(f"{side}: {link['link']} alpha {link['alpha_us']:.4g} us, "
             f"{link['bandwidth_gb_s']:.4g} GB/s ({link['provenance']}: {link['source']})")
    click.echo(framework_line(pred.framework))
    for term, d in pred.overheads.items():
        if isinstance(d, dict):
            click.echo(f"overhead {term}: {d['ms']:.3f} ms = {d['formula']} "
                       f"({d.get('source') or d.get('how')})")
    for note in pred.notes:
        echo(f"note: {note}")
    for what, path in (("timeline", timeline), ("gantt", gantt),
                       ("kineto traces (one per worker) to", kineto_dir)):
        if path:
            click.echo(f"wrote {what} {path}")


def framework_line(f: dict | None) -> str:
    """``framework: KEY (how; the profile's settings and citation)``, or ``none (how)``."""
    if not f or f.get("framework") == "none":
        return f"framework: none ({(f or {}).get('how', 'given')})"
    return (f"framework: {f['framework']} ({f['how']}; policy {f['policy']}, bucket "
            f"{f['bucket_bytes']}, first bucket {f['first_bucket_bytes']}, cycle "
            f"{f['cycle_ms']} ms, blocking {f['blocking']}; {f['citation']})")


split_option = split_list


def gbps_option(bandwidth_gb_s: float | None) -> float | None:
    """--link-bandwidth-gb-s (GB/s) as the library's ``gbps`` (Gb/s)."""
    return None if bandwidth_gb_s is None else bandwidth_gb_s * 8.0


def bucket_bytes_option(bucket_mib: float) -> int:
    """--bucket-mib as bytes: a finite number of MiB > 0 (BAD_INPUT otherwise)."""
    from dgtraces.values import bad_value as bad

    if not 0 < bucket_mib < 1 << 20:  # also NaN; 1 TiB buckets at most
        raise bad("bucket_mib", "must be a finite number of MiB > 0", "> 0", bucket_mib)
    return int(bucket_mib * 1024 * 1024)


def _given(option: str, value: float) -> float:
    """A time given on the command line: a number, not NaN (which would read as 0)."""
    from dgtraces.values import bad_value as bad

    if value != value:
        raise bad(option, "must be a number of ms", ">= 0", value, code=Code.PLAUSIBILITY)
    return value


def check_suffix(path: str, option: str, allowed: tuple[str, ...]) -> None:
    from dgtraces.values import bad_value as bad

    if not path.lower().endswith(allowed):
        raise bad(option, "unsupported file type", " | ".join(allowed), path)
