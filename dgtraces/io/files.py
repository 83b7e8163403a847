"""Files that appear whole or not at all, their hashes, and the one UTC clock.

* :func:`atomic_file` — a file appears complete or not at all (temp file beside it, fsync,
  rename); :func:`atomic_write_bytes` writes bytes through it, :func:`atomic_write_all`
  several files, every name checked before the first is written. A writer replaces an
  output name, never writes through it, and refuses one that is a link
  (:func:`check_targets`: a symlink or hard link there may lead into the store; #36).
  :func:`output_names` expands an output option's declared names (``OutPath(writes=)``).
* :func:`atomic_folder` — a folder appears complete or not at all (temp folder beside it,
  renamed into place on success, removed on any error). Collectors, ``import``,
  ``export-hf``, release writing and staging use it; :func:`check_out` checks an output
  folder before any work.
* :func:`sha256_file`, :func:`utc_now` (``ISO_UTC``; ``STAMP_UTC`` for ids).

The bottom layer: imports nothing of dgtraces but :mod:`dgtraces.errors`.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import os
import secrets
import shutil
import stat
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

from dgtraces.errors import Code, DgtracesError

ISO_UTC = "%Y-%m-%dT%H:%M:%SZ"
STAMP_UTC = "%Y%m%dT%H%M%SZ"  # compact, for ids and folder names
TMP_PREFIX = ".tmp-"


def fsync_dir(path: Path) -> None:
    """Make a rename inside ``path`` durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _link_kind(path: str | os.PathLike) -> str | None:
    """"symlink" or "hard link" when ``path`` is one, else None (also when it is absent)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        return "symlink"
    if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
        return "hard link"
    return None


def check_targets(paths: Iterable[str | os.PathLike], option: str = "--out") -> None:
    """BAD_INPUT (one failure per name) if any output name in ``paths`` is a symlink or a
    hard link (a regular file with more than one name). Writers replace a name by renaming
    a temp file onto it and so never write through a link; a link planted at an output
    name (into the store, say) is refused outright rather than silently replaced."""
    from dgtraces.errors import Failure

    failures = [Failure(Code.BAD_INPUT, f"a {kind} at an output name", file=str(p),
                        column=option, expected="a new name or a plain file")
                for p in paths if (kind := _link_kind(p)) is not None]
    if failures:
        raise DgtracesError(f"refused: {failures[0].file} is a link; dgtraces writes a new "
                            "file there and will not replace or follow a link (remove it or "
                            "give another name)", code=Code.BAD_INPUT, failures=failures)


def output_names(value: str | os.PathLike, patterns: Iterable[str]) -> list[Path]:
    """The existing names that ``patterns`` (``{}`` the option's value; ``*`` any part of a
    name) select for an output option given ``value``, plus the fixed names (no ``*``)
    whether they exist or not."""
    names: list[Path] = []
    for pattern in patterns:
        if "*" in pattern:
            names += map(Path, sorted(glob.glob(pattern.format(glob.escape(str(value))))))
        else:
            names.append(Path(pattern.format(str(value))))
    return names


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike, mode: str = "wb") -> Iterator[IO]:
    """Yield an open temp file beside ``path``; on success it is fsynced and renamed onto
    ``path``, on any error removed (``path`` keeps its old content, if any). A link at
    ``path`` is refused first (:func:`check_targets`)."""
    path = Path(path)
    check_targets([path])
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f"{TMP_PREFIX}{path.name}.{secrets.token_hex(4)}"
    xmode = mode.replace("w", "x")  # the temp name is new: never opened through a link
    try:
        with (open(tmp, xmode) if "b" in mode
              else open(tmp, xmode, encoding="utf-8", newline="")) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        fsync_dir(path.parent)
    finally:
        if tmp.exists():
            tmp.unlink()


def check_out(out: str | os.PathLike) -> Path:
    """``out`` must not exist or be an empty folder; checked before any work (and again by
    :func:`atomic_folder`), so a bad ``--out`` costs no measurement time."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        from dgtraces.errors import Failure

        # "out": the CLI names it as the command spells it (OUT argument, --out option)
        raise DgtracesError(f"out: {out} exists and is not an empty folder; give a new or "
                            "empty folder", code=Code.BAD_INPUT,
                            failures=[Failure(Code.BAD_INPUT, "exists and is not an empty folder",
                                              column="out", expected="a new or empty folder",
                                              found=str(out))])
    return out


@contextlib.contextmanager
def atomic_folder(out: str | os.PathLike, *, tmp_name: str | None = None,
                  exists_ok: bool = False) -> Iterator[Path]:
    """Yield a temp folder beside ``out`` to fill; on success it is fsynced and renamed to
    ``out`` (which must not exist, or be an empty folder); on any error it is removed with
    its files. With ``exists_ok`` an ``out`` that appeared meanwhile is BAD_INPUT, not a
    crash. ``tmp_name`` names the temp folder (default ``.tmp-<out>-<random>``)."""
    out = Path(out)
    check_out(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / (tmp_name or f"{TMP_PREFIX}{out.name}-{secrets.token_hex(4)}")
    tmp.mkdir()
    try:
        yield tmp
        fsync_dir(tmp)
        if out.is_dir() and not any(out.iterdir()):
            out.rmdir()
        try:
            os.rename(tmp, out)
        except OSError as exc:
            if not exists_ok:
                raise
            raise DgtracesError(f"{out} appeared while it was being written",
                                code=Code.BAD_INPUT) from exc
        fsync_dir(out.parent)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def utc_now(fmt: str = ISO_UTC) -> str:
    """The current UTC time, ISO 8601 with ``Z`` by default (``STAMP_UTC`` for ids)."""
    return datetime.now(UTC).strftime(fmt)


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temp file in the same folder, fsync, then rename."""
    with atomic_file(path) as fh:
        fh.write(data)


def atomic_write_all(files: Mapping[Path, bytes], option: str = "--out") -> list[Path]:
    """Write several files, each through :func:`atomic_write_bytes`, after checking every
    name (:func:`check_targets`), so a refused name leaves none of them written."""
    check_targets(files, option)
    for path, data in files.items():
        atomic_write_bytes(path, data)
    return list(files)
