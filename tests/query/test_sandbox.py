"""SQL sandbox attacks (issue #14 items 1-3): every statement kind that could write, execute
or read files outside the release, in spellings, cases and comments, through `sql`, the CLI
and a raw connection; runaway queries hit typed limits. Each attempt is tallied."""

import hashlib

import duckdb
import pytest
from click.testing import CliRunner

import dgtraces
from dgtraces.cli import main
from dgtraces.query.engine import Query, SqlError, sql
from tests.attack_tally import record

ATTACKS = {
    "import/export database": [
        "IMPORT DATABASE '{out}/dump'",
        "import database '{out}/dump'",
        "/* comment */ IMPORT\nDATABASE '{out}/dump'",
        "-- line\nImPoRt DaTaBaSe '{out}/dump'",
        "EXPORT DATABASE '{out}/export'",
        "export database '{out}/export' (FORMAT parquet)",
        "COPY FROM DATABASE memory TO other",
        "SELECT 1; IMPORT DATABASE '{out}/dump'",
    ],
    "copy to/from files": [
        "COPY layers TO '{out}/copy.csv'",
        "copy (select 1) to '{root}/releases/v0.2.0/x.parquet' (format parquet)",
        "COPY (SELECT 'x' AS run_id) TO '{runs}' (FORMAT parquet, USE_TMP_FILE "
        "false)",
        "COPY layers FROM '{out}/outside.csv'",
        "SELECT 1; COPY layers TO '{out}/copy.csv'",
        "EXPLAIN ANALYZE COPY (SELECT 1) TO '{out}/x.csv'",
        "EXPLAIN (ANALYZE) COPY (SELECT 1) TO '{runs}'",
        "EXPLAIN /* c */ ANALYZE /* c */ COPY layers TO '{out}/x.csv'",
        "EXPLAIN ANALYZE EXPLAIN ANALYZE COPY (SELECT 1) TO '{out}/x.csv'",
        "EXPLAIN ANALYZE IMPORT DATABASE '{out}/dump'",
    ],
    "attach/detach/use": [
        "ATTACH '{out}/attached.duckdb' AS other",
        "attach ':memory:' as m",
        "ATTACH '{runs}' AS r",
        "DETACH memory",
        "USE memory",
    ],
    "extensions install/load": [
        "INSTALL httpfs", "LOAD httpfs", "FORCE INSTALL httpfs", "load '{out}/x.duckdb_extension'",
        "UPDATE EXTENSIONS",
    ],
    "settings set/reset/pragma": [
        "SET threads = 1", "set enable_external_access = true", "SET allowed_paths = ['/']",
        "RESET lock_configuration", "PRAGMA threads = 1", "SET GLOBAL memory_limit = '1GB'",
        "SET temp_directory = '{out}'", "SET VARIABLE v = 1", "PRAGMA enable_profiling",
        "SET profiling_output = '{out}/p.json'", "SELECT * FROM enable_logging("
        "storage='file', storage_path='{out}/log')",
    ],
    "pragma/call statements": [
        "PRAGMA table_info('layers')", "pragma show_tables", "CALL pragma_version()",
        "CHECKPOINT", "call enable_logging(storage='file', storage_path='{out}/log')",
    ],
    "catalog writes (create/macro/secret)": [
        "CREATE TABLE t AS SELECT 1", "CREATE MACRO m(x) AS x",
        "create or replace view layers as select 1", "CREATE TEMP MACRO t() AS TABLE SELECT 1",
        "CREATE SECRET (TYPE s3, KEY_ID 'a', SECRET 'b')",
        "CREATE PERSISTENT SECRET s (TYPE s3)", "DROP VIEW layers",
        "INSERT INTO layers SELECT * FROM layers", "UPDATE runs SET flagged = true",
        "DELETE FROM runs", "ALTER VIEW layers RENAME TO x", "PREPARE p AS SELECT 1",
        "BEGIN", "VACUUM", "ANALYZE",
        "MERGE INTO runs USING runs AS s ON true WHEN MATCHED THEN DELETE",
    ],
    "file reads outside the release": [
        "SELECT * FROM read_csv('{out}/outside.csv')",
        "select * from READ_CSV_AUTO('{out}/outside.csv')",
        "SELECT * FROM '{out}/outside.csv'",
        "SELECT * FROM read_text('{out}/outside.csv')",
        "SELECT * FROM read_blob('/etc/passwd')",
        "SELECT * FROM read_text('/proc/self/environ')",
        "SELECT * FROM read_json('{rel}/manifest.json')",
        "SELECT * FROM read_parquet('{layers}')",
        "SELECT * FROM parquet_scan('{layers}')",
        "SELECT * FROM parquet_metadata('{layers}')",
        "SELECT * FROM sniff_csv('{out}/outside.csv')",
        "SELECT * FROM read_ndjson('{out}/x.json')",
        "SELECT * FROM read_parquet('https://example.com/x.parquet')",
        "SELECT * FROM glob('{root}/*')", "SELECT * FROM glob('*')",
        "SELECT * FROM glob('/proc/self/fd/*')",
        "WITH x AS (SELECT * FROM read_csv('{out}/outside.csv')) SELECT * FROM x",
    ],
    "temp directory reads (.tmp)": [
        "SELECT * FROM read_csv('.tmp/x.csv')", "SELECT * FROM glob('.tmp/*')",
        "SELECT * FROM read_text('.tmp/x.csv')", "FROM '.tmp/x.csv'",
    ],
}
CASES = [(cls, q) for cls, qs in ATTACKS.items() for q in qs]


def tree_hash(*roots) -> str:
    h = hashlib.sha256()
    for root in roots:
        for p in sorted(root.rglob("*")):
            h.update(str(p).encode())
            if p.is_file():
                h.update(p.read_bytes())
    return h.hexdigest()


@pytest.fixture
def arena(mini_store, tmp_path, monkeypatch):
    """An outside folder with a CSV, and a working directory with DuckDB's default `.tmp`."""
    from dgtraces.store import release

    files = release.table_files("0.2.0", mini_store)  # the shards the views read
    (runs,), (layers,) = files["runs"], files["layers"]
    out = tmp_path / "outside"
    (out / "dump").mkdir(parents=True)
    (out / "outside.csv").write_text("a,b\n1,2\n")
    (out / "x.json").write_text('{"a": 1}\n')
    (out / "dump" / "schema.sql").write_text("CREATE TABLE pwned(a INT);\n")
    (out / "dump" / "load.sql").write_text(
        f"COPY (SELECT 1 AS a) TO '{runs}' (FORMAT parquet);\n")
    cwd = tmp_path / "cwd"
    (cwd / ".tmp").mkdir(parents=True)
    (cwd / ".tmp" / "x.csv").write_text("secret\n42\n")
    monkeypatch.chdir(cwd)
    return {"out": out, "root": mini_store, "rel": mini_store / "releases" / "v0.2.0",
            "cwd": cwd, "runs": runs, "layers": layers}


@pytest.mark.parametrize("cls,template", CASES)
def test_statement_guard_refuses_and_changes_nothing(arena, cls, template):
    query = template.format(**arena)
    before = tree_hash(arena["root"], arena["out"], arena["cwd"])
    refused = False
    try:
        sql(query)
    except SqlError as exc:
        refused = exc.code == "SQL"
    record(cls, refused and tree_hash(arena["root"], arena["out"], arena["cwd"]) == before)
    assert refused, query
    assert tree_hash(arena["root"], arena["out"], arena["cwd"]) == before


FILE_CLASSES = ("file reads outside the release", "temp directory reads (.tmp)",
                "import/export database", "attach/detach/use", "extensions install/load")


@pytest.mark.parametrize("cls,template", [c for c in CASES if c[0] in FILE_CLASSES
                                          and "IMPORT" not in c[1].upper()
                                          and "USE " not in c[1] and "DETACH" not in c[1]
                                          and ":memory:" not in c[1]
                                          and "COPY FROM" not in c[1]])
def test_raw_connection_cannot_touch_other_files(arena, cls, template):
    """No statement guard: the file sandbox alone refuses (DuckDB's Permission/IO errors)."""
    query = template.format(**arena)
    before = tree_hash(arena["root"], arena["out"], arena["cwd"])
    con = dgtraces.connect()
    try:
        with pytest.raises(duckdb.Error):
            con.execute(query).fetchall()
        assert con.execute("SELECT count(*) FROM layers").fetchone()[0] == 23
    finally:
        con.close()
    record("raw connection: " + cls, tree_hash(arena["root"], arena["out"], arena["cwd"])
           == before)
    assert tree_hash(arena["root"], arena["out"], arena["cwd"]) == before


@pytest.mark.parametrize("options", ["(FORMAT parquet, USE_TMP_FILE false)",
                                     "(FORMAT csv, USE_TMP_FILE false)", "(FORMAT parquet)",
                                     "(FORMAT json, OVERWRITE true)"])
def test_raw_connection_has_no_writable_path(arena, options):
    """Even the paths DuckDB may open (the private copies of the release files) refuse
    writes: COPY ... TO them fails and the release is unchanged."""
    before = tree_hash(arena["root"])
    con = dgtraces.connect()
    try:
        paths = [r[0] for r in con.execute(
            "SELECT DISTINCT regexp_extract(sql, '''(.*)''', 1) FROM duckdb_views() "
            "WHERE NOT internal").fetchall()]
        assert paths and all(p.startswith("/proc/self/fd/") for p in paths)
        for p in paths:
            with pytest.raises(duckdb.Error):
                con.execute(f"COPY (SELECT 1 AS a) TO '{p}' {options}")
        assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == 2
    finally:
        con.close()
    ok = tree_hash(arena["root"]) == before
    record("raw connection: write to readable paths", ok)
    assert ok


def test_unknown_statement_type_is_refused_not_a_traceback(arena):
    # duckdb's parser knows UPDATE EXTENSIONS but its Python enum cannot name it
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "dgtraces", "sql", "UPDATE EXTENSIONS"],
                         capture_output=True, text=True)
    assert out.returncode == 1 and "[SQL]" in out.stderr and "Traceback" not in out.stderr


def test_reads_still_work(mini_store, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for q in ("SHOW TABLES", "DESCRIBE layers", "SUMMARIZE runs", "FROM layers LIMIT 1",
              "VALUES (1)", "PIVOT layers ON kind USING count(*)",
              "SELECT * FROM pragma_table_info('layers')", "EXPLAIN SELECT 1",
              "EXPLAIN ANALYZE SELECT count(*) FROM layers",
              "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < 5) "
              "SELECT max(i) FROM r"):
        assert sql(q).rows, q
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no .tmp or other file made


RUNAWAY = {
    "range(1e12)": "SELECT count(*) FROM range(1000000000000) t(i) WHERE i % 7 = 3",
    "unbounded recursive CTE": "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) "
                               "SELECT count(*) FROM r",
    "large cross join": "SELECT count(*) FROM range(100000000) a, range(100000) b "
                        "WHERE a.range + b.range = -1",
}


@pytest.mark.parametrize("name", sorted(RUNAWAY))
def test_runaway_queries_stop_with_query_limit(mini_store, name):
    with pytest.raises(SqlError) as exc:
        sql(RUNAWAY[name], timeout_s=0.5)
    record("runaway query (time)", exc.value.code == "QUERY_LIMIT")
    assert exc.value.code == "QUERY_LIMIT"


def test_memory_limit_is_typed_and_streaming_is_timed(mini_store, tmp_path):
    with pytest.raises(SqlError) as exc:
        sql("SELECT list(range) FROM range(200000000)", memory_limit_mib=64)
    record("runaway query (memory)", exc.value.code == "QUERY_LIMIT")
    assert exc.value.code == "QUERY_LIMIT"
    with Query("SELECT range FROM range(1000000000000)", timeout_s=0.5) as q:
        with pytest.raises(SqlError) as exc:
            for _ in q.batches(1000):
                pass
    assert exc.value.code == "QUERY_LIMIT"
    res = CliRunner().invoke(main, ["sql", RUNAWAY["range(1e12)"], "--timeout-s", "0.5"])
    assert isinstance(res.exception, SqlError) and res.exception.code == "QUERY_LIMIT"
    res = CliRunner().invoke(main, ["sql", "SELECT 42", "--timeout-s", "0",
                                    "--memory-limit-mib", "4096"])
    assert res.exit_code == 2
    for bad in ({"timeout_s": 0}, {"timeout_s": float("nan")}, {"memory_limit_mib": 8},
                {"memory_limit_mib": 100.5}, {"timeout_s": True}):
        with pytest.raises(dgtraces.errors.DgtracesError) as exc:
            sql("SELECT 1", **bad)
        assert exc.value.code == "BAD_INPUT", bad


def test_ctrl_c_is_a_clean_message(mini_store):
    import subprocess
    import sys

    code = ("import dgtraces.query as q\n"
            "def boom(self, fn):\n    raise KeyboardInterrupt\n"
            "q.Query._timed = boom\n"
            "import sys; sys.argv = ['dgtraces', 'sql', 'SELECT 1']\n"
            "from dgtraces.cli import run; run()\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 130 and "interrupted" in out.stderr
    assert "Traceback" not in out.stderr
