"""Readers check what they read against the release manifest (sha256), with a cache.

Every reader of a release (``load()``/``store.read_table``, ``dgtraces sql``/``Query``,
``export-hf``) hashes each file it opens (each shard of a table, see :mod:`dgtraces.store.shards`)
and compares it with the manifest's ``sha256`` and ``bytes``; a mismatch is
:class:`~dgtraces.errors.IntegrityError` (code ``INTEGRITY``) naming every bad file.
Hashing a large release on every cold start would cost more than the query,
so a verified file is remembered by its identity (resolved path, size, mtime, ctime, inode,
device) in this process and in a small per-user cache file *outside* the release folder
(``$DGTRACES_CACHE`` or ``$XDG_CACHE_HOME/dgtraces`` or ``~/.cache/dgtraces``,
``verified.json``). Any write to a file changes its ctime (which user space cannot set back),
so a changed file is hashed again; a cache entry is used only when its sha256 equals the
manifest's. The cache is an optimisation: an unreadable or unwritable cache only costs time.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path

from dgtraces.errors import Code, Failure, IntegrityError
from dgtraces.store.manifest import VERIFY_HINT

CACHE_ENV = "DGTRACES_CACHE"
CACHE_NAME = "verified.json"
CACHE_MAX_ENTRIES = 512
_MEMO: dict[str, list] = {}


def cache_dir() -> Path:
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "dgtraces"


def identity(st: os.stat_result) -> list[int]:
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]


def _load_cache() -> dict[str, list]:
    try:
        data = json.loads((cache_dir() / CACHE_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError, RecursionError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, list)}


def _save_cache(entries: Mapping[str, list]) -> None:
    from dgtraces.io.files import atomic_write_bytes

    keep = dict(list(entries.items())[-CACHE_MAX_ENTRIES:])
    try:
        atomic_write_bytes(cache_dir() / CACHE_NAME, json.dumps(keep).encode())
    except OSError:  # a read-only home: verification still happened, only the memo is lost
        pass


def hash_stream(read: Callable[[int], bytes], sink: Callable[[bytes], object] | None = None
                ) -> tuple[str, int]:
    """sha256 and length of everything ``read`` yields, passing each chunk to ``sink``."""
    h, n = hashlib.sha256(), 0
    for chunk in iter(lambda: read(1 << 20), b""):
        h.update(chunk)
        n += len(chunk)
        if sink is not None:
            sink(chunk)
    return h.hexdigest(), n


def mismatch(name: str, path: Path, entry: Mapping, digest: str | None, size: int
             ) -> Failure | None:
    """The INTEGRITY failure of a file whose bytes differ from its manifest entry, else None."""
    if size != entry["bytes"]:
        return Failure(Code.INTEGRITY, f"table {name}: size differs from the manifest",
                       file=str(path), column="bytes", expected=str(entry["bytes"]),
                       found=str(size))
    if digest is not None and digest != entry["sha256"]:
        return Failure(Code.INTEGRITY, f"table {name}: sha256 differs from the manifest",
                       file=str(path), column="sha256", expected=entry["sha256"], found=digest)
    return None


def raise_failures(folder: Path, failures: list[Failure]) -> None:
    if failures:
        raise IntegrityError(f"release {folder.name}: {len(failures)} file(s) differ from the "
                             f"manifest (changed after the release was written)",
                             failures=failures, hint=VERIFY_HINT)


def verify_files(folder: Path, entries: Mapping[str, Mapping], names=None) -> None:
    """Check the files of tables ``names`` (default all) of release ``folder`` against their
    manifest ``entries`` (every shard, or the legacy per-table file); INTEGRITY listing
    every file that differs."""
    from dgtraces.store.manifest import entry_files

    cache: dict[str, list] | None = None
    failures, dirty = [], False
    files = [(name, path, want) for name in sorted(entries if names is None else names)
             for path, want in entry_files(folder, name, entries[name])]
    for name, path, entry in files:
        try:
            st = path.stat()
        except OSError:
            failures.append(Failure(Code.INTEGRITY, f"table {name}: file missing", file=str(path),
                                    expected="present", found="absent"))
            continue
        bad = mismatch(name, path, entry, None, st.st_size)
        if bad is not None:
            failures.append(bad)
            continue
        key, ident = str(path.resolve()), identity(st)
        want = [entry["sha256"], *ident]
        if _MEMO.get(key) == want:
            continue
        if cache is None:
            cache = _load_cache()
        if cache.get(key) == want:
            _MEMO[key] = want
            continue
        with open(path, "rb") as fh:
            digest, size = hash_stream(fh.read)
        bad = mismatch(name, path, entry, digest, size)
        if bad is not None:
            failures.append(bad)
            continue
        _MEMO[key] = cache[key] = want
        dirty = True
    if dirty and cache is not None:
        _save_cache(cache)
    raise_failures(folder, failures)


def forget() -> None:
    """Drop this process's memo (tests; the per-user cache file stays)."""
    _MEMO.clear()
