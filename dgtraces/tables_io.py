"""Writing outputs without losing anything: one atomic file writer, one atomic folder, one
table writer.

* :func:`atomic_file` — a file appears complete or not at all (temp file beside it, fsync,
  rename). ``store.atomic_write_bytes`` and ``sql --out`` use it.
* :func:`atomic_folder` — a folder appears complete or not at all (temp folder beside it,
  renamed into place on success, removed on any error). Collectors, ``import``, ``export-hf``,
  release writing and staging use it.
* :func:`write_tables` — validate frames together (schemas and every declared foreign key)
  and write one ``<table>.parquet`` or ``<table>.csv`` each; into a new folder atomically,
  or (``into_existing``) file by file into a folder that already holds other tables.

Torch-free; pandas/pyarrow are imported when a table is written.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING, Literal

from .errors import DgtracesError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

TMP_PREFIX = ".tmp-"
Format = Literal["parquet", "csv"]


def fsync_dir(path: Path) -> None:
    """Make a rename inside ``path`` durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike, mode: str = "wb") -> Iterator[IO]:
    """Yield an open temp file beside ``path``; on success it is fsynced and renamed onto
    ``path``, on any error removed (``path`` keeps its old content, if any)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f"{TMP_PREFIX}{path.name}.{secrets.token_hex(4)}"
    try:
        with (open(tmp, mode) if "b" in mode
              else open(tmp, mode, encoding="utf-8", newline="")) as fh:
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
                            "empty folder", code="BAD_INPUT",
                            failures=[Failure("BAD_INPUT", "exists and is not an empty folder",
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
                                code="BAD_INPUT") from exc
        fsync_dir(out.parent)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _table_bytes(df: "pd.DataFrame", fmt: Format) -> bytes:
    import io

    if fmt == "csv":
        return df.to_csv(index=False).encode("utf-8")
    buf = io.BytesIO()
    df.to_parquet(buf, index=False)
    return buf.getvalue()


def write_tables(out: str | os.PathLike, frames: Mapping[str, "pd.DataFrame"], *,
                 fmt: Format = "parquet", validate: bool = True,
                 known: Mapping[str, "pd.DataFrame"] | None = None,
                 into_existing: bool = False, overwrite: bool = False) -> list[Path]:
    """Write one ``<table>.<fmt>`` per frame into ``out``; returns the written paths.

    ``validate`` checks the frames together (schemas and declared foreign keys; ``known``
    adds parent rows such as the store's runs) before anything is written. A new ``out``
    (missing or empty) is written atomically as a whole. ``into_existing`` writes into a
    folder that may hold other files, each file atomically; an existing table file is
    BAD_INPUT unless ``overwrite``.
    """
    if fmt not in ("parquet", "csv"):
        raise DgtracesError(f"table format must be parquet or csv, got {fmt!r}",
                            code="BAD_INPUT")
    if validate:
        from .checks import validate_tables

        frames = validate_tables(frames, known=known)
    out = Path(out)
    names = {name: f"{name}.{fmt}" for name in frames}
    if into_existing and out.is_dir() and any(out.iterdir()):
        clash = [str(out / f) for f in names.values() if (out / f).exists()]
        if clash and not overwrite:
            raise DgtracesError(f"refusing to overwrite {', '.join(clash)} (use --force)",
                                code="BAD_INPUT")
        for name, df in frames.items():
            with atomic_file(out / names[name]) as fh:
                fh.write(_table_bytes(df, fmt))
    else:
        with atomic_folder(out) as tmp:
            for name, df in frames.items():
                (tmp / names[name]).write_bytes(_table_bytes(df, fmt))
    return [out / names[name] for name in frames]
