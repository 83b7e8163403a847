import json

import pandas as pd
import pytest

from dgtraces.publish.croissant import build, data_type
from dgtraces.publish.hf import export
from dgtraces.store import manifest as store
from dgtraces.store.release import Release

mlc = pytest.importorskip("mlcroissant")


@pytest.fixture(scope="module")
def exported(mini_release_root, tmp_path_factory):
    out = tmp_path_factory.mktemp("croissant") / "ds"
    export(out, root=mini_release_root, fragments_dir=tmp_path_factory.mktemp("nofrag"))
    return out


def test_structure_from_schemas_and_manifest(mini_release_root):
    doc = build(Release.open(root=mini_release_root))
    manifest = store.read_manifest(root=mini_release_root)
    assert doc["version"] == "0.2.0" and doc["conformsTo"] == "http://mlcommons.org/croissant/1.0"
    assert doc["license"] == ["https://creativecommons.org/licenses/by/4.0/",
                              "https://opensource.org/license/bsd-2-clause"]
    assert "arXiv:1805.03812" in doc["citeAs"]
    shas = {f["name"]: f["sha256"] for f in doc["distribution"] if "sha256" in f}
    assert shas == {rel: s["sha256"] for t, e in manifest["tables"].items()
                    for rel, s in store.export_names(t, e)}  # every shard
    rs = {r["name"]: r for r in doc["recordSet"]}
    assert sorted(rs) == sorted(manifest["tables"])
    for table, entry in manifest["tables"].items():  # fields in the Parquet file's order
        assert [f["name"] for f in rs[table]["field"]] == entry["columns"]
    lt = {f["name"]: f["dataType"] for f in rs["layer_timings"]["field"]}
    assert lt["run_id"] == "sc:Text" and lt["fwd_ms"] == "sc:Float" and lt["n"] == "sc:Integer"
    assert {f["name"]: f["dataType"] for f in rs["runs"]["field"]}["flagged"] == "sc:Boolean"
    assert data_type("Int64") == "sc:Integer" and data_type("boolean") == "sc:Boolean"


def test_validates_without_issues(exported):
    ds = mlc.Dataset(jsonld=str(exported / "croissant.json"))
    assert not ds.metadata.ctx.issues.errors
    assert not ds.metadata.ctx.issues.warnings


def _plain(v):
    if isinstance(v, bytes):
        return v.decode()
    return None if v is None or pd.isna(v) else v


@pytest.mark.parametrize("table", ["iterations", "layer_timings", "runs", "devices"])
def test_records_equal_parquet_rows(exported, table):
    ds = mlc.Dataset(jsonld=str(exported / "croissant.json"))
    got = [{k.split("/", 1)[1]: _plain(v) for k, v in r.items()} for r in ds.records(table)]
    frame = pd.read_parquet(exported / "data" / table).astype(object)
    want = [{k: _plain(v) for k, v in row.items()} for row in frame.to_dict("records")]
    assert len(got) == len(want) > 0
    assert got == want
    assert any(v is None for row in want for v in row.values())  # nulls were exercised


def test_committed_style_render_is_stable(mini_release_root):
    from dgtraces.publish.croissant import render

    a = render(Release.open(root=mini_release_root))
    assert a == render(Release.open(root=mini_release_root))
    assert json.loads(a)["distribution"][0]["contentUrl"].startswith("data/")
