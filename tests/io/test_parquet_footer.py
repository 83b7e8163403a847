"""Parquet files whose footer lies (issue #29 high): the page headers, not the footer, say
what a reader decodes; every bounded reader (contribute, validate, streamed layer_timings,
the release copying staged files into shards) refuses a file whose footer understates
rows or sizes, as BAD_FILE, before decoding it, and the store stays byte-identical."""

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dgtraces.contribute import Limits, contribute
from dgtraces.contribute.intake import read_bounded
from dgtraces.io import bounded
from tests.attack_tally import record, refused
from tests.contribute.test_contribute import tree_digest, variant, write_contrib
from tests.parquet_forge import (
    CMD_DATA_OFFSET,
    CMD_NUM_VALUES,
    CMD_UNCOMPRESSED,
    column_meta,
    groups,
    lie,
    read_footer,
    set_field,
    write_footer,
)

CLS = "parquet footer lies"
N = 200_000  # rows the pages really hold (RLE: a few kB on disk)


def _refused(call, how: str):
    return refused(call, "BAD_FILE", f"{CLS} ({how})")


def _table(path, rows=N, **kw):
    pq.write_table(pa.table({"run_id": pa.array(["r"] * rows), "fwd_ms": pa.array([1.0] * rows)}),
                   path, compression="zstd", row_group_size=rows, **kw)
    return path


@pytest.mark.parametrize("table", ["runs", "iterations", "comm", "layer_timings"])
@pytest.mark.parametrize("footer_only", [False, True])
def test_a_footer_claiming_one_row_is_refused_for_every_table(tmp_path, table, footer_only):
    path = _table(tmp_path / f"{table}.parquet")
    lie(path, footer_only=footer_only)
    assert pq.ParquetFile(path).metadata.num_rows == 1
    if table == "layer_timings":  # streamed: the chunked reader
        from dgtraces.contribute.stream import raw_chunks

        err = _refused(lambda: list(raw_chunks(path, table, Limits())), "streamed")
    else:
        err = _refused(lambda: read_bounded(path, Limits()), "whole table")
    assert "rows" in err.failures[0].message or "values" in err.failures[0].message


def test_rows_beyond_the_limit_counted_from_the_row_groups(tmp_path):
    """The row groups are honest and the footer's total alone lies: the limit binds on the
    row groups' sum (a 2-row limit, 3 row groups of 2)."""
    path = tmp_path / "runs.parquet"
    pq.write_table(pa.table({"a": [1, 2, 3, 4, 5, 6]}), path, row_group_size=2)
    lie(path, rows=2, footer_only=True)
    _refused(lambda: read_bounded(path, Limits(max_rows=2)), "footer total only")


def test_understated_uncompressed_size_is_refused(tmp_path):
    path = _table(tmp_path / "runs.parquet")
    body, fmd = read_footer(path)
    for group in groups(fmd):
        for meta in column_meta(group):
            set_field(meta, CMD_UNCOMPRESSED, 230)
    write_footer(path, body, fmd)
    err = _refused(lambda: read_bounded(path, Limits()), "uncompressed size")
    assert "decompress" in err.failures[0].message


def test_chunk_values_disagreeing_with_the_row_group(tmp_path):
    path = _table(tmp_path / "runs.parquet", rows=10)
    body, fmd = read_footer(path)
    set_field(column_meta(groups(fmd)[0])[1], CMD_NUM_VALUES, 5)
    write_footer(path, body, fmd)
    _refused(lambda: read_bounded(path, Limits()), "chunk vs row group")


@pytest.mark.parametrize("offset", [10**12, 0, -5])
def test_a_column_chunk_outside_the_file(tmp_path, offset):
    path = _table(tmp_path / "runs.parquet", rows=10, use_dictionary=False)
    body, fmd = read_footer(path)
    set_field(column_meta(groups(fmd)[0])[0], CMD_DATA_OFFSET, offset)
    write_footer(path, body, fmd)
    _refused(lambda: read_bounded(path, Limits()), "chunk offset")


def test_a_garbage_page_header(tmp_path):
    path = _table(tmp_path / "runs.parquet", rows=10)
    body, fmd = read_footer(path)
    start = column_meta(groups(fmd)[0])[1][CMD_DATA_OFFSET][1]
    body = body[:start] + b"\xff" * 16 + body[start + 16:]
    write_footer(path, body, fmd)
    _refused(lambda: read_bounded(path, Limits()), "garbage page header")


def test_a_page_larger_than_the_limit(tmp_path):
    path = tmp_path / "runs.parquet"
    pq.write_table(pa.table({"x": pa.array(range(50_000), pa.int64())}), path,
                   compression="zstd", data_page_size=1 << 30)
    assert bounded.read_parquet(path, max_rows=10**6, max_cells=10**7, max_bytes=1 << 20,
                                max_field_chars=10).shape == (50_000, 1)
    _refused(lambda: bounded.read_parquet(path, max_rows=10**6, max_cells=10**7,
                                          max_bytes=200_000, max_field_chars=10),
             "page size")


def test_honest_files_of_other_writers_still_read(tmp_path):
    """pyarrow (v1 and v2 data pages, dictionaries, nulls) and DuckDB files pass the page
    walk with the rows and values they hold."""
    import duckdb

    t = pa.table({"s": [f"r{i % 7}" for i in range(30_000)], "x": [float(i) for i in range(30_000)],
                  "n": [None, 1] * 15_000})
    pq.write_table(t, tmp_path / "a.parquet", row_group_size=7_000)
    pq.write_table(t, tmp_path / "b.parquet", data_page_version="2.0", compression="zstd")
    con = duckdb.connect()
    con.register("t", t)
    con.execute(f"COPY t TO '{tmp_path / 'c.parquet'}' (FORMAT parquet, ROW_GROUP_SIZE 5000)")
    for name in "abc":
        df = bounded.read_parquet(tmp_path / f"{name}.parquet", max_rows=10**6,
                                  max_cells=10**7, max_bytes=1 << 26, max_field_chars=100)
        assert len(df) == 30_000 and df["x"].sum() == pytest.approx(sum(range(30_000)))


def test_contribute_and_validate_refuse_a_lying_runs_file(store, tmp_path):
    from dgtraces.contribute.files import validate_files

    runs, lt = variant("r1")
    folder = write_contrib(tmp_path / "c", runs, lt, fmt="parquet")
    big = runs.loc[runs.index.repeat(20_000)].reset_index(drop=True)
    big.to_parquet(folder / "runs.parquet", index=False, row_group_size=len(big))
    lie(folder / "runs.parquet")
    before = tree_digest(store)
    _refused(lambda: contribute(folder, root=store, dry_run=True), "contribute --dry-run")
    _refused(lambda: contribute(folder, root=store), "contribute")
    _refused(lambda: validate_files([folder / "runs.parquet"], use_store=False), "validate")
    assert tree_digest(store) == before


def test_the_release_reader_refuses_a_tampered_staged_file(store, tmp_path):
    """A staged table whose footer was rewritten after staging: the release copies staged
    files into shards through the page check, so it is refused and nothing is released."""
    from dgtraces.contribute.release import build_release
    from dgtraces.contribute.staging import list_staged

    runs, lt = variant("r-staged")
    contribute(write_contrib(tmp_path / "c", runs, lt), root=store)
    (entry,) = list_staged(store)
    staged = entry.path / "layer_timings.parquet"
    table = pq.read_table(staged)
    big = pa.concat_tables([table] * 50)
    pq.write_table(big, staged, row_group_size=big.num_rows)
    lie(staged, rows=table.num_rows, footer_only=False)
    before = tree_digest(store)
    _refused(lambda: build_release("9.0.0", root=store), "release reader")
    assert tree_digest(store) == before


@pytest.mark.parametrize("table", ["runs", "layer_timings"])
def test_a_lying_file_inside_a_zip_contribution(store, tmp_path, table):
    import zipfile

    runs, lt = variant("r1")
    folder = write_contrib(tmp_path / "c", runs, lt, fmt="parquet")
    frame = runs if table == "runs" else lt
    big = frame.loc[frame.index.repeat(5_000)].reset_index(drop=True)
    big.to_parquet(folder / f"{table}.parquet", index=False, row_group_size=len(big))
    lie(folder / f"{table}.parquet", rows=len(frame))
    archive = tmp_path / "c.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
        for p in folder.iterdir():
            z.write(p, p.name)
    before = tree_digest(store)
    _refused(lambda: contribute(archive, root=store, dry_run=True), "zip contribution")
    assert tree_digest(store) == before


def test_a_wide_streamed_file_is_read_in_smaller_batches(tmp_path):
    """Rows per streamed batch shrink with the columns, so a batch's decoded size stays
    within max_chunk_bytes (a 2000-column layer_timings is refused by its schema, after
    one small batch, not after decoding 100,000 rows of 2000 columns; contribute.stream passes
    these limits)."""
    path = tmp_path / "layer_timings.parquet"
    pq.write_table(pa.table({f"c{i}": pa.array([1.0] * 3000) for i in range(2000)}), path)
    limits = Limits(max_chunk_bytes=1 << 20)
    sizes = [len(df) for df in bounded.iter_parquet(
        path, limits.chunk_rows, max_rows=10**6, max_bytes=1 << 30, max_group_bytes=1 << 30,
        max_field_chars=100, max_batch_bytes=limits.max_chunk_bytes)]
    ok = sum(sizes) == 3000 and max(sizes) * 2000 * 9 <= limits.max_chunk_bytes
    record(f"{CLS} (wide batch bounded)", ok)
    assert ok, sizes


def test_page_headers_with_long_statistics_are_read_whole(tmp_path):
    """A data page header carries min/max statistics: with long text it outgrows the first
    512-byte read and is read again whole (up to 64 KiB)."""
    from dgtraces.io.parquet_pages import check_pages

    path = tmp_path / "runs.parquet"
    values = ["a" * 3000 + str(i) for i in range(50)]
    pq.write_table(pa.table({"source": values}), path, use_dictionary=False)
    pages = check_pages(path, pq.ParquetFile(path).metadata, max_rows=100, max_bytes=1 << 24,
                        max_group_bytes=1 << 24, max_page_bytes=1 << 24)
    assert pages.rows == 50
    assert list(bounded.read_parquet(path, max_rows=100, max_cells=100, max_bytes=1 << 24,
                                     max_field_chars=4000)["source"]) == values


@pytest.mark.parametrize("stem", ["comm_fits", "comm"])
def test_a_lying_file_given_to_predict_link_fit(tmp_path, stem):
    """Variant (another reader): `predict --link-fit FILE` reads a comm/comm_fits table
    someone handed over; it goes through the bounded reader too."""
    from dgtraces.comm.linkfit import link_from_fit

    path = _table(tmp_path / f"{stem}.parquet")
    lie(path)
    _refused(lambda: link_from_fit(str(path)), "predict --link-fit")
    _refused(lambda: link_from_fit(str(tmp_path)), "predict --link-fit")  # the folder form


def test_stored_nans_stay_visible_and_pandas_metadata_stays_out(tmp_path):
    """A stored NaN (not a null) reads as "NaN" text in any float column, a null stays
    missing, and a pandas-written file's index metadata is not applied, whether or not the
    file has a dictionary-encoded text column (the two paths of bounded._decoded)."""
    import pandas as pd

    kw = dict(max_rows=100, max_cells=1000, max_bytes=1 << 20, max_field_chars=100)
    pd.DataFrame({"a": [1.0, None], "c": [1, 2]}, index=[5, 6]).to_parquet(tmp_path / "x.pq")
    got = bounded.read_parquet(tmp_path / "x.pq", **kw)
    assert list(got.index) == [0, 1] and list(got["__index_level_0__"]) == [5, 6]
    assert got["a"].isna().tolist() == [False, True]
    for text in (None, pa.array(["a", "b", "a"])):
        cols = {"f": pa.array([1.0, float("nan"), None]), "g": pa.array([1.0, 2.0, 3.0]),
                "h": pa.array([float("nan")] * 3, pa.float32())}
        if text is not None:
            cols["s"] = text
        pq.write_table(pa.table(cols), tmp_path / "y.pq")
        got = bounded.read_parquet(tmp_path / "y.pq", **kw)
        assert got["f"].tolist()[:2] == [1.0, "NaN"] and pd.isna(got["f"].iloc[2])
        assert got["h"].tolist() == ["NaN"] * 3 and got["g"].dtype == "float64"
