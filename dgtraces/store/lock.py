"""The store lock ``data/.lock``: every write to the store (staging, release, migration)
holds it. A process that cannot get it within ``timeout`` seconds (default
:data:`LOCK_TIMEOUT`) fails with code LOCKED; it never writes without it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from dgtraces.errors import Code, DgtracesError
from dgtraces.store.manifest import data_root

LOCK_FILE = ".lock"
LOCK_TIMEOUT = 10.0


@contextmanager
def store_lock(root=None, timeout: float = LOCK_TIMEOUT) -> Iterator[None]:
    """Hold ``data/.lock``; raise LOCKED if another process keeps it beyond ``timeout``."""
    from filelock import FileLock, Timeout

    if not timeout >= 0:  # filelock waits forever on a negative timeout
        raise DgtracesError(f"lock timeout must be >= 0 s, got {timeout}", code=Code.BAD_INPUT)
    data = data_root(root)
    data.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(data / LOCK_FILE), timeout=timeout)
    try:
        lock.acquire()
    except Timeout:
        raise DgtracesError(f"another dgtraces process holds {data / LOCK_FILE} (waited "
                            f"{timeout:g} s)", code=Code.LOCKED,
                            hint="retry when the other contribute/release has finished, "
                                 "or pass a longer --lock-timeout") from None
    try:
        yield
    finally:
        lock.release()
