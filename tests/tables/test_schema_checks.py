import pandas as pd
import pytest

from dgtraces.contribute.files import validate_files
from dgtraces.errors import DgtracesError, ValidationError
from dgtraces.tables.checks import validate_frame, validate_tables
from dgtraces.tables.export import stale


def run_row(**kw):
    row = dict(run_id="r1", model="alexnet", device="cpu-test", device_kind="cpu", host=None,
               framework="pytorch 2.13.0", precision="fp32", batch_size=8, threads=1, cores=2,
               provenance="measured", source="unit test fixture", collector_version="t 0",
               timestamp_utc="2026-12-02T10:00:00Z", fwd_ms=10.0, bwd_ms=20.0,
               update_ms=1.0, iter_ms=31.0, layer_sum_ratio=1.0, flagged=False,
               flag_reason=None, params_json=None, notes=None)
    row.update(kw)
    return row


def timing_row(**kw):
    row = dict(run_id="r1", layer="conv1", fwd_ms=1.0, bwd_ms=2.0, fwd_p10_ms=0.9,
               fwd_p90_ms=1.1, bwd_p10_ms=1.8, bwd_p90_ms=2.2, comm_ms=None, n=10)
    row.update(kw)
    return row


def test_valid_tables_pass():
    out = validate_tables({"runs": pd.DataFrame([run_row()]),
                           "layer_timings": pd.DataFrame([timing_row()])})
    assert out["runs"]["threads"].dtype == "Int64"


def test_schema_failures_name_row_column_expected_found():
    df = pd.DataFrame([timing_row(), timing_row(layer="conv2", fwd_ms=-1.0, n=0)])
    with pytest.raises(ValidationError) as exc:
        validate_frame("layer_timings", df, file="lt.csv")
    err = exc.value
    assert err.code == "SCHEMA"
    bad = {(f.row, f.column) for f in err.failures}
    assert (1, "fwd_ms") in bad and (1, "n") in bad
    f = next(f for f in err.failures
             if f.column == "fwd_ms" and "greater_than_or_equal_to" in f.expected)
    assert f.file == "lt.csv" and f.found == "-1.0" and f.row == 1


def test_extra_and_missing_columns_are_reported():
    df = pd.DataFrame([timing_row()]).drop(columns=["n"]).assign(surprise=1)
    with pytest.raises(ValidationError) as exc:
        validate_frame("layer_timings", df)
    text = exc.value.report()
    assert "'n'" in text and "'surprise'" in text


def test_cross_table_unknown_layer_and_run():
    runs = pd.DataFrame([run_row()])
    lt = pd.DataFrame([timing_row(), timing_row(layer="res2a"), timing_row(run_id="nope")])
    with pytest.raises(ValidationError) as exc:
        validate_tables({"runs": runs, "layer_timings": lt})
    codes = [f.code for f in exc.value.failures]
    assert codes.count("UNKNOWN_LAYER") == 1 and codes.count("CROSS_TABLE") == 1


def test_duplicate_run_ids_and_bad_provenance():
    runs = pd.DataFrame([run_row(), run_row(provenance="guessed")])
    with pytest.raises(ValidationError) as exc:
        validate_frame("runs", runs)
    cols = {f.column for f in exc.value.failures}
    assert {"run_id", "provenance"} <= cols


def test_validate_files_csv_report_and_no_modification(tmp_path):
    p = tmp_path / "layer_timings.csv"
    pd.DataFrame([timing_row(bwd_ms="abc")]).to_csv(p, index=False)
    before = p.read_bytes()
    with pytest.raises(ValidationError) as exc:
        validate_files([p], use_store=False)
    assert p.read_bytes() == before
    assert any(f.column == "bwd_ms" for f in exc.value.failures)
    assert any(f.code == "CROSS_TABLE" for f in exc.value.failures)  # run r1 unknown


def test_non_utf8_and_truncated_files(tmp_path):
    csv = tmp_path / "runs.csv"
    csv.write_bytes(b"run_id,model\n\xff\xfe,alexnet\n")
    with pytest.raises(ValidationError) as exc:
        validate_files([csv], use_store=False)
    assert exc.value.code == "BAD_FILE"
    pq = tmp_path / "runs.parquet"
    pd.DataFrame([run_row()]).to_parquet(pq)
    pq.write_bytes(pq.read_bytes()[:100])
    with pytest.raises(ValidationError) as exc:
        validate_files([pq], use_store=False)
    assert exc.value.code == "BAD_FILE"


def test_unknown_table_name(tmp_path):
    p = tmp_path / "stuff.csv"
    p.write_text("a\n1\n")
    with pytest.raises(DgtracesError) as exc:  # a bad argument, not a schema failure
        validate_files([p])
    assert exc.value.code == "BAD_INPUT"


def test_exported_schemas_match_code():
    assert stale("schemas") == []


def test_validate_files_missing_path_is_not_found_even_without_a_table_name(tmp_path):
    for path in (tmp_path / "nothing-here", tmp_path / "layers.parquet"):
        with pytest.raises(ValidationError) as exc:
            validate_files([path])
        assert exc.value.code == "NOT_FOUND"


def test_one_bad_cell_gives_one_located_failure():
    df = pd.DataFrame({"run_id": ["r1", "r1"], "layer": ["conv1", "conv2"],
                       "fwd_ms": ["abc", 1.0], "bwd_ms": [1.0, 2.0], "n": [1, 1]})
    for col in ("fwd_p10_ms", "fwd_p90_ms", "bwd_p10_ms", "bwd_p90_ms", "comm_ms"):
        df[col] = None
    with pytest.raises(ValidationError) as exc:
        validate_frame("layer_timings", df, file="lt.csv")
    (f,) = exc.value.failures  # no echoes of checks that crashed on the unconverted column
    assert (f.code, f.row, f.column, f.found) == ("SCHEMA", 0, "fwd_ms", "'abc'")
    assert "(line 2)" in f.line()


def test_missing_columns_are_named_as_columns():
    with pytest.raises(ValidationError) as exc:
        validate_frame("layers", pd.DataFrame({"model": ["alexnet"]}), file="layers.csv")
    cols = {f.column for f in exc.value.failures if f.row is None}
    assert {"layer", "kind", "fwd_flops"} <= cols and "Layers" not in cols


def test_failure_line_shows_csv_line_and_only_the_sides_it_has():
    from dgtraces.errors import Failure

    assert "(line 7)" in Failure("PLAUSIBILITY", "m", file="runs.csv", row=5).line()
    assert "line" not in Failure("PLAUSIBILITY", "m", file="runs.parquet", row=5).line()
    text = Failure("DUPLICATE", "already staged", found="0d33").line()
    assert "expected" not in text and "found 0d33" in text
