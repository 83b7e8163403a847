import json
import os
import shutil
import subprocess
import sys

import pandas as pd
import pytest
import yaml

import dgtraces
from dgtraces.errors import DgtracesError
from dgtraces.io import files as fileio
from dgtraces.publish.hf import export
from dgtraces.store import manifest as store
from dgtraces.store import release

TABLES = ["comm", "comm_fits", "devices", "iterations", "layer_timings", "layers", "links",
          "runs"]


def records(df: pd.DataFrame, columns=None) -> list[tuple]:
    df = df if columns is None else df[columns]
    return [tuple(None if pd.isna(v) else v for v in row)
            for row in df.astype(object).itertuples(index=False)]


@pytest.fixture(scope="module")
def exported(mini_release_root, tmp_path_factory):
    out = tmp_path_factory.mktemp("hub") / "dgtraces"
    export(out, root=mini_release_root, fragments_dir=tmp_path_factory.mktemp("nofrag"))
    return out


def front_matter(readme: str) -> dict:
    assert readme.startswith("---\n")
    return yaml.safe_load(readme.split("---\n")[1])


def test_export_layout_bytes_and_yaml_configs(exported, mini_release_root):
    manifest = store.read_manifest(root=mini_release_root)
    files = sorted(str(p.relative_to(exported)) for p in exported.rglob("*") if p.is_file())
    shards = {t: store.export_names(t, e) for t, e in manifest["tables"].items()}
    assert files == sorted(["README.md", "croissant.json", "manifest.json"]
                           + [f"data/{rel}" for t in TABLES for rel, _ in shards[t]])
    src = release.table_files(root=mini_release_root)
    for t in TABLES:  # byte copies of every shard, named by their sha256
        assert [f.name for f in src[t]] == [f"{s['sha256']}.parquet" for _, s in shards[t]]
        for (rel, _), f in zip(shards[t], src[t], strict=True):
            assert (exported / "data" / rel).read_bytes() == f.read_bytes()
    assert json.loads((exported / "manifest.json").read_text()) == manifest
    meta = front_matter((exported / "README.md").read_text())
    # the mini release has B-Caffe-derived rows: their BSD-2-Clause is declared too
    assert meta["license"] == ["cc-by-4.0", "bsd-2-clause"]
    assert meta["pretty_name"] and meta["tags"]
    configs = {c["config_name"]: c for c in meta["configs"]}
    assert sorted(configs) == TABLES
    for name, c in configs.items():
        (split,) = c["data_files"]
        assert split["split"] == "train"
        assert split["path"] == [f"data/{rel}" for rel, _ in shards[name]]
        assert all((exported / p).is_file() for p in split["path"])
    assert [c["config_name"] for c in meta["configs"] if c.get("default")] == ["layer_timings"]
    assert meta["size_categories"] == ["n<1K"]


LOAD = """
import sys, datasets
out, cache, dest = sys.argv[1:4]
for name in ("layer_timings", "iterations"):
    ds = datasets.load_dataset(out, name, split="train", cache_dir=cache)
    ds.to_pandas().to_parquet(f"{dest}/{name}.parquet")
print(sorted(datasets.get_dataset_config_names(out)))
"""


def test_load_dataset_offline_equals_dgtraces_load(exported, mini_store, tmp_path):
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1",
               HF_HOME=str(tmp_path / "hf"), HF_DATASETS_CACHE=str(tmp_path / "cache"))
    res = subprocess.run([sys.executable, "-c", LOAD, str(exported), str(tmp_path / "cache"),
                          str(tmp_path)], capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    assert eval(res.stdout.strip().splitlines()[-1]) == TABLES
    for name in ("layer_timings", "iterations"):
        want = dgtraces.load(name)
        got = pd.read_parquet(tmp_path / f"{name}.parquet")
        assert list(got.columns) == list(want.columns)
        assert records(got) == records(want)
    # the nulls survived (iterations i2 has no iter_ms, no batch size)
    assert records(got, ["iter_id", "iter_ms", "batch_size"])[1] == ("i2", None, None)


def test_export_refuses_non_empty_out(mini_store, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(DgtracesError) as exc:
        export(out)
    assert exc.value.code == "BAD_INPUT"
    assert [p.name for p in out.iterdir()] == ["keep.txt"]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert (empty / "README.md") in export(empty, version="0.1.0")
    assert sorted(p.name for p in (empty / "data").iterdir()) == ["layers"]


def test_export_refuses_corrupt_release(mini_release_root, tmp_path):
    root = tmp_path / "data"
    shutil.copytree(mini_release_root, root)
    (f,) = release.table_files("0.2.0", root)["comm"]
    f.write_bytes(f.read_bytes()[:-1] + b"\0")
    with pytest.raises(DgtracesError) as exc:
        export(tmp_path / "out", root=root)
    assert exc.value.code == "INTEGRITY"
    assert {fl.code for fl in exc.value.failures} == {"INTEGRITY"}
    assert not (tmp_path / "out").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(fileio.TMP_PREFIX)]


def test_export_cli(mini_store, tmp_path):
    from click.testing import CliRunner

    from dgtraces.cli import main

    res = CliRunner().invoke(main, ["export-hf", str(tmp_path / "x"), "--release", "0.1.0"])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "x" / "croissant.json").is_file()
    (path,) = front_matter((tmp_path / "x" / "README.md").read_text()
                           )["configs"][0]["data_files"][0]["path"]
    assert path.startswith("data/layers/") and (tmp_path / "x" / path).is_file()


def test_export_includes_fragments_and_their_figures(mini_store, tmp_path):
    frag = tmp_path / "fragments"
    frag.mkdir()
    (frag / "a.md").write_text("## Method\n\n![fig](fragments/fig.png)\n")
    (frag / "fig.png").write_bytes(b"\x89PNG fake")
    out = tmp_path / "out"
    export(out, fragments_dir=frag)
    assert "![fig](fragments/fig.png)" in (out / "README.md").read_text()
    assert (out / "fragments" / "fig.png").read_bytes() == b"\x89PNG fake"
    assert not (out / "fragments" / "a.md").exists()
