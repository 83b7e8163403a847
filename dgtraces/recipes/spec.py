"""Declarative release recipes: what goes into a release, from which producer.

A :class:`Recipe` names the release, its base and an ordered tuple of :class:`Step`\\ s;
each step names a producer (``"module:function"`` under ``dgtraces``) with its keyword
arguments, the tables it adds, the equivalent CLI command, and whether it *measures* (its
rows depend on this machine and this moment) or is *deterministic* (its rows are a
function of the package and its reference data). One generic builder,
:func:`dgtraces.recipes.build.build_recipe`, runs any recipe; ``dgtraces recipe VERSION``
is its CLI. The shipped releases are declared in :mod:`dgtraces.recipes.releases`
(plain data: no pandas is imported to read them).

Released data are immutable: a recipe documents how a release was made and rebuilds it
elsewhere (``--root``); it never rewrites ``data/releases``.

This module holds the two declarations; :mod:`dgtraces.recipes` finds a recipe by version.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Step:
    """One producer call. ``producer(ctx, **kwargs)`` returns ``{table: DataFrame}`` with
    exactly the tables in ``tables``."""

    producer: str
    tables: tuple[str, ...]
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    command: str = ""  # the equivalent CLI, for the plan and the docs
    measures: bool = False  # True: rows depend on this machine (not reproducible)

    def label(self) -> str:
        return self.producer.rsplit(":", 1)[-1]


@dataclass(frozen=True)
class Recipe:
    """A release: ``base`` + every step's tables (``notes`` may use ``{elapsed_s}`` and
    ``{rows}``, filled in by the builder). ``after`` producers run once the release is
    written (e.g. regenerate a card fragment) with ``(ctx)`` only."""

    version: str
    base: str | None
    notes: str
    steps: tuple[Step, ...]
    after: tuple[str, ...] = ()

    def deterministic_steps(self) -> tuple[Step, ...]:
        return tuple(s for s in self.steps if not s.measures)
