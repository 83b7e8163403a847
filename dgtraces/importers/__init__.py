"""Importers of traces recorded elsewhere, and the published reference tables.

- :mod:`.kineto`: PyTorch-profiler (Kineto) Chrome traces -> ``runs`` + ``layer_timings``.
- :mod:`.bcaffe`: B-Caffe ``distributed.cpp`` per-blob logs -> ``runs`` + ``layer_timings``.
- :mod:`.osu`: OSU MPI allreduce latency logs -> ``comm`` + ``comm_fits``.
- :mod:`.published`: every published table built from ``dgtraces/reference/``.

Shipped reference logs are recognised by their sha256 (``reference/SHA256SUMS.json``) so a
row imported from one cites repository, path and commit; any other file needs a source
given by the caller. Nothing here prints or writes outside the path it is given.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from ..errors import DgtracesError, Failure

IMPORTER_VERSION = "1"
REPO = "shyhuai/B-Caffe"
# commit that last changed each shipped log (reference/bcaffe/README.md)
COMMITS = {
    "allreduce2.log": "2ef1db1f3fcc",
    "allreduce4.log": "2c643ba82a5c",
    "allreduce8.log": "2ef1db1f3fcc",
}
TMP_COMMIT = "afc8063dca05"


def read_input(path: Path) -> bytes:
    """The bytes of an importer's input file, at most :data:`dgtraces.bounded.
    MAX_GUNZIP_BYTES` (what a gzipped trace may decompress to): its size is checked before
    it is read (BAD_FILE; issue #29: bounded reading for ``import`` too)."""
    from ..bounded import MAX_GUNZIP_BYTES, bad_file

    size = path.stat().st_size
    if size <= MAX_GUNZIP_BYTES:
        with open(path, "rb") as fh:
            data = fh.read(MAX_GUNZIP_BYTES + 1)  # + 1: a file that grew meanwhile
        if len(data) <= MAX_GUNZIP_BYTES:
            return data
        size = len(data)
    raise bad_file(str(path), "file too large for an importer", f"<= {MAX_GUNZIP_BYTES} bytes",
                   size)


def read_text(path: str | os.PathLike) -> tuple[str, str]:
    """Text and sha256 of a log file; missing or non-UTF-8 input raises a typed error."""
    path = Path(path)
    if not path.is_file():
        raise DgtracesError(f"{path}: no such file", code="NOT_FOUND")
    data = read_input(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DgtracesError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})",
                            code="BAD_FILE",
                            failures=[Failure("BAD_FILE", "not UTF-8", file=str(path))]) from None
    return text, hashlib.sha256(data).hexdigest()


def shipped_name(digest: str) -> str | None:
    """The B-Caffe log name (e.g. ``tmpcomm.log``) whose shipped copy has this sha256."""
    from .. import reference

    sums = json.loads((reference.ROOT / "SHA256SUMS.json").read_text(encoding="utf-8"))
    for name, known in sums.items():
        if known == digest and name.startswith("bcaffe/"):
            return name.split("/", 1)[1]
    return None


def citation(digest: str, source: str | None, path) -> tuple[str, str | None]:
    """(source text, shipped log name or None). A shipped log cites repo, path and commit;
    any other file must come with ``source`` (code BAD_INPUT otherwise)."""
    name = shipped_name(digest)
    if name is not None:
        commit = COMMITS.get(name, TMP_COMMIT)
        cited = f"{REPO} logdata/{name} (commit {commit})"
        return (f"{source}; {cited}" if source else cited), name
    if not source:
        raise DgtracesError(
            f"{path}: not one of the shipped reference logs, so its origin is unknown; "
            f"give --source (where the log comes from)", code="BAD_INPUT",
            failures=[Failure("BAD_INPUT", "source required", file=str(path), column="source",
                              expected="a citation", found="none")])
    return source, None


def frame(table: str, rows: list[dict]):
    """Rows -> a schema-valid DataFrame of ``table`` (absent columns become null)."""
    import pandas as pd

    from ..checks import validate_frame
    from ..schema import TABLES

    columns = list(TABLES[table].to_schema().columns)
    extra = {k for r in rows for k in r} - set(columns)
    if extra:
        raise DgtracesError(f"{table}: unknown columns {sorted(extra)}", code="SCHEMA")
    df = pd.DataFrame([{c: r.get(c) for c in columns} for r in rows], columns=columns)
    return validate_frame(table, df)
