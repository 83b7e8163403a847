"""reconstruct: K80/V100 traces from the calibrated cost model, and the method's error."""

from __future__ import annotations

import click

from dgtraces.errors import Code

from . import OutPath, model_option
from .options import release_option
from .progress import working


@click.command()
@click.option("--device", default=None, help="Device key: with calibration rows (k80, v100) "
              "for roofline-1.1; any GPU with datasheet peaks and SMs for kernels-2.x.")
@model_option(default=None)
@click.option("--batch-size", type=int, default=None, help="Per-device batch size (> 0).")
@click.option("--precision", default="fp32", show_default=True,
              type=click.Choice(["fp32", "amp"]), help="amp: V100 tensor-core variant.")
@click.option("--out", default=None, type=OutPath(file_okay=False),
              help="Write runs.parquet + layer_timings.parquet into this new folder.")
@click.option("--csv", "as_csv", is_flag=True, help="Write CSV instead of Parquet.")
@click.option("--report", is_flag=True, help="Print the method's measured error and exit.")
@release_option("Release for --report ({}).".format("'latest': the newest"))
@click.option("--fragment", default=None, type=OutPath(file_okay=False),
              help="With --report: also write reconstruction.md (+ PNG) into this folder "
              "(adds the leave-one-out table, about 20 s); with --method kernels-2.0: "
              "reconstruction_kernels.md (+ PNG).")
@click.option("--method", default="roofline-1.1", show_default=True,
              type=click.Choice(["roofline-1.1", "kernels-2.0", "kernels-2.1"]),
              help="Cost model version (docs/reconstruction-kernels.md for kernels-2.x).")
@click.option("--figure", default=None, type=OutPath(dir_okay=False),
              help="With --report --method kernels-2.0: write the log-log predicted vs "
              "measured plot (PNG) here.")
def reconstruct(device, model, batch_size, precision, out, as_csv, report, release,
                fragment, method, figure) -> None:
    """Reconstruct a per-layer training trace (provenance=reconstructed), or --report the
    method's fit and its error against the release's stored measured CPU runs and the
    B-Caffe logs (nothing is measured on this machine)."""
    from ..errors import DgtracesError

    if report and method == "kernels-2.1":
        from dgtraces.evaluation.kernels21 import build as build21
        from dgtraces.store.release import Release

        if figure or fragment:
            raise DgtracesError("--figure and --fragment are for --method kernels-2.0",
                                code=Code.BAD_INPUT)
        with working("kernels-2.1 report: every fold and leave-one-out refits (minutes)"):
            text = build21(Release.open(release).tables(), release).text()
        click.echo(text)
        return
    if report and method == "kernels-2.0":
        from dgtraces.evaluation.kernel_summary import build
        from dgtraces.evaluation.kernel_summary import figure as plot
        from dgtraces.store.release import Release

        with working("kernels-2.0 report: leave-one-outs (about a minute)"):
            summary = build(Release.open(release).tables(), release)
        click.echo(summary.text())
        if figure:
            plot(summary, figure)
            click.echo(f"wrote {figure}")
        if fragment:
            from dgtraces.evaluation.kernel_summary import write as write_fragment

            for path in write_fragment(summary, fragment):
                click.echo(f"wrote {path}")
        return
    if report:
        from dgtraces.evaluation.reconstruction import build_report

        with working("roofline-1.1 report" + (" with its leave-one-out (about 20 s)"
                                              if fragment else "")):
            rep = build_report(release, loo=bool(fragment))
        click.echo(rep.text())
        if fragment:
            from dgtraces.evaluation.fragment import write

            for path in write(rep, fragment):
                click.echo(f"wrote {path}")
        return
    if device is None or model is None or batch_size is None:
        raise DgtracesError("--device, --model and --batch-size are required (or --report)",
                            code=Code.BAD_INPUT)
    from ..reconstruct import reconstruct_trace, runs_frame

    if out:
        from dgtraces.io.files import check_out

        check_out(out)  # before any work, as the collectors do
    rec = reconstruct_trace(device, model, batch_size, precision, method=method)
    r = rec.run
    click.echo(f"{r['run_id']}: fwd {r['fwd_ms']:.2f} ms, bwd {r['bwd_ms']:.2f} ms, update "
               f"{r['update_ms']:.2f} ms, iteration {r['iter_ms']:.2f} ms "
               f"({1000 * batch_size / r['iter_ms']:.1f} img/s)  [reconstructed, "
               f"{r['collector_version']}]")
    counts = rec.bound[["fwd_bound", "bwd_bound"]].stack().value_counts()
    click.echo("layer-directions by bound: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    if out:
        from dgtraces.tables.write import write_tables

        for path in write_tables(out, {"runs": runs_frame([rec]),
                                       "layer_timings": rec.layer_timings},
                                 fmt="csv" if as_csv else "parquet"):
            click.echo(f"wrote {path}")
