"""Bounded reading of untrusted files (issue #14 item 5): Parquet dictionary bombs and
dictionary-encoded long fields, nested columns, CSV cell counts, gzip bombs and deep JSON /
YAML nesting are BAD_FILE before anything large is materialised."""

import gzip
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dgtraces.contribute.intake import Limits, read_bounded
from dgtraces.contribute.metadata import parse_meta
from dgtraces.errors import DgtracesError
from dgtraces.importers.kineto import load_trace
from dgtraces.io import bounded
from tests.attack_tally import refused


def _refused(call, cls) -> DgtracesError:
    return refused(call, "BAD_FILE", cls)


def _dict_column(value: str, rows: int) -> pa.Array:
    return pa.DictionaryArray.from_arrays(pa.array([0] * rows, pa.int32()), pa.array([value]))


@pytest.mark.parametrize("categorical", [False, True])
def test_parquet_dictionary_bomb(tmp_path, categorical):
    path = tmp_path / "layer_timings.parquet"
    col = _dict_column("x" * 60_000, 200_000)  # decodes to 12 GB of text
    table = pa.table({"run_id": col, "fwd_ms": pa.array([1.0] * 200_000)})
    # without the stored Arrow schema the column reads back as plain strings
    pq.write_table(table, path, compression="zstd", store_schema=categorical)
    assert pa.types.is_dictionary(pq.read_schema(path).field("run_id").type) is categorical
    assert path.stat().st_size < 1 << 20
    err = _refused(lambda: read_bounded(path, Limits()), "parquet dictionary bomb")
    assert "dictionary bomb" in err.failures[0].message


def test_validate_command_reads_within_the_limits(tmp_path):
    """`dgtraces validate` (contribute.files.validate_files) reads through the bounded reader."""
    from dgtraces.contribute.files import validate_files

    path = tmp_path / "layer_timings.parquet"
    col = _dict_column("x" * 60_000, 200_000)
    pq.write_table(pa.table({"run_id": col, "fwd_ms": pa.array([1.0] * 200_000)}), path,
                   compression="zstd")
    _refused(lambda: validate_files([path], use_store=False), "parquet dictionary bomb")


@pytest.mark.parametrize("categorical", [False, True])
def test_parquet_dictionary_long_field(tmp_path, categorical):
    path = tmp_path / "runs.parquet"
    pq.write_table(pa.table({"notes": _dict_column("y" * 100_000, 3)}), path,
                   store_schema=categorical)
    _refused(lambda: read_bounded(path, Limits()), "parquet long field (dictionary)")


def test_parquet_nested_and_cell_limits(tmp_path):
    path = tmp_path / "runs.parquet"
    pq.write_table(pa.table({"a": pa.array([[1, 2], [3]])}), path)
    _refused(lambda: read_bounded(path, Limits()), "parquet nested column")
    pq.write_table(pa.table({f"c{i}": list(range(100)) for i in range(20)}), path)
    _refused(lambda: read_bounded(path, Limits(max_cells=1000)), "parquet cells over limit")


def test_csv_cells_checked_before_parsing(tmp_path, monkeypatch):
    path = tmp_path / "layer_timings.csv"
    path.write_text("a,b,c,d\n" + "1,2,3,4\n" * 600)
    from dgtraces.tables import checks as checks

    monkeypatch.setattr(checks, "read_file", lambda p: pytest.fail("parsed"))
    _refused(lambda: read_bounded(path, Limits(max_cells=2000)), "csv cells over limit")
    _refused(lambda: read_bounded(path, Limits(max_rows=500)), "csv rows over limit")
    assert bounded.csv_shape(path) == (600, 4)


def test_gzip_bomb_and_deep_json_in_kineto(tmp_path, monkeypatch):
    monkeypatch.setattr(bounded, "MAX_GUNZIP_BYTES", 1 << 20)
    bomb = tmp_path / "trace.json.gz"
    doc = json.dumps({"traceEvents": [], "pad": " " * (8 << 20)}).encode()
    bomb.write_bytes(gzip.compress(doc))
    assert bomb.stat().st_size < 100_000
    _refused(lambda: load_trace(bomb), "gzip bomb")
    two = tmp_path / "two.json.gz"  # a multi-member stream is bounded over all members
    two.write_bytes(gzip.compress(b" " * (700 << 10)) * 2)
    _refused(lambda: load_trace(two), "gzip bomb")
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 200_000 + "]" * 200_000)
    _refused(lambda: load_trace(deep), "deep JSON nesting")
    ok = tmp_path / "ok.json.gz"
    ok.write_bytes(gzip.compress(b'{"traceEvents": []}'))
    assert bounded.gunzip(ok.read_bytes(), "ok") == b'{"traceEvents": []}'


@pytest.mark.parametrize("text", ["a: " + "[" * 5000 + "]" * 5000,
                                  "a:\n" + "".join("  " * i + "- \n" for i in range(200)),
                                  "a: " + "{b: " * 3000 + "1" + "}" * 3000])
def test_deep_yaml_is_bad_file(text):
    _refused(lambda: parse_meta(text), "deep YAML nesting")
