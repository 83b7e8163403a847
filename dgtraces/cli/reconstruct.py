"""reconstruct: K80/V100 traces from the calibrated cost model, and the method's error."""

from __future__ import annotations

import click

from dgtraces.errors import Code
from dgtraces.reference.frameworks import NAMES

from . import NEW_FOLDER, OutPath, model_option
from .options import release_option
from .progress import working


@click.command()
@click.option("--device", default=None, help="Device key: with calibration rows (k80, v100) "
              "for roofline-1.1; any GPU with datasheet peaks and SMs "
              "(dgtraces/reference/gpu_sms.csv) for kernels-2.x and kernels-3.")
@model_option(default=None)
@click.option("--batch-size", type=int, default=None, help="Per-device batch size (> 0).")
@click.option("--precision", default="fp32", show_default=True,
              type=click.Choice(["fp32", "amp"]), help="amp: V100 tensor-core variant.")
@click.option("--out", default=None, type=OutPath(writes=NEW_FOLDER, file_okay=False),
              help="Write runs.parquet + layer_timings.parquet into this new folder.")
@click.option("--csv", "as_csv", is_flag=True, help="Write CSV instead of Parquet.")
@click.option("--report", is_flag=True, help="Print the method's measured error and exit.")
@release_option("Release for --report ({}).".format("'latest': the newest"))
@click.option("--fragment", default=None,
              type=OutPath(writes=("{}/reconstruction*.md", "{}/reconstruction*.png"),
                           file_okay=False),
              help="With --report: also write reconstruction.md (+ PNG) into this folder "
              "(adds the leave-one-out table, about 20 s); with --method kernels-2.0: "
              "reconstruction_kernels.md (+ PNG); with --method kernels-3: "
              "reconstruction_kernels3.md (+ PNG).")
@click.option("--method", default="roofline-1.1", show_default=True,
              type=click.Choice(["roofline-1.1", "kernels-2.0", "kernels-2.1", "kernels-3"]),
              help="Cost model version (docs/reconstruction-kernels.md for kernels-2.x, "
              "docs/reconstruction-kernels3.md for kernels-3).")
@click.option("--framework", default=None,
              help="kernels-3: the framework whose family's per-layer overhead the trace "
              f"carries: {' | '.join(NAMES)} (default: the device's, see "
              "docs/reconstruction-kernels3.md; none = device time only).")
@click.option("--figure", default=None, type=OutPath(writes=("{}",), dir_okay=False),
              help="With --report --method kernels-2.0: write the log-log predicted vs "
              "measured plot (PNG) here; with --method kernels-3: the per-GPU "
              "leave-one-GPU-out parity plot.")
@click.option("--refit", is_flag=True, help="With --report --method kernels-3: recompute the "
              "fit and the evaluation from the release's tables (minutes) and say where they "
              "differ from the stored figures.")
def reconstruct(device, model, batch_size, precision, out, as_csv, report, release,
                fragment, method, framework, figure, refit) -> None:
    """Reconstruct a per-layer training trace (provenance=reconstructed), or --report the
    method's fit and its error, from the release's stored rows (nothing is measured on this
    machine): roofline-1.1 against the release's stored measured CPU runs and the B-Caffe
    logs; kernels-2.x against the DeepBench kernels (leave-one-out); kernels-3 its
    pre-registered clauses (docs/reconstruction-kernels3.md)."""
    from ..errors import DgtracesError

    if refit and not (report and method == "kernels-3"):
        raise DgtracesError("--refit is for --report --method kernels-3", code=Code.BAD_INPUT)
    if report and method == "kernels-3":
        _report3(release, figure, refit, fragment)
        return

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
        from dgtraces.evaluation.kernel_summary import write as write_fragment
        from dgtraces.store.release import Release

        with working("kernels-2.0 report: leave-one-outs (about a minute)"):
            summary = build(Release.open(release).tables(), release)
        click.echo(summary.text())
        _outputs(figure, fragment, lambda f: plot(summary, f),
                 lambda d: write_fragment(summary, d))
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
    if method == "kernels-3":
        from dgtraces.reconstruct import kernels3_trace
        from dgtraces.store.release import Release

        rec = kernels3_trace(device, model, batch_size, Release.open(release), precision,
                             framework=framework)
    else:
        rec = reconstruct_trace(device, model, batch_size, precision, method=method,
                                framework=framework)
    r = rec.run
    click.echo(f"{r['run_id']}: fwd {r['fwd_ms']:.2f} ms, bwd {r['bwd_ms']:.2f} ms, update "
               f"{r['update_ms']:.2f} ms, iteration {r['iter_ms']:.2f} ms "
               f"({1000 * batch_size / r['iter_ms']:.1f} img/s)  [reconstructed, "
               f"{r['collector_version']}]")
    if rec.pricing is not None:
        _pricing(rec.pricing)
    else:
        counts = rec.bound[["fwd_bound", "bwd_bound"]].stack().value_counts()
        click.echo("layer-directions by bound: "
                   + ", ".join(f"{k} {v}" for k, v in counts.items()))
    if out:
        from dgtraces.tables.write import write_tables

        for path in write_tables(out, {"runs": runs_frame([rec]),
                                       "layer_timings": rec.layer_timings},
                                 fmt="csv" if as_csv else "parquet"):
            click.echo(f"wrote {path}")


def _pricing(pricing) -> None:
    """kernels-3: how many kernels each rule priced, and the extrapolated layers."""
    from collections import Counter

    tags: Counter = Counter()
    for cell in list(pricing["fwd_priced_by"]) + list(pricing["bwd_priced_by"]):
        tags.update(t for t in str(cell).split("+") if t)
    click.echo("kernels priced by: " + ", ".join(f"({k}) {v}" for k, v in sorted(tags.items()))
               + "  [a measured, b1 own kernel batch-scaled, b2 shape effect, b3 model, "
               "c bytes; @gpu: transferred]")
    extra = list(pricing.loc[pricing["extrapolated"], "layer"])
    if extra:
        click.echo(f"extrapolated (outside the fitted ranges): {len(extra)} layer(s): "
                   + ", ".join(extra[:8]) + (" ..." if len(extra) > 8 else ""))


def _report3(release, figure, refit, fragment) -> None:
    """``--report --method kernels-3``: the stored figures; ``--refit``: recomputed too;
    ``--fragment``: the card fragment and its figure."""
    from dgtraces.evaluation.kernels3_report import differences, text
    from dgtraces.evaluation.kernels3_report import figure as plot
    from dgtraces.evaluation.kernels3_report import refit as redo
    from dgtraces.reconstruct.kernels3.params import TABLE
    from dgtraces.store.release import Release

    from ..errors import DgtracesError

    rel = Release.open(release)
    if TABLE not in rel.table_names:
        raise DgtracesError(f"release {rel.version} has no {TABLE} table (kernels-3 needs "
                            "0.6.0 or later)", code=Code.NO_CALIBRATION)
    stored = rel.table(TABLE)
    click.echo(text(stored, rel.version))
    if refit:
        fresh = redo(rel, lambda what: click.echo(what, err=True))
        diff = differences(stored, fresh)
        click.echo(f"refit: {len(fresh)} rows recomputed; "
                   + (f"{len(diff)} differ from the stored ones:" if diff else
                      "all equal to the stored ones (rtol 1e-6)"))
        for line in diff[:20]:
            click.echo(f"  {line}")
    from dgtraces.evaluation.kernels3_report import write

    _outputs(figure, fragment, lambda f: plot(rel, f), lambda d: write(rel, d))


def _outputs(figure, fragment, plot, write_fragment) -> None:
    """``--figure`` (a PNG) and ``--fragment`` (a card fragment and its figure), if asked."""
    if figure:
        plot(figure)
        click.echo(f"wrote {figure}")
    if fragment:
        for path in write_fragment(fragment):
            click.echo(f"wrote {path}")
