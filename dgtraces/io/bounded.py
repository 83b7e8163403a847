"""Reading untrusted files within stated bounds: sizes and nesting are checked before
anything is materialised, and every overrun is BAD_FILE (never a MemoryError, a
RecursionError or a machine brought to its knees).

* Columns: a table file's columns are capped (its table's columns plus a small margin,
  given by the caller) before anything else is read: a CSV header is counted over its whole
  line, 1 MiB at a time, and a Parquet footer's schema length is read from its first bytes
  before pyarrow parses a footer that grows with the columns (#36: 1 row x 1,000,000
  columns passed the cell bound and took pandas to 2.6 GB).
* Parquet: rows, rows x columns and the declared uncompressed size come from the footer;
  nested column types are refused; text columns are read *as dictionaries* (memory of the
  encoded data), and the size they would decode to (the dictionary-bomb case: one long
  string referenced by every row) and their longest value are computed from the dictionary
  and its indices before any plain string is built.
* CSV: lines and header columns are counted in one streaming pass (bytes, no parsing)
  before pandas parses the file, so memory stays proportional to the cell limit.
* gzip: decompressed in chunks, stopping at a byte limit.
* JSON / YAML: nesting deeper than :data:`MAX_DEPTH` is refused (YAML by its events before
  it is composed; JSON by the parser's own recursion limit).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from dgtraces.errors import BadFileError

# the streamed limits of a contribution's layer_timings, and of a staged file a release
# reads back (contribute.intake.Limits defaults to them)
MAX_STREAM_ROWS = 100_000_000
MAX_STREAM_FILE_BYTES = 8 << 30

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

MAX_DEPTH = 64
MAX_GUNZIP_BYTES = 1 << 30


bad_file = BadFileError.at  # the reads below refuse with it


def gunzip(data: bytes, name: str, max_bytes: int | None = None) -> bytes:
    """Decompress (possibly multi-member) gzip ``data``; BAD_FILE past ``max_bytes``
    (default :data:`MAX_GUNZIP_BYTES`)."""
    max_bytes = MAX_GUNZIP_BYTES if max_bytes is None else max_bytes
    out, total = [], 0
    while data:
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            chunk = d.decompress(data, 1 << 20)
        except zlib.error:  # bytes after the last member that are no gzip member (#29)
            raise bad_file(name, "not a gzip stream (or garbage after its last member)"
                           ) from None
        while True:
            total += len(chunk)
            if total > max_bytes:
                raise bad_file(name, "decompresses beyond the size limit (gzip bomb?)",
                               f"<= {max_bytes} bytes", f"> {max_bytes} bytes")
            out.append(chunk)
            if d.eof or not d.unconsumed_tail:
                break
            try:
                chunk = d.decompress(d.unconsumed_tail, 1 << 20)
            except zlib.error:
                raise bad_file(name, "corrupt gzip stream") from None
        if not d.eof:
            raise bad_file(name, "truncated gzip stream")
        data = d.unused_data.lstrip(b"\0")
    return b"".join(out)


def json_loads(text: str | bytes, name: str):
    """``json.loads`` with nesting beyond the interpreter's recursion limit as BAD_FILE."""
    import json

    try:
        return json.loads(text)
    except RecursionError:
        raise bad_file(name, "JSON nested too deeply") from None


def check_yaml_depth(events, name: str, max_depth: int = MAX_DEPTH) -> None:
    """Walk YAML parser events (no composition); BAD_FILE past ``max_depth`` levels."""
    import yaml

    depth = 0
    for event in events:
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            depth += 1
            if depth > max_depth:
                raise bad_file(name, "YAML nested too deeply", f"<= {max_depth} levels")
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1


def csv_shape(path: Path) -> tuple[int, int]:
    """(lines after the header, header columns) in one streaming pass; an upper bound on
    the rows (a quoted value spanning lines counts once per line)."""
    return csv_lines(path)[:2]


def _too_many_columns(name: str, max_columns: int, found) -> BadFileError:
    return bad_file(name, "too many columns (the table's columns and a small margin at most)",
                    f"<= {max_columns}", found)


def _header_columns(fh, name: str, max_columns: int | None) -> int:
    """Columns of the CSV header line at ``fh``'s position, counted over the whole line
    (commas outside double quotes), 1 MiB at a time; BAD_FILE as soon as the count passes
    ``max_columns``, nothing further read. Leaves ``fh`` at the first line after it."""
    import numpy as np

    cols, quoted, start, length = 1, 0, fh.tell(), 0
    for chunk in iter(lambda: fh.read(1 << 20), b""):
        b = np.frombuffer(chunk, dtype=np.uint8)
        outside = (np.cumsum(b == 34) + quoted) % 2 == 0  # quotes before each byte: even
        ends = np.flatnonzero((b == 10) & outside)
        stop = int(ends[0]) if len(ends) else len(b)
        crs = np.flatnonzero((b[:stop] == 13) & outside[:stop])
        if len(crs) and (len(crs) > 1 or int(crs[0]) != stop - 1 or not len(ends)):
            raise bad_file(name, "not a CSV file with \\n or \\r\\n line ends "
                                 "(a carriage return inside the header line)")
        cols += int(np.count_nonzero((b[:stop] == 44) & outside[:stop]))
        length += stop
        if max_columns is not None and cols > max_columns:
            raise _too_many_columns(name, max_columns, f"> {cols - 1}" if len(ends) == 0
                                    else cols)
        if len(ends):
            fh.seek(start + stop + 1)
            break
        quoted = int(np.count_nonzero(b == 34) + quoted) % 2
        start += len(chunk)
    return cols if length else 0


def csv_lines(path: Path, max_columns: int | None = None) -> tuple[int, int, int]:
    """:func:`csv_shape` and the longest line after the header, in bytes (same pass);
    BAD_FILE if the header has more than ``max_columns`` columns (before the lines are
    read)."""
    import numpy as np

    lines, last, longest, carry = 0, b"\n", 0, 0
    with open(path, "rb") as fh:
        cols = _header_columns(fh, path.name, max_columns)
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            ends = np.flatnonzero(np.frombuffer(chunk, dtype=np.uint8) == 10)
            lines += len(ends)
            if len(ends):
                gaps = np.diff(ends).max() if len(ends) > 1 else 0
                longest = max(longest, carry + int(ends[0]) + 1, int(gaps))
                carry = len(chunk) - int(ends[-1]) - 1
            else:
                carry += len(chunk)
            last = chunk[-1:]
    lines += last != b"\n"
    return lines, cols, max(longest, carry)


def check_csv(path: Path, max_rows: int, max_cells: int | None,
              max_columns: int | None = None) -> int:
    """Header columns (first, over the whole header line), rows and rows x columns of a
    CSV file within the limits (None: no limit); returns its longest line in bytes (a
    streamed read sizes its chunks by it)."""
    rows, cols, longest = csv_lines(path, max_columns)
    if rows > max_rows:
        raise bad_file(path.name, "too many rows", f"<= {max_rows}", rows)
    if max_cells is not None and rows * max(cols, 1) > max_cells:
        raise bad_file(path.name, "too many cells (rows x columns)", f"<= {max_cells}",
                       rows * cols)
    return longest


def _is_binary(t) -> bool:
    import pyarrow as pa

    if pa.types.is_dictionary(t):
        t = t.value_type
    return pa.types.is_binary(t) or pa.types.is_large_binary(t) or \
        pa.types.is_fixed_size_binary(t)


def _open_parquet(path: Path, *, max_rows: int, max_cells: int | None, max_bytes: int,
                  max_group_bytes: int | None = None, max_columns: int | None = None):
    """The file's ParquetFile and its text columns, after the footer checks (module doc);
    ``max_group_bytes`` bounds each row group's declared uncompressed size, and marks a
    streamed read: one row group at a time, read through a 1 MiB buffer without
    pre-buffering (pyarrow's pre-buffered reads kept the buffers of earlier row groups:
    520 MB after 10M poorly compressible rows, 46 MB without)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    name = path.name
    from .parquet_pages import footer_schema_length

    declared = footer_schema_length(path)  # the root and one element per flat column
    if max_columns is not None and declared is not None and declared - 1 > max_columns:
        raise _too_many_columns(name, max_columns, declared - 1)
    try:
        pf = pq.ParquetFile(path)
        md, schema = pf.metadata, pf.schema_arrow
    except Exception as exc:  # truncated / not Parquet: pyarrow raises various types
        raise bad_file(name, f"not a readable Parquet file ({type(exc).__name__})") from exc
    if md.num_rows > max_rows:
        raise bad_file(name, "too many rows", f"<= {max_rows}", md.num_rows)
    if max_columns is not None and md.num_columns > max_columns:
        raise _too_many_columns(name, max_columns, md.num_columns)
    if max_cells is not None and md.num_rows * max(md.num_columns, 1) > max_cells:
        raise bad_file(name, "too many cells (rows x columns)", f"<= {max_cells}",
                       md.num_rows * md.num_columns)
    names = [f.name for f in schema]
    if len(set(names)) != len(names):  # pandas would make a frame of a column (#29)
        raise bad_file(name, "duplicate column names", "each column once",
                       ", ".join(sorted({n for n in names if names.count(n) > 1}))[:200])
    binary = [f.name for f in schema if _is_binary(f.type)]
    if binary:  # bytes are no table value: text is UTF-8 strings
        raise bad_file(name, "binary columns are not table columns", "text or numbers",
                       ", ".join(binary)[:200])
    nested = [f.name for f in schema if pa.types.is_nested(f.type)]
    if nested:
        raise bad_file(name, "nested column types are not table columns", "flat columns",
                       ", ".join(nested)[:200])
    from .parquet_pages import check_pages  # the footer is a claim: the page headers say

    check_pages(path, md, max_rows=max_rows, max_bytes=max_bytes,
                max_group_bytes=max_group_bytes or max_bytes,
                max_page_bytes=max_group_bytes or max_bytes)
    groups = [sum(md.row_group(i).column(j).total_uncompressed_size
                  for j in range(md.num_columns)) for i in range(md.num_row_groups)]
    if sum(groups) > max_bytes:
        raise bad_file(name, "uncompressed size too large", f"<= {max_bytes} bytes",
                       sum(groups))
    if max_group_bytes is not None and groups and max(groups) > max_group_bytes:
        raise bad_file(name, "a row group too large to stream", f"<= {max_group_bytes} "
                       "bytes per row group", max(groups))

    def is_text(t) -> bool:
        if pa.types.is_dictionary(t):
            t = t.value_type
        return pa.types.is_string(t) or pa.types.is_binary(t) or \
            pa.types.is_large_string(t) or pa.types.is_large_binary(t)

    text = [f.name for f in schema if is_text(f.type)]
    streamed = {} if max_group_bytes is None else {"pre_buffer": False, "buffer_size": 1 << 20}
    try:
        return pq.ParquetFile(path, read_dictionary=text, **streamed), text
    except Exception as exc:
        raise bad_file(name, f"not a readable Parquet file ({type(exc).__name__})") from exc


def _decoded(table, text: list[str], name: str, *, max_bytes: int, max_field_chars: int,
             decoded: int = 0, max_batch_bytes: int | None = None
             ) -> "tuple[pd.DataFrame, int]":
    """``table`` (text columns as dictionaries) as a DataFrame, once the bytes its text
    decodes to (``decoded`` counted before it, the total returned; this table alone at most
    ``max_batch_bytes``) and its longest value are within the limits; a stored NaN is kept
    visible as "NaN" text."""
    before = decoded
    import pyarrow as pa
    import pyarrow.compute as pc

    for col in text:
        for chunk in table.column(col).chunks:
            if not pa.types.is_dictionary(chunk.type) or len(chunk.dictionary) == 0:
                continue
            try:  # invalid UTF-8 would fail in pandas, as a traceback (#29)
                chunk.dictionary.validate(full=True)
            except pa.ArrowInvalid as exc:
                raise bad_file(name, f"column {col!r} is not valid UTF-8 text",
                               "UTF-8", str(exc)[:120]) from None
            lengths = pc.binary_length(chunk.dictionary)
            longest = pc.max(lengths).as_py() or 0
            if longest > max_field_chars:
                raise bad_file(name, f"huge field in column {col!r}",
                               f"<= {max_field_chars} chars", longest)
            decoded += pc.sum(pc.take(lengths, chunk.indices)).as_py() or 0
            if max_batch_bytes is not None and decoded - before > max_batch_bytes:
                raise bad_file(name, "a chunk's text columns decode beyond the chunk size "
                                     "limit (dictionary bomb?)",
                               f"<= {max_batch_bytes} bytes", f"> {decoded - before}")
            if decoded > max_bytes:
                raise bad_file(name, "text columns decode beyond the size limit "
                                     "(dictionary bomb?)", f"<= {max_bytes} bytes",
                               f"> {decoded}")
    plain = pa.schema([pa.field(f.name, f.type.value_type if pa.types.is_dictionary(f.type)
                                else f.type) for f in table.schema])
    # the cast drops the schema's metadata (pandas' index and dtypes stay out); with no
    # dictionary column to decode, dropping the metadata alone is the same and ~2000 times
    # fewer arrow calls on a wide file
    same = plain.equals(table.schema)
    df = (table.replace_schema_metadata(None) if same else table.cast(plain)).to_pandas()
    floats = [f.name for f in plain if pa.types.is_floating(f.type)]
    # one pass over the frame first: only a column holding a null or a NaN can hold a stored
    # NaN (a 2000-column file in 52 batches: 104,000 arrow calls otherwise). The frame's
    # columns are the field names (no metadata); a repeated name selects more than itself.
    if len(set(floats)) == len(floats):
        missing = df[floats].isna().any()
        floats = [name for name, m in zip(floats, missing.to_numpy(), strict=True) if m]
    for name in floats:  # a stored NaN is not a missing value: keep it visible as "NaN" text
        nan = pc.is_nan(table.column(name)).to_numpy(zero_copy_only=False)
        nan = nan == True  # noqa: E712 (nulls come back as None)
        if nan.any():
            df[name] = df[name].astype(object)
            df.loc[nan, name] = "NaN"
    return df, decoded


def read_parquet(path: Path, *, max_rows: int, max_cells: int, max_bytes: int,
                 max_field_chars: int, max_columns: int | None = None) -> "pd.DataFrame":
    """A Parquet file as a DataFrame, its sizes checked before materialising (module doc)."""
    pf, text = _open_parquet(path, max_rows=max_rows, max_cells=max_cells,
                             max_bytes=max_bytes, max_columns=max_columns)
    import pyarrow as pa

    batches = list(counted(pf, 1 << 16, path.name))
    table = pa.Table.from_batches(batches, schema=batches[0].schema) if batches else \
        pf.schema_arrow.empty_table()
    return _decoded(table, text, path.name, max_bytes=max_bytes,
                    max_field_chars=max_field_chars)[0]


def parquet_reader(path: Path, *, max_rows: int, max_bytes: int):
    """A streamed ``ParquetFile`` of a file this process wrote earlier (a staged table the
    release copies into shards) after the page checks of :func:`_open_parquet`: staging is
    a folder anyone with the data folder can write, so its footers are not trusted either.
    Read it through :func:`counted`."""
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path, pre_buffer=False, buffer_size=1 << 20)
        md = pf.metadata
    except Exception as exc:
        raise bad_file(path.name, f"not a readable Parquet file ({type(exc).__name__})") from exc
    from .parquet_pages import check_pages

    check_pages(path, md, max_rows=max_rows, max_bytes=max_bytes, max_group_bytes=max_bytes,
                max_page_bytes=max_bytes)
    return pf


def counted(pf, batch_rows: int, name: str):
    """``pf``'s record batches, each counted as it is read: rows beyond what the (checked)
    row groups declare are BAD_FILE at the batch that brings them."""
    declared, seen = pf.metadata.num_rows, 0
    batches = pf.iter_batches(batch_size=batch_rows)
    while True:
        try:
            batch = next(batches)
        except StopIteration:
            return
        except Exception as exc:
            raise bad_file(name, f"cannot read Parquet data ({type(exc).__name__}: "
                                 f"{str(exc)[:200]})") from exc
        seen += batch.num_rows
        if seen > declared:
            raise bad_file(name, "holds more rows than its row groups declare", declared,
                           f">= {seen}")
        yield batch


def _row_bytes(t) -> int:
    """Bytes one row of a column of type ``t`` takes decoded, besides text (indices of a
    dictionary or string offsets: 4-8; validity bit rounded up)."""
    import pyarrow as pa

    if pa.types.is_dictionary(t):
        return t.index_type.bit_width // 8 + 1
    try:
        return max(1, t.bit_width // 8) + 1
    except ValueError:  # variable width: offsets
        return 9


def iter_parquet(path: Path, batch_rows: int, *, max_rows: int, max_bytes: int,
                 max_group_bytes: int, max_field_chars: int, max_batch_bytes: int,
                 max_columns: int | None = None) -> "Iterator[pd.DataFrame]":
    """A Parquet file as DataFrames of at most ``batch_rows`` rows, with the checks of
    :func:`read_parquet` (decoded text counted over the whole file, and at most
    ``max_batch_bytes`` per batch; no cell limit: memory is one row group plus one batch,
    whatever the file's size)."""
    import pyarrow as pa

    pf, text = _open_parquet(path, max_rows=max_rows, max_cells=None, max_bytes=max_bytes,
                             max_group_bytes=max_group_bytes, max_columns=max_columns)
    # rows per batch so that its fixed-width part fits max_batch_bytes however many columns
    # the file has (#29 high: bounded as read; text is bounded by _decoded)
    width = sum(_row_bytes(f.type) for f in pf.schema_arrow)
    batch_rows = max(1, min(batch_rows, max_batch_bytes // max(width, 1)))
    decoded = 0
    for batch in counted(pf, batch_rows, path.name):
        if batch.nbytes > 2 * max_batch_bytes:  # a backstop: what was really decoded
            raise bad_file(path.name, "a batch decodes beyond the chunk size limit",
                           f"<= {max_batch_bytes} bytes", batch.nbytes)
        df, decoded = _decoded(pa.Table.from_batches([batch]), text, path.name,
                               max_bytes=max_bytes, max_field_chars=max_field_chars,
                               decoded=decoded, max_batch_bytes=max_batch_bytes)
        yield df
