"""What every importer shares: reading a log, the importer version stamp, schema-valid frames
and the ``runs`` row of an imported file.

Importers import from here, :mod:`.shipped` (the registry of shipped files) and the layers
below; never from :mod:`.gpu_sources` (the catalog that runs them) or from each other's
internals, so the importers form no import cycle (``tests/importers/test_importers_registry.py``).
Nothing here prints or writes outside the path it is given.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from dgtraces.errors import Code, DgtracesError, Failure

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from dgtraces.importers.shipped import GpuSource

IMPORTER_VERSION = "1"


@dataclass
class TraceImport:
    """What a trace importer returns: a ``runs`` row and its ``layer_timings`` (each
    importer's result adds what it found or could not map)."""

    runs: pd.DataFrame
    layer_timings: pd.DataFrame

    def frames(self) -> dict[str, pd.DataFrame]:
        """table name -> frame, as written by ``dgtraces import``."""
        return {"runs": self.runs, "layer_timings": self.layer_timings}


@dataclass
class CommImport:
    """What a communication-log importer returns: ``comm`` points and their ``comm_fits``."""

    comm: pd.DataFrame
    comm_fits: pd.DataFrame

    def frames(self) -> dict[str, pd.DataFrame]:
        return {"comm": self.comm, "comm_fits": self.comm_fits}


def collector_version(module: str) -> str:
    """``runs.collector_version`` of a row imported by ``dgtraces.importers.<module>``."""
    return f"dgtraces.importers.{module} {IMPORTER_VERSION}"


def read_input(path: Path) -> bytes:
    """The bytes of an importer's input file, at most :data:`dgtraces.io.bounded.
    MAX_GUNZIP_BYTES` (what a gzipped trace may decompress to): its size is checked before
    it is read (BAD_FILE; issue #29: bounded reading for ``import`` too), and it must be a
    regular file (:func:`dgtraces.io.lines.open_regular`; #36)."""
    from dgtraces.io.bounded import MAX_GUNZIP_BYTES, bad_file
    from dgtraces.io.lines import open_regular

    with open_regular(path) as fh:  # a FIFO or /dev/zero is refused, never read (#36)
        size = os.fstat(fh.fileno()).st_size
        if size <= MAX_GUNZIP_BYTES:
            data = fh.read(MAX_GUNZIP_BYTES + 1)  # + 1: a file that grew meanwhile
            if len(data) <= MAX_GUNZIP_BYTES:
                return data
            size = len(data)
    raise bad_file(str(path), "file too large for an importer", f"<= {MAX_GUNZIP_BYTES} bytes",
                   size)


def read_text(path: str | os.PathLike) -> tuple[str, str]:
    """Text and sha256 of a log file; missing or non-UTF-8 input raises a typed error."""
    path = Path(path)
    if not path.exists():
        raise DgtracesError(f"{path}: no such file", code=Code.NOT_FOUND)
    data = read_input(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DgtracesError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})",
                            code=Code.BAD_FILE,
                            failures=[Failure(Code.BAD_FILE, "not UTF-8", file=str(path))]
                            ) from None
    return text, hashlib.sha256(data).hexdigest()


def _table_columns(table: str, names: set) -> list[str]:
    """``table``'s columns in schema order; SCHEMA when ``names`` holds one it lacks."""
    from dgtraces.tables.schema import TABLES

    columns = list(TABLES[table].to_schema().columns)
    extra = names - set(columns)
    if extra:
        raise DgtracesError(f"{table}: unknown columns {sorted(extra)}", code=Code.SCHEMA)
    return columns


def frame(table: str, rows: list[dict]):
    """Rows -> a schema-valid DataFrame of ``table`` (absent columns become null)."""
    import pandas as pd

    from dgtraces.tables.checks import validate_frame

    columns = _table_columns(table, {k for r in rows for k in r})
    df = pd.DataFrame([{c: r.get(c) for c in columns} for r in rows], columns=columns)
    return validate_frame(table, df)


def columns_frame(table: str, parts: list[dict]):
    """Column arrays (one dict per part, each with the same columns) -> a schema-valid
    DataFrame of ``table`` (absent columns become null): :func:`frame` without a dict per
    row, for importers of long logs."""
    import numpy as np
    import pandas as pd

    from dgtraces.tables.checks import validate_frame
    from dgtraces.tables.strict import column_kinds

    names = set().union(*parts) if parts else set()
    columns = _table_columns(table, names)
    n = sum(len(next(iter(p.values()))) for p in parts if p)
    floats = {c for c, kind in column_kinds(table).items() if kind == "float"}
    df = pd.DataFrame({c: np.concatenate([p[c] for p in parts]) if c in names
                       else np.full(n, np.nan) if c in floats else np.empty(n, dtype=object)
                       for c in columns}, columns=columns)
    return validate_frame(table, df)


def gpu_run_row(*, run_id: str, model: str, device: str, known: GpuSource | None,
                framework: str, batch_size: int, source: str, importer: str, params: dict,
                notes: str, **times) -> dict:
    """The ``runs`` row of an imported GPU file (caffe time, PipeDream): published, with the
    source's framework, statement, licence and date when the file is shipped (``known``),
    measured at import time otherwise."""
    from dgtraces.importers.shipped import COPIED_UTC
    from dgtraces.io.files import utc_now
    from dgtraces.tables.runrow import runs_row

    if known is not None:
        params = {**params, "stated": known.stated, "licence": known.licence}
    return runs_row(run_id=run_id, model=model, device=device, device_kind="gpu",
                    framework=known.framework if known else framework,
                    batch_size=batch_size, provenance="published" if known else "measured",
                    source=source, collector_version=collector_version(importer),
                    timestamp_utc=(known.date_utc or COPIED_UTC) if known else utc_now(),
                    params=params, notes=notes, **times)
