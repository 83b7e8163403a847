"""Executing the schemas: file reading, lazy pandera validation, cross-table checks.

Every problem becomes a :class:`~dgtraces.errors.Failure` naming file, row, column, expected
and found; nothing here writes to disk. Rows are counted from 0 over data rows (header
excluded); for CSV files the message also gives the 1-based line number.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import BadFileError, DgtracesError, Failure, MissingFileError, ValidationError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

READABLE = (".csv", ".parquet", ".pq")


def table_for_path(path: str | os.PathLike) -> str:
    """Infer the table from a file name such as ``layer_timings.csv``."""
    from .schema import TABLES

    stem = Path(path).name.split(".")[0]
    if stem not in TABLES:
        raise DgtracesError(
            f"{path}: cannot tell which table this is; name the file after a table or pass "
            f"--table", code="BAD_INPUT",
            failures=[Failure("BAD_INPUT", "unknown table", file=str(path),
                              expected=" | ".join(TABLES), found=stem)])
    return stem


def read_file(path: str | os.PathLike) -> "pd.DataFrame":
    """Read a CSV (UTF-8) or Parquet file; unreadable input raises code BAD_FILE."""
    import pandas as pd

    path = Path(path)
    suffix = path.suffix.lower()
    if not path.is_file():
        raise MissingFileError(f"{path}: no such file")
    if suffix not in READABLE:
        raise BadFileError(f"{path}: unsupported file type {suffix!r}",
                           failures=[Failure("BAD_FILE", "unsupported type", file=str(path),
                                             expected="csv | parquet", found=suffix)])
    try:
        if suffix == ".csv":
            return pd.read_csv(path, encoding="utf-8", encoding_errors="strict",
                               keep_default_na=True)
        return pd.read_parquet(path)
    except UnicodeDecodeError as exc:
        raise BadFileError(f"{path}: not UTF-8 text ({exc.reason} at byte "
                           f"{exc.start})") from exc
    except Exception as exc:  # pyarrow / pandas parser errors vary by version
        raise BadFileError(f"{path}: cannot read {suffix[1:]} ({type(exc).__name__}: "
                           f"{str(exc)[:300]})") from exc


def _schema_failures(table: str, errors, file: str | None) -> list[Failure]:
    from .schema import TABLES

    records = errors.failure_cases.to_dict("records")
    # a value that could not be converted, or a missing column, makes later checks on its
    # column (and frame-wide checks) crash with a TypeError/KeyError; those echoes are
    # dropped when the failure that causes them is reported
    structural = any(str(r.get("check")).startswith(("coerce_dtype", "dtype",
                                                     "column_in_dataframe"))
                     for r in records)
    model_name = TABLES[table].__name__  # pandera's "column" of frame-wide checks
    coerced = {(r.get("index"), r.get("column")) for r in records
               if str(r.get("check")).startswith("coerce_dtype")}
    out = []
    for rec in records:
        idx = rec.get("index")
        row = None if idx is None or idx != idx else int(idx)
        column = rec.get("column")
        column = None if column is None or column != column else str(column)
        check = str(rec.get("check"))
        found = rec.get("failure_case")
        if structural and row is None and isinstance(found, str) and found.startswith(
                ("TypeError(", "ValueError(", "KeyError(")):
            continue
        if column == model_name:
            column = None  # a frame-wide check, not a column
        if check.startswith("dtype") and (idx, rec.get("column")) in coerced:
            continue  # the same cell's failed conversion is reported already
        msg = f"{table}: failed {check}"  # Failure.line adds the CSV line to the row
        if check.startswith(("column_in_dataframe", "column_in_schema")):
            missing = check.startswith("column_in_dataframe")
            out.append(Failure("SCHEMA", f"{table}: column " + (
                "missing" if missing else "not in the schema"), file=file, column=str(found)))
            continue
        out.append(Failure("SCHEMA", msg, file=file, row=row, column=column,
                           expected=check, found=repr(found)))
    return out


def validate_frame(table: str, df: "pd.DataFrame", *, file: str | None = None
                   ) -> "pd.DataFrame":
    """Validate one table lazily (all failures at once); returns the coerced frame."""
    import pandera.errors as pe

    from .schema import TABLES

    if table not in TABLES:
        raise DgtracesError(f"unknown table {table!r}", code="BAD_INPUT")
    if not df.index.is_unique:  # e.g. a concat; rows are reported by position anyway
        df = df.reset_index(drop=True)
    try:
        return TABLES[table].validate(df, lazy=True)
    except pe.SchemaErrors as errors:
        failures = _schema_failures(table, errors, file)
        raise ValidationError(f"{file or table}: {len(failures)} schema failure(s)",
                              failures=failures) from None


@lru_cache(maxsize=1)
def _catalog(parent: str) -> "pd.DataFrame":
    """Rows of a parent table the package itself defines (``schema.CATALOG_PARENTS``):
    ``layers`` = every layer of every shipped model (built once per process)."""
    from .models import layers_frame

    if parent != "layers":  # pragma: no cover - a new catalog parent needs its source here
        raise DgtracesError(f"no catalog for table {parent!r}", code="BAD_INPUT")
    return layers_frame()


def _parent_rows(fk, frames: Mapping[str, "pd.DataFrame"],
                 known: Mapping[str, "pd.DataFrame"]) -> "pd.DataFrame | None":
    """The parent rows a key may reference: the package's catalog, or the checked frame
    plus the store's rows (later rows win on a duplicate key)."""
    import pandas as pd

    from .schema import CATALOG_PARENTS

    if fk.parent in CATALOG_PARENTS:
        return _catalog(fk.parent)
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

    from .schema import CATALOG_PARENTS

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

    def make(r: int, v) -> Failure:
        scope = where(r)
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
    from .schema import FOREIGN_KEYS

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
        code = "SCHEMA" if any(f.code == "SCHEMA" for f in failures) else failures[0].code
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
        try:
            out[name] = validate_frame(name, df, file=files.get(name))
        except ValidationError as exc:
            if exc.code != "SCHEMA":
                raise
            failures.extend(exc.failures)
            out[name] = df
    failures.extend(cross_failures(out, files=files, known_runs=known_runs, known=known))
    return out, failures


def needed_parents(tables) -> set[str]:
    """Parent tables (not catalogs) that the declared foreign keys of ``tables`` reference
    and that are not among ``tables`` themselves."""
    from .schema import CATALOG_PARENTS, FOREIGN_KEYS

    tables = set(tables)
    parents = {p for fk in FOREIGN_KEYS if fk.table in tables
               for p in (fk.parent, *(v[2] for v in fk.via))}
    return parents - tables - set(CATALOG_PARENTS)


def _store_parents(frames: Mapping[str, "pd.DataFrame"], root=None
                   ) -> dict[str, "pd.DataFrame"]:
    """The latest release's rows of each parent table the frames reference but lack."""
    from . import store
    from .errors import StoreError

    known = {}
    for parent in sorted(needed_parents(frames)):
        try:
            known[parent] = store.read_table(parent, root=root)
        except StoreError:
            continue
    return known


def validate_files(paths, table: str | None = None, *, use_store: bool = True,
                   root=None) -> dict[str, int]:
    """Validate files (never modifies them). Returns table -> rows; raises with a report."""
    frames: dict[str, "pd.DataFrame"] = {}
    files: dict[str, str] = {}
    failures: list[Failure] = []
    for path in paths:
        if not Path(path).is_file():  # before guessing a table from a name that isn't there
            raise MissingFileError(f"{path}: no such file")
        name = table or table_for_path(path)
        if name in frames:
            raise DgtracesError(f"two files for table {name!r}: {files[name]} and {path}",
                                code="BAD_INPUT")
        frames[name] = read_file(path)
        files[name] = str(path)
    known = _store_parents(frames, root) if use_store else {}
    try:
        validate_tables(frames, files=files, known=known)
    except ValidationError as exc:
        failures.extend(exc.failures)
        raise ValidationError(f"{len(failures)} validation failure(s) in "
                              f"{len(paths)} file(s)", code=exc.code,
                              failures=failures) from None
    return {name: len(df) for name, df in frames.items()}
