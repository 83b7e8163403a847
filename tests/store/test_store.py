import json

import pandas as pd
import pytest

from dgtraces.errors import DgtracesError, StoreError, ValidationError
from dgtraces.io import files as fileio
from dgtraces.models import layers_frame
from dgtraces.store import manifest as store
from dgtraces.store import release, shards, verify


def test_committed_v010_is_intact_and_matches_code():
    report = verify.verify()
    assert report.ok, [f.line() for f in report.failures]
    assert "0.1.0" in report.releases
    df = release.read_table("layers", "0.1.0")
    expected = layers_frame(["alexnet", "googlenet", "resnet50"])  # the v0.1.0 models
    pd.testing.assert_frame_equal(df.reset_index(drop=True), expected, check_dtype=False)


def test_write_release_manifest_and_reads(empty_store):
    lf = layers_frame("alexnet")
    path = shards.write_release("0.1.0", {"layers": lf})
    m = json.loads((path / "manifest.json").read_text())
    assert m["tables"]["layers"]["rows"] == 23
    (shard,) = m["tables"]["layers"]["shards"]
    file = store.shard_path("layers", shard["sha256"])
    assert shard["sha256"] == fileio.sha256_file(file) and shard["rows"] == 23
    assert shard["bytes"] == m["tables"]["layers"]["bytes"] == file.stat().st_size
    assert [p.name for p in path.iterdir()] == ["manifest.json"]
    assert store.latest() == "0.1.0" and verify.verify().ok
    assert release.read_table("layers")["params"].sum() == 60_965_224


def test_verify_detects_any_changed_byte(tmp_store):
    (f,) = release.table_files("0.1.0")["layers"]
    data = bytearray(f.read_bytes())
    data[len(data) // 2] ^= 0x01
    f.write_bytes(bytes(data))
    report = verify.verify()
    assert not report.ok and report.failures[0].code == "INTEGRITY"


def test_verify_detects_manifest_edit_and_extra_file(tmp_store):
    rel = tmp_store / "releases" / "v0.1.0"
    m = json.loads((rel / "manifest.json").read_text())
    m["notes"] = "edited"
    (rel / "manifest.json").write_text(json.dumps(m))
    (rel / "extra.txt").write_text("x")
    msgs = [f.message for f in verify.verify().failures]
    assert any("digest" in x for x in msgs) and any("not listed" in x for x in msgs)


def test_refuses_existing_and_older_versions(tmp_store):
    with pytest.raises(StoreError) as exc:
        shards.write_release("0.1.0", {"layers": layers_frame("alexnet")})
    assert exc.value.code == "VERSION"
    shards.write_release("0.2.0", {"layers": layers_frame("alexnet")})
    with pytest.raises(StoreError) as exc:
        shards.write_release("0.1.5", {"layers": layers_frame("alexnet")})
    assert exc.value.code == "VERSION"
    with pytest.raises(StoreError) as exc:
        shards.write_release("one", {"layers": layers_frame("alexnet")})
    assert exc.value.code == "VERSION"


def test_invalid_tables_write_nothing(tmp_store):
    before = sorted(p.name for p in (tmp_store / "releases").iterdir())
    bad = layers_frame("alexnet").assign(params=-1)
    with pytest.raises(ValidationError):
        shards.write_release("0.2.0", {"layers": bad})
    assert sorted(p.name for p in (tmp_store / "releases").iterdir()) == before


def test_extend_release_appends_and_keeps_old(tmp_store):
    runs = pd.DataFrame([dict(
        run_id="r1", model="alexnet", device="cpu-test", device_kind="cpu", host=None,
        framework="pytorch", precision="fp32", batch_size=8, threads=1, cores=2,
        provenance="measured", source="unit test", collector_version="t",
        timestamp_utc="2026-12-02T10:00:00Z", fwd_ms=None, bwd_ms=None, update_ms=None,
        iter_ms=None, layer_sum_ratio=None, flagged=False, flag_reason=None,
        params_json=None, notes=None)])
    shards.extend_release("0.2.0", {"runs": runs})
    assert store.list_releases() == ["0.1.0", "0.2.0"]
    assert len(release.read_table("runs")) == 1
    assert len(release.read_table("layers", "0.2.0")) == len(release.read_table("layers", "0.1.0"))
    assert store.read_manifest("0.2.0")["parent"] == "0.1.0"
    assert verify.verify().ok


def test_stale_temp_is_ignored_by_verify_and_cleaned(tmp_store):
    (tmp_store / "releases" / ".tmp-v9.9.9-1-abc").mkdir()
    report = verify.verify()
    assert report.ok and report.stale_temps
    assert store.clean_stale_temps() and not verify.verify().stale_temps


def test_atomic_write_bytes(tmp_path):
    p = tmp_path / "a" / "f.txt"
    fileio.atomic_write_bytes(p, b"one")
    fileio.atomic_write_bytes(p, b"two")
    assert p.read_bytes() == b"two" and [x.name for x in p.parent.iterdir()] == ["f.txt"]


def test_merge_frames_appends_replaces_and_leaves_input_alone():
    a = pd.DataFrame({"x": [1, 2]})
    frames = {"t": a, "u": a}
    out = store.merge_frames(frames, {"t": pd.DataFrame({"x": [3]}), "u": pd.DataFrame({"x": [9]}),
                                      "v": pd.DataFrame({"x": [5]})}, replace=["u"])
    assert out["t"]["x"].tolist() == [1, 2, 3]
    assert out["u"]["x"].tolist() == [9] and out["v"]["x"].tolist() == [5]
    assert frames["t"] is a and list(frames) == ["t", "u"]


def _copy_release(tmp_store, src, name, link=False):
    rdir = store.releases_dir()
    if link:
        (rdir / name).symlink_to(rdir / src)
    else:
        import shutil

        shutil.copytree(rdir / src, rdir / name)


@pytest.mark.parametrize("name,link", [("0.9.0", False), ("v0.09.0", False),
                                       ("v00.9.0", False), ("v0.1\u0669.0", False)])
def test_loose_names_are_not_releases(tmp_store, name, link):
    _copy_release(tmp_store, "v0.1.0", name, link)
    assert store.list_releases() == ["0.1.0"] and store.latest() == "0.1.0"
    report = verify.verify()
    assert not report.ok and report.releases == ["0.1.0"]
    assert any(f.code == "INTEGRITY" and f.file.endswith(name) for f in report.failures)


@pytest.mark.parametrize("swap", ["link", "dangling link", "file"])
def test_a_release_swapped_for_a_link_is_integrity_never_an_older_release(tmp_store, swap):
    """#36 low: a link named like a release was skipped, so readers served the release
    before it as the latest, silently; like a deleted manifest, it is INTEGRITY."""
    import shutil

    from dgtraces.errors import DgtracesError
    from dgtraces.store import release
    from tests.attack_tally import record

    rdir = store.releases_dir()
    if swap == "file":
        (rdir / "v0.9.0").write_text("not a release")
    else:
        target = rdir.parent.parent / "elsewhere"
        if swap == "link":
            shutil.copytree(rdir / "v0.1.0", target)
        (rdir / "v0.9.0").symlink_to(target)
    assert store.latest() == "0.9.0"
    for read in (lambda: release.read_table("layers"),
                 lambda: release.read_table("layers", "0.9.0")):
        with pytest.raises(DgtracesError) as exc:
            read()
        record("release folder swapped for a link", exc.value.code == "INTEGRITY")
        assert exc.value.code == "INTEGRITY"
    assert not verify.verify().ok


def test_copied_release_folder_is_an_integrity_error_for_readers(tmp_store):
    _copy_release(tmp_store, "v0.1.0", "v0.9.0")
    assert store.latest() == "0.9.0"  # a real folder with a manifest...
    with pytest.raises(StoreError) as exc:  # ...whose manifest says another release
        release.read_table("layers")
    assert exc.value.code == "INTEGRITY"
    assert not verify.verify().ok


@pytest.mark.parametrize("edit", [
    lambda m: [],  # not a mapping
    lambda m: {**m, "tables": []},
    lambda m: {**m, "tables": {"layers": {k: v for k, v in m["tables"]["layers"].items()
                                          if k != "bytes"}}},
    lambda m: {**m, "tables": {"layers": {**m["tables"]["layers"], "shards": [
        {**m["tables"]["layers"]["shards"][0], "sha256": 5}]}}},
    lambda m: {**m, "tables": {"layers": {**m["tables"]["layers"], "shards": [
        {k: v for k, v in m["tables"]["layers"]["shards"][0].items() if k != "rows"}]}}},
    lambda m: {**m, "tables": {"layers": {**m["tables"]["layers"], "shards": "x"}}},
])
def test_malformed_manifest_is_reported_not_raised(tmp_store, edit):
    path = store.releases_dir() / "v0.1.0" / store.MANIFEST
    path.write_text(json.dumps(edit(json.loads(path.read_text()))))
    report = verify.verify()  # no exception
    assert not report.ok and all(f.code == "INTEGRITY" for f in report.failures)
    with pytest.raises(StoreError) as exc:
        release.read_table("layers")
    assert exc.value.code == "INTEGRITY"


def test_outputs_inside_the_data_folder_are_refused(tmp_store, tmp_path):
    for path in (tmp_store / "x.csv", tmp_store / "releases" / "v0.9.0", tmp_store):
        with pytest.raises(DgtracesError) as exc:  # a bad argument, not a store lookup
            store.refuse_inside_data(path)
        assert exc.value.code == "BAD_INPUT"
    store.refuse_inside_data(tmp_path / "elsewhere.csv")  # fine


def test_write_release_needs_tables(tmp_store):
    for frames, code in (({}, "EMPTY"), ([layers_frame("alexnet")], "EMPTY"),
                         ({"layers": None}, "BAD_INPUT")):
        with pytest.raises(DgtracesError) as exc:
            shards.write_release("0.9.0", frames)
        assert exc.value.code == code
    assert store.list_releases() == ["0.1.0"]


def test_duplicate_primary_keys_are_schema_failures(tmp_store):
    lay = release.read_table("layers")
    with pytest.raises(ValidationError) as exc:
        shards.write_release("0.9.0", {"layers": pd.concat([lay, lay.iloc[:1]])})
    assert exc.value.code == "SCHEMA"
    assert {(f.row, f.column) for f in exc.value.failures} >= {(0, "model"), (409, "model")}


def test_a_release_handle_is_passed_down_and_reads_each_table_once(mini_store, monkeypatch):
    """as_release keeps an open Release and opens a version (None: the latest); cached
    reads a table once per handle; open_if_any leaves a version without a release as it
    is (for readers that also work without a store)."""
    from dgtraces.store.release import Release, as_release, open_if_any

    rel = Release.open("0.2.0")
    assert as_release(rel) is rel and as_release(None).version == "0.2.0"
    assert as_release("0.1.0").version == "0.1.0" and open_if_any("9.9.9") == "9.9.9"
    runs = rel.cached("runs")
    assert runs.equals(release.read_table("runs", "0.2.0"))

    def no_read(*args, **kwargs):
        raise AssertionError("read again")

    monkeypatch.setattr(Release, "table", no_read)
    again = rel.cached("runs")  # not read again, and a copy: editing one changes no other
    assert again is not runs and again.equals(runs)
    again["batch_size"] *= 2
    assert rel.cached("runs").equals(runs)
    with pytest.raises(AssertionError):
        Release.open("0.2.0").cached("runs")  # another handle reads its own
    with pytest.raises(StoreError) as exc:
        as_release("9.9.9")
    assert exc.value.code == "NOT_FOUND"


def test_a_handle_resolves_each_trace_once(monkeypatch):
    """Release.memo computes a key once per handle (an error is not kept); resolve with a
    handle gives the same trace again without resolving it again, equal to a fresh one."""
    from dgtraces.predict import trace as tr
    from dgtraces.store.release import Release

    monkeypatch.delenv("DGTRACES_DATA", raising=False)  # the checkout's store
    rel = Release.open("0.3.0")
    calls = []
    assert rel.memo("k", lambda: calls.append(1) or 7) == 7
    assert rel.memo("k", lambda: calls.append(1) or 8) == 7 and calls == [1]
    with pytest.raises(ZeroDivisionError):
        rel.memo("bad", lambda: 1 / 0)
    assert rel.memo("bad", lambda: 3) == 3  # the failure was not kept
    first = tr.resolve("alexnet", "cpu", 4, release=rel)
    assert first.provenance == "measured"
    fresh = tr.resolve("alexnet", "cpu", 4, release="0.3.0")  # a version: no handle
    monkeypatch.setattr(tr, "_resolved", lambda *a: (_ for _ in ()).throw(AssertionError))
    assert tr.resolve("alexnet", "cpu", 4, release=rel) is first and first == fresh
    with pytest.raises(AssertionError):  # another handle, other options: resolved anew
        tr.resolve("alexnet", "cpu", 4, release=Release.open("0.3.0"))
    with pytest.raises(AssertionError):
        tr.resolve("alexnet", "cpu", 4, release=rel, whole=False)

def test_find_run_is_none_without_a_release(mini_store, tmp_path, monkeypatch):
    """find_run: None when no such release opens (the predictor then reconstructs)."""
    from dgtraces.predict.trace import find_run

    assert find_run("alexnet", "k80", 16, release="9.9.9") is None
    monkeypatch.setenv("DGTRACES_DATA", str(tmp_path / "empty"))
    assert find_run("alexnet", "k80", 16) is None


def test_query_takes_a_root_in_its_old_place(mini_store):
    """query.sql / connect / Query keep ``root`` as their third (second) positional
    parameter: a caller of the old API still reads the store it names."""
    from dgtraces.query.engine import Query, connect, sql

    root = store.data_root()
    assert sql("SELECT count(*) FROM runs", "0.2.0", root, 5).rows == \
        sql("SELECT count(*) FROM runs", "0.2.0").rows
    con = connect("0.1.0", root)
    assert con.execute("SELECT count(*) FROM layers").fetchall()[0][0] > 0
    with Query("SELECT 1", None, root) as q:
        assert q.version == "0.2.0"
