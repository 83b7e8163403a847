"""The SQL memory limit holds for lists and strings too (issue #29 M4): DuckDB's
memory_limit does not cover a list or string built inside one vector, so while a query
runs and its rows are fetched the process's data size is capped (dgtraces.memcap)."""

import resource

import pytest

from dgtraces.errors import DgtracesError
from dgtraces.query import Query, sql
from tests.attack_tally import record

HUGE = [
    "SELECT len(range(700000000))",
    "SELECT length(repeat('x', 1500000000))",
    "SELECT len(list_resize([1], 700000000))",
    "SELECT length(string_agg(repeat('x', 1000000), '')) FROM range(3000)",
    "SELECT len(string_split(repeat('a,', 400000000), ','))",
    "SELECT repeat('x', 100000000) FROM range(40)",  # fetched into Python
]


@pytest.mark.parametrize("query", HUGE)
def test_lists_and_strings_past_the_limit_are_query_limit(mini_store, query):
    before = resource.getrlimit(resource.RLIMIT_DATA)
    with pytest.raises(DgtracesError) as exc:
        sql(query, memory_limit_mib=256)
    record("runaway query (memory, lists/strings)", exc.value.code == "QUERY_LIMIT")
    assert exc.value.code == "QUERY_LIMIT", exc.value
    assert resource.getrlimit(resource.RLIMIT_DATA) == before  # the cap is lifted again
    assert sql("SELECT 42 AS x").rows == [(42,)]


def test_streamed_batches_are_capped_too(mini_store):
    with Query("SELECT range(700000000) AS r", memory_limit_mib=256) as q:
        with pytest.raises(DgtracesError) as exc:
            _, batches = q.arrow_batches(10)
            list(batches)
    record("runaway query (memory, lists/strings)", exc.value.code == "QUERY_LIMIT")
    assert exc.value.code == "QUERY_LIMIT"


def test_queries_within_the_limit_still_run(mini_store):
    res = sql("SELECT len(range(1000000)) AS n, length(repeat('x', 10000000)) AS s",
              memory_limit_mib=256)
    assert res.rows == [(1_000_000, 10_000_000)]
