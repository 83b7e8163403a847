"""Strict reading of boolean and integer cells, before pandera coerces them.

pandera's coercion is pandas' ``astype``: any non-empty string becomes ``True`` (``"no"``,
``"nope"``, ``"2"``), ``32.9`` becomes ``32`` and ``True`` becomes ``1``. Intake must not
guess, so every boolean column accepts only ``true``/``false``/``1``/``0`` (any case,
surrounding spaces ignored), real booleans and the numbers 0 and 1; every integer column
accepts only whole numbers (ints, floats with no fractional part such as a CSV column with
gaps produces, and digit strings), never booleans. Anything else is one SCHEMA failure for
that cell; the cell is then set to null so no later check reports it a second time. A
missing value in a non-nullable boolean column is a SCHEMA failure here, before coercion
(``astype(bool)`` would make it True, or False; issue #29 M1).

The same pass refuses, per cell: a NUL character in any text (SCHEMA); a ``*_json`` column
value that is not JSON (SCHEMA; ``NaN``/``Infinity`` are not JSON); and a non-finite number
spelled out in a float column (``NaN``, ``inf``: PLAUSIBILITY, as CONTRIBUTING says; an
empty cell is the way to say "missing"). :func:`infinite_failures` refuses, after coercion,
an infinite value however it was written (``1e999`` in a CSV, ``inf`` in Parquet): the one
finite check of ``validate``, ``contribute`` and every table writer (#36 item 7).
"""

from __future__ import annotations

import math
import re
from numbers import Integral, Real
from typing import TYPE_CHECKING

from dgtraces.errors import Code, Failure

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

BOOL_WORDS = {"true": True, "false": False, "1": True, "0": False}
_INT_TEXT = re.compile(r"[+-]?[0-9]+(\.0*)?")  # ASCII digits only: int("٣٢") is 32 (#29)
_MISSING = object()
MAX_INFINITE_REPORTED = 200  # per column; the report says how many more


def _is_null(v: object) -> bool:
    import pandas as pd

    return v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v))


def to_bool(v: object) -> object:
    """``v`` as a bool, or ``_MISSING`` when it is no unambiguous boolean."""
    import numpy as np

    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, Real) and float(v) in (0.0, 1.0):
        return bool(v)
    if isinstance(v, str):
        return BOOL_WORDS.get(v.strip().lower(), _MISSING)
    return _MISSING


def to_int(v: object) -> object:
    """``v`` as an int, or ``_MISSING`` unless it is a whole number (never a bool)."""
    import numpy as np

    if isinstance(v, (bool, np.bool_)):
        return _MISSING
    if isinstance(v, Integral):
        return int(v)
    if isinstance(v, Real):
        f = float(v)
        return int(f) if math.isfinite(f) and f.is_integer() else _MISSING
    if isinstance(v, str) and _INT_TEXT.fullmatch(v.strip()):
        return int(float(v)) if "." in v else int(v)
    return _MISSING


NON_FINITE = {"nan", "+nan", "-nan", "inf", "+inf", "-inf", "infinity", "+infinity",
              "-infinity"}


def column_kinds(table: str) -> dict[str, str]:
    """Column -> "bool" | "int" | "float" | "json" | "str" for the table's columns."""
    from dgtraces.tables.schema import TABLES

    out = {}
    for name, col in TABLES[table].to_schema().columns.items():
        dtype = str(col.dtype).lower()
        if dtype.startswith("bool"):
            out[name] = "bool"
        elif dtype.startswith(("int", "uint")):
            out[name] = "int"
        elif dtype.startswith("float"):
            out[name] = "float"
        elif name.endswith("_json"):
            out[name] = "json"
        elif name == "timestamp_utc":
            out[name] = "timestamp"
        else:
            out[name] = "str"
    return out


def text_columns(table: str) -> list[str]:
    """The table's text columns (kind "str" or "json")."""
    return [c for c, kind in column_kinds(table).items() if kind in ("str", "json", "timestamp")]


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def _valid_time(text: str) -> bool:
    """``text`` is a real date and time in the schema's form (month 99 is not; #29)."""
    import datetime

    from .schema import ISO_UTC

    if not re.match(ISO_UTC, text):
        return True  # the schema's pattern check reports it (once)
    try:
        datetime.datetime.fromisoformat(text)
    except ValueError:
        return False
    return True


def _finite(text: str) -> float:
    """A JSON number, finite (``1e999`` would be inf; #29)."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is not a finite number")
    return value


def _text_problem(kind: str, v: object) -> tuple[str, str, str] | None:
    """(code, message, expected) for a bad text/float/JSON cell, else None."""
    import json

    if isinstance(v, str) and "\0" in v:
        return "SCHEMA", "text contains a NUL character", "text without NUL"
    if kind == "float" and isinstance(v, str) and v.strip().lower() in NON_FINITE:
        return "PLAUSIBILITY", "value must be a finite number", "finite (empty = missing)"
    if kind == "float" and isinstance(v, str) and not v.isascii():  # float("３２") is 32.0
        return "SCHEMA", "not a number in ASCII digits", "e.g. 12.5 (ASCII digits)"
    if kind == "timestamp" and isinstance(v, str) and not _valid_time(v):
        return "SCHEMA", "not a valid ISO 8601 UTC timestamp", "e.g. 2024-05-01T12:00:00Z"
    if kind == "json" and isinstance(v, str):
        try:
            json.loads(v, parse_constant=_reject_constant, parse_float=_finite)
        except (ValueError, RecursionError):
            return "SCHEMA", "not valid JSON", "JSON text"
    return None


def _text_cells(table: str, df: "pd.DataFrame", kinds: dict[str, str], file: str | None
                ) -> tuple["pd.DataFrame", list[Failure]]:
    """NUL characters, invalid JSON and spelled-out non-finite numbers (module doc)."""
    failures: list[Failure] = []
    out = df
    for column, kind in kinds.items():
        if kind not in ("float", "json", "str", "timestamp") or column not in df.columns or not (
                df[column].dtype == object or str(df[column].dtype).startswith("str")):
            continue
        values = df[column].to_numpy(dtype=object)
        bad = []
        for r, v in enumerate(values):
            problem = _text_problem(kind, v)
            if problem is not None:
                code, message, expected = problem
                failures.append(Failure(code, f"{table}: {message}", file=file, row=r,
                                        column=column, expected=expected,
                                        found=repr(v)[:120]))
                bad.append(r)
        if bad:
            if out is df:
                out = df.copy()
            out[column] = out[column].astype(object)
            out.loc[out.index[bad], column] = None
    return out, failures


def strict_cells(table: str, df: "pd.DataFrame", file: str | None = None
                 ) -> tuple["pd.DataFrame", list[Failure]]:
    """``df`` with its boolean/integer cells converted strictly, and one SCHEMA failure per
    cell that is no unambiguous boolean / whole number (that cell becomes null)."""
    import numpy as np
    import pandas as pd

    from .schema import TABLES

    kinds = column_kinds(table)
    required = {n for n, c in TABLES[table].to_schema().columns.items() if not c.nullable}
    df, failures = _text_cells(table, df, kinds, file)
    out = df
    for column, kind in kinds.items():
        if column not in df.columns or kind not in ("bool", "int"):
            continue
        series = df[column]
        if kind == "bool" and column in required:  # coercion would fill a null (#29 M1)
            failures += [Failure(Code.SCHEMA, f"{table}: missing value in a non-nullable "
                                 "column", file=file, row=int(r), column=column,
                                 expected="true | false", found="missing")
                         for r in np.flatnonzero(series.isna().to_numpy())]
        if kind == "int" and pd.api.types.is_integer_dtype(series.dtype):
            continue  # already whole numbers (bool dtypes are not integer dtypes)
        if kind == "bool" and pd.api.types.is_bool_dtype(series.dtype):
            continue
        convert = to_bool if kind == "bool" else to_int
        values = series.to_numpy(dtype=object)
        if pd.api.types.is_float_dtype(series.dtype):  # vectorised: whole / 0-1 floats
            arr = series.to_numpy(dtype=float)
            ok = np.isnan(arr) | (np.isin(arr, (0.0, 1.0)) if kind == "bool" else
                                  (np.isfinite(arr) & (np.floor(arr) == arr)))
            bad_rows = np.flatnonzero(~ok)
        else:
            bad_rows = np.array([i for i, v in enumerate(values)
                                 if not _is_null(v) and convert(v) is _MISSING], dtype=int)
        bad = set(bad_rows.tolist())
        converted = [None if _is_null(v) or i in bad else convert(v)
                     for i, v in enumerate(values)] if bad or series.dtype == object else None
        for r in bad_rows.tolist():
            failures.append(Failure(
                Code.SCHEMA, f"{table}: not " + ("an unambiguous boolean" if kind == "bool"
                                              else "a whole number"),
                file=file, row=int(r), column=column,
                expected="true | false | 1 | 0" if kind == "bool" else "a whole number",
                found=repr(values[r])))
        if converted is not None:
            if out is df:
                out = df.copy()
            out[column] = pd.Series(converted, index=df.index, dtype=object)
    return out, failures


def infinite_failures(table: str, df: "pd.DataFrame", file: str | None = None
                      ) -> list[Failure]:
    """One PLAUSIBILITY failure per infinite cell of a float column of ``df`` (typed), at
    most :data:`MAX_INFINITE_REPORTED` per column plus one saying how many more."""
    import numpy as np

    out: list[Failure] = []
    message = f"{table}: value must be a finite number"
    for column in df.columns:
        if df[column].dtype.kind != "f":
            continue
        values = df[column].to_numpy(dtype=float, na_value=np.nan)
        rows = np.flatnonzero(np.isinf(values))
        out += [Failure(Code.PLAUSIBILITY, message, file=file, row=int(r), column=column,
                        expected="finite", found=repr(float(values[r])))
                for r in rows[:MAX_INFINITE_REPORTED]]
        if len(rows) > MAX_INFINITE_REPORTED:
            out.append(Failure(Code.PLAUSIBILITY, f"{len(rows) - MAX_INFINITE_REPORTED} more "
                               f"rows fail: {message}", file=file, column=column))
    return out
