"""The ``dgtraces`` command: a thin click layer that parses, calls the library, and prints.

Subcommands are registered by import path and loaded only when invoked, so ``--help``
imports neither pandas nor any other heavy dependency. Library errors
(:class:`~dgtraces.errors.DgtracesError`) are printed as reports with exit code 1.
"""

from __future__ import annotations

import importlib
import sys

import click

from dgtraces.errors import Code

from .._version import __version__

NEW_FOLDER = ("{}/*",)  # a folder that must be new or empty: any name in it


class OutPath(click.Path):
    """A path the command writes to: never inside the data folder, and no name it writes a
    link (BAD_INPUT, before any work). ``writes`` declares those names: patterns where
    ``{}`` is the given path and ``*`` any part of a name (``("{}", "{}.meta.json")`` for
    a file and its sidecar, ``("{}/README.md",)`` for a folder's files)."""

    def __init__(self, *, writes: tuple[str, ...], **kw):
        super().__init__(**kw)
        if not writes or not all("{}" in w for w in writes):
            raise ValueError(f"OutPath(writes=) needs patterns naming {{}}, got {writes!r}")
        self.writes = writes

    def convert(self, value, param, ctx):
        value = super().convert(value, param, ctx)
        from dgtraces.io.files import check_targets, output_names
        from dgtraces.store.manifest import refuse_inside_data

        option = "/".join(param.opts) if param is not None else "--out"
        check_targets(output_names(value, self.writes), option)  # a link: never followed
        refuse_inside_data(value, option)
        return value


def echo(text: object = "", err: bool = False) -> None:
    """``click.echo`` for a line that holds external text (a log's GPU or layer names, a
    trace's op names, a file name, a fit's or a release's ``source``): every control
    character escaped by :func:`dgtraces.io.terminal_text.inert`, the one filter of printed
    external strings (#29 M7, #36 item 6); newlines and tabs are kept."""
    from dgtraces.io.terminal_text import inert

    click.echo(inert(text, keep_newlines=True), err=err)


def echo_json(doc: object, **kw) -> None:
    """Print ``doc`` as strict JSON, the one writer of every ``--json`` output: a non-finite
    float is ``null`` (Python's ``json`` writes ``NaN``/``Infinity``, which JSON has not, and
    ``allow_nan=False`` alone raised a traceback; #36 low); what JSON cannot encode is its
    ``str``. ``kw``: ``json.dumps`` options (``sort_keys``)."""
    import json
    import math

    def clean(x):
        if isinstance(x, float) and not math.isfinite(x):
            return None
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [clean(v) for v in x]
        return x

    click.echo(json.dumps(clean(doc), indent=2, allow_nan=False, default=str, **kw))


def model_choice() -> click.Choice:  # case-insensitive, did-you-mean
    """The dataset models of the registry (plain data: no pandas is imported)."""
    from ..models.registry import MODELS
    from .options import NameChoice

    return NameChoice(MODELS)


def model_option(*decls: str, **kw):
    """``--model`` restricted to the registry's dataset models, with their names in --help."""
    return click.option(*(decls or ("--model",)), type=model_choice(), **kw)


def model_list(ctx, param, value: str | None) -> tuple[str, ...] | None:
    """Callback of a comma-list ``--models`` option: each item must be a registry model."""
    if value is None:
        return None
    choice = model_choice()
    return tuple(choice.convert(v.strip(), param, ctx) for v in value.split(","))


# name -> (module:attribute, one-line help). Add a command here and in its own module.
COMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("dgtraces.cli.demo:demo",
             "Tour: dataset contents, two SQL questions, a prediction, validation figure."),
    "info": ("dgtraces.cli.core:info", "Show version, releases, tables and row counts."),
    "validate": ("dgtraces.cli.core:validate", "Validate CSV/Parquet files against the schemas."),
    "verify": ("dgtraces.cli.core:verify", "Check every release's bytes against its manifest."),
    "migrate-store": ("dgtraces.cli.core:migrate_store",
                      "Rewrite old one-file-per-table releases into shards (idempotent)."),
    "schemas": ("dgtraces.cli.core:schemas", "Export the table schemas to schemas/*.json."),
    "predict": ("dgtraces.cli.predict:predict",
                "Predict one S-SGD iteration (DAG model) with breakdown, timeline, Gantt."),
    "sweep": ("dgtraces.cli.sweep:sweep",
              "Predict every combination of workers/links/policies/batches/models."),
    "validate-predictor": ("dgtraces.cli.sweep:validate_predictor",
                           "Predict measured/published iterations rows; MAPE + parity plot."),
    "collective": ("dgtraces.cli.collective:collective",
                   "Predict one collective's time per message size (NCCL's model; nccl-tests "
                   "layout)."),
    "validate-comm": ("dgtraces.cli.collective:validate_comm",
                      "Predict nccl-tests logs row by row; per-log MAPE and a plot."),
    "collect": ("dgtraces.cli.collect:collect",
                "Measure layer timings, collectives and S-SGD iterations with PyTorch."),
    "import": ("dgtraces.cli.importers:import_group",  # names no importer: the registry does
               "Import traces, logs and published tables recorded elsewhere as table CSVs "
               "(`dgtraces import --help` lists the importers)."),
    "sql": ("dgtraces.cli.query:sql", "Run sandboxed, read-only SQL on a release (DuckDB)."),
    "export-hf": ("dgtraces.cli.query:export_hf", "Write a Hugging Face Hub-ready dataset folder."),
    "card": ("dgtraces.cli.query:card", "Regenerate the dataset card and croissant.json."),
    "cite": ("dgtraces.cli.cite:cite",
             "Print BibTeX: package, dataset release (manifest digest), DAG paper."),
    "contribute": ("dgtraces.cli.contribute:contribute",
                   "Validate a contribution (folder or .zip) and stage it."),
    "staging": ("dgtraces.cli.contribute:staging", "List, show or reject staged contributions."),
    "release": ("dgtraces.cli.contribute:release",
                "Build a new release from the latest one plus staged contributions."),
    "export-astra-sim": ("dgtraces.cli.export:export_astra_sim",
                         "Write a stored run as an ASTRA-sim 1.0 text workload."),
    "export-chakra": ("dgtraces.cli.export:export_chakra",
                      "Write a stored run's predicted DAG as Chakra execution traces."),
    "recipe": ("dgtraces.cli.contribute:recipe",
               "Build (or --plan) a release from its declarative recipe."),
    "reconstruct": ("dgtraces.cli.reconstruct:reconstruct",
                    "Reconstruct a K80/V100 layer trace, or --report the method's error."),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx):
        return sorted(COMMANDS)

    def get_command(self, ctx, name):
        if name not in COMMANDS:
            return None
        target, _ = COMMANDS[name]
        module, attr = target.split(":")
        from .options import ascii_numbers

        return ascii_numbers(getattr(importlib.import_module(module), attr))

    def invoke(self, ctx):
        from ..errors import DgtracesError

        try:
            return super().invoke(ctx)
        except DgtracesError as exc:
            sub = self.get_command(ctx, ctx.invoked_subcommand or "")
            if sub is not None:
                name_options(exc, _options(sub))
            raise

    def format_commands(self, ctx, formatter):
        rows = [(name, COMMANDS[name][1]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def _options(cmd: click.Command) -> dict[str, str]:
    """Parameter name -> its long option (``batch_size`` -> ``--batch-size``), for a command
    and, for a group, its subcommands."""
    out: dict[str, str] = {}
    for sub in getattr(cmd, "commands", {}).values():
        out.update(_options(sub))
    for p in cmd.params:
        longs = [o for o in getattr(p, "opts", []) if o.startswith("--")]
        if isinstance(p, click.Option) and p.name and longs:
            out[p.name] = max(longs, key=len)
        elif isinstance(p, click.Argument) and p.name:
            out.setdefault(p.name, p.human_readable_name)  # OUT
    return out


def name_options(exc, options: dict[str, str]) -> None:
    """Make a library error about an option's value say ``option --batch-size``, not
    ``column 'batch_size'``: failures located by a field name that is one of the command's
    parameters (and not in a file or row, where it is a data column) are renamed."""
    from dataclasses import replace

    renamed = []
    for f in exc.failures:
        opt = options.get(f.column) if f.file is None and f.row is None else None
        renamed.append(replace(f, column=opt) if opt else f)
        if opt and exc.message.startswith(f"{f.column}: "):
            exc.message = f"{opt}: " + exc.message[len(f.column) + 2:]
            exc.args = (exc.message,)
    exc.failures = renamed


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="dgtraces")
def main() -> None:
    """Layer-wise DL training traces (AlexNet, GoogLeNet, ResNet-50) and a DAG predictor
    of synchronous data-parallel SGD iteration time."""


# An error prints at most SHOWN_FAILURES of its located failures ("... and N more"), except
# in the commands whose report the failures are (a contributor fixes every row listed)
SHOWN_FAILURES = 5
LISTS_FAILURES = frozenset({"validate", "contribute", "verify", "migrate-store", "release"})


def run() -> None:
    """Console-script entry: turn library errors into reports and exit code 1."""
    from ..errors import DgtracesError

    try:
        main.main(standalone_mode=False)
    except DgtracesError as exc:
        from dgtraces.io.terminal_text import inert

        command = next((a for a in sys.argv[1:] if a in COMMANDS), None)
        report = exc.report() if command in LISTS_FAILURES else exc.report(SHOWN_FAILURES)
        click.echo(inert(report, keep_newlines=True), err=True)  # #29 M7
        sys.exit(1)
    except OSError as exc:  # an output path that cannot be written, a vanished input, ...
        where = f"{exc.filename}: " if exc.filename else ""
        click.echo(DgtracesError(f"{where}{exc.strerror or exc}", code=Code.IO_ERROR).report(),
                   err=True)
        sys.exit(1)
    except (click.exceptions.Abort, KeyboardInterrupt):
        click.echo("interrupted (Ctrl-C)", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
