"""Executing the schemas: file reading, lazy pandera validation, cross-table checks.

Every problem becomes a :class:`~dgtraces.errors.Failure` naming file, row, column, expected
and found; nothing here writes to disk. Rows are counted from 0 over data rows (header
excluded); for CSV files the message also gives the 1-based line number.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Mapping

from .errors import Failure, ValidationError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

READABLE = (".csv", ".parquet", ".pq")


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
            return pd.read_csv(path, encoding="utf-8", encoding_errors="strict",
                               keep_default_na=True)
        return pd.read_parquet(path)
    except UnicodeDecodeError as exc:
        raise ValidationError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})",
                              code="BAD_FILE") from exc
    except Exception as exc:  # pyarrow / pandas parser errors vary by version
        raise ValidationError(f"{path}: cannot read {suffix[1:]} ({type(exc).__name__}: "
                              f"{str(exc)[:300]})", code="BAD_FILE") from exc


def _schema_failures(table: str, errors, file: str | None, csv: bool) -> list[Failure]:
    cases = errors.failure_cases
    out = []
    for rec in cases.to_dict("records"):
        idx = rec.get("index")
        row = None if idx is None or idx != idx else int(idx)
        column = rec.get("column")
        column = None if column is None or column != column else str(column)
        check = str(rec.get("check"))
        found = rec.get("failure_case")
        msg = f"{table}: failed {check}"
        if csv and row is not None:
            msg += f" (line {row + 2})"
        code = "SCHEMA"
        if check.startswith("column_in_dataframe") or check.startswith("column_in_schema"):
            msg = f"{table}: column {found!r} " + (
                "missing" if check.startswith("column_in_dataframe") else "not in the schema")
        out.append(Failure(code, msg, file=file, row=row, column=column,
                           expected=check, found=repr(found)))
    return out


def validate_frame(table: str, df: "pd.DataFrame", *, file: str | None = None,
                   csv: bool = False) -> "pd.DataFrame":
    """Validate one table lazily (all failures at once); returns the coerced frame."""
    import pandera.errors as pe

    from .schema import TABLES

    if table not in TABLES:
        raise ValidationError(f"unknown table {table!r}", code="BAD_INPUT")
    try:
        return TABLES[table].validate(df, lazy=True)
    except pe.SchemaErrors as errors:
        failures = _schema_failures(table, errors, file, csv)
        raise ValidationError(f"{file or table}: {len(failures)} schema failure(s)",
                              failures=failures) from None


def cross_failures(frames: Mapping[str, "pd.DataFrame"], *,
                   files: Mapping[str, str] | None = None,
                   known_runs: "pd.DataFrame | None" = None) -> list[Failure]:
    """Cross-table keys: timing runs exist, timing layers exist for the run's model,
    iterations' trace runs exist. ``known_runs`` adds runs from the store."""
    import pandas as pd

    from .models import MODELS, layer_records

    files = dict(files or {})
    out: list[Failure] = []
    runs_parts = [f for f in (frames.get("runs"), known_runs) if f is not None]
    runs = pd.concat(runs_parts, ignore_index=True) if runs_parts else None
    run_model = {} if runs is None else dict(zip(runs["run_id"], runs["model"]))
    names = {m: {r["layer"] for r in layer_records(m)} for m in MODELS}
    lt = frames.get("layer_timings")
    if lt is not None:
        f = files.get("layer_timings")
        for row, (rid, layer) in enumerate(zip(lt["run_id"], lt["layer"])):
            model = run_model.get(rid)
            if model is None:
                out.append(Failure("CROSS_TABLE", "run_id not in runs", file=f, row=row,
                                   column="run_id", expected="a runs.run_id", found=repr(rid)))
            elif model in names and layer not in names[model]:
                out.append(Failure("UNKNOWN_LAYER", f"layer not in model {model}", file=f,
                                   row=row, column="layer",
                                   expected=f"a layer of {model}", found=repr(layer)))
    it = frames.get("iterations")
    if it is not None and "trace_run_id" in it:
        f = files.get("iterations")
        for row, rid in enumerate(it["trace_run_id"]):
            if isinstance(rid, str) and rid not in run_model:
                out.append(Failure("CROSS_TABLE", "trace_run_id not in runs", file=f, row=row,
                                   column="trace_run_id", expected="a runs.run_id",
                                   found=repr(rid)))
    lay = frames.get("layers")
    if lay is not None:
        f = files.get("layers")
        for row, (model, layer) in enumerate(zip(lay["model"], lay["layer"])):
            if model in names and layer not in names[model]:
                out.append(Failure("UNKNOWN_LAYER", f"layer not in model {model}", file=f,
                                   row=row, column="layer", expected=f"a layer of {model}",
                                   found=repr(layer)))
    return out


def validate_tables(frames: Mapping[str, "pd.DataFrame"], *,
                    files: Mapping[str, str] | None = None,
                    known_runs: "pd.DataFrame | None" = None) -> dict[str, "pd.DataFrame"]:
    """Validate several tables and their keys together; raise one error listing everything."""
    files = dict(files or {})
    failures: list[Failure] = []
    out = {}
    for name, df in frames.items():
        try:
            out[name] = validate_frame(name, df, file=files.get(name),
                                       csv=str(files.get(name, "")).endswith(".csv"))
        except ValidationError as exc:
            if exc.code != "SCHEMA":
                raise
            failures.extend(exc.failures)
            out[name] = df
    failures.extend(cross_failures(out, files=files, known_runs=known_runs))
    if failures:
        code = "SCHEMA" if any(f.code == "SCHEMA" for f in failures) else failures[0].code
        raise ValidationError(f"{len(failures)} validation failure(s)", code=code,
                              failures=failures)
    return out


def validate_files(paths, table: str | None = None, *, use_store: bool = True,
                   root=None) -> dict[str, int]:
    """Validate files (never modifies them). Returns table -> rows; raises with a report."""
    frames: dict[str, "pd.DataFrame"] = {}
    files: dict[str, str] = {}
    failures: list[Failure] = []
    for path in paths:
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
