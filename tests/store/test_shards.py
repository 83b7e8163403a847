"""Content-addressed shards (issue #18): releases share older shards and add only new ones,
keys are checked across shards, readers see a table's shards as one table, verify hashes
each shard once, and migrate-store rewrites legacy releases with equal content."""

import json
import os

import pandas as pd
import pytest
from click.testing import CliRunner

from dgtraces.errors import DgtracesError
from dgtraces.io import files as fileio
from dgtraces.publish import hf
from dgtraces.query import engine as query
from dgtraces.store import manifest as store
from dgtraces.store import migrate, release, shards, verify
from dgtraces.store import shards as shards_mod
from tests.conftest import _mini_frames


@pytest.fixture
def mini(tmp_path, monkeypatch):
    """v0.1.0 (layers) + v0.2.0 (every table, built on v0.1.0's shards)."""
    frames = _mini_frames()
    root = tmp_path / "data"
    monkeypatch.setenv("DGTRACES_DATA", str(root))
    shards_mod.write_release("0.1.0", {"layers": frames["layers"]})
    shards_mod.extend_release("0.2.0", {t: df for t, df in frames.items() if t != "layers"})
    return root, frames


def _pool(root):
    return sorted(p.relative_to(root) for p in (root / "shards").rglob("*.parquet"))


def _more_runs(frames, prefix: str):
    runs = frames["runs"].assign(run_id=frames["runs"]["run_id"] + prefix)
    lt = frames["layer_timings"].assign(run_id=frames["layer_timings"]["run_id"] + prefix)
    return runs, lt


def test_release_stores_only_its_new_shards(mini):
    root, frames = mini
    m1, m2 = store.read_manifest("0.1.0"), store.read_manifest("0.2.0")
    assert m2["tables"]["layers"]["shards"] == m1["tables"]["layers"]["shards"]  # shared
    before = _pool(root)
    runs, lt = _more_runs(frames, "-b")
    shards_mod.extend_release("0.3.0", {"runs": runs, "layer_timings": lt})
    m3 = store.read_manifest("0.3.0")
    new = sorted(set(_pool(root)) - set(before))
    assert [p.parts[1] for p in new] == ["layer_timings", "runs"]  # one new shard each
    for t in ("runs", "layer_timings"):
        assert m3["tables"][t]["shards"][:1] == m2["tables"][t]["shards"]
        assert len(m3["tables"][t]["shards"]) == 2
        assert m3["tables"][t]["rows"] == m2["tables"][t]["rows"] + len(frames[t])
    for t in ("layers", "comm", "devices"):
        assert m3["tables"][t] == m2["tables"][t]
    assert [p.name for p in store.release_path("0.3.0").iterdir()] == ["manifest.json"]


def test_readers_see_the_shards_as_one_table(mini):
    root, frames = mini
    runs, lt = _more_runs(frames, "-b")
    shards_mod.extend_release("0.3.0", {"runs": runs, "layer_timings": lt})
    got = release.read_table("runs")
    want = pd.concat([release.read_table("runs", "0.2.0"), runs], ignore_index=True)
    assert list(got["run_id"]) == list(want["run_id"])  # shard order = row order
    assert list(got.dtypes) == list(release.read_table("runs", "0.2.0").dtypes)
    n_runs = frames["layer_timings"]["run_id"].nunique()
    assert query.sql("SELECT count(*) AS n, count(DISTINCT run_id) AS d FROM layer_timings"
                     ).rows == [(2 * len(frames["layer_timings"]), 2 * n_runs)]
    assert len(release.dataset("layer_timings").to_table(columns=["run_id"])) == 2 * len(lt)
    out = hf.export(root.parent / "hub")
    names = {str(p.relative_to(root.parent / "hub")) for p in out}
    for t, e in release.tables().items():
        assert {f"data/{rel}" for rel, _ in store.export_names(t, e)} <= names


def test_primary_key_unique_across_shards_and_nothing_left(mini):
    root, frames = mini
    before = _pool(root)
    runs = frames["runs"].iloc[[0]].assign(notes="same run id, other content")
    with pytest.raises(DgtracesError) as exc:
        shards_mod.extend_release("0.3.0", {"runs": runs})
    assert exc.value.code == "SCHEMA"
    assert [f.found for f in exc.value.failures] == [repr((frames["runs"]["run_id"][0],))]
    assert store.list_releases() == ["0.1.0", "0.2.0"] and _pool(root) == before


def test_foreign_keys_checked_by_duckdb_on_replace(mini):
    _, frames = mini
    keep = frames["runs"][frames["runs"]["run_id"] != "m1"]
    with pytest.raises(DgtracesError) as exc:  # timings and iterations still name m1
        shards_mod.extend_release("0.3.0", {"runs": keep}, replace=["runs"])
    assert exc.value.code == "CROSS_TABLE"
    assert {(f.column, f.found) for f in exc.value.failures} == {
        ("run_id", "'m1'"), ("trace_run_id", "'m1'")}
    bad = frames["layer_timings"].iloc[:1].assign(run_id="nope")
    with pytest.raises(DgtracesError) as exc:
        shards_mod.extend_release("0.3.0", {"layer_timings": bad})
    assert exc.value.code == "CROSS_TABLE"


def test_key_failures_query_directly(mini, tmp_path):
    _, frames = mini
    files = release.table_files("0.2.0")
    dup = tmp_path / "dup.parquet"
    frames["runs"].iloc[[1]].to_parquet(dup)
    fails = shards.key_failures({"runs": [dup]}, {"runs": files["runs"]},
                                {**files, "runs": files["runs"] + [dup]})
    assert [(f.code, f.found) for f in fails] == [("SCHEMA", "('p1',)")]


def test_verify_hashes_each_shard_once_and_notes_unreferenced(mini):
    root, _ = mini
    report = verify.verify()
    assert report.ok and report.files_checked == len(_pool(root))  # layers counted once
    import hashlib

    stray = root / "shards" / "runs" / (hashlib.sha256(b"x").hexdigest() + ".parquet")
    stray.write_bytes(b"x")
    report = verify.verify()
    assert report.ok and report.unreferenced == [str(stray)]
    stray.rename(stray.with_name("0" * 64 + ".parquet"))  # its bytes no longer match (#29 M5)
    assert not verify.verify().ok and verify.verify(deep=False).ok
    stray.with_name("0" * 64 + ".parquet").rename(stray)
    (root / "shards" / "runs" / "notes.txt").write_text("x")
    assert not verify.verify().ok


# ---- migration ---------------------------------------------------------------------------

def _write_legacy(root, version, frames, parent=None):
    """A release in the pre-shard layout: <table>.parquet files in the release folder."""
    folder = root / "releases" / f"v{version}"
    folder.mkdir(parents=True)
    tables = {}
    for name, df in sorted(frames.items()):
        path = folder / f"{name}.parquet"
        store.write_parquet(df, path)
        tables[name] = {"file": path.name, "bytes": path.stat().st_size,
                        "sha256": fileio.sha256_file(path), "rows": len(df),
                        "columns": list(df.columns)}
    manifest = {"dataset": "dgtraces", "version": version, "schema_version": "1",
                "created_utc": "2026-01-01T00:00:00Z", "parent": parent, "notes": "old",
                "tables": tables}
    manifest["digest"] = store.manifest_digest(manifest)
    (folder / "manifest.json").write_text(json.dumps(manifest))


@pytest.fixture
def legacy(tmp_path, monkeypatch):
    from dgtraces.tables.checks import validate_tables

    f = validate_tables(_mini_frames())
    root = tmp_path / "data"
    monkeypatch.setenv("DGTRACES_DATA", str(root))
    _write_legacy(root, "0.1.0", {"layers": f["layers"]})
    _write_legacy(root, "0.2.0", {"layers": f["layers"], "runs": f["runs"].iloc[:1],
                                  "layer_timings": f["layer_timings"]
                                  [f["layer_timings"]["run_id"] == "m1"]}, "0.1.0")
    _write_legacy(root, "0.3.0", {**f, "runs": f["runs"].iloc[::-1]}, "0.2.0")  # reordered
    return root


def _row_sets(root):
    out = {}
    for v in store.list_releases(root):
        for t in release.tables(v, root):
            df = release.read_table(t, v, root)
            out[v, t] = sorted(map(repr, df.astype(object).itertuples(index=False)))
    return out


def test_migrate_keeps_row_sets_and_is_idempotent(legacy):
    before = _row_sets(legacy)
    assert verify.verify().legacy == ["0.1.0", "0.2.0", "0.3.0"]
    with pytest.raises(DgtracesError) as exc:  # no new release on a legacy base
        shards_mod.extend_release("0.4.0", {"devices": release.read_table("devices", "0.3.0")},
                             replace=["devices"])
    assert exc.value.code == "INTEGRITY" and exc.value.hint == store.MIGRATE_HINT
    result = migrate.migrate()
    assert result.migrated == ["0.1.0", "0.2.0", "0.3.0"]
    assert result.shared == {"0.2.0": ["layers"], "0.3.0": ["layer_timings", "layers"]}
    assert _row_sets(legacy) == before
    report = verify.verify()
    assert report.ok and not report.legacy and not report.unreferenced
    m3 = store.read_manifest("0.3.0")
    assert m3["created_utc"] == "2026-01-01T00:00:00Z" and m3["parent"] == "0.2.0"
    assert len(m3["tables"]["layer_timings"]["shards"]) == 2  # v0.2.0's rows + the rest
    assert len(m3["tables"]["runs"]["shards"]) == 1  # reordered: a full copy
    again = migrate.migrate()
    assert again.migrated == [] and again.already == ["0.1.0", "0.2.0", "0.3.0"]
    assert _row_sets(legacy) == before


def test_migrate_refuses_a_changed_legacy_file_and_finishes_a_killed_run(legacy):
    path = legacy / "releases" / "v0.2.0" / "runs.parquet"
    data = path.read_bytes()
    path.write_bytes(data[:-1] + b"\0")
    with pytest.raises(DgtracesError) as exc:
        migrate.migrate()
    assert exc.value.code == "INTEGRITY"
    assert verify.verify().legacy == ["0.2.0", "0.3.0"]  # v0.1.0 was done, v0.2.0 untouched
    path.write_bytes(data)
    kept = legacy / "kept.parquet"
    os.link(legacy / "releases" / "v0.3.0" / "comm.parquet", kept)
    migrate.migrate()
    os.link(kept, legacy / "releases" / "v0.3.0" / "comm.parquet")  # as if killed before
    assert not verify.verify().ok                                   # the legacy files went
    assert migrate.migrate().already == ["0.1.0", "0.2.0", "0.3.0"]
    assert verify.verify().ok


def test_migrate_store_cli(legacy):
    from dgtraces.cli import main

    res = CliRunner().invoke(main, ["migrate-store"])
    assert res.exit_code == 0, res.output
    assert "migrated  0.3.0" in res.output and "ok  verify: 3 release(s)" in res.output
    res = CliRunner().invoke(main, ["migrate-store"])
    assert res.exit_code == 0 and "ok  0.1.0 already in the shard layout" in res.output


def test_hub_exports_of_two_releases_share_shard_paths(mini, tmp_path):
    """What docs/hub-hosting.md relies on: the export of a release differs from its
    parent's only by its new shards (same path, same bytes for the rest), so a Hub commit
    per release uploads those alone; a glob over one table's folder reads that table."""
    import duckdb

    _, frames = mini
    runs, lt = _more_runs(frames, "-b")
    shards_mod.extend_release("0.3.0", {"runs": runs, "layer_timings": lt})
    old, new = tmp_path / "v2", tmp_path / "v3"
    hf.export(old, "0.2.0", fragments_dir=tmp_path / "nofrag")
    hf.export(new, "0.3.0", fragments_dir=tmp_path / "nofrag")

    def files(folder):
        return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*")
                if p.is_file()}

    a, b = files(old), files(new)
    changed = sorted(k for k in b if a.get(k) != b[k])
    m3, m2 = release.tables("0.3.0"), release.tables("0.2.0")
    shards_new = sorted(f"data/{rel}" for t in m3 for rel, _ in store.export_names(t, m3[t])
                        if (rel, _) not in store.export_names(t, m2.get(t, {"shards": []})))
    assert changed == sorted(["README.md", "croissant.json", "manifest.json", *shards_new])
    assert len(shards_new) == 2 and set(a) <= set(b)
    con = duckdb.connect()
    got = con.execute(f"SELECT count(*) FROM read_parquet('{new}/data/layer_timings/*.parquet')"
                      ).fetchall()[0][0]
    con.close()
    assert got == len(release.read_table("layer_timings", "0.3.0"))
