"""The DuckDB connection behind ``dgtraces sql``: read-only files, bounded resources.

What the connection can touch (the statement guard in :mod:`dgtraces.query` comes on top):

* **Files.** DuckDB's ``allowed_paths`` grants read *and* write access and has no read-only
  form. So on Linux, for releases up to :data:`PRIVATE_COPY_MAX_BYTES`, each table file is
  copied into a private, *sealed* in-memory file (``memfd_create`` + ``F_SEAL_WRITE``,
  ``F_SEAL_SHRINK``, ``F_SEAL_GROW``, ``F_SEAL_SEAL``) while its sha256 is computed and
  compared with the manifest; the views read ``/proc/self/fd/N`` and those paths are the only
  ``allowed_paths``. The kernel refuses every write to a sealed file, even root's, so the
  connection has no path it can write to, and it serves exactly the bytes that were checked.
  Larger releases, and other systems, read the release's own files (checked against the
  manifest first, :mod:`dgtraces.store.integrity`); there ``allowed_paths`` would let DuckDB write
  them, and only the statement guard keeps ``COPY ... TO`` out (see docs/security.md).
* **No other path.** ``enable_external_access=false`` after the views exist: no other file,
  glob, URL, ``ATTACH``, ``INSTALL``/``LOAD``; no ``temp_directory`` (DuckDB's default
  ``.tmp`` would be implicitly readable), so nothing spills to disk; no persistent secrets;
  extension auto-install/auto-load off; then ``lock_configuration=true`` so no
  ``SET``/``RESET``/``PRAGMA`` can undo any of it.
* **Memory.** ``memory_limit`` is :data:`DEFAULT_MEMORY_LIMIT_MIB` unless raised; a query
  needing more fails with ``QUERY_LIMIT`` (the time limit lives in :class:`~dgtraces.query.
  Query`).
"""

from __future__ import annotations

import os
import sys
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from dgtraces.errors import Code, DgtracesError, Failure

if TYPE_CHECKING:  # pragma: no cover
    import duckdb

PRIVATE_COPY_MAX_BYTES = 256 << 20
DEFAULT_TIMEOUT_S = 60.0
DEFAULT_MEMORY_LIMIT_MIB = 2048
STARTUP_CONFIG: dict[str, str | bool | int | float | list[str]] = {
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "allow_community_extensions": False,
    "allow_unsigned_extensions": False,
    "allow_persistent_secrets": False,
    "temp_directory": "",
}


def check_limits(timeout_s: object, memory_limit_mib: object) -> tuple[float, int]:
    """The limits as numbers; BAD_INPUT unless a finite time > 0 and whole MiB >= 64."""
    import math
    from numbers import Real

    from dgtraces.values import whole_number

    if isinstance(timeout_s, bool) or not isinstance(timeout_s, Real) or \
            not math.isfinite(float(timeout_s)) or not 0 < float(timeout_s) <= 7 * 86400:
        raise DgtracesError(f"timeout_s must be a number of seconds in (0, 604800], got "
                            f"{timeout_s!r}", code=Code.BAD_INPUT)
    memory = whole_number("memory_limit_mib", memory_limit_mib, least=64, most=1 << 30)
    return float(timeout_s), memory


def _sealed_copy(name: str, path: Path, entry: Mapping) -> tuple[int, Failure | None]:
    """A sealed memfd holding ``path``'s bytes, hashed on the way (the failure if they differ
    from the manifest ``entry``)."""
    import fcntl

    from dgtraces.store.integrity import hash_stream, mismatch

    fd = os.memfd_create(f"dgtraces-{name}", os.MFD_ALLOW_SEALING | os.MFD_CLOEXEC)
    try:
        with open(path, "rb") as fh:  # the manifest's size first: nothing larger is copied
            want = int(entry["bytes"])  # into memory, not even a file growing meanwhile (#29)
            left = [want + 1 if os.fstat(fh.fileno()).st_size == want else 0]

            def read(n: int) -> bytes:
                chunk = fh.read(min(n, left[0])) if left[0] > 0 else b""
                left[0] -= len(chunk)
                return chunk

            found: tuple[str | None, int] = hash_stream(read, lambda c: _write_all(fd, c))
            if left[0] == 0 and found[1] != want + 1:  # refused before copying: its size
                found = None, os.fstat(fh.fileno()).st_size
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW |
                    fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SEAL)
    except BaseException:
        os.close(fd)
        raise
    return fd, mismatch(name, path, entry, *found)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _close_fds(fds: list[int]) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass
    fds.clear()


def readable_paths(folder: Path, entries: Mapping[str, Mapping]
                   ) -> tuple[dict[str, list[str]], list[int]]:
    """Table -> the paths DuckDB reads its shards from (in row order), and the private fds
    to close afterwards. Either way the bytes are checked against the manifest (INTEGRITY
    otherwise)."""
    from dgtraces.store.integrity import raise_failures, verify_files
    from dgtraces.store.manifest import entry_files

    files = {n: entry_files(folder, n, e) for n, e in sorted(entries.items())}
    total = sum(int(e["bytes"]) for e in entries.values())
    if not (sys.platform.startswith("linux") and hasattr(os, "memfd_create")) or \
            total > PRIVATE_COPY_MAX_BYTES:
        verify_files(folder, entries)
        return {n: [str(p) for p, _ in fs] for n, fs in files.items()}, []
    fds: list[int] = []
    paths: dict[str, list[str]] = {}
    failures = []
    try:
        for name, shards in files.items():
            for path, want in shards:
                fd, bad = _sealed_copy(name, path, want)
                fds.append(fd)
                paths.setdefault(name, []).append(f"/proc/self/fd/{fd}")
                if bad is not None:
                    failures.append(bad)
        raise_failures(folder, failures)
    except BaseException:
        _close_fds(fds)
        raise
    return paths, fds


def _quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def quote_str(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def open_connection(folder: Path, entries: Mapping[str, Mapping],
                    memory_limit_mib: int = DEFAULT_MEMORY_LIMIT_MIB
                    ) -> "duckdb.DuckDBPyConnection":
    """The locked, in-memory connection with one view per table (see the module doc). The
    private files close when the connection object is garbage-collected."""
    import duckdb

    paths, fds = readable_paths(folder, entries)
    try:
        con = duckdb.connect(":memory:", config={**STARTUP_CONFIG,
                                                 "memory_limit": f"{memory_limit_mib}MiB"})
    except BaseException:
        _close_fds(fds)
        raise
    weakref.finalize(con, _close_fds, fds)
    try:
        for name, files in sorted(paths.items()):  # one view over the table's shard list
            listed = ", ".join(quote_str(f) for f in files)
            con.execute(f"CREATE TEMP VIEW {_quote_ident(name)} AS SELECT * FROM "
                        f"read_parquet([{listed}])")
        allowed = ", ".join(quote_str(f) for fs in paths.values() for f in fs)
        try:  # a library prints nothing (in Jupyter, DuckDB refuses the setting
            con.execute("SET enable_progress_bar = false")  # without ipywidgets)
        except duckdb.Error:
            pass
        con.execute(f"SET allowed_paths = [{allowed}]")
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
    except BaseException:
        con.close()
        raise
    return con
