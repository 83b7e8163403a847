"""What the cold paths import (issue #24): the schema loads no predictor, ``predict`` and
``sql`` load no validator or plotting library. Timings live in benchmarks/cold_start.py."""

import json
import os
import subprocess
import sys

import pytest

from tests.paths import REPO

NOT_ON_PREDICT = ("pandera", "matplotlib", "scipy", "torch", "hypothesis", "duckdb",
                  "pyarrow.dataset", "datasets")
NOT_ON_SQL = ("pandera", "pandas", "matplotlib", "scipy", "torch", "pyarrow.dataset")


def loaded_after(code: str, env: dict | None = None) -> list[str]:
    """The modules a fresh interpreter holds after running ``code``."""
    script = code + "\nimport json, sys\nprint('MODULES' + json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    line = [x for x in out.stdout.splitlines() if x.startswith("MODULES")][-1]
    return json.loads(line[len("MODULES"):])


def cli(*args: str) -> str:
    return ("from dgtraces.cli import main\n"
            f"main.main({list(args)!r}, standalone_mode=False)")


def test_schema_imports_no_predictor_module():
    mods = loaded_after("import dgtraces.tables.schema")
    assert "dgtraces.tables.vocab" in mods
    assert [m for m in mods if m == "dgtraces.predict" or m.startswith("dgtraces.predict.")] \
        == []


def test_policy_registry_is_the_tables_vocabulary():
    from dgtraces.predict import policy_registry
    from dgtraces.tables import schema, vocab

    assert policy_registry.POLICIES is vocab.POLICIES
    assert policy_registry.grouping is vocab.grouping
    assert schema.POLICIES == (*vocab.POLICY_NAMES, vocab.FRAMEWORK_DEFAULT)


@pytest.mark.parametrize("store", ["checkout", "empty"])
def test_predict_cli_imports_no_validator_or_plotting(tmp_path, store):
    """The typical predict call, over the checkout's releases (tables read from shards) and
    over an empty store (trace reconstructed)."""
    env = {"DGTRACES_CACHE": str(tmp_path / "cache")}
    if store == "empty":
        env["DGTRACES_DATA"] = str(tmp_path / "data")
    mods = set(loaded_after(cli("predict", "--model", "resnet50", "--device", "v100",
                                "--batch-size", "64", "--workers", "8", "--gpus-per-node",
                                "4", "--intra", "nvlink2", "--inter", "10gbe"), env))
    assert {"dgtraces.comm.links", "dgtraces.predict.dag"} <= mods  # it did predict
    assert sorted(m for m in NOT_ON_PREDICT if m in mods) == []


def test_sql_cli_imports_no_pandas_or_validator(tmp_path):
    mods = set(loaded_after(cli("sql", "select count(*) from layers"),
                            {"DGTRACES_CACHE": str(tmp_path / "cache")}))
    assert {"duckdb", "dgtraces.query.sandbox"} <= mods
    assert sorted(m for m in NOT_ON_SQL if m in mods) == []
    from dgtraces.cli.grid import RICH_TERMINAL_ENV

    if not any(k in os.environ for k in RICH_TERMINAL_ENV):  # piped: the plain grid
        assert "rich" not in mods


@pytest.mark.parametrize("use_store", [False, True])
def test_links_read_without_pandera_equal_the_validated_table(use_store):
    """The predictor reads ``links.csv`` (and the release's comm_fits rows) without running
    the schema on every call; the schema runs here: the same links, value for value."""
    from dgtraces.comm.links import Link, _links_rows, known_links, links_frame

    checked = links_frame("latest", use_store=use_store)  # raises ValidationError if bad
    assert len(checked) == len(_links_rows("latest", use_store)) >= 20
    links = known_links("latest", use_store)
    for r in checked.to_dict("records"):
        assert links[r["link"]] == Link(r["link"], pytest.approx(r["alpha_us"], rel=1e-12),
                                        pytest.approx(r["bandwidth_gb_s"], rel=1e-12),
                                        r["provenance"], r["source"])


def test_release_tables_read_without_pyarrow_dataset_equal_the_dataset():
    """``Release.table`` reads shards with pyarrow.parquet; the frames are the dataset's,
    for every table and for column subsets in any order; unknown or repeated columns go
    through the dataset (its error, its duplicate columns)."""
    import pandas as pd
    import pyarrow as pa

    from dgtraces.store.release import Release

    rel = Release.open()
    assert max(len(rel.files(t)) for t in rel.table_names) >= 2  # several shards are joined
    for name in rel.table_names:
        names = list(rel.entries[name]["columns"])
        for columns in (None, names[:2][::-1], names[-1:]):
            pd.testing.assert_frame_equal(
                rel.table(name, columns),
                rel.dataset(name).to_table(columns=columns).to_pandas(), check_exact=True)
    cols = list(rel.table("runs").columns)
    assert list(rel.table("runs", [cols[0], cols[0]]).columns) == [cols[0], cols[0]]
    with pytest.raises(pa.ArrowInvalid):
        rel.table("runs", ["no_such_column"])


def test_runs_row_columns_are_the_schema_columns():
    """runrow declares the runs columns as plain data (no pandera on the predict path);
    they must stay the schema's columns in its order."""
    from dgtraces.tables.runrow import RUNS_COLUMNS
    from dgtraces.tables.schema import TABLES

    assert list(RUNS_COLUMNS) == list(TABLES["runs"].to_schema().columns)
