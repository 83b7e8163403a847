"""What every measured row carries: versions, timestamps, ids, the measurement lock; re-exports
the torch-free helpers collectors use (``fitting``, ``tables_io``, ``values``, ``host``)."""

from __future__ import annotations

import contextlib
import os
import platform
import secrets
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from dgtraces.io.files import STAMP_UTC, check_out, utc_now
from dgtraces.io.host import cores, cpu_model, loadavg
from dgtraces.tables.write import write_tables

from ..errors import Code, DgtracesError, require
from ..fitting import RATIO_TOLERANCE, consistency_flag, stats
from ..values import nonneg_int, positive_int

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

REPO = Path(__file__).resolve().parent.parent.parent
INTERCONNECT = "loopback-gloo"
DEVICE = "cpu"


MEASURE_LOCK = Path("/tmp/dgtraces-measure.lock")


@contextlib.contextmanager
def measure_lock(owner: str, poll_s: float = 15.0, path: Path = MEASURE_LOCK,
                 timeout_s: float | None = None):
    """Hold the machine-wide measurement lock (other helpers pause CPU work while it exists).

    The lock file names its holder (``<owner> pid <pid> host <host> since <utc>``). Waits
    while a live process holds it; a lock whose process no longer runs on this host (a
    crashed or killed holder) is stale and is removed. With ``timeout_s``, gives up after
    that many seconds with code LOCKED. The file is removed on exit, also on errors, Ctrl-C
    and SIGTERM (turned into SystemExit while held)."""
    import signal
    import time

    path = Path(path)
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            break
        except FileExistsError:
            if _break_stale(path):
                continue
            wait = poll_s
            if deadline is not None:
                wait = min(wait, deadline - time.monotonic())
                if wait <= 0:
                    raise DgtracesError(f"{path} is held by a running process "
                                        f"({_read(path).strip()!r}) after {timeout_s} s",
                                        code=Code.LOCKED) from None
            time.sleep(wait)
    os.write(fd, f"{owner} pid {os.getpid()} host {platform.node()} since {utc_now()}\n"
             .encode())
    os.close(fd)
    previous = signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        yield path
    finally:
        path.unlink(missing_ok=True)
        signal.signal(signal.SIGTERM, previous)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def _break_stale(path: Path) -> bool:
    """Remove ``path`` when it names a pid of this host that no longer runs; True when the
    lock is gone (removed here or released meanwhile). A lock without a readable pid (being
    written, or from an unknown tool) or from another host is never stale. Checked under a
    short-lived guard file so two waiters cannot both break it and remove a fresh lock."""
    import re
    import time

    guard = path.with_name(path.name + ".break")
    try:
        gfd = os.open(guard, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        with contextlib.suppress(OSError):  # a guard is held for microseconds: old = dead
            if time.time() - guard.stat().st_mtime > 60:
                guard.unlink(missing_ok=True)
        return False
    try:
        if not path.exists():
            return True
        m = re.search(r"\bpid (\d+)(?: host (\S+))?", _read(path))
        if (not m or int(m[1]) <= 0 or (m[2] is not None and m[2] != platform.node())
                or _alive(int(m[1]))):
            return False
        path.unlink(missing_ok=True)
        return True
    finally:
        os.close(gfd)
        guard.unlink(missing_ok=True)


def _exit_on_sigterm(signum, frame):
    raise SystemExit(143)


def require_torch(purpose: str):
    """Import torch or raise MISSING_DEPENDENCY with the ``[collect]`` install hint."""
    return require("torch", "collect", purpose)


def git_describe() -> str:
    try:
        out = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=REPO,
                             capture_output=True, text=True, timeout=10)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def collector_version(tool: str) -> str:
    from .._version import __version__

    return f"dgtraces {__version__} {tool} (git {git_describe()})"


def framework() -> str:
    import torch

    return f"pytorch {torch.__version__.split('+')[0]}"


def new_id(*parts) -> str:
    """A unique id such as ``pytorch-alexnet-b4-t1-20261202T150102Z-3fa2``."""
    stamp = utc_now(STAMP_UTC)
    return "-".join([*(str(p) for p in parts), stamp, secrets.token_hex(2)])


def environment(threads: int | None = None) -> dict:
    """Environment details stored in params_json so noise and setup are visible."""
    import torch

    env = {
        "torch": torch.__version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu": cpu_model(),
        "cores": cores(),
        "intra_op_threads": torch.get_num_threads() if threads is None else threads,
        "interop_threads": torch.get_num_interop_threads(),
        "mkldnn": bool(torch.backends.mkldnn.is_available()),
        "flush_denormal": True,
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
    }
    return env


def frame(rows: list[dict]) -> "pd.DataFrame":
    import pandas as pd

    return pd.DataFrame(rows)


__all__ = ["DEVICE", "INTERCONNECT", "RATIO_TOLERANCE", "check_out", "collector_version",
           "consistency_flag", "cores", "cpu_model", "environment", "framework", "loadavg",
           "measure_lock", "new_id", "nonneg_int", "positive_int", "require_torch", "stats",
           "utc_now", "write_tables"]
