"""Review fixes: table output escapes rich markup, a broken release gives INTEGRITY (not a raw
duckdb/OS error), `sql --out` cannot write into releases, manifest file entries are checked."""

import json
import shutil

import pytest
from click.testing import CliRunner

from dgtraces.cli import main
from dgtraces.errors import DgtracesError
from dgtraces.io import files as fileio
from dgtraces.store import manifest as store
from dgtraces.store import release, verify


@pytest.fixture
def own_store(mini_release_root, tmp_path, monkeypatch):
    """A private, writable copy of the mini store (v0.1.0 + v0.2.0)."""
    root = tmp_path / "data"
    shutil.copytree(mini_release_root, root)
    monkeypatch.setenv("DGTRACES_DATA", str(root))
    return root


def _invoke(*args):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_sql_table_prints_values_and_names_verbatim(mini_store):
    res = _invoke("sql", "SELECT 'a[/b]' AS x, '[x]' AS \"[y]\", NULL AS z")
    assert res.exit_code == 0, res.output
    assert "a[/b]" in res.output and "[x]" in res.output and "[y]" in res.output
    assert "null" in res.output


@pytest.mark.parametrize("call", ["sql", "card", "export", "read_table"])
def test_missing_parquet_file_is_integrity(own_store, tmp_path, call):
    from dgtraces.publish import card as cards
    from dgtraces.publish import hf
    from dgtraces.query import engine as query

    (comm,) = release.table_files("0.2.0")["comm"]
    comm.unlink()
    run = {"sql": lambda: query.sql("SELECT count(*) FROM runs", "0.2.0"),
           "card": lambda: cards.render_card(release.Release.open("0.2.0")),
           "export": lambda: hf.export(tmp_path / "hf", "0.2.0"),
           "read_table": lambda: release.read_table("runs", "0.2.0")}[call]
    with pytest.raises(DgtracesError) as exc:
        run()
    assert exc.value.code == "INTEGRITY" and exc.value.hint == store.VERIFY_HINT
    assert [f.file for f in exc.value.failures] == [str(comm)]
    assert not (tmp_path / "hf").exists()


def test_sql_out_refuses_the_releases_folder(own_store, tmp_path):
    (target,) = release.table_files("0.2.0")["runs"]
    digest = fileio.sha256_file(target)
    (tmp_path / "rel").symlink_to(own_store / "shards")
    for out in (target, tmp_path / "rel" / "runs" / target.name,
                own_store / "releases" / "new.csv"):
        with pytest.raises(DgtracesError) as exc:
            _invoke("sql", "SELECT 1 AS x", "--format", "csv", "--out", str(out))
        assert exc.value.code == "BAD_INPUT"
    assert fileio.sha256_file(target) == digest and verify.verify(own_store).ok
    assert not (own_store / "releases" / "new.csv").exists()
    res = _invoke("sql", "SELECT 1 AS x", "--format", "csv", "--out", str(tmp_path / "o.csv"))
    assert res.exit_code == 0 and (tmp_path / "o.csv").read_text() == "x\n1\n"


def test_every_writing_command_refuses_the_data_folder(own_store, tmp_path):
    before = sorted(str(p) for p in own_store.rglob("*"))
    for args in (["sql", "SELECT 1 AS x", "--format", "csv", "--out",
                  str(own_store / ".release-journal.json")],
                 ["export-hf", str(own_store / "releases" / "v0.9.0")],
                 ["card", "--out", str(own_store / "releases" / "v0.2.0")],
                 ["reconstruct", "--device", "k80", "--model", "alexnet", "--batch-size", "8",
                  "--out", str(own_store / "staging" / "x")],
                 ["predict", "--model", "alexnet", "--device", "k80", "--batch-size", "8",
                  "--timeline", str(own_store / "t.json")]):
        with pytest.raises(DgtracesError) as exc:
            _invoke(*args)
        assert exc.value.code == "BAD_INPUT", args
    assert sorted(str(p) for p in own_store.rglob("*")) == before


@pytest.mark.parametrize("file", ["../../../../etc/passwd", "/etc/passwd", "runs.csv",
                                  "sub/runs.parquet", None])
def test_manifest_shard_entry_is_a_sha256_only(own_store, file):
    """A shard is named by its sha256 alone: no path from a manifest is ever opened."""
    from dgtraces.query import engine as query

    mpath = own_store / "releases" / "v0.2.0" / store.MANIFEST
    manifest = json.loads(mpath.read_text())
    manifest["tables"]["runs"]["shards"][0]["sha256"] = file
    mpath.write_text(json.dumps(manifest))
    for call in (lambda: store.read_manifest("0.2.0"), lambda: query.connect("0.2.0"),
                 lambda: release.read_table("layers", "0.2.0")):
        with pytest.raises(DgtracesError) as exc:
            call()
        assert exc.value.code == "INTEGRITY"
        assert [(f.column, f.found) for f in exc.value.failures] == [("sha256", repr(file))]
    bad = [f for f in verify.verify(own_store).failures if f.column == "sha256"]
    assert [(f.expected, f.found) for f in bad] == [("64 hex digits", repr(file))]


def test_manifest_legacy_file_entry_must_be_table_parquet(own_store):
    mpath = own_store / "releases" / "v0.2.0" / store.MANIFEST
    manifest = json.loads(mpath.read_text())
    manifest["tables"]["runs"]["file"] = "../../../../etc/passwd"  # beside its shards
    mpath.write_text(json.dumps(manifest))
    with pytest.raises(DgtracesError) as exc:
        store.read_manifest("0.2.0")
    assert [(f.column, f.expected) for f in exc.value.failures] == [("file", "absent")]
    for shard in manifest["tables"]["runs"].pop("shards"):  # a legacy entry: exact name
        manifest["tables"]["runs"].update(shard)
    mpath.write_text(json.dumps(manifest))
    with pytest.raises(DgtracesError) as exc:
        store.read_manifest("0.2.0")
    assert [(f.expected, f.found) for f in exc.value.failures] == [
        ("runs.parquet", repr("../../../../etc/passwd"))]
