"""Malformed input is a typed error, never a traceback (issue #29 lows): CR-only CSV,
binary or zip bytes named .csv, binary / invalid-UTF-8 / duplicate-named Parquet columns,
huge YAML integers and duplicate YAML keys, Kineto numbers past float range, gzip with
trailing garbage, and `sql --format json` of non-finite numbers."""

import gzip
import io
import json
import zipfile

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dgtraces.contribute.intake import Limits, read_bounded
from dgtraces.contribute.metadata import parse_meta
from dgtraces.contribute.stream import raw_chunks
from dgtraces.errors import DgtracesError
from dgtraces.importers.kineto import load_trace
from tests.attack_tally import record
from tests.conftest import _mini_frames

CLS = "malformed input (typed, no traceback)"


def _typed(call, code="BAD_FILE"):
    try:
        call()
    except DgtracesError as exc:
        ok = exc.code == code
        record(CLS, ok)
        assert ok, exc.report()
        return exc
    record(CLS, False)
    pytest.fail("accepted")


def _readers(path):
    """The whole-table reader, and the streamed one for a layer_timings file."""
    if path.name.startswith("layer_timings"):
        return [lambda: list(raw_chunks(path, "layer_timings", Limits()))]
    return [lambda: read_bounded(path)]


def _csv_bytes():
    return _mini_frames()["runs"].to_csv(index=False).encode()


def _zip_bytes():
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("runs.csv", _csv_bytes())
    return buf.getvalue()


CSV_CASES = {
    "cr-only": lambda: _csv_bytes().replace(b"\n", b"\r"),
    "binary": lambda: bytes(range(256)) * 40,
    "zip": _zip_bytes,
    "utf-16": lambda: b"\xff\xfe" + _csv_bytes().decode().encode("utf-16-le"),
    "gzip": lambda: gzip.compress(_csv_bytes()),
}


@pytest.mark.parametrize("table", ["runs", "layer_timings"])
@pytest.mark.parametrize("case", list(CSV_CASES))
def test_non_csv_bytes_named_csv(tmp_path, table, case):
    path = tmp_path / f"{table}.csv"
    path.write_bytes(CSV_CASES[case]())
    for read in _readers(path):
        _typed(read)


def _invalid_utf8_string():
    return pa.Array.from_buffers(pa.string(), 2, [None, pa.py_buffer(
        b"\x00\x00\x00\x00\x02\x00\x00\x00\x05\x00\x00\x00"), pa.py_buffer(b"ok\xff\xfe\xfd")])


PARQUET_CASES = {
    "binary column": lambda: pa.table({"source": pa.array([b"\xff\xfe"], pa.binary())}),
    "invalid utf-8": lambda: pa.table({"source": _invalid_utf8_string()}),
    "duplicate names": lambda: pa.Table.from_arrays([pa.array([1]), pa.array([2])],
                                                    names=["run_id", "run_id"]),
}


@pytest.mark.parametrize("table", ["runs", "layer_timings"])
@pytest.mark.parametrize("case", list(PARQUET_CASES))
def test_malformed_parquet_columns(tmp_path, table, case):
    path = tmp_path / f"{table}.parquet"
    pq.write_table(PARQUET_CASES[case](), path)
    for read in _readers(path):
        _typed(read)


META = ("contributor: A B <a@b.invalid>\nlicense: CC0-1.0\nhardware: x\nsoftware: y\n"
        "collection: z\n")


@pytest.mark.parametrize("text,code", [
    ("contributor: " + "9" * 5000 + "\nlicense: CC0-1.0\n", "BAD_FILE"),
    (META + "batch: " + "1" * 4301 + "\n", "BAD_FILE"),
    (META + "license: CC-BY-4.0\n", "METADATA"),
    (META + "contributor: Someone Else <s@e.invalid>\n", "METADATA"),
    (META + "devices:\n  - device: d1\n    kind: gpu\n    kind: cpu\n    name: D\n",
     "METADATA"),
])
def test_yaml_values_and_duplicate_keys(text, code):
    _typed(lambda: parse_meta(text), code)


@pytest.mark.parametrize("field", ["dur", "ts"])
def test_kineto_numbers_past_float_range(tmp_path, field):
    event = {"ph": "X", "name": "conv1", "cat": "user_annotation", "ts": 1, "dur": 2}
    text = json.dumps({"traceEvents": [event]}).replace(f'"{field}": {event[field]}',
                                                        f'"{field}": 1' + "0" * 400)
    path = tmp_path / "t.json"
    path.write_text(text)
    _typed(lambda: load_trace(path))


@pytest.mark.parametrize("tail", [b"garbage!", b"\x1f\x8bnot gzip", b"PK\x03\x04"])
def test_gzip_with_trailing_garbage(tmp_path, tail):
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(b'{"traceEvents": []}') + tail)
    _typed(lambda: load_trace(path))


@pytest.mark.parametrize("value", ["'inf'::DOUBLE", "'-inf'::DOUBLE", "'nan'::DOUBLE"])
def test_sql_json_with_non_finite_numbers(mini_store, tmp_path, value):
    from click.testing import CliRunner

    from dgtraces.cli import main

    out = tmp_path / "r.json"
    res = CliRunner().invoke(main, ["sql", f"SELECT {value} AS x, 1 AS y", "--format", "json",
                                    "--out", str(out)])
    ok = res.exit_code == 0 and json.loads(out.read_text()) == [{"x": None, "y": 1}]
    record(CLS, ok)
    assert ok, res.output
