"""Contribution workflow: read safely (``intake``), check (``validate``), stage
(``staging``), release (``release``). Heavy dependencies load inside functions.

>>> from dgtraces.contribute import contribute
>>> entry = contribute("my_traces.zip")        # doctest: +SKIP
"""

from __future__ import annotations

import os
from collections.abc import Callable

from .intake import DEFAULT_LIMITS, Limits


def contribute(path: str | os.PathLike, *, root=None, limits: Limits = DEFAULT_LIMITS,
               timeout: float | None = None, dry_run: bool = False,
               progress: Callable[[str], object] | None = None):
    """Validate ``path`` and stage it; returns the StagedEntry (or the Checked result when
    ``dry_run``). Refused input raises a typed error and writes nothing. ``progress`` gets
    a line of text after each chunk of ``layer_timings`` (the CLI shows it)."""
    from dgtraces.contribute.staging import stage
    from dgtraces.store.lock import LOCK_TIMEOUT
    from dgtraces.store.manifest import data_root

    from .validate import validate_contribution

    data = data_root(root)  # the data folder, resolved once for validation and staging
    checked = validate_contribution(path, root=data, limits=limits, progress=progress)
    if dry_run:
        return checked
    return stage(checked, str(path), root=data,
                 timeout=LOCK_TIMEOUT if timeout is None else timeout)


__all__ = ["DEFAULT_LIMITS", "Limits", "contribute"]
