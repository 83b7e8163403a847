"""Reading a contribution (folder or .zip) safely: archive limits, file limits, metadata.

Nothing here writes into the data folder. A zip is checked member by member (no absolute
paths, no ``..``, no links, no encryption, size and compression-ratio limits) and extracted
into a private temp folder with byte counting, so declared sizes are never trusted. Folders
may not contain symlinks. Tables are read with :func:`dgtraces.tables.checks.read_file` after
size, row-count and field-length limits, except the tables of :data:`STREAMED_TABLES`
(``layer_timings``: one row per layer per run, the table that grows with a contribution),
which are left on disk and validated in chunks by :mod:`dgtraces.contribute.stream` under
their own, larger limits.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
import weakref
import zipfile
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from dgtraces.io.bounded import MAX_STREAM_FILE_BYTES, MAX_STREAM_ROWS

from ..errors import Code, DgtracesError, Failure, ValidationError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

META_FILE = "contribution.yaml"
REQUIRED_TABLES = ("runs", "layer_timings")
OPTIONAL_TABLES = ("iterations", "comm")
STREAMED_TABLES = ("layer_timings",)  # validated in chunks: memory does not grow with it
TABLE_SUFFIXES = (".csv", ".parquet")
EXTRA_FILES = ("README.md",)


@dataclass(frozen=True)
class Limits:
    """Resource limits for one contribution (defaults sized for real trace sets)."""

    max_members: int = 32            # files in a zip or folder
    max_file_bytes: int = 256 << 20  # one file, uncompressed
    max_total_bytes: int = (8 << 30) + (512 << 20)  # all files, uncompressed
    max_ratio: float = 100.0         # uncompressed / compressed, per zip member > 64 KiB
    max_rows: int = 5_000_000        # rows per table
    max_field_chars: int = 65_536    # one text cell
    max_meta_bytes: int = 64 << 10   # contribution.yaml
    max_cells: int = 20_000_000      # rows x columns per table (memory: ~1-2 GB worst case)
    # a streamed table (STREAMED_TABLES) is read in chunks: its limits bound disk and time,
    # not memory (which is one chunk, see contribute.stream)
    max_stream_rows: int = MAX_STREAM_ROWS
    max_stream_file_bytes: int = MAX_STREAM_FILE_BYTES
    max_row_group_bytes: int = 256 << 20  # one Parquet row group of a streamed table
    chunk_rows: int = 100_000        # rows validated at a time in a streamed table
    max_chunk_bytes: int = 64 << 20  # ... fewer when its rows are long: text per chunk

    def file_bytes(self, name: str) -> int:
        """Size limit of one file (a streamed table's file, ``layer_timings.csv`` or
        ``.parquet`` exactly, has its own)."""
        stem, _, suffix = name.partition(".")
        streamed = stem in STREAMED_TABLES and f".{suffix}" in TABLE_SUFFIXES
        return self.max_stream_file_bytes if streamed else self.max_file_bytes


DEFAULT_LIMITS = Limits()


@dataclass
class Contribution:
    """Raw tables and metadata of a contribution, before validation."""

    source: str
    meta: dict
    frames: dict[str, "pd.DataFrame"] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)
    meta_failures: list = field(default_factory=list)  # METADATA problems, reported by check
    layout_failures: list = field(default_factory=list)  # stray files etc., reported by check
    streamed: dict[str, Path] = field(default_factory=dict)  # STREAMED_TABLES, left on disk
    limits: Limits = DEFAULT_LIMITS
    progress: Callable[[str], object] | None = None  # told after each streamed chunk
    _closer: ExitStack = field(default_factory=ExitStack, repr=False)

    def close(self) -> None:
        """Remove the temp copy of a zip's files (also done when garbage-collected)."""
        self._closer.close()


def _unsafe(message: str, name: str, found: str | None = None) -> DgtracesError:
    return DgtracesError(f"refused: {message}", code=Code.UNSAFE_ARCHIVE,
                         failures=[Failure(Code.UNSAFE_ARCHIVE, message, file=name, found=found)])


def bad_file(message: str, name: str, expected=None, found=None) -> DgtracesError:
    return DgtracesError(f"{name}: {message}", code=Code.BAD_FILE,
                         failures=[Failure(Code.BAD_FILE, message, file=name, expected=expected,
                                           found=found)])


def _member_path(name: str) -> PurePosixPath:
    """A zip member name as a safe relative path, or UNSAFE_ARCHIVE."""
    if "\\" in name or "\0" in name:
        raise _unsafe("member name has a backslash or NUL", repr(name))
    p = PurePosixPath(name)
    if p.is_absolute() or (len(name) > 1 and name[1] == ":"):
        raise _unsafe("absolute member path", name)
    if any(part == ".." for part in p.parts):
        raise _unsafe("path traversal ('..') in member name", name)
    return p


def _check_zip(zf: zipfile.ZipFile, limits: Limits) -> list[zipfile.ZipInfo]:
    infos = zf.infolist()
    files = [i for i in infos if not i.is_dir()]
    if len(files) > limits.max_members:
        raise _unsafe("too many members", zf.filename or "zip",
                      found=f"{len(files)} > {limits.max_members}")
    seen, total = set(), 0
    file_keys = {str(_member_path(i.filename)) for i in files}
    for info in infos:
        path = _member_path(info.filename)
        mode = info.external_attr >> 16
        if stat.S_ISLNK(mode):
            raise _unsafe("symbolic link in archive", info.filename)
        if info.flag_bits & 0x1:
            raise _unsafe("encrypted member", info.filename)
        key = str(path).rstrip("/")
        if key in seen:
            raise _unsafe("duplicate member name", info.filename)
        seen.add(key)
        clash = next((str(p) for p in path.parents if str(p) in file_keys), None)
        if clash is not None:  # "a" is a file and "a/b" needs it as a folder
            raise _unsafe("member lies under another member that is a file", info.filename,
                          found=clash)
        if info.is_dir():
            continue
        cap = limits.file_bytes(path.name)
        if info.file_size > cap:
            raise _unsafe("member too large", info.filename,
                          found=f"{info.file_size} > {cap} bytes")
        if (info.file_size > 65_536
                and info.file_size > limits.max_ratio * max(info.compress_size, 1)):
            raise _unsafe("compression ratio too high (zip bomb?)", info.filename,
                          found=f"{info.file_size / max(info.compress_size, 1):.0f}:1")
        total += info.file_size
    if total > limits.max_total_bytes:
        raise _unsafe("archive too large when unpacked", zf.filename or "zip",
                      found=f"{total} > {limits.max_total_bytes} bytes")
    return files


def _extract(zpath: Path, dest: Path, limits: Limits) -> None:
    """Extract ``zpath`` into ``dest`` counting real bytes (declared sizes may lie)."""
    try:
        zf = zipfile.ZipFile(zpath)
    except (zipfile.BadZipFile, OSError) as exc:
        raise bad_file(f"not a readable zip ({exc})", str(zpath)) from exc
    with zf:
        total = 0
        for info in _check_zip(zf, limits):
            target = dest.joinpath(*_member_path(info.filename).parts)
            if not target.resolve().is_relative_to(dest.resolve()):
                raise _unsafe("member escapes the extraction folder", info.filename)
            written = 0
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                with zf.open(info) as src, open(target, "xb") as out:
                    for chunk in iter(lambda: src.read(1 << 16), b""):
                        written += len(chunk)
                        total += len(chunk)
                        if written > max(info.file_size, 0) \
                                or written > limits.file_bytes(target.name) \
                                or total > limits.max_total_bytes:
                            raise _unsafe("member inflates beyond its declared/allowed size",
                                          info.filename)
                        out.write(chunk)
            except (zipfile.BadZipFile, EOFError, OSError, ValueError) as exc:
                raise bad_file(f"corrupt zip member ({exc})", info.filename) from exc


def _scan_folder(folder: Path, limits: Limits) -> list[Path]:
    """Regular files of a folder (one optional wrapping level); symlinks are refused."""
    found: list[Path] = []
    total = 0
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                raise _unsafe("symbolic link in contribution folder", str(p.relative_to(folder)))
            if stat.S_ISDIR(st.st_mode):
                continue
            if not stat.S_ISREG(st.st_mode):
                raise _unsafe("special file in contribution folder", str(p.relative_to(folder)))
            if st.st_size > limits.file_bytes(name):
                raise bad_file("file too large", str(p), limits.file_bytes(name), st.st_size)
            total += st.st_size
            found.append(p)
    if len(found) > limits.max_members:
        raise _unsafe("too many files", str(folder), found=f"{len(found)} > {limits.max_members}")
    if total > limits.max_total_bytes:
        raise bad_file("contribution too large", str(folder), limits.max_total_bytes, total)
    return found


def _contribution_dir(root: Path, files: list[Path]) -> Path:
    """The folder holding contribution.yaml: ``root``, or its single sub-folder when that
    is the only entry of ``root`` (anything beside a wrapping folder is BAD_FILE: it would
    otherwise be ignored silently)."""
    if (root / META_FILE).is_file():
        return root
    entries = sorted(root.iterdir())
    subs = [p for p in entries if p.is_dir()]
    if len(subs) == 1 and (subs[0] / META_FILE).is_file():
        extra = [p.name for p in entries if p != subs[0]]
        if extra:
            raise bad_file(f"unexpected entries beside the wrapping folder {subs[0].name!r}",
                            extra[0], f"only the folder {subs[0].name}/",
                            ", ".join(extra)[:200])
        return subs[0]
    raise DgtracesError(f"{root}: no {META_FILE} at the top level", code=Code.BAD_INPUT,
                        failures=[Failure(Code.BAD_INPUT, f"missing {META_FILE}", file=str(root))])


@contextmanager
def opened(path: str | os.PathLike, limits: Limits = DEFAULT_LIMITS) -> Iterator[Path]:
    """Yield a safe folder with the contribution's files (a temp copy for zips)."""
    path = Path(path)
    if path.is_symlink():
        raise _unsafe("the contribution path is a symbolic link", str(path))
    if path.is_dir():
        files = _scan_folder(path, limits)
        yield _contribution_dir(path, files)
        return
    if not path.is_file():
        raise DgtracesError(f"{path}: no such file or folder", code=Code.NOT_FOUND)
    if path.suffix.lower() != ".zip":
        raise bad_file("expected a folder or a .zip", str(path), ".zip", path.suffix)
    tmp = Path(tempfile.mkdtemp(prefix="dgtraces-contrib-"))
    try:
        _extract(path, tmp, limits)
        yield _contribution_dir(tmp, _scan_folder(tmp, limits))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def expected_files() -> str:
    """Every file a contribution folder may hold (for the refusal of any other)."""
    tables = " | ".join(f"{t}.csv/.parquet" for t in REQUIRED_TABLES + OPTIONAL_TABLES)
    return f"{META_FILE} | {' | '.join(EXTRA_FILES)} | {tables}"


def _table_files(folder: Path) -> tuple[dict[str, Path], list[Failure]]:
    """Table name -> file, and a failure for EVERY stray file or sub-folder, second file of
    a table and missing required table (one run lists them all)."""
    allowed = {META_FILE, *EXTRA_FILES}
    out: dict[str, Path] = {}
    problems: list[Failure] = []
    for p in sorted(folder.iterdir()):
        if p.is_dir():
            problems.append(Failure(Code.BAD_FILE, "unexpected sub-folder", file=p.name,
                                    expected="table files only", found=p.name))
            continue
        if p.name in allowed:
            continue
        stem, suffix = p.name.split(".")[0], p.suffix.lower()
        if stem not in REQUIRED_TABLES + OPTIONAL_TABLES or suffix not in TABLE_SUFFIXES \
                or p.name != stem + suffix:
            problems.append(Failure(Code.BAD_FILE, "unexpected file", file=p.name,
                                    expected=expected_files(), found=p.name))
        elif stem in out:
            problems.append(Failure(Code.BAD_FILE, f"two files for table {stem}", file=p.name,
                                    expected="one file per table", found=out[stem].name))
        else:
            out[stem] = p
    problems += [Failure(Code.BAD_INPUT, "missing table", file=f"{t}.csv", expected="present",
                         found="absent") for t in REQUIRED_TABLES if t not in out]
    return out, problems


def layout_error(folder: Path, problems: list[Failure]) -> DgtracesError:
    """One error for every layout problem of a contribution (code of the first)."""
    names = ", ".join(f.file or "" for f in problems)
    return DgtracesError(f"{folder}: {len(problems)} problem(s) with its files: {names}"[:500],
                         code=problems[0].code, failures=problems)


def read_bounded(path: Path, limits: Limits = DEFAULT_LIMITS, table: str | None = None
                 ) -> "pd.DataFrame":
    """A CSV/Parquet table read within ``limits`` (sizes and columns checked before
    materialising; BAD_FILE past them). Contributions and ``dgtraces validate`` read through
    it; ``table`` defaults to the one the file is named after."""
    from dgtraces.io import bounded
    from dgtraces.tables.checks import column_cap, read_file
    from dgtraces.tables.schema import TABLES

    stem = path.name.split(".")[0]
    table = table or (stem if stem in TABLES else None)
    if path.suffix.lower() == ".parquet":  # sizes checked from the footer and dictionaries
        df = bounded.read_parquet(path, max_rows=limits.max_rows, max_cells=limits.max_cells,
                                  max_bytes=limits.max_file_bytes,
                                  max_field_chars=limits.max_field_chars,
                                  max_columns=column_cap(table))
    else:
        bounded.check_csv(path, limits.max_rows, limits.max_cells, column_cap(table))
        try:
            df = read_file(path, table)
        except ValidationError as exc:
            exc.failures = exc.failures or [Failure(exc.code, exc.message, file=path.name)]
            raise
    if len(df) > limits.max_rows:
        raise bad_file("too many rows", path.name, limits.max_rows, len(df))
    check_cells(df, path.name, limits)
    return df


def check_cells(df: "pd.DataFrame", name: str, limits: Limits) -> None:
    """Column names and text cells within ``limits`` (BAD_FILE otherwise)."""
    for col in df.columns:
        if len(str(col)) > 256:
            raise bad_file("huge column name", name, "<= 256 chars", len(str(col)))
        if df[col].dtype == object or str(df[col].dtype).startswith("str"):
            import pandas as pd

            longest = df[col].astype("string").str.len().max()
            if pd.notna(longest) and longest > limits.max_field_chars:
                raise bad_file("huge field", name, f"<= {limits.max_field_chars} chars",
                                int(longest))


def read_contribution(path: str | os.PathLike, limits: Limits = DEFAULT_LIMITS) -> Contribution:
    """Open ``path`` safely and read its metadata and tables (no validation yet). The
    tables of :data:`STREAMED_TABLES` stay on disk (a zip's in a temp folder that lives as
    long as the returned object, or until its ``close()``)."""
    from .metadata import read_meta

    closer = ExitStack()
    try:
        folder = closer.enter_context(opened(path, limits))
        problems: list[Failure] = []
        meta = read_meta(folder / META_FILE, limits.max_meta_bytes, problems)
        out = Contribution(source=str(path), meta=meta, meta_failures=problems,
                           limits=limits)
        tables, layout = _table_files(folder)
        if any(t not in tables for t in REQUIRED_TABLES):  # nothing to check the rest against
            raise layout_error(folder, layout + problems)
        out.layout_failures = layout  # stray files: reported by check with everything else
        for table, p in tables.items():
            if table in STREAMED_TABLES:
                out.streamed[table] = p
            else:
                out.frames[table] = read_bounded(p, limits)
            out.files[table] = p.name
    except BaseException:
        closer.close()
        raise
    out._closer = closer
    weakref.finalize(out, closer.close)
    return out
