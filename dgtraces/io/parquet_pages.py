"""What a Parquet file really holds, read from its page headers, not its footer.

The footer (``FileMetaData``) states rows and sizes, but a reader decodes each column
chunk page by page, each page by its own header: a file whose footer claims 1 row and
230 bytes can hold pages of hundreds of millions of values. :func:`check_pages` walks
every column chunk's page headers (Thrift compact protocol, parsed here; no page is
decompressed) and refuses, before any data is read:

* a column chunk whose byte range lies outside the file, or whose pages do not tile it;
* a page whose uncompressed size exceeds ``max_page_bytes``, and uncompressed sizes
  summed per row group / per file beyond ``max_group_bytes`` / ``max_bytes``;
* data pages whose value counts do not add up to the chunk's ``num_values``, the row
  group's ``num_rows`` (flat columns only: the bounded readers refuse nested ones), and
  row groups that do not add up to the footer's ``num_rows``;
* more than ``max_pages`` pages in the file (time).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

from dgtraces.errors import BadFileError

_bad = BadFileError.at

MAX_HEADER_BYTES = 1 << 16  # a page header (statistics included) read at most
DICTIONARY_PAGE, DATA_PAGE, DATA_PAGE_V2 = 2, 0, 3  # PageType values
_FIELDS = {DATA_PAGE: 5, DICTIONARY_PAGE: 7, DATA_PAGE_V2: 8}  # PageHeader field per type


class _Truncated(Exception):
    pass


class Compact:
    """A Thrift compact-protocol reader: a struct as {field id: (type, value)}; nested
    structs as such dicts, lists as (element type, [values])."""

    def __init__(self, data: bytes, pos: int = 0):
        self.data, self.pos, self.depth = data, pos, 0

    def _byte(self) -> int:
        if self.pos >= len(self.data):
            raise _Truncated
        self.pos += 1
        return self.data[self.pos - 1]

    def varint(self) -> int:
        out = shift = 0
        while True:
            b = self._byte()
            out |= (b & 0x7F) << shift
            if not b & 0x80:
                return out
            shift += 7
            if shift > 70:
                raise ValueError("varint too long")

    def zigzag(self) -> int:
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def value(self, kind: int):
        if kind in (1, 2):  # bool in a field header
            return kind == 1
        if kind == 3:
            return struct.unpack("b", bytes([self._byte()]))[0]
        if kind in (4, 5, 6):
            return self.zigzag()
        if kind == 7:
            raw = self.data[self.pos:self.pos + 8]
            if len(raw) < 8:
                raise _Truncated
            self.pos += 8
            return struct.unpack("<d", raw)[0]
        if kind == 8:
            n = self.varint()
            if self.pos + n > len(self.data):
                raise _Truncated
            self.pos += n
            return bytes(self.data[self.pos - n:self.pos])
        if kind in (9, 10):
            head = self._byte()
            n, elem = head >> 4, head & 0x0F
            if n == 15:
                n = self.varint()
            if n > len(self.data):
                raise ValueError("list longer than the data")
            if elem in (1, 2):  # list of bools: one byte each
                return elem, [self._byte() == 1 for _ in range(n)]
            return elem, [self.value(elem) for _ in range(n)]
        if kind == 12:
            return self.struct()
        raise ValueError(f"unsupported compact type {kind}")

    def struct(self) -> dict:
        self.depth += 1
        if self.depth > 32:
            raise ValueError("nested too deeply")
        out: dict[int, tuple[int, object]] = {}
        last = 0
        while True:
            head = self._byte()
            if head == 0:
                self.depth -= 1
                return out
            delta, kind = head >> 4, head & 0x0F
            fid = last + delta if delta else self.zigzag()
            out[fid] = (kind, self.value(kind))
            last = fid


def footer_schema_length(path: Path) -> int | None:
    """How many schema elements the footer declares (the root and one per column of a flat
    file), from the first bytes of the footer only: pyarrow parses the whole footer, which
    grows with the columns, before anything can be checked (#36). None when the file does
    not end or start its footer as expected (pyarrow then says what is wrong)."""
    with open(path, "rb") as fh:
        size = fh.seek(0, 2)
        if size < 12:
            return None
        fh.seek(size - 8)
        tail = fh.read(8)
        length = int.from_bytes(tail[:4], "little")
        if tail[4:] != b"PAR1" or length > size - 12:
            return None
        fh.seek(size - 8 - length)
        reader = Compact(fh.read(min(length, 64)))
    last = 0
    try:
        while True:  # FileMetaData: 1 version (i32), 2 schema (list<SchemaElement>), ...
            head = reader._byte()
            delta, kind = head >> 4, head & 0x0F
            if head == 0 or delta == 0:
                return None
            last += delta
            if last == 2:
                if kind != 9:
                    return None
                items = reader._byte() >> 4
                return reader.varint() if items == 15 else items
            if last > 2 or kind not in (4, 5, 6):
                return None
            reader.zigzag()
    except (_Truncated, ValueError):
        return None


@dataclass(frozen=True)
class Pages:
    """What the page headers of a file add up to."""

    rows: int  # rows per the data pages (first column of each row group)
    uncompressed_bytes: int
    pages: int


def _header(fh, offset: int, end: int, name: str) -> tuple[dict, int]:
    """The page header at ``offset`` (and its length), within ``end``."""
    for want in (512, MAX_HEADER_BYTES):  # most headers are small: read more only if needed
        fh.seek(offset)
        data = fh.read(min(want, end - offset))
        try:
            reader = Compact(data)
            return reader.struct(), reader.pos
        except _Truncated:
            if len(data) < want:  # the chunk ends first
                break
        except (ValueError, struct.error) as exc:
            raise _bad(name, f"unreadable page header ({exc})") from None
    raise _bad(name, "a page header runs past its column chunk or the header limit",
               f"<= {MAX_HEADER_BYTES} bytes")


def _int(header: dict, fid: int) -> int:
    kind, value = header.get(fid, (0, None))
    if kind not in (4, 5, 6):
        raise ValueError(f"field {fid} missing")
    return int(value)


def _chunk(fh, col, end_of_data: int, name: str, max_page_bytes: int
           ) -> tuple[int, int, int]:
    """(data values, uncompressed bytes, pages) of one column chunk, from its pages."""
    start = col.data_page_offset
    if col.has_dictionary_page and col.dictionary_page_offset is not None and \
            0 < col.dictionary_page_offset < start:
        start = col.dictionary_page_offset
    end = start + col.total_compressed_size
    if start < 4 or col.total_compressed_size <= 0 or end > end_of_data:
        raise _bad(name, "a column chunk lies outside the file's data",
                   f"within bytes 4..{end_of_data}", f"{start}..{end}")
    values = raw = pages = 0
    pos = start
    while pos < end and values < col.num_values:
        header, size = _header(fh, pos, end, name)
        try:
            kind, unc, comp = _int(header, 1), _int(header, 2), _int(header, 3)
        except ValueError as exc:
            raise _bad(name, f"unreadable page header ({exc})") from None
        if unc < 0 or comp < 0 or unc > max_page_bytes:
            raise _bad(name, "a page too large (uncompressed, per its header)",
                       f"<= {max_page_bytes} bytes", unc)
        sub = header.get(_FIELDS.get(kind, -1), (0, None))[1]
        if kind in (DATA_PAGE, DATA_PAGE_V2):
            if not isinstance(sub, dict):
                raise _bad(name, "a data page without its header")
            try:
                values += _int(sub, 1)
            except ValueError as exc:
                raise _bad(name, f"unreadable page header ({exc})") from None
        raw += size + unc  # as total_uncompressed_size counts: headers included
        pages += 1
        pos += size + comp
    if values != col.num_values:
        raise _bad(name, "a column chunk's pages hold another number of values than its "
                         "metadata states", col.num_values, values)
    if pos > end:
        raise _bad(name, "a page runs past its column chunk", f"<= byte {end}", pos)
    if raw > col.total_uncompressed_size:  # overstating only makes the limits stricter
        raise _bad(name, "a column chunk's pages decompress to more than its metadata "
                         "states", f"<= {col.total_uncompressed_size} bytes", raw)
    return values, raw, pages


def check_pages(path: Path, md, *, max_rows: int, max_bytes: int, max_group_bytes: int,
                max_page_bytes: int, max_pages: int = 1_000_000) -> Pages:
    """Walk every page header of ``path`` (``md``: its pyarrow ``FileMetaData``) and check
    the counts and sizes against each other and the limits (module doc); BAD_FILE on the
    first problem."""
    name = path.name
    size = path.stat().st_size
    footer = 8 + md.serialized_size
    end_of_data = size - footer
    rows = raw = pages = 0
    with open(path, "rb") as fh:
        for i in range(md.num_row_groups):
            group = md.row_group(i)
            if group.num_rows < 0:
                raise _bad(name, "a row group with a negative row count", ">= 0",
                           group.num_rows)
            group_raw = 0
            for j in range(group.num_columns):
                col = group.column(j)
                if col.num_values != group.num_rows:
                    raise _bad(name, "a column chunk holds another number of values than "
                                     "its row group has rows", group.num_rows, col.num_values)
                if not col.num_values:
                    continue
                _, chunk_raw, chunk_pages = _chunk(fh, col, end_of_data, name,
                                                   max_page_bytes)
                group_raw += chunk_raw
                pages += chunk_pages
                if pages > max_pages:
                    raise _bad(name, "too many pages", f"<= {max_pages}", pages)
            rows += group.num_rows
            raw += group_raw
            if rows > max_rows:
                raise _bad(name, "too many rows (per the row groups)", f"<= {max_rows}", rows)
            if group_raw > max_group_bytes:
                raise _bad(name, "a row group too large (per its pages)",
                           f"<= {max_group_bytes} bytes", group_raw)
            if raw > max_bytes:
                raise _bad(name, "uncompressed size too large (per the pages)",
                           f"<= {max_bytes} bytes", raw)
    if rows != md.num_rows:
        raise _bad(name, "the row groups hold another number of rows than the footer states",
                   md.num_rows, rows)
    return Pages(rows=rows, uncompressed_bytes=raw, pages=pages)
