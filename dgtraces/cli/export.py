"""export-astra-sim, export-chakra: a stored run's layer trace as simulator input."""

from __future__ import annotations

import click

from . import OutPath
from .options import (
    explicit,
    framework_option,
    inter_help,
    intra_help,
    io_overlap_option,
    nccl_options,
    nics_option,
    overheads_options,
    release_option,
)
from .predict import (
    POLICIES,
    bucket_bytes_option,
    cluster_options,
    framework_cluster,
    framework_line,
    h2d_link_option,
    h2d_ms_option,
    io_ms_option,
    option_cluster,
    with_phases,
)

_raw = click.option("--raw-layer-times", is_flag=True,
                    help="Do not scale layer times to the run's whole-model medians.")


def _phases(f):
    """``predict``'s input options: an export and ``predict`` agree for the same ones (#36)."""
    return io_ms_option(h2d_ms_option(h2d_link_option(f)))


def _trace(run_id, release, raw_layer_times, io_ms, h2d_ms, h2d_link):
    """The run's trace as ``predict --run-id`` reads it with the same input options."""
    from ..export import load_run_trace

    trace = load_run_trace(run_id, release, whole=not raw_layer_times,
                           h2d_link=h2d_link if h2d_ms is None else None)
    return with_phases(trace, io_ms, h2d_ms)


@click.command("export-astra-sim")
@click.option("--run-id", required=True, help="Stored run whose layer trace is exported.")
@click.option("--workers", default=1, show_default=True, type=int,
              help="NPUs the workload is meant for (recorded in the sidecar).")
@click.option("--parallelism", default="DATA", show_default=True,
              type=click.Choice(["DATA"]), help="ASTRA-sim training loop.")
@click.option("--clock-ghz", default=1.0, show_default=True, type=float,
              help="Cycles per ns: ASTRA-sim's analytical backend ticks in ns (1 GHz).")
@click.option("--update-placement", "update", default="first-layer", show_default=True,
              type=click.Choice(["first-layer", "by-grad-bytes"]),
              help="Where the run's update time goes: all on the first layer with a gradient "
                   "(ASTRA-sim 1.0 then runs it after the last collective, as predict does), "
                   "or shared by gradient bytes (most of it then hides under backward).")
@release_option("Release to read the run from ('latest': the newest).")
@_raw
@_phases
@click.option("--gpus-per-node", default=1, show_default=True, type=int)
@click.option("--intra", default=None,
              help="With --intra: the sidecar also holds NCCL's modelled all-reduce of each "
                   "layer's gradient on this cluster (nccl_reference). " + intra_help())
@click.option("--inter", default="10gbe", show_default=True, help=inter_help())
@nics_option
@nccl_options
@framework_option(wins=None)  # no grouping options: the profile is recorded, not exported
@overheads_options
@click.option("--out", type=OutPath(writes=("{}", "{}.meta.json"), dir_okay=False),
              required=True, help="Workload file; a <out>.meta.json sidecar is written beside it.")
def export_astra_sim(run_id, workers, parallelism, clock_ghz, update, release,
                     raw_layer_times, io_ms, h2d_ms, h2d_link, gpus_per_node, intra, inter,
                     nics_per_node, nccl, nccl_time, framework, overheads, iteration_cv,
                     host_decode_img_s, out) -> None:
    """Write an ASTRA-sim 1.0 text workload (cycles, bytes) of a stored run. The input read
    and copy (predict's modelled copy of a GPU trace by default) go on the first layer's
    forward compute, where predict runs them."""
    from dgtraces.store.release import open_if_any

    from ..export import check_workers
    from ..export.astra import astra_workload, nccl_reference, write_astra
    from ..export.terms import ASTRA_PROFILE_NOTE, export_terms
    from ..predict import predict_trace
    from ..predict.overheads import Overheads
    from ..predict.trace import run_row
    from ..reference.frameworks import choose_framework

    choose_framework(framework, None)  # a bad name fails before any work
    spec = Overheads.parse(overheads, iteration_cv=iteration_cv,
                           host_decode_img_s=host_decode_img_s)
    check_workers(workers)
    rel = open_if_any(release)
    trace = _trace(run_id, rel, raw_layer_times, io_ms, h2d_ms, h2d_link)
    chosen = choose_framework(framework, run_row(run_id, rel))
    # the terms on predict's cluster for these options (--intra: predict's default when not
    # given), so the input term's g and T_dag are predict's
    cluster, pol, _, _ = _cluster(trace, rel, chosen, {}, workers, gpus_per_node,
                                  "pcie3" if intra is None else intra, inter, nics_per_node,
                                  nccl, nccl_time, release=release)
    terms, _ = export_terms(predict_trace(trace, cluster, pol)[0], trace, spec, chosen)
    wl = astra_workload(trace, workers=workers, parallelism=parallelism, clock_ghz=clock_ghz,
                        update=update, extra={**terms, "framework_note": ASTRA_PROFILE_NOTE})
    if intra is not None:
        wl = nccl_reference(wl, workers=workers, gpus_per_node=gpus_per_node, intra=intra,
                            inter=inter, nics_per_node=nics_per_node, nccl=nccl,
                            nccl_time=nccl_time)
    path, side = write_astra(out, wl)
    t = wl.meta["totals_ms"]
    click.echo(f"wrote {path} ({len(wl.layers)} layers, {parallelism}, cycles at "
               f"{clock_ghz:g} GHz) and {side}")
    click.echo(f"totals (ms): fwd {t['fwd']:.3f}, input-grad {t['input_grad']:.3f}, "
               f"weight-grad {t['weight_grad']:.3f}, update {t['update']:.3f}; "
               f"{t['grad_bytes']} gradient bytes all-reduced")
    from dgtraces.io.terminal_text import inert

    click.echo(inert(f"trace: {trace.provenance} ({trace.run_id}); {trace.source}"))  # #29 M7
    click.echo(f"update ({update}): " + wl.meta["update"])
    inp = wl.meta["input_phases_ms"]
    click.echo(f"input: read {inp['io']:.3f} ms + copy {inp['h2d']:.3f} ms on the first "
               "layer's forward compute (as predict runs them)")
    click.echo("note: " + wl.meta["backward_split"])
    if "nccl_reference" in wl.meta:
        ref = wl.meta["nccl_reference"]
        total = sum(x["allreduce_us"] for x in ref["layers"]) / 1000.0
        click.echo(f"nccl_reference: NCCL {ref['nccl']} ({ref['time']}) all-reduce of every "
                   f"gradient alone: {total:.3f} ms in all")
    _echo_terms(terms)
    click.echo("note: " + ASTRA_PROFILE_NOTE)


def _echo_terms(terms: dict) -> None:
    click.echo(framework_line(terms["framework"]))
    click.echo(f"overheads {terms['overheads']}: sync {terms['sync_ms']:.3f} ms, input "
               f"{terms['input_ms']:.3f} ms per iteration ({terms['overheads_note']})")


def _cluster(trace, rel, chosen, given, workers, gpus_per_node, intra, inter, nics_per_node,
             nccl, nccl_time, *, policy="wfbp", io_overlap="off", bucket_mib=25.0,
             algorithm=None, servers=1, link_alpha_us=None, link_bandwidth_gb_s=None,
             release, staging=None, staging_passes=2, shared_cpu=False, link_fit=None):
    """The cluster and policy ``predict --run-id`` uses for the same options (the keyword
    defaults are predict's option defaults), after the framework profile; with the link fit
    and the presets it replaced (None and (intra, inter) without --link-fit)."""
    from ..predict import Policy
    from ..reference.frameworks import apply_framework

    cluster, fit, presets = option_cluster(
        trace, rel, workers, gpus_per_node, intra, inter, nics_per_node, nccl, nccl_time,
        algorithm=algorithm, servers=servers, link_alpha_us=link_alpha_us,
        link_bandwidth_gb_s=link_bandwidth_gb_s, release=release, staging=staging,
        staging_passes=staging_passes, shared_cpu=shared_cpu, link_fit=link_fit)
    _, pol = apply_framework(chosen.profile, cluster, Policy(
        policy, io_overlap == "on", bucket_bytes_option(bucket_mib)), given)
    return framework_cluster(chosen.profile, cluster, pol, given), pol, fit, presets


@click.command("export-chakra")
@click.option("--run-id", required=True, help="Stored run whose layer trace is exported.")
@click.option("--workers", default=1, show_default=True, type=int,
              help="NPUs: one <out>.<rank>.et file each.")
@click.option("--intra", default="pcie3", show_default=True, help=intra_help())
@click.option("--inter", default="10gbe", show_default=True, help=inter_help())
@click.option("--policy", default="wfbp", show_default=True, type=click.Choice(POLICIES),
              help="Gradient aggregation policy (sets the COMM_COLL nodes).")
@io_overlap_option()
@_raw
@_phases
@cluster_options
@framework_option()
@overheads_options
@click.option("--out", type=OutPath(writes=("{}.*.et",), dir_okay=False), required=True,
              help="Path prefix: writes <out>.0.et ... <out>.<workers-1>.et.")
def export_chakra(run_id, workers, intra, inter, policy, io_overlap, raw_layer_times, io_ms,
                  h2d_ms, h2d_link, gpus_per_node, algorithm, nics_per_node, nccl, nccl_time,
                  servers, bucket_mib, link_alpha_us, link_bandwidth_gb_s, release, staging,
                  staging_passes, shared_cpu, link_fit, framework, overheads, iteration_cv,
                  host_decode_img_s, out) -> None:
    """Write Chakra execution traces (ASTRA-sim 2.0) of a stored run's predicted DAG (the
    DAG of predict --run-id with the same options, the modelled input copy included)."""
    from dgtraces.store.release import open_if_any

    from ..export import check_workers
    from ..export.chakra import build_et, write_et
    from ..export.terms import export_terms
    from ..predict import predict_trace
    from ..predict.overheads import Overheads
    from ..predict.trace import run_row
    from ..reference.frameworks import choose_framework

    choose_framework(framework, None)  # a bad name fails before any work
    spec = Overheads.parse(overheads, iteration_cv=iteration_cv,
                           host_decode_img_s=host_decode_img_s)
    check_workers(workers)
    rel = open_if_any(release)  # opened once: the run and a --link-fit read it
    trace = _trace(run_id, rel, raw_layer_times, io_ms, h2d_ms, h2d_link)
    chosen = choose_framework(framework, run_row(run_id, rel))
    given = explicit(click.get_current_context(), {"policy": "policy",
                                                   "bucket_mib": "bucket_bytes",
                                                   "algorithm": "algorithm"})
    cluster, pol, fit, presets = _cluster(
        trace, rel, chosen, given, workers, gpus_per_node, intra, inter, nics_per_node, nccl,
        nccl_time, policy=policy, io_overlap=io_overlap, bucket_mib=bucket_mib,
        algorithm=algorithm, servers=servers, link_alpha_us=link_alpha_us,
        link_bandwidth_gb_s=link_bandwidth_gb_s, release=release, staging=staging,
        staging_passes=staging_passes, shared_cpu=shared_cpu, link_fit=link_fit)
    simulated = predict_trace(trace, cluster, pol)  # once, for the terms and the ET
    terms, total = export_terms(simulated[0], trace, spec, chosen)  # total: what predict prints
    graph = build_et(trace, cluster, pol, extra=terms, simulated=simulated)
    paths = write_et(out, graph, workers)
    comm = sum(1 for n in graph.nodes if n.name.startswith("comm/"))
    click.echo(f"wrote {len(paths)} Chakra ET file(s) {paths[0]} ... ({len(graph.nodes)} nodes "
               f"each: {len(graph.nodes) - comm} compute, {comm} COMM_COLL all-reduce)")
    click.echo(f"DAG iteration (before overheads) {graph.iter_ms:.3f} ms; with the overheads "
               f"{terms['overheads']} (below) {total:.3f} ms, as predict; trace: "
               f"{trace.provenance} "
               f"({trace.run_id}); algorithm {cluster.algorithm} ({cluster.algorithm_why})")
    if fit is not None:
        from dgtraces.io.terminal_text import inert

        click.echo(inert(f"note: {fit.note(*presets)}"))  # the file name is the user's text
    _echo_terms(terms)
