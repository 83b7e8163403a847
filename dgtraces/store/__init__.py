"""The store: releases under ``data/releases/vX.Y.Z/`` whose manifests list content-addressed
shards in ``data/shards/<table>/<sha256>.parquet``.

Public surface: :class:`Release` (``Release.open(version, root)``: the manifest read and
checked once; ``.table()``, ``.files()``, ``.verify()``, ``.digest``), :func:`open_release`,
:func:`read_table`, :func:`list_releases`, :func:`latest`, :func:`data_root`. The modules
behind it, bottom up: ``locate`` (where the data lives), ``manifest`` (paths, versions,
manifest checks), ``integrity`` (hashes), ``release`` (the handle), ``duck`` (the one DuckDB
helper), ``shards`` (the one writer), ``verify``, ``migrate``. Nothing here imports pandas,
pyarrow or DuckDB at import time.
"""

from dgtraces.store.manifest import data_root, latest, list_releases
from dgtraces.store.release import Release, open_release, read_all, read_table

__all__ = ["Release", "data_root", "latest", "list_releases", "open_release", "read_all",
           "read_table"]
