"""``dgtraces collective`` (one collective's time per message size, laid out like nccl-tests)
and ``dgtraces validate-comm`` (predict every row of nccl-tests logs; per-log MAPE)."""

from __future__ import annotations

import click

from . import OutPath, echo, echo_json
from .options import release_option

COLLECTIVE_NAMES = ("allreduce", "allgather", "reducescatter", "broadcast", "reduce",
                    "alltoall")
DEFAULT_SIZES = ("8,64,512,4KiB,32KiB,256KiB,1MiB,4MiB,16MiB,64MiB,256MiB,1GiB")


def _algorithm_help() -> str:
    return ("auto: NCCL's choice of algorithm and protocol per size (its 2.7.5 tuning model); "
            "nccl-ring / nccl-tree: that algorithm forced; ring, tree, dbtree, hierarchical, "
            "ps: today's alpha-beta all-reduce models over links.csv presets.")


@click.command()
@click.option("--collective", "coll", default="allreduce", show_default=True,
              help="allreduce | allgather | reducescatter | broadcast | reduce | alltoall.")
@click.option("--workers", default=8, show_default=True, type=int, help="Ranks (GPUs).")
@click.option("--gpus-per-node", default=8, show_default=True, type=int)
@click.option("--intra", default="nvlink3", show_default=True,
              help="Board: nvlink1..4, nvlink2-link, pcie3/4/5.")
@click.option("--inter", default="ib-hdr", show_default=True,
              help="NIC preset: ib-fdr/edr/hdr/ndr, 100/200/400gbe-roce, 10gbe, 25gbe, "
                   "100gbe-tcp.")
@click.option("--nics-per-node", default=1, show_default=True, type=int,
              help="NICs (rails) per node; their bandwidth is shared by the node's GPUs.")
@click.option("--algorithm", default="auto", show_default=True, help=_algorithm_help())
@click.option("--sizes", default=DEFAULT_SIZES, show_default=True,
              help="Comma list of bytes, or with units (64KiB, 1MiB, 2G).")
@release_option("Release for measured link fits of the alpha-beta presets.")
@click.option("--json", "as_json", is_flag=True,
              help="Print {rows: [...], links: ...} as JSON.")
def collective(coll, workers, gpus_per_node, intra, inter, nics_per_node, algorithm, sizes,
               release, as_json) -> None:
    """Predict one collective's time for each message size (modelled).

    \b
    Example (2 nodes x 8 A100, 8 HDR NICs per node):
      dgtraces collective --workers 16 --gpus-per-node 8 --intra nvlink3 \\
          --inter ib-hdr --nics-per-node 8 --sizes 1MiB,64MiB,1GiB
    """
    from ..comm.collective_time import FLOAT_BYTES, parse_sizes, predict_collective

    res = predict_collective(coll, parse_sizes(sizes), workers=workers,
                             gpus_per_node=gpus_per_node, intra=intra, inter=inter,
                             nics_per_node=nics_per_node, algorithm=algorithm,
                             release=release or "latest")
    if as_json:
        echo_json(res.to_dict())
        return
    click.echo(f"# {res.collective}: {res.workers} ranks, {res.nodes} node(s) x "
               f"{res.gpus_per_node} GPUs, {res.nics_per_node} NIC(s) per node, algorithm "
               f"{res.algorithm} (modelled: {res.model})")
    click.echo(f"#{'size':>11}  {'count':>12}  {'type':>8}  {'time':>9}  {'algbw':>7}  "
               f"{'busbw':>7}  {'algo':>5}  proto")
    click.echo(f"#{'(B)':>11}  {'(elements)':>12}  {'':>8}  {'(us)':>9}  {'(GB/s)':>7}  "
               f"{'(GB/s)':>7}")
    for r in res.rows:
        count = r.message_bytes // FLOAT_BYTES
        click.echo(f"{r.message_bytes:>12}  {count:>12}  {'float':>8}  "
                   f"{r.time_us:>9.2f}  {r.algbw_gb_s:>7.2f}  {r.busbw_gb_s:>7.2f}  "
                   f"{r.algorithm:>5}  {r.protocol}")
    for side, link in res.links.items():
        bw = link.get("bandwidth_gb_s")
        click.echo(f"# {side}: {link['link']} {bw:.4g} GB/s ({link['source']})")
    for note in res.notes:
        click.echo(f"# note: {note}")


@click.command("validate-comm")
@click.argument("logs", nargs=-1, type=click.Path(dir_okay=False, exists=True))
@click.option("--workers", default=None, type=int,
              help="Ranks of the given logs (default: the log's rank lines).")
@click.option("--gpus-per-node", default=None, type=int,
              help="Default: ranks / hosts of the log.")
@click.option("--intra", default=None, help="Board of the given logs (required with LOG).")
@click.option("--inter", default="ib-hdr", show_default=True)
@click.option("--nics-per-node", default=1, show_default=True, type=int)
@click.option("--collective", "coll", default=None,
              help="Default: inferred from the log (see import nccl-tests).")
@click.option("--algorithm", default="auto", show_default=True, help=_algorithm_help())
@click.option("--per-size", is_flag=True, help="Print every size's error.")
@click.option("--plot", type=OutPath(dir_okay=False), default=None,
              help="Write a PNG: time vs size, measured and predicted, log-log.")
@click.option("--json", "as_json", is_flag=True)
def validate_comm(logs, workers, gpus_per_node, intra, inter, nics_per_node, coll, algorithm,
                  per_size, plot, as_json) -> None:
    """Predict every row of nccl-tests logs and report the error (modelled vs measured).

    Without LOG: the shipped reference logs (dgtraces/reference/nccl-tests, CC BY 3.0) and,
    in a source checkout with ../shared/reference/nccl-tests beside it, its unlicensed one
    (evaluation.comm.SHIPPED and SHARED; tests/evaluation check these folders)."""
    from dgtraces.evaluation.comm import LogCluster, validate

    given = None
    if logs:
        from dgtraces.values import bad_value as bad

        if intra is None:
            raise bad("intra", "a log does not name its board; give --intra", "a preset",
                      None)
        given = LogCluster(workers, gpus_per_node, intra, inter, nics_per_node, coll)
    report = validate(logs, given, algorithm=algorithm)
    if plot:
        from dgtraces.evaluation.comm import write_plot

        write_plot(report, plot)
    if as_json:
        echo_json(report.to_dict())
        return
    for log in report.logs:
        echo(f"{log.log_id}: {log.collective}, {log.workers} ranks, intra {log.intra}, "
             f"algorithm {report.algorithm}: MAPE {log.mape_all:.1%} (all {log.n_all} "
             f"sizes), {_pct(log.mape_1mib)} (>= 1 MiB, {log.n_1mib} sizes)")
        if per_size:
            for p in log.points:
                echo(f"  {p.message_bytes:>12} B  measured {p.measured_us:>10.2f} us  "
                     f"predicted {p.predicted_us:>10.2f} us  error {p.error:+.1%}  "
                     f"({p.algorithm}/{p.protocol})")
    echo(f"median over logs: {_pct(report.median_all)} (all sizes), "
         f"{_pct(report.median_1mib)} (>= 1 MiB)")
    for note in report.notes:
        echo(f"note: {note}")
    if plot:
        echo(f"wrote {plot}")


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.1%}"
