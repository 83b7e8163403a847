"""Executing the schemas: file reading, lazy pandera validation, cross-table checks.

Every problem becomes a :class:`~dgtraces.errors.Failure` naming file, row, column, expected
and found; nothing here writes to disk. Rows are counted from 0 over data rows (header
excluded); for CSV files the message also gives the 1-based line number.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import replace
from functools import cache, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dgtraces.errors import (
    BadFileError,
    Code,
    DgtracesError,
    Failure,
    MissingFileError,
    ValidationError,
)
from dgtraces.names import allowed_names, reference_names, unknown_failure

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

READABLE = (".csv", ".parquet", ".pq")
NULL_SPELLINGS = ["", "NA", "N/A", "null", "NULL", "None", "<NA>"]


def table_for_path(path: str | os.PathLike) -> str:
    """Infer the table from a file name such as ``layer_timings.csv``."""
    from dgtraces.tables.schema import TABLES

    stem = Path(path).name.split(".")[0]
    if stem not in TABLES:
        raise DgtracesError(
            f"{path}: cannot tell which table this is; name the file after a table or pass "
            f"--table", code=Code.BAD_INPUT,
            failures=[Failure(Code.BAD_INPUT, "unknown table", file=str(path),
                              expected=" | ".join(TABLES), found=stem)])
    return stem


EXTRA_COLUMNS = 16  # columns a table file may have beyond its table's before it is refused


@cache
def column_cap(table: str | None) -> int:
    """The most columns a file of ``table`` (None or unknown: of any table) is read with:
    its columns plus :data:`EXTRA_COLUMNS` (optional extras such as grad_bytes, and a few
    unknown ones, which the strict schema reports by name). A wider file is BAD_FILE before
    it is parsed (#36: 1 row x 1,000,000 columns went around the cell bound)."""
    from dgtraces.tables.schema import TABLES

    tables = [table] if table in TABLES else list(TABLES)
    return max(len(TABLES[t].to_schema().columns) for t in tables) + EXTRA_COLUMNS


def _csv_options(path: Path, table: str | None) -> dict[str, Any]:
    """pandas.read_csv options of every CSV read: UTF-8, only :data:`NULL_SPELLINGS` mean
    "missing" (a written NaN/inf stays text and is refused as non-finite, PLAUSIBILITY,
    instead of becoming null silently), and with a known ``table`` its text columns read as
    text (a run id ``007`` stays ``007``, and chunks of one file agree on the type)."""
    from dgtraces.tables.strict import text_columns

    opts: dict[str, Any] = dict(encoding="utf-8", encoding_errors="strict",
                                keep_default_na=False, na_values=NULL_SPELLINGS)
    if table is not None:
        opts["dtype"] = {c: str for c in text_columns(table)}
    return opts


def _unreadable(path: Path, suffix: str, exc: Exception) -> BadFileError:
    if isinstance(exc, UnicodeDecodeError):
        return BadFileError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})")
    return BadFileError(f"{path}: cannot read {suffix[1:]} ({type(exc).__name__}: "
                        f"{str(exc)[:300]})")


def read_file(path: str | os.PathLike, table: str | None = None) -> "pd.DataFrame":
    """Read a CSV (UTF-8) or Parquet file; unreadable input raises code BAD_FILE.
    ``table``: the table the file holds (its text columns are read as text)."""
    import pandas as pd

    path = Path(path)
    suffix = path.suffix.lower()
    if not path.is_file():
        raise MissingFileError(f"{path}: no such file")
    if suffix not in READABLE:
        raise BadFileError(f"{path}: unsupported file type {suffix!r}",
                           failures=[Failure(Code.BAD_FILE, "unsupported type", file=str(path),
                                             expected="csv | parquet", found=suffix)])
    if suffix == ".csv":
        check_first_row(path)
    try:
        if suffix == ".csv":
            return pd.read_csv(path, **_csv_options(path, table))
        return pd.read_parquet(path)
    except Exception as exc:  # pyarrow / pandas parser errors vary by version
        raise _unreadable(path, suffix, exc) from exc


def check_first_row(path: Path) -> None:
    """BAD_FILE, once, when the first data row of a CSV has more fields than its header:
    pandas would read the extra leading fields as an index and shift every column, so an
    unquoted comma in a text cell came out as ~30 misplaced-value failures (#36 item 8). A
    later row with too many fields is pandas' own tokenizing error (BAD_FILE, with its
    line). Unreadable text is left to the reader that follows."""
    import csv

    try:
        with open(path, encoding="utf-8", newline="") as fh:
            reader = csv.reader(fh)
            header = next(reader, None)
            line = reader.line_num + 1
            first = next(reader, None)
    except (UnicodeDecodeError, csv.Error):
        return
    if header is None or first is None or len(first) <= len(header):
        return
    raise BadFileError(
        f"{path}: line {line} has {len(first)} fields, the header {len(header)}: an unquoted "
        "comma in a text cell? (quote the cell)",
        failures=[Failure(Code.BAD_FILE, f"line {line}: more fields than the header (an "
                          "unquoted comma?)", file=str(path), row=0,
                          expected=f"{len(header)} fields (the header's)",
                          found=f"{len(first)} fields")])


def csv_chunks(path: Path, table: str, chunk_rows: int) -> "Iterator[pd.DataFrame]":
    """A CSV file read as :func:`read_file` reads it, in frames of ``chunk_rows`` rows."""
    import pandas as pd

    check_first_row(path)
    try:
        reader = pd.read_csv(path, chunksize=chunk_rows, **_csv_options(path, table))
    except Exception as exc:
        raise _unreadable(path, ".csv", exc) from exc
    with reader:
        while True:
            try:
                chunk = next(reader)
            except StopIteration:
                return
            except Exception as exc:
                raise _unreadable(path, ".csv", exc) from exc
            yield chunk


def _check_label(check) -> str:
    """The name pandera gives a check in its failure cases."""
    if check is None or isinstance(check, str):
        return str(check)
    return str(check.error if check.error is not None else
               check.name if check.name is not None else check)


def _column(err):
    """The column a pandera SchemaError is about (coercion errors name it on the schema)."""
    name = err.column_name
    return getattr(err.schema, "name", None) if name is None else name


def _cases(err) -> list[tuple[Any, Any, Any]]:
    """(index, failure case, column of the case if pandera names one) of a SchemaError."""
    import pandas as pd

    fc = err.failure_cases
    if isinstance(fc, pd.DataFrame):
        n = len(fc)
        idx = fc["index"].tolist() if "index" in fc else [None] * n
        col = fc["column"].tolist() if "column" in fc else [None] * n
        return list(zip(idx, fc["failure_case"].tolist(), col, strict=False))
    return [(None, fc, None)]


def _schema_failures(table: str, errors, file: str | None,
                     skip: frozenset = frozenset()) -> list[Failure]:
    """One failure per bad value, classified by pandera's reason codes (never by message
    text). ``skip`` holds (row, column) cells reported already (strict intake)."""
    from pandera.errors import SchemaErrorReason as R

    from dgtraces.tables.schema import TABLES

    errs = list(errors.schema_errors)
    # a value that could not be converted, or a missing column, makes later checks on its
    # column (and frame-wide checks) crash (reason CHECK_ERROR); those echoes are dropped
    structural = any(e.reason_code in (R.DATATYPE_COERCION, R.WRONG_DATATYPE,
                                       R.COLUMN_NOT_IN_DATAFRAME) for e in errs)
    coerced = {(idx, _column(e)) for e in errs if e.reason_code == R.DATATYPE_COERCION
               for idx, _, _ in _cases(e)}
    columns = set(TABLES[table].to_schema().columns)
    cells, frame_wide, seen_frame = [], [], set()
    for err in errs:
        reason, check = err.reason_code, _check_label(err.check)
        if reason in (R.COLUMN_NOT_IN_DATAFRAME, R.COLUMN_NOT_IN_SCHEMA):
            for _, found, _ in _cases(err):
                cells.append(Failure(Code.SCHEMA, f"{table}: column " + (
                    "missing" if reason == R.COLUMN_NOT_IN_DATAFRAME else
                    "not in the schema"), file=file, column=str(found)))
            continue
        if reason == R.CHECK_ERROR and structural:
            continue
        for idx, found, case_column in _cases(err):
            row = None if idx is None or idx != idx else int(idx)
            column = _column(err)
            if reason in (R.DUPLICATES, R.SERIES_CONTAINS_DUPLICATES) and \
                    case_column in columns:
                column = case_column  # a multi-column uniqueness check names each cell
            whole_row = column is None or str(column) not in columns  # a frame-wide check
            if reason == R.WRONG_DATATYPE and (idx, column) in coerced:
                continue  # the same cell's failed conversion is reported already
            if whole_row:  # pandera lists every cell of a failing row: one line per row
                if (check, row) not in seen_frame:
                    seen_frame.add((check, row))
                    frame_wide.append(Failure(Code.SCHEMA, f"{table}: failed {check}", file=file,
                                              row=row, expected=check))
                continue
            if (row, str(column)) in skip:
                continue
            allowed = allowed_names(err.check)
            if allowed:  # a name: the known ones listed once, with a did-you-mean
                cells.append(unknown_failure("SCHEMA", f"{table}: unknown {column} {found!r}",
                                             found, allowed, file=file, row=row,
                                             column=str(column)))
                continue
            cells.append(Failure(Code.SCHEMA, f"{table}: failed {check}", file=file, row=row,
                                 column=str(column), expected=check, found=repr(found)))
    # a row with a bad cell fails frame-wide checks because of it: one bad value, one line
    bad_rows = {f.row for f in cells if f.row is not None} | {r for r, _ in skip}
    return cells + [f for f in frame_wide if f.row is None or f.row not in bad_rows]


def typed_frame(table: str, df: "pd.DataFrame", *, file: str | None = None,
                partial: bool = False) -> "tuple[pd.DataFrame | None, list[Failure]]":
    """Validate one table lazily: (the coerced frame, or None when it fails its schema;
    every failure). A cell refused by the strict pass alone (set to null there, e.g. a
    spelled-out NaN: PLAUSIBILITY) leaves the frame typed. ``partial``: only the columns
    ``df`` has are required (every check of those columns and of the table still runs)."""
    import pandas as pd
    import pandera.errors as pe

    from dgtraces.tables.schema import TABLES
    from dgtraces.tables.strict import infinite_failures, strict_cells

    if table not in TABLES:
        raise DgtracesError(f"unknown table {table!r}", code=Code.BAD_INPUT)
    if not df.index.is_unique or not isinstance(df.index, pd.RangeIndex):
        df = df.reset_index(drop=True)  # rows are reported by position
    schema = TABLES[table].to_schema()
    if partial:
        present = [c for c in schema.columns if c in df.columns]
        unique = [c for c in schema.unique or () if c in present] or None
        schema = schema.select_columns(present)
        schema.unique = unique
    df, failures = strict_cells(table, df, file)  # no guessing of booleans and integers
    out = None
    try:
        out = schema.validate(df, lazy=True)
    except pe.SchemaErrors as errors:
        skip = frozenset((f.row, f.column) for f in failures)
        failures += _schema_failures(table, errors, file, skip)
    if any(f.code == Code.SCHEMA for f in failures):
        out = None
    elif out is not None:  # typed: an infinite float, however written, refused for all
        failures += infinite_failures(table, out, file)
    failures.sort(key=lambda f: (f.row is not None, f.row or 0))
    return out, failures


def validate_frame(table: str, df: "pd.DataFrame", *, file: str | None = None
                   ) -> "pd.DataFrame":
    """Validate one table lazily (all failures at once); returns the coerced frame."""
    out, failures = typed_frame(table, df, file=file)
    if failures or out is None:
        raise ValidationError(f"{file or table}: {len(failures)} schema failure(s)",
                              failures=failures) from None
    return out


def validate_columns(table: str, df: "pd.DataFrame", *, file: str | None = None
                     ) -> "pd.DataFrame":
    """The columns ``df`` has, validated against ``table``'s schema as :func:`validate_frame`
    does (strict cells, every column check, no column outside the schema); the columns it
    lacks are not required (a hand-made ``comm_fits`` file with only the columns a fit
    needs). Raises ValidationError coded SCHEMA, or PLAUSIBILITY when every failure is
    (a spelled-out NaN or inf)."""
    out, failures = typed_frame(table, df, file=file, partial=True)
    if failures or out is None:
        codes = {f.code for f in failures}
        code = Code.PLAUSIBILITY if codes == {Code.PLAUSIBILITY} else Code.SCHEMA
        raise ValidationError(f"{file or table}: {len(failures)} failure(s) against the "
                              f"{table} schema", code=code, failures=failures) from None
    return out


@lru_cache(maxsize=1)
def catalog(parent: str) -> "pd.DataFrame":
    """Rows of a parent table the package itself defines (``schema.CATALOG_PARENTS``):
    ``layers`` = every layer of every shipped model (built once per process)."""
    from dgtraces.models import layers_frame

    if parent != "layers":  # pragma: no cover - a new catalog parent needs its source here
        raise DgtracesError(f"no catalog for table {parent!r}", code=Code.BAD_INPUT)
    return layers_frame()


def _parent_rows(fk, frames: Mapping[str, "pd.DataFrame"],
                 known: Mapping[str, "pd.DataFrame"]) -> "pd.DataFrame | None":
    """The parent rows a key may reference: the package's catalog, or the checked frame
    plus the store's rows (later rows win on a duplicate key)."""
    import pandas as pd

    from dgtraces.tables.schema import CATALOG_PARENTS

    if fk.parent in CATALOG_PARENTS:
        return catalog(fk.parent)
    parts = [f for f in (known.get(fk.parent), frames.get(fk.parent))
             if f is not None and set(fk.parent_columns) <= set(f.columns)]
    if not parts:
        return None
    return pd.concat(parts, ignore_index=True)


def _key_index(df: "pd.DataFrame", cols) -> "pd.MultiIndex":
    """Key tuples as object values (plain Python equality; no arrow casts of odd keys)."""
    import pandas as pd

    return pd.MultiIndex.from_arrays([df[c].astype(object).to_numpy() for c in cols],
                                     names=list(cols))


def _child_keys(fk, child: "pd.DataFrame", frames, known) -> "pd.DataFrame | None":
    """The child's key columns (``via`` ones looked up in their parent; NaN when the
    referenced row does not exist), or None when the child lacks a column (its schema
    failure reports that)."""
    import pandas as pd

    out = pd.DataFrame(index=child.index)
    derived = {v[0]: v for v in fk.via}
    for col in fk.columns:
        if col in derived:
            _, own, parent, parent_key = derived[col]
            if own not in child:
                return None
            rows = _parent_rows(replace(fk, parent=parent, parent_columns=(parent_key,)),
                                frames, known)
            if rows is None or col not in rows:
                out[col] = float("nan")
                continue
            rows = rows.drop_duplicates(parent_key, keep="last")
            lookup = pd.Series(rows[col].to_numpy(), index=rows[parent_key].astype(object))
            out[col] = child[own].astype(object).map(lookup)
        elif col in child:
            out[col] = child[col].astype(object)
        else:
            return None
    return out


def _fk_failures(fk, frames, known, file) -> list[tuple[int, Failure]]:
    import numpy as np

    from dgtraces.tables.schema import CATALOG_PARENTS

    child = frames[fk.table].reset_index(drop=True)
    keys = _child_keys(fk, child, frames, known)
    if keys is None:
        return []
    parents = _parent_rows(fk, frames, known)
    present = keys.notna().all(axis=1).to_numpy(copy=True)
    if fk.parent in CATALOG_PARENTS and parents is not None:
        # a value of the leading column the catalog does not know is a schema failure
        present &= keys[fk.columns[0]].isin(parents[fk.parent_columns[0]]).to_numpy()
    parent_index = (_key_index(parents, fk.parent_columns) if parents is not None
                    else _key_index(keys.iloc[:0], fk.columns))
    bad = present & ~np.asarray(_key_index(keys, fk.columns).isin(parent_index))
    column = fk.columns[-1]
    values = keys[column].to_numpy()
    context = keys[list(fk.columns[:-1])].to_numpy()
    def where(r):
        return (", ".join(f"{c}={v}" for c, v in zip(fk.columns[:-1], context[r], strict=False)))

    names = reference_names(fk.parent_columns, parents)

    def make(r: int, v) -> Failure:
        scope = where(r)
        known = names(tuple(context[r]))
        if known:  # the names that exist there, listed once, and the closest
            return unknown_failure(fk.code, fk.label + (f" for {scope}" if scope else ""), v,
                                   known, file=file, row=r, column=column)
        return Failure(fk.code, fk.label + (f" for {scope}" if scope else ""), file=file,
                       row=r, column=column,
                       expected=f"a {fk.parent}.{fk.parent_columns[-1]}"
                       + (f" of {scope}" if scope else ""), found=repr(v))

    return _row_failures(bad, values, make)


def _row_failures(mask, values, make) -> list[tuple[int, Failure]]:
    """(row, failure) for each True position of ``mask`` (vectorised selection)."""
    import numpy as np

    rows = np.flatnonzero(np.asarray(mask, dtype=bool))
    return [(int(r), make(int(r), values[r])) for r in rows]


def cross_failures(frames: Mapping[str, "pd.DataFrame"], *,
                   files: Mapping[str, str] | None = None,
                   known_runs: "pd.DataFrame | None" = None,
                   known: Mapping[str, "pd.DataFrame"] | None = None) -> list[Failure]:
    """Every foreign key declared in ``schema.FOREIGN_KEYS`` whose table is among ``frames``.

    ``known`` adds parent rows from the store (``known_runs`` is ``known={"runs": ...}``).
    Vectorised (membership via pandas indexes); tables missing a key column are skipped
    (their schema failure already reports it); null keys are not references. Failures come
    per table in row order (tables in declaration order).
    """
    from dgtraces.tables.schema import FOREIGN_KEYS

    files = dict(files or {})
    known = dict(known or {})
    if known_runs is not None:
        known.setdefault("runs", known_runs)
    per_table: dict[str, list[tuple[int, Failure]]] = {}
    for fk in FOREIGN_KEYS:
        if frames.get(fk.table) is not None:
            per_table.setdefault(fk.table, []).extend(
                _fk_failures(fk, frames, known, files.get(fk.table)))
    return [fail for found in per_table.values()
            for _, fail in sorted(found, key=lambda x: x[0])]


def validate_tables(frames: Mapping[str, "pd.DataFrame"], *,
                    files: Mapping[str, str] | None = None,
                    known_runs: "pd.DataFrame | None" = None,
                    known: Mapping[str, "pd.DataFrame"] | None = None
                    ) -> dict[str, "pd.DataFrame"]:
    """Validate several tables and their keys together; raise one error listing everything."""
    out, failures = check_tables(frames, files=files, known_runs=known_runs, known=known)
    if failures:
        code = Code.SCHEMA if any(f.code == Code.SCHEMA for f in failures) else failures[0].code
        raise ValidationError(f"{len(failures)} validation failure(s)", code=code,
                              failures=failures)
    return out


def check_tables(frames: Mapping[str, "pd.DataFrame"], *,
                 files: Mapping[str, str] | None = None,
                 known_runs: "pd.DataFrame | None" = None,
                 known: Mapping[str, "pd.DataFrame"] | None = None
                 ) -> tuple[dict[str, "pd.DataFrame"], list[Failure]]:
    """:func:`validate_tables` without raising: (frames, failures). A table that fails its
    schema comes back as given (untyped); the others are coerced."""
    files = dict(files or {})
    failures: list[Failure] = []
    out = {}
    for name, df in frames.items():
        typed, found = typed_frame(name, df, file=files.get(name))
        failures.extend(found)
        out[name] = typed if typed is not None else df
    # a cell that failed its schema is not reported again by the key checks
    bad_cells = {(f.file, f.row, f.column) for f in failures if f.row is not None}
    failures.extend(f for f in cross_failures(out, files=files, known_runs=known_runs,
                                              known=known)
                    if (f.file, f.row, f.column) not in bad_cells)
    return out, failures


def needed_parents(tables) -> set[str]:
    """Parent tables (not catalogs) that the declared foreign keys of ``tables`` reference
    and that are not among ``tables`` themselves."""
    from dgtraces.tables.schema import CATALOG_PARENTS, FOREIGN_KEYS

    tables = set(tables)
    parents = {p for fk in FOREIGN_KEYS if fk.table in tables
               for p in (fk.parent, *(v[2] for v in fk.via))}
    return parents - tables - set(CATALOG_PARENTS)
