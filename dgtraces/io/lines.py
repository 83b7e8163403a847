"""Untrusted input files opened as regular files only, and text logs streamed line by line
within bounds (issue #36 items 4 and 5).

* :func:`open_regular`: a path is checked to be a regular file (symbolic links followed)
  *before* it is opened, and again on the opened descriptor (a path swapped meanwhile): a
  FIFO would block the reader forever, ``/dev/zero`` or ``/dev/urandom`` never end, and a
  directory or socket is no input. Opening uses ``O_NONBLOCK``, so even a FIFO that
  appears between the check and the open does not block. Refused: BAD_FILE naming the kind
  of file; a missing path is NOT_FOUND.
* :class:`TextLines`: the lines of a UTF-8 text file, read one at a time (memory does not
  grow with the file), each at most :data:`MAX_LINE_BYTES`, the whole file at most
  ``max_bytes``; the sha256 of the bytes read is :attr:`TextLines.digest` once iterated.
  A line that is not UTF-8 is BAD_FILE naming the line.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from dgtraces.errors import BadFileError, Code, Failure, MissingFileError

MAX_LINE_BYTES = 1 << 16  # a log line; nccl-tests prints < 300 bytes, NCCL INFO lines < 2 KiB
MAX_TEXT_BYTES = 1 << 30  # as io.bounded.MAX_GUNZIP_BYTES: the importers' input bound

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))


def _kind(mode: int) -> str:
    return next((what for test, what in _KINDS if test(mode)), "not a regular file")


def _refuse(name: str, mode: int) -> BadFileError:
    return BadFileError.at(name, "not a regular file", "a regular file", _kind(mode))


def check_regular(path: str | os.PathLike) -> os.stat_result:
    """``os.stat`` of ``path`` if it is a regular file (after symbolic links); NOT_FOUND if
    it does not exist, BAD_FILE for a FIFO, device, socket or directory. Nothing is opened."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise MissingFileError(f"{path}: no such file") from None
    except OSError as exc:
        raise BadFileError.at(str(path), f"cannot stat ({exc.strerror})") from None
    if not stat.S_ISREG(st.st_mode):
        raise _refuse(str(path), st.st_mode)
    return st


def open_regular(path: str | os.PathLike) -> BinaryIO:
    """``path`` opened for binary reading, a regular file checked before and after opening
    (module doc)."""
    check_regular(path)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise MissingFileError(f"{path}: no such file") from None
    except OSError as exc:
        raise BadFileError.at(str(path), f"cannot open ({exc.strerror})") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):  # swapped between the check and the open
        os.close(fd)
        raise _refuse(str(path), mode)
    return os.fdopen(fd, "rb")


class TextLines:
    """``(line number, text without its line end)`` of a UTF-8 file, streamed (module doc).
    Iterate once; then :attr:`digest` is the sha256 of the file and :attr:`n_bytes` its
    size."""

    def __init__(self, path: str | os.PathLike, *, max_bytes: int = MAX_TEXT_BYTES,
                 max_line_bytes: int = MAX_LINE_BYTES) -> None:
        self.path = Path(path)
        self.name = str(path)
        self.max_bytes = max_bytes
        self.max_line_bytes = max_line_bytes
        self._hash = hashlib.sha256()
        self.n_bytes = 0
        self.done = False

    @property
    def digest(self) -> str:
        if not self.done:
            raise RuntimeError("TextLines.digest before the file was read to its end")
        return self._hash.hexdigest()

    def __iter__(self) -> Iterator[tuple[int, str]]:
        with open_regular(self.path) as fh:
            size = os.fstat(fh.fileno()).st_size
            if size > self.max_bytes:
                raise BadFileError.at(self.name, "file too large", f"<= {self.max_bytes} bytes",
                                      size)
            lineno = 0
            while raw := fh.readline(self.max_line_bytes + 1):
                lineno += 1
                self.n_bytes += len(raw)
                if self.n_bytes > self.max_bytes:  # the file grew meanwhile
                    raise BadFileError.at(self.name, "file too large",
                                          f"<= {self.max_bytes} bytes", self.n_bytes)
                if len(raw) > self.max_line_bytes:
                    raise self._bad(lineno, "line too long", f"<= {self.max_line_bytes} bytes",
                                    f"> {self.max_line_bytes} bytes")
                self._hash.update(raw)
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise self._bad(lineno, f"not UTF-8 text ({exc.reason})", "UTF-8",
                                    f"byte {exc.start} of the line") from None
                yield lineno, text.rstrip("\r\n")
        self.done = True

    def _bad(self, lineno: int, message: str, expected: str, found: str) -> BadFileError:
        return BadFileError(f"{self.name} line {lineno}: {message}", failures=[
            Failure(Code.BAD_FILE, message, file=self.name, row=lineno, expected=expected,
                    found=found)])
