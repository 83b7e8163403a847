"""Wide files are refused before they are parsed (issue #36 item 2).

The cell bound (rows x columns) let 1 row x 1,000,000 columns through: `contribute
--dry-run` on a 7.9 MB runs.csv reached 2.6 GB and a MemoryError, and `validate` of a 4 MB
header-only kernels.csv ran past 300 s. A CSV header is now counted over its whole line,
1 MiB at a time, and a Parquet footer's schema length read from its first bytes, each
against the table's columns plus a small margin (`tables.checks.column_cap`). The tests
count the bytes read instead of timing anything.
"""

import builtins

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dgtraces.contribute import contribute
from dgtraces.contribute.files import validate_files
from dgtraces.errors import DgtracesError
from dgtraces.io import bounded
from dgtraces.io.parquet_pages import footer_schema_length
from dgtraces.tables.checks import EXTRA_COLUMNS, column_cap
from tests.attack_tally import refused
from tests.contribute.test_contribute import tree_digest, variant, write_contrib

WIDE = 1_000_000


def wide_csv(path, columns=WIDE, rows=1):
    header = ",".join(f"c{i}" for i in range(columns))
    body = "".join(",".join("1" for _ in range(columns)) + "\n" for _ in range(rows))
    path.write_text(header + "\n" + body, encoding="utf-8")
    return path


class ReadCounter:
    """Counts the bytes the bounded reader reads from files (its own ``open``)."""

    def __init__(self, monkeypatch):
        self.bytes = 0
        counter = self

        class Counted:
            def __init__(self, fh):
                self.fh = fh

            def read(self, *a):
                data = self.fh.read(*a)
                counter.bytes += len(data)
                return data

            def readline(self, *a):
                data = self.fh.readline(*a)
                counter.bytes += len(data)
                return data

            def __getattr__(self, name):
                return getattr(self.fh, name)

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                self.fh.close()

        monkeypatch.setattr(bounded, "open", lambda *a, **k: Counted(builtins.open(*a, **k)),
                            raising=False)


def _refused(call, cls):
    return refused(call, "BAD_FILE", cls)


def test_contribute_dry_run_refuses_a_million_column_runs_csv_reading_1_mib(
        store, tmp_path, monkeypatch):
    runs, lt = variant()
    folder = write_contrib(tmp_path / "c", runs, lt)
    path = wide_csv(folder / "runs.csv")
    assert path.stat().st_size > 6 << 20
    counter = ReadCounter(monkeypatch)
    before = tree_digest(store)
    err = _refused(lambda: contribute(folder, root=store, dry_run=True), "wide CSV header")
    assert err.failures[0].expected == f"<= {column_cap('runs')}"
    assert 0 < counter.bytes <= 2 << 20  # the header's first MiB and the other table
    assert tree_digest(store) == before


def test_validate_refuses_a_header_only_kernels_csv(tmp_path, monkeypatch):
    path = tmp_path / "kernels.csv"
    path.write_text(",".join(f"column_{i}" for i in range(WIDE)), encoding="utf-8")
    counter = ReadCounter(monkeypatch)
    _refused(lambda: validate_files([path], use_store=False), "wide CSV header")
    assert 0 < counter.bytes <= 1 << 20


def test_streamed_layer_timings_csv_is_capped_too(store, tmp_path, monkeypatch):
    runs, lt = variant()
    folder = write_contrib(tmp_path / "c", runs, lt)
    path = wide_csv(folder / "layer_timings.csv", columns=300_000, rows=2)
    assert path.stat().st_size > 3 << 20
    counter = ReadCounter(monkeypatch)
    _refused(lambda: contribute(folder, root=store, dry_run=True), "wide CSV header")
    assert counter.bytes <= 3 << 19


@pytest.mark.parametrize("table", ["runs", "layer_timings"])
def test_wide_parquet_is_refused_before_its_footer_is_parsed(store, tmp_path, monkeypatch,
                                                            table):
    runs, lt = variant()
    folder = write_contrib(tmp_path / "c", runs, lt, fmt="parquet")
    path = folder / f"{table}.parquet"
    pq.write_table(pa.table({f"c{i}": [1] for i in range(2_000)}), path)
    assert footer_schema_length(path) == 2_001

    def parsed(*a, **k):
        raise AssertionError("the footer was parsed")

    monkeypatch.setattr(pq, "ParquetFile", parsed)
    _refused(lambda: contribute(folder, root=store, dry_run=True), "wide Parquet footer")


def test_link_fit_tables_are_capped(tmp_path, monkeypatch):
    from dgtraces.comm.linkfit import link_from_fit

    path = wide_csv(tmp_path / "comm_fits.csv", columns=WIDE)
    counter = ReadCounter(monkeypatch)
    _refused(lambda: link_from_fit(str(path), None), "wide CSV header")
    assert counter.bytes <= 1 << 20
    wide = tmp_path / "comm.parquet"
    pq.write_table(pa.table({f"c{i}": [1.0] for i in range(500)}), wide)
    _refused(lambda: link_from_fit(str(wide), None), "wide Parquet footer")


def test_the_header_count_is_exact_and_quote_aware(tmp_path):
    path = tmp_path / "t.csv"
    path.write_bytes(b'a,"b,c",d\r\n1,2,3\n4,5,6\n')
    assert bounded.csv_shape(path) == (2, 3)
    cap = column_cap("runs")
    wide_csv(path, columns=cap, rows=3)
    assert bounded.csv_lines(path, cap)[:2] == (3, cap)  # at the cap: read
    wide_csv(path, columns=cap + 1, rows=3)
    with pytest.raises(DgtracesError) as exc:
        bounded.csv_lines(path, cap)
    assert exc.value.code == "BAD_FILE"
    path.write_bytes(b"a,b\rc,d\r")  # CR-only line ends stay refused (#29)
    with pytest.raises(DgtracesError):
        bounded.csv_lines(path)
    path.write_bytes(b"")
    assert bounded.csv_shape(path) == (0, 0)
    assert cap == len(variant()[0].columns) + EXTRA_COLUMNS
