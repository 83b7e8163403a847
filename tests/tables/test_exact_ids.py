"""Identifiers, keys and timestamps match exactly (issue #29 M3): ``$`` matched before a
final newline and ``\\d`` matches any Unicode digit, so ``r1\\n`` passed the run-id pattern
beside ``r1``; timestamps are parsed, not only pattern-matched (month 99)."""

import pytest

from dgtraces.contribute import contribute
from dgtraces.errors import DgtracesError
from dgtraces.tables.checks import validate_frame
from tests.attack_tally import record
from tests.conftest import _mini_frames
from tests.contribute.test_contribute import (
    META,
    TEST_DEVICE,
    refused,
    variant,
    write_contrib,
)

NEWLINE_IDS = ["r1\n", "r1\r\n", "r1\n\n", "\nr1", "r1\x00"[:-1] + "\u2028"]
BAD_TIMES = ["2024-05-01T12:00:00Z\n", "2024-99-01T12:00:00Z", "2024-02-30T12:00:00Z",
             "2024-05-01T24:00:00Z", "٢٠٢٤-05-01T12:00:00Z", "２０２４-05-01T12:00:00Z",
             "2024-05-01T12:00:00+25:00"]


def _schema_refused(table, column, value, cls, row=0):
    df = _mini_frames()[table].astype({column: object})
    df.loc[row, column] = value
    with pytest.raises(DgtracesError) as exc:
        validate_frame(table, df, file=f"{table}.csv")
    ok = exc.value.code == "SCHEMA" and (row, column) in \
        {(f.row, f.column) for f in exc.value.failures}
    record(cls, ok)
    assert ok, exc.value.report()


@pytest.mark.parametrize("value", NEWLINE_IDS)
@pytest.mark.parametrize("table,column", [("runs", "run_id"), ("runs", "device"),
                                          ("iterations", "iter_id"),
                                          ("layer_timings", "run_id"),
                                          ("devices", "device")])
def test_identifiers_with_a_line_break_are_schema(table, column, value):
    _schema_refused(table, column, value, "identifier with a trailing newline")


@pytest.mark.parametrize("value", BAD_TIMES)
@pytest.mark.parametrize("table", ["runs", "iterations", "comm"])
def test_timestamps_are_parsed(table, value):
    _schema_refused(table, "timestamp_utc", value, "invalid timestamp")


def test_valid_timestamps_still_pass():
    for value in ("2024-05-01T12:00:00Z", "2024-02-29T23:59:59.123456789+02:00"):
        df = _mini_frames()["runs"]
        df.loc[0, "timestamp_utc"] = value
        assert validate_frame("runs", df)["timestamp_utc"][0] == value


def test_a_stored_run_id_plus_newline_is_refused(store, tmp_path):
    contribute(write_contrib(tmp_path / "a", *variant("r-a")), root=store)
    runs, lt = variant("r-a\n", scale=1.2)  # CSV quotes the cell: it reads back with \n
    refused(write_contrib(tmp_path / "b", runs, lt), store, "SCHEMA")
    record("identifier with a trailing newline", True)


@pytest.mark.parametrize("key", ["test-gpu\\n", "test-gpu\\r", "test-gpu\\u2028"])
def test_a_declared_device_key_with_a_line_break(store, tmp_path, key):
    meta = META.replace(f"device: {TEST_DEVICE}", f'device: "{key}"')
    refused(write_contrib(tmp_path / "a", *variant("r-a"), meta=meta), store, "METADATA")
    record("identifier with a trailing newline", True)


def test_a_staging_id_with_a_newline(store):
    from dgtraces.contribute.staging import get_staged, reject

    for call in (get_staged, reject):
        with pytest.raises(DgtracesError) as exc:
            call("20260101T000000Z-0123456789ab\n", root=store)
        record("identifier with a trailing newline", exc.value.code == "BAD_INPUT")
        assert exc.value.code == "BAD_INPUT"


def test_kineto_import_run_id_with_a_newline():
    from dgtraces.importers.kineto import import_trace
    from tests.importers.test_importers_kineto import SCOPES

    with pytest.raises(DgtracesError) as exc:
        import_trace(SCOPES, "alexnet", batch_size=2, run_id="kin-1\n")
    record("identifier with a trailing newline", exc.value.code in ("SCHEMA", "BAD_INPUT"))
    assert exc.value.code in ("SCHEMA", "BAD_INPUT")


NON_ASCII_NUMBERS = ["٣٢", "３２", "۳۲", "३२", "32\u200b"]


@pytest.mark.parametrize("value", NON_ASCII_NUMBERS)
@pytest.mark.parametrize("column", ["batch_size", "fwd_ms"])
def test_numbers_in_non_ascii_digits_are_schema(column, value):
    """issue #29 low: int("٣٢") and float("３２") are 32 in Python."""
    _schema_refused("runs", column, value, "non-ASCII digits", row=1)


@pytest.mark.parametrize("value", ["٣٢", "３２", "²", "1" * 5000])
def test_whole_number_options_take_ascii_digits_only(value):
    from dgtraces.values import whole_number

    with pytest.raises(DgtracesError) as exc:
        whole_number("batch_size", value, text_ok=True)
    record("non-ASCII digits", exc.value.code == "BAD_INPUT")
    assert exc.value.code == "BAD_INPUT"


@pytest.mark.parametrize("text", ['{"lr": 1e999}', '{"lr": -1e999}', '[1e400]',
                                  '{"a": {"b": 2e308}}'])
def test_params_json_numbers_must_be_finite(text):
    _schema_refused("runs", "params_json", text, "non-finite number in JSON")


@pytest.mark.parametrize("name", ["runs\n", "runs\r\n", "ru\u2028ns"])
def test_a_manifest_table_name_with_a_line_break_is_integrity(name):
    from dgtraces.store import manifest as store

    bad = store.entry_failure(name, {"shards": [], "rows": 0, "bytes": 0}, "manifest.json")
    record("identifier with a trailing newline", bad is not None and bad.code == "INTEGRITY")
    assert bad is not None and bad.code == "INTEGRITY"


@pytest.mark.parametrize("text", ["0.3.0\n0", "٠.٣.٠", "v0.3.0x"])
def test_versions_take_ascii_digits_only(text):
    from dgtraces.store import manifest as store

    with pytest.raises(DgtracesError):
        store.norm_version(text)
    record("non-ASCII digits", True)


@pytest.mark.parametrize("column,suffix", [("commit", "\n"), ("kernel_id", "\n")])
def test_kernel_commit_and_id_with_a_line_break_are_schema(column, suffix):
    """Variant (another table): the kernels table's commit pattern ended in `$` too."""
    from dgtraces.importers.deepbench import import_deepbench

    df = import_deepbench().kernels.head(2).copy().reset_index(drop=True)
    df.loc[0, column] = df.loc[0, column] + suffix
    with pytest.raises(DgtracesError) as exc:
        validate_frame("kernels", df)
    ok = exc.value.code == "SCHEMA" and (0, column) in \
        {(f.row, f.column) for f in exc.value.failures}
    record("identifier with a trailing newline", ok)
    assert ok, exc.value.report()
