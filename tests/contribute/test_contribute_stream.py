"""Streamed validation of layer_timings (contribute.stream): the result does not depend on
the chunk size, runs are never split, failures are capped, staged rows keep file order."""

import zipfile

import pandas as pd
import pytest

from dgtraces.contribute import Limits, contribute, stream
from dgtraces.contribute.staging import get_staged
from dgtraces.errors import DgtracesError
from tests.attack_tally import record
from tests.contribute.test_contribute import variant, write_contrib

SMALL = Limits(chunk_rows=30)  # alexnet has 23 layers: runs span chunk boundaries


def _runs(n=4, shuffle=True):
    parts = [variant(f"r{i}", scale=1.0 + 0.1 * i) for i in range(n)]
    runs = pd.concat([p[0] for p in parts], ignore_index=True)
    lt = pd.concat([p[1] for p in parts], ignore_index=True)
    if shuffle:  # rows of a run scattered over the file
        lt = lt.sample(frac=1.0, random_state=3).reset_index(drop=True)
    return runs, lt


def _outcome(path, store, limits):
    try:
        checked = contribute(path, root=store, dry_run=True, limits=limits)
    except DgtracesError as exc:
        return exc.code, sorted((f.code, f.file, f.row, f.column, f.found)
                                for f in exc.failures)
    return "ok", (checked.digest, checked.fingerprints, checked.rows)


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_a_valid_contribution_checks_the_same_in_any_chunk_size(store, tmp_path, fmt,
                                                                ci_full):
    runs, lt = _runs()
    path = write_contrib(tmp_path / "c", runs, lt, fmt=fmt)
    whole = _outcome(path, store, Limits())
    assert whole[0] == "ok"
    for size in (7,) + ((30, 1) if ci_full else ()):
        assert _outcome(path, store, Limits(chunk_rows=size)) == whole, size
    assert whole[1][2] == {"runs": 4, "layer_timings": len(lt)}


def test_staged_rows_are_the_typed_file_rows_in_file_order(store, tmp_path):
    runs, lt = _runs()
    entry = contribute(write_contrib(tmp_path / "c", runs, lt), root=store, limits=SMALL)
    staged = get_staged(entry.id, store).frames()["layer_timings"]
    assert "__row" not in staged.columns
    assert list(staged["run_id"]) == list(lt["run_id"])
    assert list(staged["layer"]) == list(lt["layer"])
    pd.testing.assert_series_equal(staged["fwd_ms"], lt["fwd_ms"], check_names=False)


def cell(runs, lt):
    lt.loc[10, "fwd_ms"] = "fast"


def orphan(runs, lt):
    lt.loc[[3, 30], "run_id"] = "nobody"


def layer(runs, lt):
    lt.loc[12, "layer"] = "conv99"


def repeated(runs, lt):  # the same (run_id, layer) far apart in the file
    lt.loc[len(lt) - 1, ["run_id", "layer"]] = lt.loc[0, ["run_id", "layer"]].to_numpy()


def nan(runs, lt):
    lt.loc[[5, 40], "bwd_ms"] = "NaN"


def missing(runs, lt):
    return runs, lt.drop(index=[2, 50]).reset_index(drop=True)


def no_rows(runs, lt):
    return runs, lt[lt["run_id"] != "r2"].reset_index(drop=True)


def slow_sum(runs, lt):
    runs.loc[1, "fwd_ms"] = runs.loc[1, "fwd_ms"] * 10


def dup_run(runs, lt):  # run r3 becomes a renamed copy of r0
    r0 = lt[lt["run_id"] == "r0"]
    cols = runs.columns.drop("run_id")
    runs.loc[3, cols] = runs.loc[0, cols]
    return runs, pd.concat([lt[lt["run_id"] != "r3"], r0.assign(run_id="r3")],
                           ignore_index=True)


# defects found in pass 1 (schema, keys) and in pass 2 (per run): one contribution each
DEFECTS = {"keys": ([cell, orphan, layer, repeated], {"SCHEMA", "CROSS_TABLE",
                                                      "UNKNOWN_LAYER"}),
           "runs": ([nan, missing, no_rows, slow_sum, dup_run], {"PLAUSIBILITY",
                                                                 "INCOMPLETE_TRACE",
                                                                 "DUPLICATE"})}


@pytest.mark.parametrize("kind", DEFECTS)
@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_a_refusal_is_the_same_in_any_chunk_size(store, tmp_path, kind, fmt, ci_full):
    runs, lt = _runs()
    lt = lt.astype({"fwd_ms": object, "bwd_ms": object})  # lets a defect write text
    defects, codes = DEFECTS[kind]
    for defect in defects:
        edited = defect(runs, lt)
        runs, lt = edited if edited is not None else (runs, lt)
    if fmt == "parquet":  # one type per Parquet column: the times as text
        lt = lt.astype({"fwd_ms": str, "bwd_ms": str})
    path = write_contrib(tmp_path / "c", runs, lt, fmt=fmt)
    whole = _outcome(path, store, Limits())
    assert {code for code, *_ in whole[1]} == codes
    for size in (7,) + ((30, 3, 1) if ci_full else ()):
        assert _outcome(path, store, Limits(chunk_rows=size)) == whole, size
    assert all(row is None or 0 <= row < len(lt) for _, _, row, _, _ in whole[1])


def test_rows_named_in_failures_are_rows_of_the_file(store, tmp_path):
    runs, lt = _runs()
    lt = lt.astype({"fwd_ms": object})
    lt.loc[[4, 33], "fwd_ms"] = "fast"
    err = pytest.raises(DgtracesError, contribute, write_contrib(tmp_path / "c", runs, lt),
                        root=store, dry_run=True, limits=SMALL).value
    assert err.code == "SCHEMA"
    assert sorted(f.row for f in err.failures) == [4, 33]


def test_a_repeated_key_across_chunks_is_a_schema_failure(store, tmp_path):
    runs, lt = _runs(shuffle=False)
    lt.loc[len(lt) - 1, ["run_id", "layer"]] = lt.loc[0, ["run_id", "layer"]].to_numpy()
    err = pytest.raises(DgtracesError, contribute, write_contrib(tmp_path / "c", runs, lt),
                        root=store, dry_run=True, limits=SMALL).value
    assert err.code == "SCHEMA"
    assert {(f.row, f.column) for f in err.failures} == {
        (0, "run_id"), (0, "layer"), (len(lt) - 1, "run_id"), (len(lt) - 1, "layer")}


def test_failures_are_capped_per_code(store, tmp_path, monkeypatch):
    monkeypatch.setattr(stream, "MAX_PER_CODE", 5)
    runs, lt = _runs()
    lt["fwd_ms"] = "fast"  # every row fails
    err = pytest.raises(DgtracesError, contribute, write_contrib(tmp_path / "c", runs, lt),
                        root=store, dry_run=True, limits=SMALL).value
    listed = [f for f in err.failures if f.row is not None]
    assert err.code == "SCHEMA" and len(listed) == 5
    assert err.failures[-1].message == f"{len(lt) - 5} more SCHEMA failures not listed"


@pytest.mark.parametrize("shuffle", [False, True])
def test_run_groups_hold_whole_runs(store, tmp_path, shuffle):
    runs, lt = _runs(n=5, shuffle=shuffle)
    if not shuffle:  # runs together, but not in id order
        lt = pd.concat([lt[lt["run_id"] == r] for r in ("r3", "r0", "r4", "r1", "r2")],
                       ignore_index=True)
    checked = contribute(write_contrib(tmp_path / "c", runs, lt), root=store, dry_run=True,
                         limits=SMALL)
    sp = checked.spools["layer_timings"]
    assert sp.chunks == -(-len(lt) // SMALL.chunk_rows)
    assert sp.contiguous is not shuffle
    seen, rows = [], []
    for df, file_rows in stream.run_groups(sp, 30):
        assert not set(df["run_id"]) & set(seen)  # a run is never split
        seen += list(dict.fromkeys(df["run_id"]))
        rows += list(file_rows)
        assert list(lt.loc[file_rows, "layer"]) == list(df["layer"])
        assert list(lt.loc[file_rows, "run_id"]) == list(df["run_id"])
    assert sorted(rows) == list(range(len(lt)))
    # file order when the runs were together, else sorted by run
    assert seen == (sorted(seen) if shuffle else ["r3", "r0", "r4", "r1", "r2"])
    if not shuffle:
        assert rows == list(range(len(lt)))


def test_run_order_tracks_runs_across_chunks():
    order = stream.RunOrder()
    for ids in (["a", "a", "b"], ["b", "c"], ["c"], ["d", "e"]):
        order.see(ids)
    assert order.contiguous
    order.see(["e", "b"])  # b ended two chunks ago
    assert not order.contiguous
    again = stream.RunOrder()
    again.see(["a", "b", "a"])
    assert not again.contiguous


def test_streamed_row_limit_is_bad_file(store, tmp_path):
    runs, lt = _runs(n=1)
    for fmt in ("csv", "parquet"):
        path = write_contrib(tmp_path / fmt, runs, lt, fmt=fmt)
        err = pytest.raises(DgtracesError, contribute, path, root=store, dry_run=True,
                            limits=Limits(max_stream_rows=len(lt) - 1)).value
        assert err.code == "BAD_FILE"


def test_header_only_timings_are_refused_as_runs_without_timings(store, tmp_path):
    runs, lt = _runs(n=1)
    err = pytest.raises(DgtracesError, contribute,
                        write_contrib(tmp_path / "c", runs, lt.iloc[:0]), root=store,
                        dry_run=True).value
    assert err.code == "PLAUSIBILITY"
    assert ("runs.csv", 0) in {(f.file, f.row) for f in err.failures}


def test_streamed_parquet_limits_are_bad_file(store, tmp_path):
    """A row group too large to stream, and text decoding past the size limit summed over
    chunks (each chunk alone is within it), are BAD_FILE before any check runs."""
    runs, lt = _runs(n=2)
    lt["x"] = "a" * 3000  # one long value in every row: 138 kB decoded, ~3 kB stored
    path = write_contrib(tmp_path / "c", runs, lt, fmt="parquet")
    for limits in (Limits(max_row_group_bytes=1000),
                   Limits(chunk_rows=10, max_stream_file_bytes=60_000)):
        err = pytest.raises(DgtracesError, contribute, path, root=store, dry_run=True,
                            limits=limits).value
        assert err.code == "BAD_FILE", limits


def test_progress_is_told_after_each_chunk(store, tmp_path):
    runs, lt = _runs()
    lines = []
    checked = contribute(write_contrib(tmp_path / "c", runs, lt), root=store, dry_run=True,
                         limits=SMALL, progress=lines.append)
    read = [line for line in lines if "read and checked" in line]
    assert len(read) == checked.spools["layer_timings"].chunks
    assert read[-1] == f"layer_timings: {len(lt)} rows read and checked (schema, keys)"
    assert lines[-1] == f"layer_timings: {len(lt)} of {len(lt)} rows checked run by run"


def test_runs_failing_its_schema_is_refused_before_any_value_check(store, tmp_path):
    runs, lt = _runs(n=2)
    err = pytest.raises(DgtracesError, contribute,
                        write_contrib(tmp_path / "c", runs.drop(columns=["run_id"]), lt),
                        root=store, dry_run=True, limits=SMALL).value
    assert err.code == "SCHEMA"
    assert ("runs.csv", "run_id") in {(f.file, f.column) for f in err.failures}


def _refused_as(code, cls, path, store, limits):
    with pytest.raises(DgtracesError) as exc:
        contribute(path, root=store, dry_run=True, limits=limits)
    record(cls, exc.value.code == code)
    assert exc.value.code == code, exc.value.report()


def test_long_csv_rows_are_read_fewer_at_a_time(store, tmp_path):
    """Chunks are sized by bytes too: a CSV of ~3 kB rows (long run ids, valid) is read
    about max_chunk_bytes at a time in both passes, with the same outcome."""
    runs, lt = _runs(n=2)
    for i in range(2):
        long_id = f"r{i}-" + "x" * 3000
        runs.loc[runs["run_id"] == f"r{i}", "run_id"] = long_id
        lt.loc[lt["run_id"] == f"r{i}", "run_id"] = long_id
    path = write_contrib(tmp_path / "c", runs, lt)
    tight = Limits(max_chunk_bytes=30_000)
    checked = contribute(path, root=store, dry_run=True, limits=tight)
    sp = checked.spools["layer_timings"]
    assert sp.chunk_rows <= 10 and sp.chunks >= len(lt) // 10
    assert _outcome(path, store, tight) == _outcome(path, store, Limits())


def test_a_parquet_chunk_that_decodes_too_large_is_bad_file(store, tmp_path):
    """Within the file's decoded-size limit, but one batch alone decodes past
    max_chunk_bytes (one long value referenced by every row)."""
    runs, lt = _runs(n=2)
    lt["x"] = "a" * 3000
    path = write_contrib(tmp_path / "c", runs, lt, fmt="parquet")
    _refused_as("BAD_FILE", "parquet chunk dictionary bomb", path, store,
                Limits(max_chunk_bytes=50_000))


@pytest.mark.parametrize("name", ["layer_timings.exe", "layer_timings.csv.txt",
                                  "layer_timings.CSV", "layer_timings"])
def test_only_the_streamed_table_files_get_its_larger_size_limit(store, tmp_path, name):
    runs, lt = _runs(n=1)
    folder = write_contrib(tmp_path / "c", runs, lt)
    zpath = tmp_path / "c.zip"
    with zipfile.ZipFile(zpath, "w") as zf:
        for p in folder.iterdir():
            zf.write(p, p.name)
        zf.writestr(name, "0" * 5000)
    _refused_as("UNSAFE_ARCHIVE", "oversized file named like the streamed table", zpath,
                store, Limits(max_file_bytes=4000))
