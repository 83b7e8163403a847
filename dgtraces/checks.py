"""Executing the schemas: file reading, lazy pandera validation, cross-table checks.

Every problem becomes a :class:`~dgtraces.errors.Failure` naming file, row, column, expected
and found; nothing here writes to disk. Rows are counted from 0 over data rows (header
excluded); for CSV files the message also gives the 1-based line number.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import Failure, ValidationError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

READABLE = (".csv", ".parquet", ".pq")
NULL_SPELLINGS = ["", "NA", "N/A", "null", "NULL", "None", "<NA>"]


def table_for_path(path: str | os.PathLike) -> str:
    """Infer the table from a file name such as ``layer_timings.csv``."""
    from .schema import TABLES

    stem = Path(path).name.split(".")[0]
    if stem not in TABLES:
        raise ValidationError(
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
        raise ValidationError(f"{path}: no such file", code="NOT_FOUND")
    if suffix not in READABLE:
        raise ValidationError(f"{path}: unsupported file type {suffix!r}", code="BAD_FILE",
                              failures=[Failure("BAD_FILE", "unsupported type", file=str(path),
                                                expected="csv | parquet", found=suffix)])
    try:
        if suffix == ".csv":
            # only these spellings mean "missing": a written NaN/inf stays text and is
            # refused as non-finite (PLAUSIBILITY) instead of becoming null silently
            return pd.read_csv(path, encoding="utf-8", encoding_errors="strict",
                               keep_default_na=False, na_values=NULL_SPELLINGS)
        return pd.read_parquet(path)
    except UnicodeDecodeError as exc:
        raise ValidationError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})",
                              code="BAD_FILE") from exc
    except Exception as exc:  # pyarrow / pandas parser errors vary by version
        raise ValidationError(f"{path}: cannot read {suffix[1:]} ({type(exc).__name__}: "
                              f"{str(exc)[:300]})", code="BAD_FILE") from exc


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

    from .schema import TABLES

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
                cells.append(Failure("SCHEMA", f"{table}: column " + (
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
                    frame_wide.append(Failure("SCHEMA", f"{table}: failed {check}", file=file,
                                              row=row, expected=check))
                continue
            if (row, str(column)) in skip:
                continue
            cells.append(Failure("SCHEMA", f"{table}: failed {check}", file=file, row=row,
                                 column=str(column), expected=check, found=repr(found)))
    # a row with a bad cell fails frame-wide checks because of it: one bad value, one line
    bad_rows = {f.row for f in cells if f.row is not None} | {r for r, _ in skip}
    return cells + [f for f in frame_wide if f.row is None or f.row not in bad_rows]


def validate_frame(table: str, df: "pd.DataFrame", *, file: str | None = None
                   ) -> "pd.DataFrame":
    """Validate one table lazily (all failures at once); returns the coerced frame."""
    import pandas as pd
    import pandera.errors as pe

    from .schema import TABLES
    from .strict import strict_cells

    if table not in TABLES:
        raise ValidationError(f"unknown table {table!r}", code="BAD_INPUT")
    if not df.index.is_unique or not isinstance(df.index, pd.RangeIndex):
        df = df.reset_index(drop=True)  # rows are reported by position
    df, failures = strict_cells(table, df, file)  # no guessing of booleans and integers
    try:
        out = TABLES[table].validate(df, lazy=True)
    except pe.SchemaErrors as errors:
        skip = frozenset((f.row, f.column) for f in failures)
        failures += _schema_failures(table, errors, file, skip)
    if failures:
        failures.sort(key=lambda f: (f.row is not None, f.row or 0))
        raise ValidationError(f"{file or table}: {len(failures)} schema failure(s)",
                              failures=failures) from None
    return out


@lru_cache(maxsize=1)
def _layer_index() -> "pd.MultiIndex":
    """(model, layer) pairs of every shipped model (built once per process)."""
    import pandas as pd

    from .models import layers_frame

    return pd.MultiIndex.from_frame(layers_frame()[["model", "layer"]].astype(object))


def _row_failures(mask, values, make) -> list[tuple[int, Failure]]:
    """(row, failure) for each True position of ``mask`` (vectorised selection)."""
    import numpy as np

    rows = np.flatnonzero(np.asarray(mask, dtype=bool))
    return [(int(r), make(int(r), values[r])) for r in rows]


def cross_failures(frames: Mapping[str, "pd.DataFrame"], *,
                   files: Mapping[str, str] | None = None,
                   known_runs: "pd.DataFrame | None" = None) -> list[Failure]:
    """Cross-table keys: timing runs exist, timing layers exist for the run's model,
    iterations' trace runs exist. ``known_runs`` adds runs from the store.

    Vectorised (membership via pandas indexes); tables missing a key column are skipped
    (their schema failure already reports it). Failures come in row order per table.
    """
    import pandas as pd

    from .models import MODELS

    files = dict(files or {})
    out: list[Failure] = []
    runs_parts = [f[["run_id", "model"]] for f in (frames.get("runs"), known_runs)
                  if f is not None and {"run_id", "model"} <= set(f.columns)]
    run_model = (pd.concat(runs_parts, ignore_index=True).drop_duplicates("run_id", keep="last")
                 .set_index("run_id")["model"] if runs_parts else pd.Series(dtype=object))
    # object dtype: plain Python equality, as dict lookups had (no arrow casts of odd keys)
    run_model.index = run_model.index.astype(object)
    valid = _layer_index()

    def layer_check(model: "pd.Series", layer: "pd.Series", known: "pd.Series", f):
        bad = known & model.astype(object).isin(MODELS) & ~pd.MultiIndex.from_arrays(
            [model.astype(object), layer.astype(object)]).isin(valid)
        models, layers = model.to_numpy(), layer.to_numpy()
        return _row_failures(bad, layers, lambda r, v: Failure(
            "UNKNOWN_LAYER", f"layer not in model {models[r]}", file=f, row=r, column="layer",
            expected=f"a layer of {models[r]}", found=repr(v)))

    lt = frames.get("layer_timings")
    if lt is not None and {"run_id", "layer"} <= set(lt.columns):
        f = files.get("layer_timings")
        rid = lt["run_id"].reset_index(drop=True).astype(object)
        known = rid.isin(run_model.index)
        model = rid.map(run_model).where(known)
        found = _row_failures(~known, rid.to_numpy(), lambda r, v: Failure(
            "CROSS_TABLE", "run_id not in runs", file=f, row=r, column="run_id",
            expected="a runs.run_id", found=repr(v)))
        found += layer_check(model, lt["layer"].reset_index(drop=True), known, f)
        out += [fail for _, fail in sorted(found, key=lambda x: x[0])]
    it = frames.get("iterations")
    if it is not None and "trace_run_id" in it:
        f = files.get("iterations")
        rid = it["trace_run_id"].reset_index(drop=True).astype(object)
        bad = rid.map(lambda v: isinstance(v, str)).astype(bool) & ~rid.isin(run_model.index)
        out += [fail for _, fail in _row_failures(bad, rid.to_numpy(), lambda r, v: Failure(
            "CROSS_TABLE", "trace_run_id not in runs", file=f, row=r, column="trace_run_id",
            expected="a runs.run_id", found=repr(v)))]
    lay = frames.get("layers")
    if lay is not None and {"model", "layer"} <= set(lay.columns):
        model = lay["model"].reset_index(drop=True)
        out += [fail for _, fail in layer_check(model, lay["layer"].reset_index(drop=True),
                                                pd.Series(True, index=model.index),
                                                files.get("layers"))]
    return out


def validate_tables(frames: Mapping[str, "pd.DataFrame"], *,
                    files: Mapping[str, str] | None = None,
                    known_runs: "pd.DataFrame | None" = None) -> dict[str, "pd.DataFrame"]:
    """Validate several tables and their keys together; raise one error listing everything."""
    out, failures = check_tables(frames, files=files, known_runs=known_runs)
    if failures:
        code = "SCHEMA" if any(f.code == "SCHEMA" for f in failures) else failures[0].code
        raise ValidationError(f"{len(failures)} validation failure(s)", code=code,
                              failures=failures)
    return out


def check_tables(frames: Mapping[str, "pd.DataFrame"], *,
                 files: Mapping[str, str] | None = None,
                 known_runs: "pd.DataFrame | None" = None
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
    # a cell that failed its schema is not reported again by the key checks
    bad_cells = {(f.file, f.row, f.column) for f in failures if f.row is not None}
    failures.extend(f for f in cross_failures(out, files=files, known_runs=known_runs)
                    if (f.file, f.row, f.column) not in bad_cells)
    return out, failures


def validate_files(paths, table: str | None = None, *, use_store: bool = True,
                   root=None) -> dict[str, int]:
    """Validate files (never modifies them). Returns table -> rows; raises with a report."""
    from .schema import TABLES

    if table is not None and table not in TABLES:
        raise ValidationError(f"unknown table {table!r}", code="BAD_INPUT",
                              failures=[Failure("BAD_INPUT", "unknown table", column="--table",
                                                expected=" | ".join(TABLES), found=repr(table))])
    frames: dict[str, "pd.DataFrame"] = {}
    files: dict[str, str] = {}
    failures: list[Failure] = []
    for path in paths:
        if not Path(path).is_file():  # before guessing a table from a name that isn't there
            raise ValidationError(f"{path}: no such file", code="NOT_FOUND")
        name = table or table_for_path(path)
        if name in frames:
            raise ValidationError(f"two files for table {name!r}: {files[name]} and {path}",
                                  code="BAD_INPUT")
        frames[name] = read_file(path)
        files[name] = str(path)
    known_runs = None
    needs_runs = ("layer_timings" in frames or "iterations" in frames) and "runs" not in frames
    if use_store and needs_runs:
        from . import store
        from .errors import StoreError

        try:
            known_runs = store.read_table("runs", root=root)
        except StoreError:
            known_runs = None
    try:
        validate_tables(frames, files=files, known_runs=known_runs)
    except ValidationError as exc:
        failures.extend(exc.failures)
        raise ValidationError(f"{len(failures)} validation failure(s) in "
                              f"{len(paths)} file(s)", code=exc.code,
                              failures=failures) from None
    return {name: len(df) for name, df in frames.items()}
