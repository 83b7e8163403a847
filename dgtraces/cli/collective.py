"""``dgtraces collective`` (one collective's time per message size, laid out like nccl-tests)
and ``dgtraces validate-comm`` (predict every row of nccl-tests logs; per-log MAPE)."""

from __future__ import annotations

import click

from . import OutPath, echo, echo_json
from .options import (
    inter_help,
    intra_help,
    link_fit_option,
    nccl_options,
    nics_option,
    release_option,
)

COLLECTIVE_NAMES = ("allreduce", "allgather", "reducescatter", "broadcast", "reduce",
                    "alltoall")
DEFAULT_SIZES = ("8,64,512,4KiB,32KiB,256KiB,1MiB,4MiB,16MiB,64MiB,256MiB,1GiB")
# what validate-comm's --nccl default stands for (not the newest release: each log's own)
VALIDATE_LATEST = ("each reference log's pre-registered release, docs/collectives.md; for a "
                   "LOG, the newest modelled release not newer than a 'NCCL version x.y.z' "
                   "line it prints, else the newest")


def _algorithm_help() -> str:
    from ..comm.nccl import MODEL_NAMES

    return ("auto: NCCL's choice of algorithm and protocol per size (the --nccl release's "
            "tuning model); " + " / ".join(n for n in MODEL_NAMES if n != "auto")
            + ": that algorithm forced (refused where the release or the hardware cannot run "
            "it); ring, tree, dbtree, hierarchical, ps: the alpha-beta all-reduce models over "
            "links.csv presets.")


@click.command()
@click.option("--collective", "coll", default="allreduce", show_default=True,
              help="allreduce | allgather | reducescatter | broadcast | reduce | alltoall.")
@click.option("--workers", default=8, show_default=True, type=int, help="Ranks (GPUs).")
@click.option("--gpus-per-node", default=8, show_default=True, type=int)
@click.option("--intra", default="nvlink3", show_default=True, help=intra_help())
@click.option("--inter", default="ib-hdr", show_default=True, help=inter_help())
@nics_option
@click.option("--algorithm", default="auto", show_default=True, help=_algorithm_help())
@nccl_options(per_process=True)
@click.option("--sizes", default=DEFAULT_SIZES, show_default=True,
              help="Comma list of bytes, or with units (64KiB, 1MiB, 2G).")
@link_fit_option()
@release_option("Release for measured link fits of the alpha-beta presets.")
@click.option("--json", "as_json", is_flag=True,
              help="Print {rows: [...], links: ...} as JSON.")
def collective(coll, workers, gpus_per_node, intra, inter, nics_per_node, algorithm, nccl,
               nccl_time, gpus_per_process, sizes, link_fit, release, as_json) -> None:
    """Predict one collective's time for each message size (modelled).

    \b
    Examples (2 nodes x 8 H100, 8 NDR NICs per node; EFA p4d; SHARP; a custom NIC):
      dgtraces collective --nccl 2.18 --workers 16 --gpus-per-node 8 \\
          --intra nvlink4 --inter ib-ndr --nics-per-node 8
      dgtraces collective --workers 16 --intra nvlink3 --inter efa-p4d
      dgtraces collective --workers 64 --intra nvlink4 --inter ib-ndr,sharp --nics-per-node 8
      dgtraces collective --workers 16 --intra nvlink3 --inter ethernet:50gbps
    """
    from ..comm.collective_time import FLOAT_BYTES, parse_sizes, predict_collective

    cluster = dict(workers=workers, gpus_per_node=gpus_per_node, intra=intra, inter=inter,
                   nics_per_node=nics_per_node, release=release or "latest")
    if link_fit is None:
        res = predict_collective(coll, parse_sizes(sizes), algorithm=algorithm, nccl=nccl,
                                 nccl_time=nccl_time, gpus_per_process=gpus_per_process,
                                 **cluster)
    else:  # the fit in place of both presets, alpha-beta (docs/collectives.md)
        from ..comm.linkfit import fit_link, fitted_collective

        given = click.get_current_context().get_parameter_source("algorithm")
        res = fitted_collective(coll, parse_sizes(sizes), fit_link(link_fit, release),
                                algorithm=None if given is click.core.ParameterSource.DEFAULT
                                else algorithm, **cluster)
    if as_json:
        echo_json(res.to_dict())
        return
    click.echo(f"# {res.collective}: {res.workers} ranks, {res.nodes} node(s) x "
               f"{res.gpus_per_node} GPUs, {res.nics_per_node} NIC(s) per node, algorithm "
               f"{res.algorithm} (modelled: {res.model})")
    version = res.nccl or "-"
    click.echo(f"#{'size':>11}  {'count':>12}  {'type':>8}  {'time':>9}  {'algbw':>7}  "
               f"{'busbw':>7}  {'algo':>14}  {'proto':>6}  nccl")
    click.echo(f"#{'(B)':>11}  {'(elements)':>12}  {'':>8}  {'(us)':>9}  {'(GB/s)':>7}  "
               f"{'(GB/s)':>7}")
    for r in res.rows:
        count = r.message_bytes // FLOAT_BYTES
        click.echo(f"{r.message_bytes:>12}  {count:>12}  {'float':>8}  "
                   f"{r.time_us:>9.2f}  {r.algbw_gb_s:>7.2f}  {r.busbw_gb_s:>7.2f}  "
                   f"{r.algorithm:>14}  {r.protocol:>6}  {version}")
    for side, link in res.links.items():
        bw = link.get("bandwidth_gb_s")
        extra = (f", achieved {link['achieved_gb_s']:.4g} GB/s per NIC ("
                 f"{link.get('achieved_source') or 'no source'})"
                 if link.get("achieved_gb_s") else "")
        echo(f"# {side}: {link['link']} {bw:.4g} GB/s{extra} ({link['source']})")
    for note in res.notes:
        echo(f"# note: {note}")  # a --link-fit file name is the user's text


@click.command("validate-comm")
@click.argument("logs", nargs=-1, type=click.Path(dir_okay=False, exists=True))
@click.option("--workers", default=None, type=int,
              help="Ranks of the given logs (default: the log's rank lines).")
@click.option("--gpus-per-node", default=None, type=int,
              help="Default: ranks / hosts of the log.")
@click.option("--intra", default=None, help="Board of the given logs (required with LOG).")
@click.option("--inter", default="ib-hdr", show_default=True, help=inter_help())
@nics_option
@click.option("--collective", "coll", default=None,
              help="Default: inferred from the log (see import nccl-tests).")
@click.option("--algorithm", default="auto", show_default=True, help=_algorithm_help())
@nccl_options(per_process="the reference log's; a LOG's nGpus header, else 1",
              default_means=VALIDATE_LATEST)
@click.option("--no-sharp", is_flag=True,
              help="Ignore the reference logs' SHARP (issue #25's model had no CollNet).")
@click.option("--per-size", is_flag=True, help="Print every size's error.")
@click.option("--plot", type=OutPath(writes=("{}",), dir_okay=False), default=None,
              help="Write a PNG: time vs size, measured and predicted, log-log, per log.")
@click.option("--json", "as_json", is_flag=True)
def validate_comm(logs, workers, gpus_per_node, intra, inter, nics_per_node, coll, algorithm,
                  nccl, nccl_time, gpus_per_process, no_sharp, per_size, plot,
                  as_json) -> None:
    """Predict every row of nccl-tests logs and report the error (modelled vs measured).

    Without LOG: the reference logs, each with the cluster, NCCL release and SHARP setting
    pre-registered in docs/collectives.md (the CC BY 3.0 sweeps shipped in
    dgtraces/reference/nccl-tests and, when present, the unlicensed ones of
    ../shared/reference/nccl-tests); --nccl overrides every log's release.

    With LOG: the options win; what they leave open is read from the log (its rank lines,
    its header's nGpus, a printed 'NCCL version x.y.z' line), and the output says what was
    read."""
    from dgtraces.evaluation.comm import LogCluster, validate

    given = None
    if logs:
        from dgtraces.comm.fabrics import default_nics
        from dgtraces.values import bad_value as bad

        if intra is None:
            raise bad("intra", "a log does not name its board; give --intra", "a preset",
                      None)
        given = LogCluster(workers, gpus_per_node, intra, inter,
                           default_nics(inter, nics_per_node), coll, nccl, algorithm,
                           gpus_per_process)
    report = validate(logs, given, algorithm=algorithm, nccl=nccl, nccl_time=nccl_time,
                      sharp=not no_sharp)
    if plot:
        from dgtraces.evaluation.comm import write_plot

        write_plot(report, plot)
    if as_json:
        echo_json(report.to_dict())
        return
    echo(f"{'log':<46} {'nccl':>5} {'ranks':>5}  {'intra':<9} {'inter':<13} "
               f"{'>=1MiB':>7} {'n':>3} {'<1MiB':>7} {'n':>3}")
    for log in report.logs:
        mark = "" if log.scored else "  (not scored)"
        echo(f"{log.log_id:<46} {log.nccl or '-':>5} {log.workers:>5}  {log.intra:<9} "
                   f"{log.inter if log.nodes > 1 else '-':<13} "
                   f"{_pct(log.mape_large):>7} {log.n_large:>3} {_pct(log.mape_small):>7} "
                   f"{log.n_small:>3}{mark}")
        if per_size:
            for p in log.points:
                echo(f"  {p.message_bytes:>12} B  measured {p.measured_us:>10.2f} us  "
                           f"predicted {p.predicted_us:>10.2f} us  error {p.error:+.1%}  "
                           f"({p.algorithm}/{p.protocol})")
    echo(f"algorithm {report.algorithm}, NCCL time {report.nccl_time}; MAPE over "
               f"sizes >= 1 MiB and < 1 MiB of the out-of-place time")
    for t in report.targets():
        if t.value is None:
            echo(f"target {t.name} <= {t.limit:.0%}: n/a (no sizes in its range in the "
                 f"{t.of} scored log{'s' if t.of != 1 else ''})")
            continue
        echo(f"target {t.name} <= {t.limit:.0%}: {_pct(t.value)} "
             f"({'met' if t.met else 'not met'}; over {t.logs} of {t.of} scored logs)")
    for log_id, why in report.unscored:
        echo(f"not scored: {log_id}: {why}")
    for note in report.notes:
        echo(f"note: {note}")
    if plot:
        echo(f"wrote {plot}")


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.1%}"
