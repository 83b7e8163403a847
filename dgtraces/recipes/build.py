"""The one generic builder: run a :class:`~dgtraces.recipes.Recipe`'s steps and write the
release (``base`` + every step's tables) with :func:`dgtraces.store.shards.extend_release`."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dgtraces.io import files as fileio
from dgtraces.store import manifest as store
from dgtraces.store import release, shards

from ..errors import Code, DgtracesError
from . import Recipe, Step

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

REPO = Path(__file__).resolve().parent.parent.parent
FRAGMENTS_ENV = "DGTRACES_FRAGMENTS"


@dataclass
class Context:
    """What a producer may use: the release being built, its base, one timestamp for every
    row it stamps, a work folder, where card fragments go, a progress callback,
    ``facts`` for the release notes and ``added``: what the recipe's earlier steps produced
    (:meth:`frame` gives a table as the release will hold it)."""

    version: str
    base: str | None
    root: Any = None  # the data folder (context() resolves it once)
    stamp: str = ""
    work: Path = Path("/tmp/dgtraces-recipe-work")
    fragments: Path = REPO / "cards" / "fragments"
    progress: Callable[[str], None] = lambda what: None
    facts: dict = field(default_factory=dict)
    added: dict = field(default_factory=dict)  # table -> frames of the earlier steps
    _base_frames: dict | None = None

    def base_frames(self) -> dict[str, "pd.DataFrame"]:
        if self._base_frames is None:
            self._base_frames = (release.Release.open(self.base, self.root).tables()
                                 if self.base else {})
        return self._base_frames

    def frame(self, table: str) -> "pd.DataFrame":
        """``table`` as the release being built will hold it so far: the base's rows, then
        the rows the recipe's earlier steps added."""
        import pandas as pd

        parts = [f for f in [self.base_frames().get(table), *self.added.get(table, [])]
                 if f is not None]
        return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


@dataclass
class RecipeResult:
    version: str
    path: Path | None  # None for a dry run
    rows_added: dict[str, int]
    notes: str
    after: list = field(default_factory=list)  # what the ``after`` producers returned


def resolve(target: str) -> Callable:
    """``"module:function"`` -> the function (BAD_INPUT if it does not exist)."""
    module, _, attr = target.partition(":")
    try:
        return getattr(import_module(module), attr)
    except (ImportError, AttributeError, ValueError) as exc:
        raise DgtracesError(f"recipe producer {target!r} cannot be loaded: {exc}",
                            code=Code.BAD_INPUT) from None


def context(recipe: Recipe, root=None, **kw: Any) -> Context:
    """A fresh context for ``recipe`` in the data folder ``root`` (None: the store's; resolved
    here once), ``fragments`` defaulting to $DGTRACES_FRAGMENTS or the repository's
    cards/fragments."""
    kw.setdefault("fragments", Path(os.environ.get(FRAGMENTS_ENV, REPO / "cards" / "fragments")))
    kw.setdefault("stamp", fileio.utc_now())
    return Context(recipe.version, recipe.base, store.data_root(root), **kw)


def produce(recipe: Recipe, ctx: Context, steps: Sequence[Step] | None = None
            ) -> dict[str, "pd.DataFrame"]:
    """Run ``steps`` (default: all of the recipe's) and concatenate their tables in step
    order. A producer must return exactly the tables its step declares (BAD_INPUT)."""
    import pandas as pd

    parts: dict[str, list] = {}
    for step in recipe.steps if steps is None else steps:
        frames = resolve(step.producer)(ctx, **step.kwargs)
        if set(frames) != set(step.tables):
            raise DgtracesError(f"recipe {recipe.version} step {step.label()} returned tables "
                                f"{sorted(frames)}, declared {sorted(step.tables)}",
                                code=Code.BAD_INPUT)
        for table in step.tables:
            if len(frames[table]):
                parts.setdefault(table, []).append(frames[table])
                ctx.added.setdefault(table, []).append(frames[table])
    return {t: pd.concat(dfs, ignore_index=True) for t, dfs in parts.items()}


class _Facts(dict):
    def __missing__(self, key: str) -> str:
        return "?"


def build_recipe(recipe: Recipe, *, root=None, dry_run: bool = False,
                 ctx: Context | None = None) -> RecipeResult:
    """Build release ``recipe.version`` = its base + every step's tables; then run the
    ``after`` producers. ``dry_run``: validate what would be written, write nothing.
    NOT_FOUND without the base release, VERSION if the release exists."""
    from dgtraces.tables.checks import validate_tables

    root = store.data_root(root)  # resolved once for the listing and the writer
    ctx = ctx or context(recipe, root)
    releases = store.list_releases(root)
    if recipe.base is not None and recipe.base not in releases:
        raise DgtracesError(f"release {recipe.version} is built on {recipe.base}, which is "
                            f"not in the store (have: {releases})", code=Code.NOT_FOUND)
    if recipe.version in releases:
        raise DgtracesError(f"release {recipe.version} exists; releases are immutable",
                            code=Code.VERSION)
    started = time.time()
    additions = produce(recipe, ctx)
    facts = _Facts(elapsed_s=time.time() - started, **ctx.facts)
    facts["rows"] = ", ".join(f"+{len(df)} {t}" for t, df in sorted(additions.items()))
    notes = recipe.notes.format_map(facts)
    rows = {t: len(df) for t, df in additions.items()}
    if dry_run:
        validate_tables(store.merge_frames(ctx.base_frames(), additions))
        return RecipeResult(recipe.version, None, rows, notes)
    if recipe.base is None:
        path = shards.write_release(recipe.version, additions, root=root, notes=notes)
    else:
        path = shards.extend_release(recipe.version, additions, base=recipe.base, root=root,
                                    notes=notes)
    after = [resolve(target)(ctx) for target in recipe.after]
    return RecipeResult(recipe.version, path, rows, notes, after)
