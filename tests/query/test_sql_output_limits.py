"""`dgtraces sql`: the time limit covers rendering, and a shard is not copied into memory
when its size differs from the manifest's (issue #29 lows)."""

import os
import time

import pytest
from click.testing import CliRunner

from dgtraces.cli import main
from dgtraces.cli.query import MAX_CELL_CHARS
from dgtraces.errors import DgtracesError
from dgtraces.query import Query, sandbox
from dgtraces.store import integrity
from dgtraces.store import manifest as store
from tests.attack_tally import record
from tests.store.test_read_integrity import own_store  # noqa: F401 (a private copy: a shard changes)


@pytest.mark.parametrize("query", ["SELECT repeat('x', 200000000) AS s",
                                   "SELECT repeat('ab', 5000000) AS s FROM range(30)",
                                   "SELECT range(3000000) AS r"])
def test_rendering_huge_values_stays_quick(mini_store, query):
    t0 = time.monotonic()
    res = CliRunner().invoke(main, ["sql", query, "--timeout-s", "20"])
    took = time.monotonic() - t0
    ok = res.exit_code == 0 and "more chars]" in res.output and took < 20
    record("runaway query (rendering)", ok)
    assert ok, (res.exit_code, took, res.output[-300:])
    assert max(len(line) for line in res.output.splitlines()) < 3 * MAX_CELL_CHARS


def test_the_time_limit_covers_work_on_the_result(mini_store):
    with Query("SELECT 1 AS x", timeout_s=0.05) as q:
        q.fetch()
        time.sleep(0.1)  # as a slow rendering would
        with pytest.raises(DgtracesError) as exc:
            q.check_time()
    record("runaway query (rendering)", exc.value.code == "QUERY_LIMIT")
    assert exc.value.code == "QUERY_LIMIT"


@pytest.mark.usefixtures("own_store")
@pytest.mark.parametrize("grow", [1, 50 << 20])
def test_a_shard_larger_than_its_manifest_entry_is_not_copied(grow):
    entries = store.read_manifest()["tables"]
    path, want = store.entry_files(store.release_path(), "runs", entries["runs"])[0]
    with open(path, "ab") as fh:
        fh.write(b"\0" * grow)
    fd, failure = sandbox._sealed_copy("runs", path, want)
    try:
        copied = os.fstat(fd).st_size
    finally:
        os.close(fd)
    ok = failure is not None and failure.code == "INTEGRITY" and copied == 0
    record("oversized shard copied before its size check", ok)
    assert ok, (failure, copied)
    integrity.forget()
    with pytest.raises(DgtracesError) as exc:
        CliRunner().invoke(main, ["sql", "SELECT 1"], catch_exceptions=False)
    assert exc.value.code == "INTEGRITY"


@pytest.mark.parametrize("table", ["runs", "layers"])
def test_a_cursor_outliving_its_connection_sees_no_views(mini_store, table):
    """issue #29 low: a cursor shares the database; the views read /proc/self/fd/N, which
    another connection's private copy could reuse once the first connection is collected.
    The views are temporary to their connection: a cursor sees none, before or after."""
    import gc

    import duckdb

    import dgtraces

    con = dgtraces.connect("0.2.0")
    cur = con.cursor()
    refused = []
    with pytest.raises(duckdb.CatalogException):
        cur.execute(f"SELECT count(*) FROM {table}").fetchall()
    refused.append(True)
    del con
    gc.collect()
    other = dgtraces.connect("0.1.0")  # reuses the freed descriptor numbers
    try:
        with pytest.raises(duckdb.CatalogException):
            cur.execute(f"SELECT count(*) FROM {table}").fetchall()
        refused.append(True)
        assert other.execute("SELECT count(*) FROM layers").fetchone()[0] > 0
    finally:
        other.close()
    record("stale cursor reading reused descriptors", refused == [True, True])
