"""sql, export-hf, card.

Only what each path needs is imported: the default table output of ``sql`` needs duckdb and
rich, never pandas or pandera.
"""

from __future__ import annotations

import contextlib
import sys

import click

from dgtraces.query.sandbox import DEFAULT_MEMORY_LIMIT_MIB, DEFAULT_TIMEOUT_S

from . import NEW_FOLDER, OutPath
from .options import release_option

FORMATS = ("table", "csv", "json", "parquet")


@contextlib.contextmanager
def _atomic_open(path: str | None, mode: str):
    """Yield a writable file for ``path`` (temp file + rename) or stdout when ``path`` is None."""
    if path is None:
        yield sys.stdout
        return
    from dgtraces.io.files import atomic_file

    with atomic_file(path, mode) as fh:
        yield fh


def _json_value(value):
    import math

    if isinstance(value, float) and not math.isfinite(value):  # JSON has no NaN/inf (#29)
        return None
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [_json_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _json_value(v) for k, v in value.items()}
    return str(value)


def _csv_value(value):
    return ("true" if value else "false") if isinstance(value, bool) else value


def _terminal_value(value):
    """A CSV value printed to a terminal: text made inert (#29 M7; files and pipes get the
    value as it is)."""
    from dgtraces.io.terminal_text import inert

    return inert(value) if isinstance(value, str) else _csv_value(value)


def _write_csv(q, out) -> int:
    import csv

    n = 0
    batches = q.batches()
    with _atomic_open(out, "w") as fh:
        writer = csv.writer(fh, lineterminator="\n")
        cell = _terminal_value if out is None and sys.stdout.isatty() else _csv_value
        writer.writerow([cell(c) for c in q.columns])
        for batch in batches:
            writer.writerows([cell(v) for v in row] for row in batch)
            n += len(batch)
    return n


def _write_json(q, out) -> int:
    import json

    n = 0
    batches = q.batches()
    with _atomic_open(out, "w") as fh:
        fh.write("[")
        for batch in batches:
            for row in batch:
                rec = {c: _json_value(v) for c, v in zip(q.columns, row, strict=True)}
                fh.write(("\n  " if n == 0 else ",\n  ") + json.dumps(rec, allow_nan=False))
                n += 1
        fh.write("\n]\n" if n else "]\n")
    return n


def _write_parquet(q, out) -> int:
    import pyarrow.parquet as pq

    schema, batches = q.arrow_batches()
    n = 0
    with _atomic_open(out, "wb") as fh:
        with pq.ParquetWriter(fh, schema, compression="zstd") as writer:
            for batch in batches:
                writer.write_batch(batch)
                n += batch.num_rows
    return n


MAX_CELL_CHARS = 1000  # a terminal cell; --format csv/json/parquet writes values whole


def _cell(value) -> str:
    """A value as shown in the terminal table: floats to 6 significant digits (whole numbers
    and values of a million or more without an exponent), null for missing; text made
    inert (control characters escaped, #29 M7)."""
    from dgtraces.io.terminal_text import inert

    if value is None:
        return "null"
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return str(value)
        if value.is_integer() and abs(value) < 1e15:
            return f"{value:.0f}"
        return f"{value:.1f}" if abs(value) >= 1e6 else f"{value:.6g}"
    text = value if isinstance(value, str) else str(value)
    if len(text) > MAX_CELL_CHARS:  # rendering stays quick whatever a query returns (#29)
        text = f"{text[:MAX_CELL_CHARS]}... [{len(text) - MAX_CELL_CHARS} more chars]"
    return inert(text)


def _print_table(q, max_rows: int) -> None:
    """A grid when every column fits the console width, else one ``column | value`` block
    per row. A pipe or file has no width (unless COLUMNS gives one): the grid is printed at
    its natural width, one line per row, for ``| cat``, ``| less -S`` and files (as plain
    text without rich where :func:`dgtraces.cli.grid.plain_grid` can)."""
    import os

    from dgtraces.cli.grid import plain_grid, plain_output
    from dgtraces.io.terminal_text import inert

    res = q.fetch(limit=max_rows)
    res.columns, res.types = [inert(c) for c in res.columns], [inert(t) for t in res.types]
    shown = f"first {len(res.rows)} rows" if res.truncated else f"{len(res.rows)} row(s)"
    cells = []
    for row in res.rows:
        cells.append([_cell(v) for v in row])
        q.check_time()  # the limit covers rendering too (#29)
    numeric = ("INT", "DOUBLE", "FLOAT", "DECIMAL", "REAL", "HUGEINT")
    right = [any(t in typ.upper() for t in numeric) for typ in res.types]
    more = "more rows not shown; raise --max-rows or use --format csv --out FILE"
    grid = plain_grid([str(c) for c in res.columns], [t.lower() for t in res.types], cells,
                      right) if plain_output() else None
    if grid is not None:
        sys.stdout.write(f"dgtraces {res.version}: {shown}\n" + grid
                         + (more + "\n" if res.truncated else ""))
        return
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console()
    console.print(f"[dim]dgtraces {res.version}: {shown}[/dim]")
    widths = [max([len(str(c)), len(t)] + [len(r[i]) for r in cells])
              for i, (c, t) in enumerate(zip(res.columns, res.types, strict=True))]
    needed = sum(widths) + 3 * len(widths) + 1
    if not console.is_terminal and not os.environ.get("COLUMNS"):
        console = Console(width=max(needed, 80))  # piped: no width to wrap at
    if needed > console.width:
        _print_vertical(console, res.columns, cells)
    else:
        table = Table()
        for col, typ, r in zip(res.columns, res.types, right, strict=True):
            # Text, not markup strings: names and values are data ("[x]" must print as is)
            table.add_column(Text.assemble(str(col), "\n", (typ.lower(), "dim")),
                             justify="right" if r else "left", overflow="fold")
        for row, raw in zip(cells, res.rows, strict=True):
            table.add_row(*(Text("null", style="dim") if v is None else Text(c)
                            for c, v in zip(row, raw, strict=True)))
        console.print(table)
    if res.truncated:
        console.print(f"[yellow]{more}[/yellow]")


def _print_vertical(console, columns: list[str], cells: list[list[str]]) -> None:
    """psql's expanded display: too wide for a grid, so one block per row."""
    from rich.text import Text

    pad = max((len(str(c)) for c in columns), default=0)
    for n, row in enumerate(cells, 1):
        console.print(Text(f"-[ row {n} ]" + "-" * max(0, min(console.width, 40) - 12),
                           style="dim"))
        for col, value in zip(columns, row, strict=True):
            console.print(Text(f"{str(col):<{pad}} | {value}"), soft_wrap=True)


@click.command()
@click.argument("query")
@release_option(dest="version")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True)
@click.option("--out", default=None, type=OutPath(writes=("{}",), dir_okay=False),
              help="Write the result to this file instead of stdout.")
@click.option("--max-rows", default=1000, show_default=True, type=click.IntRange(1),
              help="Rows shown by --format table.")
@click.option("--timeout-s", default=DEFAULT_TIMEOUT_S, show_default=True,
              type=click.FloatRange(0, 7 * 86400, min_open=True),
              help="Stop the query after this many seconds (QUERY_LIMIT).")
@click.option("--memory-limit-mib", default=DEFAULT_MEMORY_LIMIT_MIB, show_default=True,
              type=click.IntRange(64), help="DuckDB memory limit; nothing spills to disk.")
def sql(query, version, fmt, out, max_rows, timeout_s, memory_limit_mib) -> None:
    """Run a read-only SQL QUERY on a release; every table is a view of the same name.

    Only reading statements run (SELECT, DESCRIBE/SHOW/SUMMARIZE, PIVOT, EXPLAIN of those);
    the connection reads only the release's Parquet files, checked against the manifest.
    Everything else (other files, URLs, COPY/IMPORT/EXPORT, ATTACH, INSTALL/LOAD,
    SET/PRAGMA/CALL, CREATE) is refused (exit 1). See docs/security.md.

    \b
    dgtraces sql "SELECT model, count(*) FROM layers GROUP BY model"
    """
    from dgtraces.query.engine import Query

    if fmt == "parquet" and out is None:
        raise click.UsageError("--format parquet needs --out FILE")
    with Query(query, version, timeout_s=timeout_s, memory_limit_mib=memory_limit_mib) as q:
        if fmt == "table" and out is None:
            _print_table(q, max_rows)
            return
        if fmt == "table":
            raise click.UsageError("--format table prints to the terminal; use csv, json or "
                                   "parquet with --out")
        n = {"csv": _write_csv, "json": _write_json, "parquet": _write_parquet}[fmt](q, out)
    if out is not None:
        click.echo(f"wrote {out}: {n} row(s)", err=True)


@click.command("export-hf")
@click.argument("out", type=OutPath(writes=NEW_FOLDER, file_okay=False))
@release_option(dest="version")
def export_hf(out, version) -> None:
    """Write a Hugging Face Hub-ready dataset folder for a release to OUT.

    OUT gets data/<table>/<sha256>.parquet (each shard byte-for-byte), manifest.json,
    README.md (card with
    YAML configs, one per table), croissant.json and fragments/ (the figures the card
    links to). OUT must not exist or be empty.
    """
    from dgtraces.publish.hf import export

    for path in export(out, version):
        click.echo(f"wrote {path}")


@click.command()
@click.option("--out", default="cards", show_default=True,
              type=OutPath(writes=("{}/README.md", "{}/croissant.json"), file_okay=False))
@release_option(dest="version")
def card(out, version) -> None:
    """Regenerate the dataset card (README.md) and croissant.json for a release."""
    from dgtraces.publish import write_card

    for path in write_card(out, version):
        click.echo(f"wrote {path}")
