"""Progress of long commands on stderr (stdout carries the result): a rich spinner or bar in
a terminal, plain lines elsewhere (a log, CI, a pipe), where rich draws nothing (#36 trial:
``reconstruct --report --method kernels-2.x`` ran for minutes, ``validate-predictor
--markdown`` for seconds, without a sign of life)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import click


@contextmanager
def working(label: str, total: int | None = None) -> Iterator[Callable[..., None]]:
    """Show ``label`` until the block ends; yields ``advance(n=1)`` for ``total`` steps
    (None: a spinner with the elapsed time)."""
    from rich.console import Console

    console = Console(stderr=True)
    start = time.monotonic()
    if console.is_terminal:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
        )

        columns = [SpinnerColumn(), TextColumn("{task.description}")]
        if total is not None:
            columns += [BarColumn(), MofNCompleteColumn()]
        with Progress(*columns, TimeElapsedColumn(), console=console, transient=True) as bar:
            task = bar.add_task(label, total=total)
            yield lambda n=1: bar.advance(task, n)
        return
    done = [0]

    def advance(n: int = 1) -> None:
        done[0] += n
        click.echo(f"{label}: {done[0]}/{total}", err=True)

    click.echo(f"{label} ...", err=True)
    yield advance
    click.echo(f"{label}: done in {time.monotonic() - start:.0f} s", err=True)
