"""``dgtraces`` command processes forked from one preloaded interpreter, for the tests that
need a real process to kill or to race (crash safety of ``release`` under SIGKILL, two
``contribute`` calls racing for the lock).

A new ``python -c`` per trial paid ~0.8 s of CPU importing pandas, pyarrow and pandera
before the command ran (issue #36: the suite's CPU). :class:`CliForks` starts one server
interpreter that imports them once; each :meth:`~CliForks.start` forks it into a child that
takes the environment given (replacing the server's, as ``subprocess``'s ``env=`` does),
writes its stdout and stderr to a file, and runs ``dgtraces ARGS`` through the console
entry (:func:`dgtraces.cli.run`) as ``python -m dgtraces ARGS`` would. The child is a real
process: a SIGKILL stops it anywhere, and its exit status is the one a subprocess would
have (``-9`` when killed). The server reaps its children and exits when the with-block
closes; the tests' process reaps the server, so the children's CPU is counted as before.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.paths import REPO

SERVER = r"""
import json, os, sys, traceback
import pandas, pyarrow.parquet, pandera.pandas, filelock, yaml  # what the commands load
from dgtraces.cli import run

done = {}
for line in sys.stdin:
    job = json.loads(line)
    pid = job.get("pid")
    if job["op"] == "start":
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                os.environ.clear()
                os.environ.update(job["env"])
                os.chdir(job["cwd"])
                fd = os.open(job["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                os.dup2(fd, 1)
                os.dup2(fd, 2)
                os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
                sys.argv = ["dgtraces", *job["argv"]]
                try:
                    run()
                    code = 0
                except SystemExit as exc:
                    code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
                except BaseException:
                    traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        answer = pid
    elif job["op"] == "poll":
        if pid not in done:
            got, status = os.waitpid(pid, os.WNOHANG)
            if got:
                done[pid] = os.waitstatus_to_exitcode(status)
        answer = done.get(pid)
    else:  # wait
        if pid not in done:
            done[pid] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        answer = done[pid]
    print(json.dumps(answer), flush=True)
"""


class CliForks:
    """``with CliForks() as forks:`` start, poll, wait and kill ``dgtraces`` children."""

    def __enter__(self) -> CliForks:
        self._server = subprocess.Popen([sys.executable, "-c", SERVER], cwd=REPO,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        text=True)
        return self

    def __exit__(self, *exc) -> None:
        assert self._server.stdin is not None
        self._server.stdin.close()
        self._server.wait(timeout=120)

    def _ask(self, **job):
        assert self._server.stdin is not None and self._server.stdout is not None
        self._server.stdin.write(json.dumps(job) + "\n")
        self._server.stdin.flush()
        line = self._server.stdout.readline()
        if not line:
            raise RuntimeError(f"the fork server stopped (exit {self._server.wait()})")
        return json.loads(line)

    def start(self, args: list[str], env: dict[str, str], log: Path, cwd: Path = REPO) -> int:
        """Fork a child running ``dgtraces *args`` with environment ``env`` (the whole
        environment), stdout and stderr into ``log``; returns its pid."""
        return self._ask(op="start", argv=list(args), env=dict(env), log=str(log),
                         cwd=str(cwd))

    def poll(self, pid: int) -> int | None:
        """The child's exit status (negative: the signal), None while it runs."""
        return self._ask(op="poll", pid=pid)

    def wait(self, pid: int, timeout: float = 120.0) -> int:
        """The child's exit status; TimeoutError (the child killed) past ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while (status := self.poll(pid)) is None:
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                self._ask(op="wait", pid=pid)
                raise TimeoutError(f"dgtraces child {pid} still ran after {timeout} s")
            time.sleep(0.01)
        return status
