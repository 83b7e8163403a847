"""Validating a streamed table (``layer_timings``) in chunks: memory is one chunk, not the
table.

Two passes over the file, neither of which holds the table:

1. **Spool** (file order): the file is read ``chunk_rows`` rows at a time (CSV through
   :func:`dgtraces.tables.checks.csv_chunks`, Parquet through
   :func:`dgtraces.io.bounded.iter_parquet`, both within the contribution's limits); each
   chunk is validated as a whole table would be (strict cells, the pandera schema, every
   declared foreign key against the already typed ``runs``, finite numbers, gradient sizes
   against the model structure) and its typed rows are appended, with their original row
   number, to a temp Parquet *spool*. A primary key repeated across chunks is found
   afterwards by one DuckDB query over a spool of every row's key columns (within a chunk,
   pandera finds it). Once schema or key failures refuse the contribution, the value checks
   are skipped (as for a whole table).

2. **Runs**: :func:`run_groups` yields chunks that hold whole runs, for the per-run checks
   (layer sums, coverage, throughput), the run fingerprints and the per-run digests. When
   pass 1 saw each run's rows together (:class:`RunOrder`; a collector writes run by run)
   the spool is read in file order; else DuckDB sorts it by run first (one thread,
   spilling to the temp folder past its memory limit).

Failures name the row of the contributed file (the spool carries it), and are capped per
reason code (:class:`Failures`). The spool, in file order, is what staging stores.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import Code, Failure

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np
    import pandas as pd

    from .intake import Limits

ROW = "__row"  # the row's 0-based position in the contributed file
MAX_PER_CODE = 1000  # failures listed per reason code; the rest are counted
STREAMED_READ = {"pre_buffer": False, "buffer_size": 1 << 20}  # see bounded._open_parquet
DUCKDB_MEMORY = "128MB"  # DuckDB's share (key repeats, sort by run); it spills beyond


@dataclass
class Failures:
    """Failures of a streamed validation: the first :data:`MAX_PER_CODE` per reason code
    (memory stays bounded however bad a file is), the others counted."""

    listed: list[Failure] = field(default_factory=list)
    more: dict[str, int] = field(default_factory=dict)
    per_code: dict[str, int] = field(default_factory=dict)

    def extend(self, failures) -> None:
        for f in failures:
            n = self.per_code.get(f.code, 0)
            self.per_code[f.code] = n + 1
            if n < MAX_PER_CODE:
                self.listed.append(f)
            else:
                self.more[f.code] = self.more.get(f.code, 0) + 1

    def all(self) -> list[Failure]:
        return self.listed + [Failure(code, f"{n} more {code} failures not listed")
                              for code, n in sorted(self.more.items())]


@dataclass
class Spool:
    """A streamed table's typed rows in file order, on disk."""

    table: str
    file: str  # the contributed file's name (failures name it)
    path: Path
    rows: int = 0
    chunks: int = 0
    chunk_rows: int = 100_000  # rows per chunk in either pass
    contiguous: bool = True  # each run's rows consecutive in the file (no sort needed)
    dtypes: dict = field(default_factory=dict)  # pandas dtypes of the typed columns
    schema: object = None  # its Arrow schema (ROW included)

    @property
    def keys_path(self) -> Path:
        """Every row's primary key as text, typed or not (for repeats across chunks)."""
        return self.path.with_name(f"{self.table}.keys.parquet")

    def write(self, dest: Path) -> None:
        """The typed rows (no row numbers) as Parquet at ``dest``, streamed, fsynced."""
        import os

        import pyarrow.parquet as pq

        schema = self.schema.remove(self.schema.get_field_index(ROW))  # type: ignore[attr-defined]
        with pq.ParquetWriter(dest, schema, compression="zstd") as writer:
            if self.rows:
                spooled = pq.ParquetFile(self.path, **STREAMED_READ)
                for batch in spooled.iter_batches(batch_size=1 << 17):
                    writer.write_batch(batch.drop_columns([ROW]))
        with open(dest, "rb+") as fh:
            os.fsync(fh.fileno())


def shifted(failures, file: str | None, rows) -> list[Failure]:
    """``failures`` with rows of ``file`` mapped to file rows: ``rows`` is an offset (int)
    or the file row of each position (array)."""
    out = []
    for f in failures:
        if f.row is not None and f.file == file:
            f = replace(f, row=int(f.row + rows if isinstance(rows, int) else rows[f.row]))
        out.append(f)
    return out


def raw_chunks(path: Path, table: str, limits: Limits) -> Iterator[pd.DataFrame]:
    """The contributed file in frames of ``limits.chunk_rows`` rows, read within the
    limits of a streamed table (BAD_FILE past them)."""
    from dgtraces.io import bounded
    from dgtraces.tables.checks import column_cap, csv_chunks

    from .intake import bad_file, check_cells

    if path.suffix.lower() == ".parquet":
        chunks = bounded.iter_parquet(path, limits.chunk_rows,
                                      max_rows=limits.max_stream_rows,
                                      max_bytes=limits.max_stream_file_bytes,
                                      max_group_bytes=limits.max_row_group_bytes,
                                      max_field_chars=limits.max_field_chars,
                                      max_batch_bytes=limits.max_chunk_bytes,
                                      max_columns=column_cap(table))
    else:  # rows per chunk so that a chunk's text stays within max_chunk_bytes
        longest = bounded.check_csv(path, limits.max_stream_rows, None, column_cap(table))
        rows = max(1, min(limits.chunk_rows, limits.max_chunk_bytes // max(longest, 1)))
        chunks = csv_chunks(path, table, rows)
    seen = 0
    for df in chunks:
        seen += len(df)
        if seen > limits.max_stream_rows:
            raise bad_file("too many rows", path.name, limits.max_stream_rows, seen)
        check_cells(df, path.name, limits)
        yield df


def _arrow_schema(df: pd.DataFrame):
    """Arrow schema of a typed chunk; an all-null text column is still text."""
    import pyarrow as pa

    schema = pa.Schema.from_pandas(df, preserve_index=False)
    for i, f in enumerate(schema):
        if pa.types.is_null(f.type):
            schema = schema.set(i, pa.field(f.name, pa.large_string()))
    return schema.remove_metadata()


def _chunks_or_header(path: Path, table: str, limits: Limits) -> Iterator[pd.DataFrame]:
    """:func:`raw_chunks`, or the (empty) table itself when the file has no rows."""
    from dgtraces.tables.checks import read_file

    empty = True
    for df in raw_chunks(path, table, limits):
        empty = False
        yield df
    if empty:
        yield read_file(path, table)


def spool(path: Path, table: str, file: str, runs: pd.DataFrame, limits: Limits,
          folder: Path, failures: Failures, later: Failures,
          progress: Callable[[str], object] | None = None) -> Spool | None:
    """Pass 1 (module doc): validate ``path`` chunk by chunk against the typed ``runs``;
    schema and key failures go to ``failures``, value checks to ``later``. Returns the
    spool, or None when a chunk failed its schema (nothing typed to spool)."""
    import pyarrow.parquet as pq

    from dgtraces.tables.checks import check_tables
    from dgtraces.tables.schema import KEYS

    from . import plausibility as pl

    out = Spool(table, file, folder / f"{table}.spool.parquet",
                chunk_rows=limits.chunk_rows)
    keys = list(KEYS[table])
    order = RunOrder()
    writer = None
    broken = False
    values = True
    largest = 1  # rows in the largest chunk read: pass 2 reads no more at a time
    key_writer = pq.ParquetWriter(out.keys_path, _key_schema(keys))
    try:
        for raw in _chunks_or_header(path, table, limits):
            offset = out.rows
            raw = raw.reset_index(drop=True)
            key_writer.write_table(_keys(raw, keys, offset))
            if keys[0] in raw.columns:
                order.see(raw[keys[0]].astype(str).to_numpy())
            gcols = [c for c in pl.GRAD_COLUMNS if c in raw.columns]
            typed, found = check_tables({table: raw.drop(columns=gcols)}, files={table: file},
                                        known={"runs": runs})
            failures.extend(shifted(found, file, offset))
            lt = typed[table]
            broken = broken or any(f.code == Code.SCHEMA for f in found)
            out.rows += len(raw)
            out.chunks += 1
            largest = max(largest, len(raw))
            if progress is not None:
                progress(f"{table}: {out.rows:,} rows read and checked (schema, keys)")
            if broken:
                continue
            if not {"SCHEMA", "CROSS_TABLE"}.isdisjoint(failures.per_code):
                values = False  # refused already (e.g. runs failed its schema): no value checks
            if values:
                checks = pl.missing_time_failures({table: lt}, {table: file})
                if gcols:
                    checks += pl.grad_failures(lt, raw[gcols], runs, file)
                later.extend(shifted(checks, file, offset))
            lt = lt.assign(**{ROW: range(offset, offset + len(lt))}).astype({ROW: "int64"})
            if writer is None:
                out.dtypes = {c: lt[c].dtype for c in lt.columns if c != ROW}
                out.schema = _arrow_schema(lt)
                writer = pq.ParquetWriter(out.path, out.schema, compression="zstd")
            writer.write_table(_to_arrow(lt, out.schema))
    finally:
        key_writer.close()
        if writer is not None:
            writer.close()
    out.contiguous = order.contiguous
    out.chunk_rows = min(out.chunk_rows, largest)  # a CSV of long rows read fewer at a time
    if out.chunks > 1:  # pandera saw each chunk alone: a key repeated across chunks
        reported = {(f.row, f.column) for f in failures.listed if f.code == Code.SCHEMA}
        failures.extend(f for f in _repeated_keys(out) if (f.row, f.column) not in reported)
    return None if broken else out


def _key_schema(keys: list[str]):
    import pyarrow as pa

    return pa.schema([pa.field(ROW, pa.int64())] + [pa.field(k, pa.large_string())
                                                    for k in keys])


def _keys(raw: pd.DataFrame, keys: list[str], offset: int):
    """The key columns of a raw chunk as text (nulls kept), with the file rows."""
    import pyarrow as pa

    cols = {ROW: pa.array(range(offset, offset + len(raw)), pa.int64())}
    for k in keys:
        values = raw[k].astype("string") if k in raw.columns else [None] * len(raw)
        cols[k] = pa.array(values, pa.large_string(), from_pandas=True)
    return pa.table(cols, schema=_key_schema(keys))


def _to_arrow(df: pd.DataFrame, schema):
    import pyarrow as pa

    return pa.Table.from_pandas(df, schema=schema, preserve_index=False)


def _duck(folder: Path):
    from dgtraces.store.duck import connect

    con = connect()
    con.execute("SET temp_directory = ?", [str(folder)])  # sorts spill here, not to RAM
    con.execute(f"SET memory_limit = '{DUCKDB_MEMORY}'")
    con.execute("SET threads = 1")  # one sort or aggregate at a time: memory at the limit
    return con


def _repeated_keys(sp: Spool) -> list[Failure]:
    """Rows whose primary key occurs more than once in the file: one SCHEMA failure per
    key cell, worded as pandera words its own (the caller drops the ones pandera found
    within a chunk)."""
    from dgtraces.store.duck import quote, scan
    from dgtraces.tables.schema import KEYS

    keys = list(KEYS[sp.table])
    cols = ", ".join(quote(c) for c in keys)
    src = scan([sp.keys_path], [ROW, *keys])
    con = _duck(sp.path.parent)
    try:
        rows = con.execute(
            f"SELECT {quote(ROW)}, {cols} FROM {src} SEMI JOIN (SELECT {cols} FROM {src} "
            f"WHERE {' AND '.join(f'{quote(k)} IS NOT NULL' for k in keys)} "
            f"GROUP BY ALL HAVING count(*) > 1) USING ({cols}) ORDER BY {quote(ROW)} "
            f"LIMIT {2 * MAX_PER_CODE}").fetchall()
    finally:
        con.close()
    check = "multiple_fields_uniqueness" if len(keys) > 1 else "field_uniqueness"
    return [Failure(Code.SCHEMA, f"{sp.table}: failed {check}", file=sp.file, row=int(r[0]),
                    column=c, expected=check, found=repr(v))
            for r in rows for c, v in zip(keys, r[1:], strict=True)]


@contextmanager
def _in_run_order(sp: Spool, batch_rows: int) -> Iterator[Iterator]:
    """The spool's record batches with each run's rows together: in file order when the
    file had them together already (a collector writes run by run), else sorted by run
    by DuckDB (one thread, spilling to the temp folder past its memory limit)."""
    import pyarrow.parquet as pq

    from dgtraces.store.duck import quote, scan
    from dgtraces.tables.schema import KEYS

    if sp.contiguous:
        yield pq.ParquetFile(sp.path, **STREAMED_READ).iter_batches(batch_size=batch_rows)
        return
    con = _duck(sp.path.parent)
    try:
        src = scan([sp.path], sp.schema.names)  # type: ignore[attr-defined]
        rel = con.sql(f"SELECT * FROM {src} ORDER BY {quote(KEYS[sp.table][0])}")
        # a relation's reader streams (DuckDB 2: to_arrow_reader; 1.x: fetch_arrow_reader)
        yield (getattr(rel, "to_arrow_reader", None) or rel.fetch_arrow_reader)(batch_rows)
    finally:
        con.close()


def run_groups(sp: Spool, chunk_rows: int) -> Iterator[tuple[pd.DataFrame, np.ndarray]]:
    """Pass 2 (module doc): the spooled rows as frames of whole runs (about ``chunk_rows``
    rows; a run is never split), with the file row of each of their rows."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from dgtraces.tables.schema import KEYS

    run = KEYS[sp.table][0]
    if not sp.rows:
        return
    with _in_run_order(sp, min(chunk_rows, 1 << 16)) as batches:
        held: list = []
        count = 0
        for batch in batches:
            held.append(batch)
            count += batch.num_rows
            if count < chunk_rows:
                continue
            data = pa.Table.from_batches(held)
            cut = pc.index(data.column(run), data.column(run)[-1]).as_py()
            if cut == 0:  # one run fills the buffer: keep reading until it ends
                continue
            yield _typed(data.slice(0, cut), sp)
            rest = data.slice(cut)
            held, count = rest.to_batches(), rest.num_rows
        if count:
            yield _typed(pa.Table.from_batches(held), sp)


@dataclass
class RunOrder:
    """Whether every run's rows are consecutive in the file, tracked chunk by chunk."""

    contiguous: bool = True
    last: object = None  # the run the previous chunk ended with
    done: set = field(default_factory=set)  # runs that ended before it

    def see(self, ids) -> None:
        import numpy as np

        if not self.contiguous or not len(ids):
            return
        ids = np.asarray(ids, dtype=object)
        segments = list(ids[np.r_[0, np.flatnonzero(ids[1:] != ids[:-1]) + 1]])
        if segments[0] == self.last:  # the previous chunk's last run goes on
            if len(segments) == 1:
                return
            segments = segments[1:]
        if self.last is not None:  # ... and ends here
            self.done.add(self.last)
        *ended, last = segments
        if len(set(segments)) < len(segments) or self.done.intersection(segments):
            self.contiguous = False
            return
        self.done.update(ended)
        self.last = last


def _typed(data, sp: Spool) -> tuple[pd.DataFrame, np.ndarray]:
    import pandas as pd
    import pyarrow as pa

    exact = {pa.int64(): pd.Int64Dtype(), pa.bool_(): pd.BooleanDtype()}  # no float detour
    df = data.to_pandas(types_mapper=exact.get)
    rows = df.pop(ROW).to_numpy(dtype="int64")
    return df.astype(sp.dtypes).reset_index(drop=True), rows


def run_sums(sp: Spool) -> pd.DataFrame:
    """Per run of the spool: layer rows (n) and fwd/bwd sums (f, b), by one DuckDB query
    (memory per run, not per row); what :func:`dgtraces.contribute.known.store_known`
    matches stored runs against."""
    from dgtraces.store.duck import scan

    con = _duck(sp.path.parent)
    try:
        src = scan([sp.path], ["run_id", "fwd_ms", "bwd_ms"])
        return con.execute(f"SELECT run_id, count(*) AS n, sum(coalesce(fwd_ms, 0)) AS f, "
                           f"sum(coalesce(bwd_ms, 0)) AS b FROM {src} GROUP BY run_id").df()
    finally:
        con.close()
