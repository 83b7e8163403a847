"""contribute, staging (list | show ID | reject ID), release, recipe."""

from __future__ import annotations

from contextlib import contextmanager

import click

from dgtraces.errors import Code
from dgtraces.io.terminal_text import inert

from . import NEW_FOLDER, OutPath, echo_json, model_list

LOCK_SECONDS = click.FloatRange(0)  # a negative timeout would make filelock wait forever
LOCK_HELP = "Seconds to wait for the store lock (data/.lock) before failing with LOCKED."


@contextmanager
def _status(text: str):
    """A rich spinner on stderr while long work runs."""
    from rich.console import Console

    with Console(stderr=True).status(text) as status:
        yield status


@click.command()
@click.argument("path", required=False, type=click.Path())
@click.option("--template", "template_dir", default=None,
              type=OutPath(writes=NEW_FOLDER, file_okay=False),
              help="Write a fillable example contribution into this (new) folder instead.")
@click.option("--dry-run", is_flag=True, help="Validate only; stage nothing.")
@click.option("--lock-timeout", default=10.0, show_default=True, type=LOCK_SECONDS,
              help=LOCK_HELP)
def contribute(path, template_dir, dry_run, lock_timeout) -> None:
    """Validate a contribution (folder or .zip) and stage it under data/staging/<id>/.

    PATH holds contribution.yaml, runs and layer_timings (CSV or Parquet) and optionally
    iterations and comm. Any failure is reported with file, row, column, expected and found;
    nothing is written. See CONTRIBUTING.md.
    """
    from ..errors import DgtracesError

    if template_dir:
        from ..contribute.template import TO_REPLACE, write_template

        for p in write_template(template_dir):
            click.echo(f"wrote {p}")
        click.echo("the example is refused until you replace its placeholders:")
        for item in TO_REPLACE:
            click.echo(f"  - {item}")
        click.echo(f"then: dgtraces contribute {template_dir} --dry-run")
        return
    if not path:
        raise DgtracesError("give PATH (a folder or .zip) or --template DIR",
                            code=Code.BAD_INPUT)
    from ..contribute import contribute as run

    with _status(f"validating {path}") as status:
        result = run(path, timeout=lock_timeout, dry_run=dry_run,
                     progress=lambda text: status.update(f"validating {path}: {text}"))
    rows = ", ".join(f"{t} {n}" for t, n in sorted(result.rows.items()))
    if dry_run:
        click.echo(f"ok  {path} passes every check ({rows} rows); nothing staged")
        return
    click.echo(f"staged {result.id}  ({rows} rows)")
    click.echo("a maintainer publishes it with: dgtraces release X.Y.Z")


@click.group()
def staging() -> None:
    """List, show or reject staged contributions."""


@staging.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def list_cmd(as_json) -> None:
    """Staged contributions, oldest first."""
    from dgtraces.store.manifest import data_root

    from ..contribute.staging import list_staged

    entries = list_staged(data_root())
    if as_json:
        echo_json([{"id": e.id, "contributor": e.contributor, "rows": e.info["rows"]}
                   for e in entries])
        return
    if not entries:
        click.echo("staging is empty")
    for e in entries:
        rows = ", ".join(f"{t} {n}" for t, n in sorted(e.info["rows"].items()))
        click.echo(inert(f"{e.id}  {e.contributor}  ({rows})"))  # contributor text (#29 M7)


@staging.command()
@click.argument("entry_id")
def show(entry_id) -> None:
    """Metadata, row counts and runs of one staged contribution."""
    from dgtraces.store.manifest import data_root

    from ..contribute.staging import get_staged

    e = get_staged(entry_id, data_root())
    info = {k: e.info[k] for k in ("id", "created_utc", "source", "digest", "rows", "meta")}
    info["runs"] = sorted(e.info["fingerprints"])
    echo_json(info, sort_keys=True)


@staging.command()
@click.argument("entry_id")
@click.option("--lock-timeout", default=10.0, show_default=True, type=LOCK_SECONDS,
              help=LOCK_HELP)
def reject(entry_id, lock_timeout) -> None:
    """Remove a staged contribution (it will not be released)."""
    from dgtraces.store.manifest import data_root

    from ..contribute.staging import reject as run

    e = run(entry_id, root=data_root(), timeout=lock_timeout)
    click.echo(inert(f"rejected {e.id} ({e.contributor})"))


@click.command()
@click.argument("version")
@click.option("--lock-timeout", default=10.0, show_default=True, type=LOCK_SECONDS,
              help=LOCK_HELP)
@click.option("--add-models", "models", default=None, callback=model_list,
              help="Comma list of registry models whose layers rows the release adds.")
def release(version, lock_timeout, models) -> None:
    """Build release VERSION = latest release + every staged contribution (+ the layers
    rows of --add-models).

    Writes the release (immutable, manifest with sha256), a CHANGELOG entry and the card,
    then clears the released entries from staging. Interrupted? Rerun the same command.
    """
    from ..contribute.release import build_release

    with _status(f"building release {version}"):
        result = build_release(version, timeout=lock_timeout, models=models or ())
    for note in result.notes:
        click.echo(inert(f"note: {note}"), err=True)
    verb = "completed" if result.resumed else "released"
    added = ", ".join(f"+{n} {t}" for t, n in sorted(result.rows_added.items()))
    extra = f" and model(s) {', '.join(result.models)}" if result.models else ""
    click.echo(f"{verb} {result.version} (parent {result.parent}) from "
               f"{len(result.ids)} contribution(s){extra}{': ' + added if added else ''}")
    click.echo(f"  {result.path}")


@click.command()
@click.argument("version")
@click.option("--plan", is_flag=True, help="Print the recipe's steps and exit.")
@click.option("--dry-run", is_flag=True, help="Run every step and validate; write nothing.")
@click.option("--root", default=None, type=click.Path(file_okay=False),
              help="Data root to build in (default: the store's).")
def recipe(version, plan, dry_run, root) -> None:
    """Build release VERSION from its declarative recipe (dgtraces/recipes/releases.py)."""
    from ..recipes import get_recipe

    r = get_recipe(version)
    if plan:
        click.echo(f"v{r.version} = " + (f"v{r.base}" if r.base else "nothing"))
        for step in r.steps:
            kind = "measures" if step.measures else "deterministic"
            click.echo(f"  + {', '.join(step.tables)} <- {step.producer} ({kind})")
            if step.command:
                click.echo(f"      {step.command}")
        for target in r.after:
            click.echo(f"  then {target}")
        return
    from ..recipes.build import build_recipe, context

    with _status(f"building v{r.version} from its recipe") as status:
        ctx = context(r, root, progress=lambda what: status.update(f"v{r.version}: {what}"))
        result = build_recipe(r, root=root, dry_run=dry_run, ctx=ctx)
    for table, n in sorted(result.rows_added.items()):
        click.echo(f"  + {table:<14} {n:>6} rows")
    click.echo("dry run: valid, nothing written" if result.path is None
               else f"wrote {result.path}")
    for item in result.after:
        click.echo(f"then: {item}")
