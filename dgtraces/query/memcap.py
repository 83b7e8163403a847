"""A process memory cap while a user query runs (issue #29 M4).

DuckDB's ``memory_limit`` bounds its buffer manager, not every allocation: a list or a
string built inside one vector (``SELECT len(range(700000000))``, ``repeat('x', 1.5e9)``)
is allocated outside it (6.4 GB under a 2048 MiB limit). While a query runs (and while its
rows are fetched into Python), :func:`capped` lowers the process's ``RLIMIT_DATA`` soft
limit (heap and private writable mappings, Linux >= 4.7) to what the process uses now plus
the query's memory limit and :data:`SLACK_MIB`; an allocation past it fails inside DuckDB
(``OutOfMemoryException``) or Python (``MemoryError``), which :mod:`dgtraces.query` reports
as ``QUERY_LIMIT``. The previous limit is restored afterwards. The cap is process-wide
while it holds: another thread allocating at that moment shares it. Elsewhere (no
``resource`` module, not Linux) it does nothing.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

SLACK_MIB = 512  # DuckDB's threads and caches, Python's result objects
_LOCK = threading.Lock()


class _State:
    depth = 0
    saved: tuple[int, int] | None = None


_STATE = _State()


def _data_bytes() -> int | None:
    """The process's current data size (``VmData``), or None where unknown."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmData:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


@contextmanager
def capped(limit_mib: int) -> Iterator[None]:
    """Cap the process's data size at its current size + ``limit_mib`` (+ slack) inside
    the block (nested blocks keep the outer cap)."""
    if not sys.platform.startswith("linux"):
        yield
        return
    import resource

    with _LOCK:
        _STATE.depth += 1
        if _STATE.depth == 1:
            now = _data_bytes()
            soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
            if now is not None:
                cap = now + ((limit_mib + SLACK_MIB) << 20)
                if hard != resource.RLIM_INFINITY:
                    cap = min(cap, hard)
                if soft == resource.RLIM_INFINITY or cap < soft:
                    resource.setrlimit(resource.RLIMIT_DATA, (cap, hard))
                    _STATE.saved = (soft, hard)
    try:
        yield
    finally:
        with _LOCK:
            _STATE.depth -= 1
            if _STATE.depth == 0 and _STATE.saved is not None:
                resource.setrlimit(resource.RLIMIT_DATA, _STATE.saved)
                _STATE.saved = None
