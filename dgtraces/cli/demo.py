"""demo: what the dataset holds, two SQL questions, a prediction with Gantt charts, and the
predictor's validation figure; prints where each file went."""

from __future__ import annotations

import click

from . import OutPath


@click.command()
@click.option("--out", default="dgtraces-demo", show_default=True,
              type=OutPath(writes=("{}/*.csv", "{}/*.png"), file_okay=False),
              help="Folder for the demo's CSVs and PNGs.")
@click.option("--release", default=None, help="Release to show (default: latest).")
def demo(out: str, release: str | None) -> None:
    """Show what dgtraces does on the shipped data, in well under a minute.

    \b
    Example:
      dgtraces demo --out /tmp/dgtraces-demo
    """
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from ..demo import STEPS, run_demo

    labels = {"overview": "reading the release", "sql": "running two SQL questions",
              "predict": "predicting ResNet-50 on 8 V100s (3 policies, Gantt charts)",
              "validate": "validating the predictor (parity figure)"}
    console = Console(stderr=True)
    with Progress(SpinnerColumn(), TextColumn("{task.description}"),
                  TextColumn("[{task.completed}/{task.total}]"), TimeElapsedColumn(),
                  console=console, transient=True) as bar:
        task = bar.add_task("starting", total=len(STEPS))

        def on_step(name: str) -> None:
            done = STEPS.index(name)
            bar.update(task, completed=done, description=labels[name])

        res = run_demo(out, release, on_step)
        bar.update(task, completed=len(STEPS))
    _print(res)


def _table(df, floats: str = "{:.4g}") -> str:
    return df.to_string(index=False, float_format=lambda v: floats.format(v))


def _print(res) -> None:
    echo = click.echo
    echo(f"dgtraces demo on release {res.release}")
    echo("\n1. What the release holds (rows per table):")
    echo("   " + ", ".join(f"{t} {n}" for t, n in res.tables.items()))
    echo("   rows per provenance and device:")
    wide = res.rows_by_provenance.pivot_table(index=["provenance", "device"],
                                              columns="table_name", values="rows",
                                              aggfunc="sum", fill_value=0)
    echo(_indent(wide.reset_index().to_string(index=False)))
    echo("\n2a. SQL: the five largest gradients (bytes per iteration per worker):")
    echo(_indent(res.queries["largest_gradients"], "   | "))
    echo(_indent(_table(res.largest_gradients)))
    echo("\n2b. SQL: communication per backward compute where one run logged both per layer:")
    echo(_indent(res.queries["comm_per_compute"], "   | "))
    echo(_indent(_table(res.comm_per_compute)))
    from ..demo import PREDICT

    p = PREDICT
    echo(f"\n3. Modelled: {p.model} batch {p.batch_size} on {p.workers} "
         f"{p.device.upper()}s ({p.workers // p.gpus_per_node} nodes x "
         f"{p.gpus_per_node}, {p.intra} inside a node, {p.inter} between, "
         f"{_algorithm(res.predictions)} all-reduce):")
    preds = res.predictions
    echo(_indent(_table(preds.drop(columns=["provenance", "framework", "overheads"]))))
    if len(preds):  # predict's defaults, as predict prints them
        echo(f"   framework: {preds['framework'].iloc[0]}; overheads "
             f"{preds['overheads'].iloc[0]} added after the DAG (dag_iter_ms: without them)")
    echo("\n4. Predictor validation (modelled vs measured/published iterations rows):")
    for prov, h in res.validation.items():
        echo(f"   {prov}: MAPE {h['mape_pct']:.2f}% over {h['rows']} rows "
             f"({h['scope']}; max {h['max_ape_pct']:.2f}%)")
    echo("\nfiles:")
    for what, path in res.files.items():
        echo(f"  {what:<20} {path}")


def _indent(text: str, prefix: str = "   ") -> str:
    return "\n".join(prefix + line for line in text.splitlines())


def _algorithm(predictions) -> str:
    """The all-reduce algorithm the demo's predictions used (predict's device default)."""
    algos = sorted(set(predictions["algorithm"])) if len(predictions) else ["none"]
    return ", ".join(algos)
