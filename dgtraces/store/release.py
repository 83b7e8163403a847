"""An opened release: :class:`Release` reads and checks its manifest once, then hands out
its tables, files and verification without re-reading it.

``Release.open(version=None, root=None)`` (``None``: the latest) is the one way in
(:func:`as_release` where an entry point also takes a version string);
:func:`read_table`, :func:`table_files` and friends below are thin wrappers over it. Pass a
``Release`` down a call chain instead of ``version``/``root`` pairs.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from dgtraces.errors import Code, StoreError
from dgtraces.store import manifest as mf

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    import pyarrow as pa
    import pyarrow.dataset as pads

T = TypeVar("T")


@dataclass(frozen=True, eq=False)
class Release:
    """One release of a store, its manifest read and checked once (digest, entries)."""

    version: str
    path: Path
    manifest: Mapping = field(repr=False)
    _verified: set = field(default_factory=set, repr=False, compare=False)
    _frames: dict = field(default_factory=dict, repr=False, compare=False)
    _memo: dict = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def open(cls, version: str | None = None, root=None) -> Release:
        """The release ``version`` (``None``: the latest) of the store at ``root``.
        StoreError (NOT_FOUND) for an unknown version; INTEGRITY for a damaged manifest."""
        path = mf.release_path(version, root)
        return cls(path.name[1:], path, mf.manifest_at(path))

    @property
    def root(self) -> Path:
        """The data folder holding this release (``releases/`` and ``shards/``)."""
        return self.path.parent.parent

    @property
    def digest(self) -> str:
        """The manifest digest: cite it with the version."""
        return str(self.manifest["digest"])

    @property
    def entries(self) -> Mapping[str, dict]:
        """Table name -> manifest entry (rows, bytes, columns, shards)."""
        return self.manifest["tables"]

    @property
    def table_names(self) -> list[str]:
        return sorted(self.entries)

    @cached_property
    def _files(self) -> dict[str, list[Path]]:
        return mf.checked_files(self.path, self.entries)

    def files(self, table: str | None = None, verify: bool = False):
        """Table -> its Parquet files in row order (or one table's list); INTEGRITY if a
        listed file is missing, and with ``verify`` if its bytes differ."""
        if table is not None:
            self._require(table)
        if verify:
            self.verify([table] if table is not None else None)
        return self._files if table is None else self._files[table]

    def verify(self, tables: list[str] | None = None) -> None:
        """Hash the files of ``tables`` (default all) against the manifest, once per
        handle (hashes cached per user, :mod:`dgtraces.store.integrity`)."""
        from dgtraces.store.integrity import verify_files

        names = self.table_names if tables is None else list(tables)
        todo = [n for n in names if n not in self._verified]
        if todo:
            self.files()  # a missing file of the release fails first
            verify_files(self.path, self.entries, todo)
            self._verified.update(todo)

    def _require(self, table: str) -> None:
        if not isinstance(table, str) or table not in self.entries:
            raise StoreError(f"table {table!r} not in release {self.version}; "
                             f"tables: {', '.join(self.table_names)}", code=Code.NOT_FOUND)

    def dataset(self, table: str) -> pads.Dataset:
        """A lazy ``pyarrow.dataset.Dataset`` over one table's shards, checked first."""
        import pyarrow.dataset as ds
        import pyarrow.parquet as pq

        files = self.files(table, verify=True)
        schema = pq.read_schema(files[0])  # every shard of a table has this schema
        return ds.dataset([str(p) for p in files], schema=schema, format="parquet")

    def table(self, table: str, columns: list[str] | None = None) -> pd.DataFrame:
        """One table as a DataFrame (its shards in order; ``columns``: only those), checked
        first. Read with ``pyarrow.parquet`` shard by shard (:func:`_read_shards`): importing
        ``pyarrow.dataset`` costs more than reading a small table, and a CLI call pays it
        cold; what that reader does not cover goes through :meth:`dataset`, as before."""
        files = self.files(table, verify=True)
        read = _read_shards(files, columns)
        if read is None:
            read = self.dataset(table).to_table(columns=columns)
        return read.to_pandas()

    def cached(self, table: str, columns: list[str] | None = None) -> pd.DataFrame:
        """:meth:`table`, read and checked once per handle; each call gets its own copy, so a
        caller that edits what it got cannot change what later calls read. Readers that look
        a table up again and again (the predictor resolving one trace per row) take the
        handle, not preloaded DataFrames."""
        key = (table, None if columns is None else tuple(columns))
        if key not in self._frames:
            self._frames[key] = self.table(table, columns)
        return self._frames[key].copy()

    def memo(self, key: Hashable, compute: Callable[[], T]) -> T:
        """``compute()`` once per handle and ``key``, shared by later calls: for immutable
        values derived from this release alone (a resolved trace: the published evaluation
        asks for the same trace row after row). An error is raised each time, never kept."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    def tables(self) -> dict[str, pd.DataFrame]:
        """Every table of the release as DataFrames."""
        return {name: self.table(name) for name in self.table_names}


def _read_shards(files: list[Path], columns: list[str] | None) -> pa.Table | None:
    """The shards concatenated, when they share one schema (as every release writes them)
    and ``columns`` is None or distinct names of it: then equal to the dataset's table.
    Else None (the dataset unifies schemas and reports unknown or repeated columns)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not files or (columns is not None and (not columns or len(set(columns)) < len(columns))):
        return None
    schemas: list[pa.Schema] = []
    parts: list[pa.Table] = []
    for f in files:
        with pq.ParquetFile(f) as pf:
            schemas.append(pf.schema_arrow)
            if not schemas[-1].equals(schemas[0], check_metadata=False) or \
                    (columns is not None and not set(columns) <= set(schemas[-1].names)):
                return None
            parts.append(pf.read(columns=columns))
    return pa.concat_tables(parts)


# The function API: each call opens the release once (manifest read and checked once).


def table_files(version: str | None = None, root=None, verify: bool = False
                ) -> dict[str, list[Path]]:
    """Table name -> its Parquet files (shards, in row order) of a release; INTEGRITY
    (hint: verify) listing every file the manifest names that is missing, and with
    ``verify`` every file whose bytes differ from the manifest (hashes cached,
    :mod:`dgtraces.store.integrity`). See :class:`dgtraces.store.release.Release`."""
    return open_release(version, root).files(verify=verify)


def tables(version: str | None = None, root=None) -> dict[str, dict]:
    """Table name -> manifest entry (rows, bytes, columns, shards) for a release."""
    return mf.read_manifest(version, root)["tables"]


def as_release(release: Release | str | None) -> Release:
    """``release`` itself when it is a :class:`Release` (already open), else the release of
    that version (``None``: the latest) of the default store, opened: the one place a
    library entry point that also takes a version string turns it into a handle."""
    return release if isinstance(release, Release) else Release.open(release)


def open_or_none(release: Release | str | None) -> Release | None:
    """:func:`as_release`, or None when there is no such release (NOT_FOUND: no store at
    all, or an unknown version). Only that falls back: a damaged release (INTEGRITY) or a
    malformed version (VERSION) raises, never read as "nothing stored" (#36 item 3)."""
    try:
        return as_release(release)
    except StoreError as exc:
        if exc.code != Code.NOT_FOUND:
            raise
        return None


def open_if_any(release: Release | str | None) -> Release | str | None:
    """:func:`as_release`, or ``release`` as given when there is no such release
    (:func:`open_or_none`): for readers that also work without a store (the predictor then
    reconstructs its traces), so that each fails, or not, where it needs a table, as before."""
    rel = open_or_none(release)
    return release if rel is None else rel


def open_release(version: str | None = None, root=None):
    """The :class:`Release` handle (manifest read once)."""
    return Release.open(version, root)


def dataset(table: str, version: str | None = None, root=None):
    """A ``pyarrow.dataset.Dataset`` over one table's shards (lazy: nothing is read yet;
    filter and project with ``to_table(columns=, filter=)`` or scan it in batches)."""
    return open_release(version, root).dataset(table)


def read_table(table: str, version: str | None = None, root=None,
               columns: list[str] | None = None) -> "pd.DataFrame":
    """One table of a release as a DataFrame (its shards in order; ``columns``: only those).
    Every shard is checked against the manifest first (:mod:`dgtraces.store.integrity`)."""
    return open_release(version, root).table(table, columns)


def read_all(version: str | None = None, root=None) -> dict[str, "pd.DataFrame"]:
    return open_release(version, root).tables()
