"""The one DuckDB helper of the store: an in-memory connection with the store's settings
(no extension autoloading, no progress bar, bounded memory, no insertion order kept) and
the two pieces of SQL text every shard query uses (a quoted name, a scan of shard files).
Release writing (key checks), contribution intake and the card statistics use it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

DUCKDB_MEMORY = "256MB"  # DuckDB caches scanned blocks up to this: it bounds RSS


def connect():
    import duckdb

    con = duckdb.connect(":memory:", config={"autoinstall_known_extensions": False,
                                             "autoload_known_extensions": False})
    try:  # no bars in release output (Jupyter without ipywidgets refuses the setting)
        con.execute("SET enable_progress_bar = false")
    except duckdb.Error:
        pass
    con.execute(f"SET memory_limit = '{DUCKDB_MEMORY}'")
    con.execute("SET preserve_insertion_order = false")
    return con


def scan(files: Sequence[Path], cols: Sequence[str]) -> str:
    listed = ", ".join("'" + str(p).replace("'", "''") + "'" for p in files)
    return f"(SELECT {', '.join(quote(c) for c in cols)} FROM read_parquet([{listed}]))"


def quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
