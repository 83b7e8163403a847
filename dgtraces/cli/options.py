"""Shared option conventions of the CLI (issue #12 item 7), declared once:

* every multi-value option takes ONE comma list (ranges ``LO-HI[:STEP]`` for integers) and is
  named in the plural; single-value options are singular;
* units in option names match the columns: ``--bucket-mib`` (MiB), ``--link-bandwidth-gb-s``
  (GB/s, as ``bandwidth_gb_s``), ``--link-alpha-us``;
* ``--release latest`` is the one sentinel for the newest release (the default);
* ``--io-overlap [off|on|both]`` means the same in ``predict`` and ``sweep`` (bare
  ``--io-overlap`` = ``on``; ``both`` only where several rows are produced);
* ``--link-fit FILE|INTERCONNECT[@WORKERS]`` (a user's own all-reduce measurement in place of
  both link presets) is declared once (:func:`link_fit_option`) for ``predict``, ``sweep``,
  ``export-chakra`` and ``collective``.

Old spellings stay as hidden, deprecated aliases for one release: they still work and print a
deprecation warning on stderr (:func:`deprecated_alias`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import click

LATEST = "latest"


def release_option(help_text: str = "Release version, or 'latest' (the newest).",
                   dest: str = "release") -> Callable:
    """``--release`` with the one sentinel ``latest``; the command receives None for it."""
    def convert(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
        return None if value in (None, "", LATEST) else value

    return click.option("--release", dest, default=LATEST, show_default=True, help=help_text,
                        callback=convert)


def io_overlap_option(choices: tuple[str, ...] = ("off", "on")) -> Callable:
    """``--io-overlap [off|on(|both)]``; bare ``--io-overlap`` means ``on``."""
    return click.option("--io-overlap", "io_overlap", type=click.Choice(choices),
                        default="off", show_default=True, is_flag=False, flag_value="on",
                        help="Prefetch the next batch during compute (bare flag = on"
                             + (", both = one row each" if "both" in choices else "") + ").")


LINK_FIT_HELP = ("An all-reduce fit of your own measurement, used for both links in place of "
                 "the --intra/--inter presets (alpha-beta collectives: NCCL's algorithm "
                 "choice is not used with a fit): a comm_fits / comm file or folder (collect "
                 "comm, import nccl-tests), a raw nccl-tests all_reduce_perf log, an OSU "
                 "output, or INTERCONNECT[@WORKERS] of the release's comm_fits.")


def link_fit_option() -> Callable:
    """``--link-fit`` (:mod:`dgtraces.comm.linkfit`); the command receives the spec or None."""
    return click.option("--link-fit", default=None, metavar="FILE|INTERCONNECT[@WORKERS]",
                        help=LINK_FIT_HELP)


def split_list(text: str | tuple | list, cast: Callable = str) -> tuple:
    """A comma list (or several, when an old repeatable alias was repeated) -> distinct items
    in order (a repeated item would repeat rows)."""
    parts = text if isinstance(text, (tuple, list)) else (text,)
    items = (x.strip() for part in parts for x in str(part).split(","))
    return tuple(dict.fromkeys(cast(x) for x in items if x))


def deprecated_alias(old: str, new: str, dest: str, *, convert: Callable[[Any], Any] | None = None,
                     multiple: bool = False, type: Any = None) -> Callable:
    """Add hidden option ``old`` feeding parameter ``dest`` of option ``new`` (after
    ``convert``), with a deprecation warning; giving both is a usage error."""
    hidden = f"_deprecated_{dest}"

    def deco(f: Callable) -> Callable:
        @functools.wraps(f)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            value = kwargs.pop(hidden)
            if value is not None and value != ():
                ctx = click.get_current_context()
                if ctx.get_parameter_source(dest) is not click.core.ParameterSource.DEFAULT:
                    raise click.UsageError(f"{old} is the deprecated spelling of {new}; "
                                           "give one of them")
                click.echo(f"warning: {old} is deprecated (removed in the next release); "
                           f"use {new}", err=True)
                kwargs[dest] = convert(value) if convert else value
            return f(*args, **kwargs)

        return click.option(old, hidden, hidden=True, default=None, multiple=multiple,
                            type=type)(wrapper)

    return deco


class NameChoice(click.Choice):
    """A choice of names matched case-insensitively (``AlexNet`` -> ``alexnet``); an unknown
    one is refused with a did-you-mean (:mod:`dgtraces.names`)."""

    def __init__(self, choices) -> None:
        super().__init__(choices, case_sensitive=False)

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Any:
        from dgtraces.names import canonical, did_you_mean

        hit = canonical(str(value), self.choices)
        if hit is not None:
            return hit
        self.fail(f"{value!r} is not one of {', '.join(map(str, self.choices))}"
                  f"{did_you_mean(str(value), map(str, self.choices))}", param, ctx)


class _AsciiDigits:
    """Mixin of click's number types: text holding a non-ASCII character is refused before
    it is converted (``int("３２")`` is 32, ``float("٣.٥")`` 3.5: digits the contribution
    checks refuse were taken by every number option; #36 low)."""

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Any:
        if isinstance(value, str) and not value.isascii():
            self.fail(f"{value!r} is not a number in ASCII digits", param, ctx)  # type: ignore[attr-defined]
        return super().convert(value, param, ctx)  # type: ignore[misc]


_ASCII_TYPES: dict[type, type] = {}


def ascii_numbers(cmd: click.Command) -> click.Command:
    """``cmd`` (and a group's subcommands) with every integer and float option and argument
    taking ASCII digits only (:class:`_AsciiDigits`); the CLI applies it to each command it
    loads, so no option can be declared without it."""
    for p in cmd.params:
        t = p.type
        if isinstance(t, (click.types.IntParamType, click.types.FloatParamType)) and \
                not isinstance(t, _AsciiDigits):
            cls = _ASCII_TYPES.setdefault(type(t), type(f"Ascii{type(t).__name__}",
                                                         (_AsciiDigits, type(t)), {}))
            strict: click.ParamType = object.__new__(cls)
            strict.__dict__.update(t.__dict__)
            p.type = strict
    for sub in getattr(cmd, "commands", {}).values():
        ascii_numbers(sub)
    return cmd


def gbit_to_gbyte(gbit_s: float) -> float:
    """Deprecated ``--link-gbps`` (Gb/s) -> ``--link-bandwidth-gb-s`` (GB/s)."""
    return gbit_s / 8.0


def framework_option(auto_help: str = "the profile the trace's run implies (its source or "
                     "metadata); none when not inferable",
                     wins: str | None = "--policy/--bucket-mib/--algorithm") -> Callable:
    """``--framework auto|NAME[@VERSION]|none`` (the profiles of ``reference.frameworks``;
    ``auto`` is the default, ``none`` the predictor without a profile). Unknown names are
    UNKNOWN_FRAMEWORK with a did-you-mean. ``wins``: the command's own options that override
    a profile's settings when given (None: it has none; the help then names none)."""
    from ..reference.frameworks import AUTO, NAMES

    choices = " | ".join((AUTO,) + NAMES)
    win = f"; explicit {wins} win" if wins else ""
    return click.option("--framework", default=AUTO, show_default=True,
                        help=f"Framework profile: {choices}; auto = {auto_help} "
                             f"(NAME@VERSION for an older row{win}).")


def overheads_options(f: Callable) -> Callable:
    """``--overheads``, ``--iteration-cv``, ``--host-decode-img-s`` (``predict.overheads``)."""
    from ..predict.overheads import ADOPTED, CHOICES, DEFAULT

    for opt in reversed([
        click.option("--overheads", default=DEFAULT, show_default=True,
                     help="Terms added after the DAG: " + " | ".join(CHOICES)
                          + " (comma list; measured = the adopted terms: "
                          + ",".join(ADOPTED) + ")."),
        click.option("--iteration-cv", type=float, default=None,
                     help="Measured per-iteration spread (std/mean) for the sync term "
                          "(default: the shipped Kineto trace's steps)."),
        click.option("--host-decode-img-s", type=float, default=None,
                     help="Measured decode rate of one node's input pipeline (img/s), for "
                          "the input term."),
    ]):
        f = opt(f)
    return f


def explicit(ctx: click.Context, names: dict[str, str]) -> frozenset[str]:
    """Which of the command's parameters (``param -> profile field``) the user gave."""
    return frozenset(field for param, field in names.items()
                     if ctx.get_parameter_source(param) is not click.core.ParameterSource.DEFAULT)


def _fabric_names(hw: str) -> str:
    from dgtraces.comm.fabrics import FABRICS

    return ", ".join(n for n, f in FABRICS.items() if (f.hw == "net") == (hw == "net"))


def intra_help(plural: bool = False) -> str:
    return (("Comma list of boards: " if plural else "Board: ") + _fabric_names("board")
            + " (or a links.csv preset for the alpha-beta algorithms).")


def inter_help(plural: bool = False) -> str:
    """``--inter``: NIC presets (comm.fabrics), ``KIND:RATE`` specs and ``,sharp``."""
    from dgtraces.comm.fabrics import SPEC_KINDS

    return (("Comma list of NICs: " if plural else "NIC: ") + _fabric_names("net")
            + "; or KIND:RATE (" + "|".join(SPEC_KINDS) + ", e.g. ethernet:50gbps); "
            "append ',sharp' for SHARP on InfiniBand (ib-ndr,sharp, ib:400gbps,sharp).")


def inter_list(text: str) -> tuple[str, ...]:
    """A comma list of ``--inter`` values where ``,sharp`` belongs to the NIC before it.
    Repeats are removed only after ``sharp`` is attached (``ib-ndr,sharp,ib-hdr,sharp``
    keeps SHARP on both NICs)."""
    out: list[str] = []
    for item in (x.strip() for x in str(text).split(",")):
        if not item:
            continue
        if item.lower() == "sharp" and out:
            out[-1] = f"{out[-1]},{item}"
        else:
            out.append(item)
    return tuple(dict.fromkeys(out))


def nics_option(f: Callable) -> Callable:
    """``--nics-per-node`` (default: the NIC preset's count, e.g. efa-p4d 4; else 1)."""
    return click.option("--nics-per-node", default=None, type=int,
                        help="NICs (rails) per node; their bandwidth is shared by the node's "
                             "GPUs. [default: the NIC preset's count (efa-p3dn 1, efa-p4d 4, "
                             "efa-p5 32), else 1]")(f)


def nccl_options(f: Callable | None = None, *, per_process: bool | str = False,
                 default_means: str | None = None) -> Callable:
    """``--nccl VERSION`` and ``--nccl-time run|tuning`` (comm.nccl.Model); with
    ``per_process``, ``--gpus-per-process`` (nccl-tests ``-g``; default 1, or, when
    ``per_process`` is a text, None standing for that text); ``default_means``: what the
    default (None) stands for in a command where it is not the newest release."""
    from dgtraces.comm.nccl_versions import DEFAULT_VERSION, VERSIONS

    means = default_means or DEFAULT_VERSION

    def deco(g: Callable) -> Callable:
        opts = [
            click.option("--nccl", "nccl", default=LATEST, show_default=True,
                         callback=lambda c, p, v: None if v in (None, "", LATEST) else v,
                         help=f"NCCL release whose tuning model runs: {', '.join(VERSIONS)} "
                              f"('latest' = {means}); a patch release reads as its "
                              "minor (2.18.3 = 2.18)."),
            click.option("--nccl-time", type=click.Choice(("run", "tuning")), default="run",
                         show_default=True,
                         help="run: the time the chosen algorithm takes (launch, launched "
                              "channels, pipeline fill, achieved NIC bandwidth); tuning: "
                              "NCCL's ranking time (issue #25's figure with --nccl 2.7).")]
        if per_process:
            gpp_means = per_process if isinstance(per_process, str) else None
            opts.append(click.option(
                "--gpus-per-process", default=None if gpp_means else 1,
                show_default=not gpp_means, type=int,
                help="GPUs one process drives (nccl-tests -g): their kernels launch one "
                     "after another." + (f" [default: {gpp_means}]" if gpp_means else "")))
        for opt in reversed(opts):
            g = opt(g)
        return g

    return deco(f) if f is not None else deco
