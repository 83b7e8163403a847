"""Declarative release recipes (:mod:`dgtraces.recipes.spec`: :class:`Recipe`,
:class:`Step`), the shipped releases' recipes (:mod:`dgtraces.recipes.releases`), their
producers and the one generic builder (:mod:`dgtraces.recipes.build`).
"""

from __future__ import annotations

from dgtraces.errors import Code, DgtracesError
from dgtraces.recipes.spec import Recipe, Step


def recipes() -> dict[str, Recipe]:
    """Every declared recipe, by version."""
    from dgtraces.recipes.releases import RECIPES

    return {r.version: r for r in RECIPES}


def get_recipe(version: str) -> Recipe:
    """The recipe of ``version`` (``0.3.0`` or ``v0.3.0``); NOT_FOUND otherwise."""

    found = recipes().get(str(version).removeprefix("v"))
    if found is None:
        raise DgtracesError(f"no recipe for release {version!r}; recipes: "
                            f"{', '.join(recipes())}", code=Code.NOT_FOUND)
    return found


__all__ = ["Recipe", "Step", "get_recipe", "recipes"]
