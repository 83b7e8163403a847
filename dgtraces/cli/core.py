"""info, validate, verify, schemas."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from dgtraces.errors import Code
from dgtraces.store import verify as verify_mod

from . import OutPath, echo_json


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
def info(as_json: bool) -> None:
    """Show package version, data folder, releases and the latest release's tables."""
    from dgtraces.store import manifest as store
    from dgtraces.store import release
    from dgtraces.store.locate import locate

    from .._version import __version__

    loc = locate()
    rels = store.list_releases()
    out: dict[str, Any] = {"version": __version__, "data": str(loc.root), "data_kind": loc.kind,
                           "releases": rels,
                           "latest": rels[-1] if rels else None, "tables": {}}
    if rels:
        out["tables"] = {k: v["rows"] for k, v in sorted(release.tables(rels[-1]).items())}
    if as_json:
        echo_json(out)
        return
    click.echo(f"dgtraces {out['version']}")
    click.echo(f"data:     {out['data']} ({loc.kind})")
    click.echo(f"releases: {', '.join(rels) or 'none'}")
    if rels:
        click.echo(f"latest:   {rels[-1]}")
        for name, rows in out["tables"].items():
            click.echo(f"  {name:<14} {rows:>8} rows")


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--table", default=None, help="Table of all PATHS (default: from file names).")
@click.option("--no-store", is_flag=True, help="Do not look up run ids in the latest release.")
def validate(paths, table, no_store) -> None:
    """Validate CSV/Parquet files lazily; exit 1 with a per-row failure report.

    Files are never modified. The table is taken from each file's name (layer_timings.csv)
    unless --table is given.
    """
    from dgtraces.contribute.files import validate_files

    counts = validate_files(list(paths), table, use_store=not no_store)
    for name, rows in counts.items():
        click.echo(f"ok  {name}: {rows} rows")


@click.command()
def verify() -> None:
    """Check manifest digests, sizes and sha256 of every release; exit 1 on any change."""
    from dgtraces.store import manifest as store

    from ..errors import IntegrityError

    report = verify_mod.verify()
    for tmp in report.stale_temps:
        click.echo(f"note: stale temp from an interrupted write (ignored): {tmp}", err=True)
    for shard in report.unreferenced:
        click.echo(f"note: shard no release lists (an interrupted release; ignored): {shard}",
                   err=True)
    if report.legacy:
        click.echo(f"note: release(s) {', '.join(report.legacy)} still in the old "
                   f"one-file-per-table layout: {store.MIGRATE_HINT}", err=True)
    if not report.ok:
        raise IntegrityError(f"{len(report.failures)} integrity failure(s)",
                             failures=report.failures)
    click.echo(f"ok  {len(report.releases)} release(s), {report.files_checked} file(s) "
               f"verified: {', '.join(report.releases)}")


@click.command()
@click.option("--out", default="schemas", show_default=True,
              type=OutPath(writes=("{}/*.json",), file_okay=False))
@click.option("--check", is_flag=True, help="Exit 1 if files differ from the code.")
def schemas(out, check) -> None:
    """Export every table schema to OUT/<table>.json (or --check they are current)."""
    from dgtraces.tables.export import export, stale

    if check:
        if not Path(out).is_dir():
            from ..errors import DgtracesError

            raise DgtracesError(f"{out}: no schemas folder here (run from the repository root "
                                "or pass --out)", code=Code.NOT_FOUND)
        diff = stale(out)
        if diff:
            click.echo("stale: " + ", ".join(diff), err=True)
            sys.exit(1)
        click.echo("ok  schemas are current")
        return
    for path in export(out):
        click.echo(f"wrote {path}")


@click.command("migrate-store")
@click.option("--lock-timeout", default=10.0, show_default=True, type=click.FloatRange(0),
              help="Seconds to wait for the store lock.")
def migrate_store(lock_timeout) -> None:
    """Rewrite old one-file-per-table releases into content-addressed shards (idempotent).

    Each table read back from its shards is checked equal to the old file before the
    release's manifest is replaced; then `verify` runs over the whole store.
    """
    from dgtraces.store.migrate import migrate

    from ..errors import IntegrityError

    result = migrate(timeout=lock_timeout)
    for version in result.migrated:
        shared = ", ".join(result.shared.get(version, [])) or "none"
        click.echo(f"migrated  {version} (tables sharing the parent's shards: {shared})")
    for version in result.already:
        click.echo(f"ok  {version} already in the shard layout")
    click.echo(f"legacy files {result.bytes_before} B -> new shards {result.bytes_after} B")
    report = verify_mod.verify()
    if not report.ok:
        raise IntegrityError(f"{len(report.failures)} integrity failure(s) after migration",
                             failures=report.failures)
    click.echo(f"ok  verify: {len(report.releases)} release(s), {report.files_checked} "
               "file(s)")
