import hashlib
import json
import re
import subprocess
import sys

import duckdb
import pandas as pd
import pytest
from click.testing import CliRunner

import dgtraces
from dgtraces.cli import main
from dgtraces.models import layers_frame
from dgtraces.query.engine import SqlError, sql


def records(df: pd.DataFrame) -> list[tuple]:
    """Rows as tuples with None for every kind of missing value (dtype-independent)."""
    return [tuple(None if pd.isna(v) else v for v in row)
            for row in df.astype(object).itertuples(index=False)]


def tree_hash(root) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        h.update(str(p.relative_to(root)).encode())
        if p.is_file():
            h.update(p.read_bytes())
    return h.hexdigest()


def test_connect_views_equal_load_for_every_table(mini_store):
    con = dgtraces.connect()
    try:
        views = {r[0] for r in con.execute("SHOW TABLES").fetchall()}
        assert views == {"layers", "runs", "layer_timings", "iterations", "comm", "comm_fits",
                         "devices", "links"}
        for table in sorted(views):
            got = con.execute(f"SELECT * FROM {table}").df()
            want = dgtraces.load(table)
            assert list(got.columns) == list(want.columns)
            assert records(got) == records(want), table
    finally:
        con.close()


def test_release_selection(mini_store):
    assert sql("SHOW TABLES").version == "0.2.0"
    old = sql("SHOW TABLES", version="0.1.0")
    assert old.version == "0.1.0" and old.rows == [("layers",)]
    with pytest.raises(dgtraces.errors.StoreError) as exc:
        sql("SELECT 1", version="9.9.9")
    assert exc.value.code == "NOT_FOUND"


def test_join_comm_compute_ratio_and_gradient_bytes(mini_store):
    got = sql("""
        SELECT r.model, r.provenance,
               sum(t.comm_ms) / sum(t.fwd_ms + t.bwd_ms) AS comm_compute,
               sum(l.grad_bytes) AS grad_bytes
        FROM layer_timings t
        JOIN runs r USING (run_id)
        JOIN layers l ON l.model = r.model AND l.layer = t.layer
        WHERE t.comm_ms IS NOT NULL
        GROUP BY ALL ORDER BY ALL""")
    assert got.columns == ["model", "provenance", "comm_compute", "grad_bytes"]
    # Fixture: p1 has comm 2*f and fwd/bwd 0.25*f / 0.5*f for f in (4, 2, 1).
    lf = layers_frame("alexnet").set_index("layer")
    grad = int(lf.loc[["conv1", "fc6", "fc7"], "grad_bytes"].sum())
    assert len(got.rows) == 1
    model, prov, ratio, gbytes = got.rows[0]
    assert (model, prov, int(gbytes)) == ("alexnet", "published", grad)
    assert ratio == pytest.approx(14.0 / 5.25)


def test_limit_flags_truncation(mini_store):
    res = sql("SELECT layer FROM layers ORDER BY layer_idx", limit=3)
    assert res.truncated and [r[0] for r in res.rows] == ["conv1", "relu1", "norm1"]
    assert not sql("SELECT 1", limit=3).truncated


@pytest.fixture
def outside(tmp_path):
    f = tmp_path / "outside.csv"
    f.write_text("a,b\n1,2\n")
    return tmp_path


REFUSED = [
    "SELECT * FROM read_csv('{out}/outside.csv')",
    "SELECT * FROM read_text('{out}/outside.csv')",
    "SELECT * FROM read_parquet('{root}/releases/v0.1.0/layers.parquet')",  # other release
    "SELECT * FROM read_json('{root}/releases/v0.2.0/manifest.json')",  # not a table file
    "SELECT * FROM glob('{root}/*')",
    "COPY layers TO '{out}/copy.csv'",
    "COPY (SELECT 1) TO '{root}/releases/v0.2.0/x.parquet' (FORMAT parquet)",
    "EXPORT DATABASE '{out}/export'",
    "ATTACH '{out}/attached.duckdb' AS other",
    "INSTALL httpfs",
    "LOAD httpfs",
    "SELECT * FROM read_parquet('https://example.com/x.parquet')",
    "SET threads = 1",
    "SET enable_external_access = true",
    "SET allowed_paths = ['/']",
    "RESET lock_configuration",
    "PRAGMA threads = 1",
    "SET GLOBAL memory_limit = '1GB'",
    "CREATE TABLE t AS SELECT 1",
    "DROP VIEW layers",
    "INSERT INTO layers SELECT * FROM layers",
    # EXPLAIN ANALYZE runs what it explains; the release's own files are writable to DuckDB
    "EXPLAIN ANALYZE COPY (SELECT 'x' AS run_id) TO '{root}/releases/v0.2.0/runs.parquet' "
    "(FORMAT parquet, USE_TMP_FILE false)",
    "EXPLAIN (ANALYZE) COPY (SELECT 1) TO '{root}/releases/v0.2.0/runs.parquet'",
    "EXPLAIN /* c */ ANALYZE /* c */ INSERT INTO layers SELECT * FROM layers",
    "EXPLAIN ANALYZE EXPLAIN ANALYZE COPY (SELECT 1) TO '{out}/x.csv'",
]
GUARD_ONLY = ("CREATE", "DROP", "INSERT", "EXPLAIN")  # refused by the statement guard alone


@pytest.mark.parametrize("template", REFUSED)
def test_sandbox_refuses_and_changes_nothing(mini_store, outside, template):
    query = template.format(out=outside, root=mini_store)
    before = tree_hash(mini_store), sorted(p.name for p in outside.iterdir())
    with pytest.raises(SqlError) as exc:
        sql(query)
    assert exc.value.code == "SQL"
    assert (tree_hash(mini_store), sorted(p.name for p in outside.iterdir())) == before


# Everything that touches files or settings, sent straight to DuckDB (no statement guard).
FILE_OR_CONFIG = [t for t in REFUSED if not t.startswith(GUARD_ONLY)]


@pytest.mark.parametrize("template", FILE_OR_CONFIG)
def test_raw_connection_sandbox_refuses(mini_store, outside, template):
    query = template.format(out=outside, root=mini_store)
    before = tree_hash(mini_store), sorted(p.name for p in outside.iterdir())
    con = dgtraces.connect()
    try:
        with pytest.raises((duckdb.PermissionException, duckdb.InvalidInputException)):
            con.execute(query)
        assert con.execute("SELECT count(*) FROM layers").fetchone()[0] == 23  # still usable
    finally:
        con.close()
    assert (tree_hash(mini_store), sorted(p.name for p in outside.iterdir())) == before


def test_bad_sql_exit_1_with_position_no_traceback(mini_store):
    for query, expect in (("SELEC 1", "SELEC"), ("SELECT * FROM layerz", "layerz")):
        out = subprocess.run([sys.executable, "-m", "dgtraces", "sql", query],
                             capture_output=True, text=True)
        assert out.returncode == 1, out
        assert "[SQL]" in out.stderr and "LINE 1:" in out.stderr and "^" in out.stderr
        assert expect in out.stderr and "Traceback" not in out.stderr


def test_cli_formats(mini_store, tmp_path):
    q = "SELECT run_id, layer, fwd_ms, comm_ms FROM layer_timings ORDER BY run_id, layer"
    want = records(dgtraces.load("layer_timings").sort_values(["run_id", "layer"])
                   [["run_id", "layer", "fwd_ms", "comm_ms"]])
    res = CliRunner().invoke(main, ["sql", q, "--format", "csv"])
    assert res.exit_code == 0, res.output
    lines = res.output.strip().splitlines()
    assert lines[0] == "run_id,layer,fwd_ms,comm_ms" and len(lines) == 7
    assert lines[1] == "m1,conv1,4.0,"
    res = CliRunner().invoke(main, ["sql", q, "--format", "json", "--out",
                                    str(tmp_path / "r.json")])
    assert res.exit_code == 0
    rows = json.loads((tmp_path / "r.json").read_text())
    assert [tuple(r.values()) for r in rows] == want
    res = CliRunner().invoke(main, ["sql", q, "--format", "parquet", "--out",
                                    str(tmp_path / "r.parquet")])
    assert res.exit_code == 0
    assert records(pd.read_parquet(tmp_path / "r.parquet")) == want
    res = CliRunner().invoke(main, ["sql", "SELECT model, count(*) AS n FROM layers GROUP BY 1"])
    assert res.exit_code == 0 and "alexnet" in res.output and "23" in res.output
    res = CliRunner().invoke(main, ["sql", q, "--format", "parquet"])
    assert res.exit_code == 2  # parquet needs --out


NO_HEAVY = """
import json, sys
from dgtraces.cli import main
main.main(["sql", "SELECT count(*) AS n FROM layer_timings"], standalone_mode=False)
sys.stderr.write(json.dumps(sorted(set(sys.modules) & {"pandas", "pandera", "pyarrow", "torch",
                                                       "datasets", "numpy"})))
"""


def test_sql_table_path_imports_no_pandas(mini_store):
    out = subprocess.run([sys.executable, "-c", NO_HEAVY], capture_output=True, text=True,
                         check=True)
    assert json.loads(out.stderr) == []
    assert re.search(r"│\s*6\s*│", out.stdout)  # the rich table cell with the count


def test_explain_of_reads_still_works(mini_store):
    for q in ("EXPLAIN SELECT count(*) FROM layers", "EXPLAIN ANALYZE SELECT count(*) FROM layers",
              "EXPLAIN (FORMAT json) SELECT 1", "EXPLAIN ANALYZE (SELECT 1)"):
        assert sql(q).rows, q


def test_limits_and_query_types_are_checked(mini_store):
    from dgtraces.query.engine import Query

    assert sql("SELECT * FROM layers", limit=0).truncated
    for bad in (-1, 2.5, True, 10 ** 20):
        with pytest.raises(dgtraces.errors.DgtracesError) as exc:
            sql("SELECT * FROM layers", limit=bad)
        assert exc.value.code == "BAD_INPUT", bad
    with pytest.raises(dgtraces.errors.DgtracesError) as exc:
        sql(5)
    assert exc.value.code == "BAD_INPUT"
    with Query("SELECT 1") as q, pytest.raises(dgtraces.errors.DgtracesError) as exc:
        q.arrow_batches(0)
    assert exc.value.code == "BAD_INPUT"
