"""Booleans and integers are read strictly at intake (issue #14 item 4): ambiguous spellings
and fractional numbers are SCHEMA failures, one per bad cell, in CSV and Parquet."""

import pytest

from dgtraces.errors import ValidationError
from dgtraces.tables.checks import read_file, validate_frame
from tests.attack_tally import record
from tests.conftest import _mini_frames


@pytest.fixture
def runs():
    return _mini_frames()["runs"]


BAD_BOOL = ["no", "nope", "2", "yes", "", " ", "TRUE!", "t", "-1", 2, 0.5]
GOOD_BOOL = [("true", True), ("False", False), (" TRUE ", True), ("0", False), ("1", True),
             (True, True), (0, False), (1.0, True)]
BAD_INT = [32.9, "32.9", True, "true", "1e3", "3 2", "x", "", float("inf"), "3_2"]
GOOD_INT = [(32, 32), (32.0, 32), ("32", 32), (" 64", 64), ("+8", 8)]


CASES = [("flagged", 0, v, "ambiguous boolean at intake") for v in BAD_BOOL] + \
    [("batch_size", 1, v, "non-whole integer at intake") for v in BAD_INT]


@pytest.mark.parametrize("column,row,value,cls", CASES,
                         ids=[f"{c}={v!r}" for c, _, v, _ in CASES])
def test_ambiguous_booleans_and_non_whole_integers_are_schema(runs, column, row, value, cls):
    df = runs.astype({column: object})
    df.loc[row, column] = value
    with pytest.raises(ValidationError) as exc:
        validate_frame("runs", df, file="runs.csv")
    ok = exc.value.code == "SCHEMA" and [(f.row, f.column) for f in exc.value.failures] == \
        [(row, column)]
    record(cls, ok)
    assert ok, exc.value.report()


def test_unambiguous_values_are_accepted(runs):
    for raw, want in GOOD_BOOL:
        df = runs.astype({"flagged": object})
        df.loc[0, "flagged"] = raw
        assert validate_frame("runs", df)["flagged"].tolist()[0] is want, raw
    for raw, want in GOOD_INT:
        df = runs.astype({"batch_size": object})
        df.loc[0, "batch_size"] = raw
        assert validate_frame("runs", df)["batch_size"].tolist()[0] == want, raw


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_files_with_bad_cells(runs, tmp_path, fmt):
    df = runs.astype({"flagged": object, "batch_size": object, "threads": object})
    df["flagged"] = ["no", "false"]
    df["batch_size"] = ["32.5", "8"]
    df["threads"] = [None, "2.5"]
    path = tmp_path / f"runs.{fmt}"
    df.to_csv(path, index=False) if fmt == "csv" else df.to_parquet(path)
    with pytest.raises(ValidationError) as exc:
        validate_frame("runs", read_file(path), file=str(path))
    cells = sorted((f.row, f.column) for f in exc.value.failures)
    assert cells == [(0, "batch_size"), (0, "flagged"), (1, "threads")], exc.value.report()


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_nul_json_and_written_nan(runs, tmp_path, fmt):
    """NUL in text and non-JSON params_json are SCHEMA; a written NaN in a float column is
    PLAUSIBILITY (CONTRIBUTING), while an empty cell stays a missing value."""
    df = runs.copy()
    df["notes"] = ["a\0b", None]
    df["params_json"] = ["{not json", '{"a": NaN}'] if fmt == "csv" else ["{not json", "[1]"]
    df["fwd_ms"] = [float("nan"), None] if fmt == "parquet" else ["NaN", None]
    path = tmp_path / f"runs.{fmt}"
    if fmt == "csv":
        df.to_csv(path, index=False)
    else:  # pandas would store NaN as null; Arrow keeps a real NaN apart from null
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.Table.from_pandas(df.drop(columns="fwd_ms"), preserve_index=False)
        pq.write_table(table.append_column("fwd_ms", pa.array([float("nan"), None])), path)
    with pytest.raises(ValidationError) as exc:
        validate_frame("runs", read_file(path) if fmt == "csv" else
                       __import__("dgtraces.io.bounded", fromlist=["x"]).read_parquet(
                           path, max_rows=10, max_cells=1000, max_bytes=1 << 20,
                           max_field_chars=1000), file=str(path))
    got = sorted((f.code, f.row, f.column) for f in exc.value.failures)
    want = [("PLAUSIBILITY", 0, "fwd_ms"), ("SCHEMA", 0, "notes"), ("SCHEMA", 0, "params_json")]
    if fmt == "csv":
        want.append(("SCHEMA", 1, "params_json"))
    assert got == sorted(want), exc.value.report()
    for _code, _, col in got:
        record({"notes": "NUL byte in text", "params_json": "params_json not JSON",
                "fwd_ms": "written NaN in a float column"}[col], True)


MISSING_SPELLINGS = ["", "NA", "None", "null", "N/A", "<NA>"]


@pytest.mark.parametrize("spelling", MISSING_SPELLINGS)
def test_a_missing_flagged_in_csv_is_refused_not_filled(runs, tmp_path, spelling):
    """issue #29 M1: an empty/NA `flagged` was released as True (pandas' astype(bool))."""
    path = tmp_path / "runs.csv"
    text = runs.to_csv(index=False).splitlines()
    col = text[0].split(",").index("flagged")
    cells = text[1].split(",")
    cells[col] = spelling
    path.write_text("\n".join([text[0], ",".join(cells), text[2]]) + "\n")
    with pytest.raises(ValidationError) as exc:
        validate_frame("runs", read_file(path, "runs"), file="runs.csv")
    ok = exc.value.code == "SCHEMA" and (0, "flagged") in \
        [(f.row, f.column) for f in exc.value.failures]
    record("missing non-nullable boolean", ok)
    assert ok, exc.value.report()


@pytest.mark.parametrize("value", [None, float("nan")])
def test_a_null_flagged_in_parquet_or_a_frame_is_refused(runs, tmp_path, value):
    from dgtraces.contribute.intake import read_bounded

    df = runs.astype({"flagged": object})
    df.loc[1, "flagged"] = value
    path = tmp_path / "runs.parquet"
    df.to_parquet(path)
    for frame in (df, read_bounded(path)):
        with pytest.raises(ValidationError) as exc:
            validate_frame("runs", frame, file="runs.parquet")
        ok = exc.value.code == "SCHEMA" and [(f.row, f.column) for f in exc.value.failures] \
            == [(1, "flagged")]
        record("missing non-nullable boolean", ok)
        assert ok, exc.value.report()


def _required(table):
    from dgtraces.tables.schema import TABLES

    return [n for n, c in TABLES[table].to_schema().columns.items() if not c.nullable]


@pytest.mark.parametrize("table", ["runs", "layer_timings", "iterations", "comm"])
def test_a_missing_value_in_any_non_nullable_column_is_refused(table, tmp_path):
    """issue #29 M1, variants (other columns and tables): every spelling of "missing" in a
    CSV (one row each), and a null in a frame, in every non-nullable column of every
    contributed table is a SCHEMA failure at that cell, never a value filled in."""
    import pandas as pd

    from dgtraces.contribute.intake import read_bounded

    one = _mini_frames()[table].head(1)
    path = tmp_path / f"{table}.csv"
    n = len(MISSING_SPELLINGS)
    for column in _required(table):
        df = pd.concat([one] * n, ignore_index=True).astype({column: object})
        df[column] = [f"@@{i}@@" for i in range(n)]
        text = df.to_csv(index=False)
        for i, spelling in enumerate(MISSING_SPELLINGS):
            text = text.replace(f"@@{i}@@", spelling)
        path.write_text(text)
        nulls = df.copy()
        nulls[column] = None
        for frame in (read_bounded(path), nulls):
            with pytest.raises(ValidationError) as exc:
                validate_frame(table, frame, file=path.name)
            cells = {(f.row, f.column) for f in exc.value.failures}
            for row in range(n):
                ok = exc.value.code == "SCHEMA" and (row, column) in cells
                record("missing value in a non-nullable column", ok)
                assert ok, (column, row, exc.value.report())
