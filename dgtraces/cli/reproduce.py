"""What a printed prediction needs to be cited and re-run: the inputs a command was given
(every option that shapes the number, defaults included) and the command line that
reproduces it, both read from the command's own click declaration (no list kept by hand).
The command line writes every such option that has a value, defaults included and as
resolved (the release read, the NCCL release, the host link, the framework profile, the
overhead terms): a later package may change a default, and the line must still re-run the
same number."""

from __future__ import annotations

import shlex
from typing import Any

import click

OUTPUT_ONLY = frozenset({"timeline", "gantt", "kineto_dir", "as_json"})  # shape no number


def _options(ctx: click.Context) -> list[click.Option]:
    return [p for p in ctx.command.params if isinstance(p, click.Option) and not p.hidden
            and p.name not in OUTPUT_ONLY]


def inputs(ctx: click.Context, values: dict[str, Any]) -> dict[str, Any]:
    """Option name -> the value the command used (``values`` overrides what click parsed:
    deprecated spellings and the resolved release)."""
    return {p.name: values.get(p.name, ctx.params.get(p.name))
            for p in _options(ctx) if p.name is not None}


def command_line(ctx: click.Context, values: dict[str, Any],
                 decided: frozenset[str] = frozenset()) -> str:
    """``dgtraces <command> --opt value ...``: every option that has a value, defaults
    included (``values`` gives the resolved ones); a flag when set. ``decided``: options
    left out because another written option decides them (a framework profile's policy and
    bucket, unless given: written, they would override the profile)."""
    words = ["dgtraces", ctx.info_name or ctx.command.name or ""]
    for p in _options(ctx):
        if p.name in decided:
            continue
        value = values.get(p.name, ctx.params.get(p.name)) if p.name else None
        flag = max(p.opts, key=len)
        if p.is_flag:
            if value and value != p.default:
                words.append(flag)
            continue
        if value is None:
            continue
        words += [flag, f"{value:g}" if isinstance(value, float) else str(value)]
    return shlex.join(words)
