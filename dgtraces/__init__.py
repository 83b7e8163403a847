"""dgtraces: layer-wise deep-learning training traces and a DAG predictor of S-SGD time.

Heavy dependencies (pandas, pandera, duckdb, torch, datasets) are imported lazily, so
``import dgtraces`` and ``dgtraces --help`` stay fast.
"""

from __future__ import annotations

from ._version import __version__

__all__ = ["__version__", "load", "connect", "layers_frame"]


def load(table: str, version: str | None = None):
    """Return one table of a release (default: the latest) as a pandas DataFrame."""
    from dgtraces.store.release import read_table

    return read_table(table, version)


def connect(version: str | None = None):
    """A read-only, sandboxed DuckDB connection with one view per table of a release."""
    from dgtraces.query.engine import connect as _connect

    return _connect(version)


def layers_frame(models=None):
    """The ``layers`` table computed from the architecture specs."""
    from .models import layers_frame as _lf

    return _lf(models)
