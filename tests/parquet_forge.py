"""Forging Parquet footers for the attack tests (issue #29 high): parse a file's footer with
:class:`dgtraces.parquet_pages.Compact`, edit fields, write it back (Thrift compact)."""

from __future__ import annotations

import struct
from pathlib import Path

from dgtraces.io.parquet_pages import Compact

# FileMetaData / RowGroup / ColumnChunk / ColumnMetaData field ids (parquet.thrift)
FMD_NUM_ROWS, FMD_ROW_GROUPS = 3, 4
RG_COLUMNS, RG_TOTAL_BYTES, RG_NUM_ROWS = 1, 2, 3
CC_META = 3
CMD_NUM_VALUES, CMD_UNCOMPRESSED, CMD_COMPRESSED, CMD_DATA_OFFSET = 5, 6, 7, 9


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _zigzag(n: int) -> bytes:
    return _varint((n << 1) ^ (n >> 63))


def _value(kind: int, value) -> bytes:
    if kind in (1, 2):
        return b""
    if kind == 3:
        return struct.pack("b", value)
    if kind in (4, 5, 6):
        return _zigzag(value)
    if kind == 7:
        return struct.pack("<d", value)
    if kind == 8:
        return _varint(len(value)) + value
    if kind in (9, 10):
        elem, items = value
        head = bytes([(len(items) << 4) | elem]) if len(items) < 15 else \
            bytes([0xF0 | elem]) + _varint(len(items))
        if elem in (1, 2):
            return head + bytes(1 if v else 2 for v in items)
        return head + b"".join(_value(elem, v) for v in items)
    if kind == 12:
        return write_struct(value)
    raise ValueError(kind)


def write_struct(fields: dict) -> bytes:
    out, last = bytearray(), 0
    for fid in sorted(fields):
        kind, value = fields[fid]
        if kind in (1, 2):
            kind = 1 if value else 2
        delta = fid - last
        out += bytes([(delta << 4) | kind]) if 0 < delta <= 15 else \
            bytes([kind]) + _zigzag(fid)
        out += _value(kind, value)
        last = fid
    return bytes(out + b"\0")


def read_footer(path: Path) -> tuple[bytes, dict]:
    """(the bytes before the footer, the parsed FileMetaData)."""
    data = path.read_bytes()
    n = struct.unpack("<I", data[-8:-4])[0]
    return data[:-8 - n], Compact(data[-8 - n:-8]).struct()


def write_footer(path: Path, body: bytes, fmd: dict) -> None:
    raw = write_struct(fmd)
    path.write_bytes(body + raw + struct.pack("<I", len(raw)) + b"PAR1")


def set_field(node: dict, fid: int, value: int) -> None:
    kind, _ = node[fid]
    node[fid] = (kind, value)


def groups(fmd: dict) -> list[dict]:
    return fmd[FMD_ROW_GROUPS][1][1]


def column_meta(group: dict) -> list[dict]:
    return [cc[CC_META][1] for cc in group[RG_COLUMNS][1][1]]


def lie(path: Path, rows: int = 1, uncompressed: int = 230, *, footer_only: bool = False
        ) -> None:
    """Rewrite ``path``'s footer to claim ``rows`` rows and ``uncompressed`` bytes (the
    footer's total only when ``footer_only``; else every row group and column chunk too)."""
    body, fmd = read_footer(path)
    set_field(fmd, FMD_NUM_ROWS, rows)
    if not footer_only:
        for group in groups(fmd):
            set_field(group, RG_NUM_ROWS, rows)
            set_field(group, RG_TOTAL_BYTES, uncompressed)
            for meta in column_meta(group):
                set_field(meta, CMD_NUM_VALUES, rows)
                set_field(meta, CMD_UNCOMPRESSED, uncompressed)
    write_footer(path, body, fmd)
