"""The one table writer: :func:`write_tables` validates frames together (schemas and every
declared foreign key) and writes one ``<table>.parquet`` or ``<table>.csv`` each; into a new
folder atomically (:func:`dgtraces.io.files.atomic_folder`), or (``into_existing``) file by
file into a folder that already holds other tables.

Torch-free; pandas/pyarrow are imported when a table is written.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from dgtraces.errors import Code, DgtracesError
from dgtraces.io.files import atomic_file, atomic_folder, check_targets

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

Format = Literal["parquet", "csv"]


def _table_bytes(df: "pd.DataFrame", fmt: Format) -> bytes:
    import io

    if fmt == "csv":
        return df.to_csv(index=False).encode("utf-8")
    buf = io.BytesIO()
    df.to_parquet(buf, index=False)
    return buf.getvalue()


def write_tables(out: str | os.PathLike, frames: Mapping[str, "pd.DataFrame"], *,
                 fmt: Format = "parquet", validate: bool = True,
                 known: Mapping[str, "pd.DataFrame"] | None = None,
                 into_existing: bool = False, overwrite: bool = False) -> list[Path]:
    """Write one ``<table>.<fmt>`` per frame into ``out``; returns the written paths.

    ``validate`` checks the frames together (schemas and declared foreign keys; ``known``
    adds parent rows such as the store's runs) before anything is written. A new ``out``
    (missing or empty) is written atomically as a whole. ``into_existing`` writes into a
    folder that may hold other files, each file atomically; an existing table file is
    BAD_INPUT unless ``overwrite``.
    """
    if fmt not in ("parquet", "csv"):
        raise DgtracesError(f"table format must be parquet or csv, got {fmt!r}",
                            code=Code.BAD_INPUT)
    if validate:
        from dgtraces.tables.checks import validate_tables

        frames = validate_tables(frames, known=known)
    out = Path(out)
    names = {name: f"{name}.{fmt}" for name in frames}
    if into_existing and out.is_dir() and any(out.iterdir()):
        clash = [str(out / f) for f in names.values() if (out / f).exists()]
        if clash and not overwrite:
            raise DgtracesError(f"refusing to overwrite {', '.join(clash)} (use --force)",
                                code=Code.BAD_INPUT)
        check_targets([out / f for f in names.values()])  # none before all pass (#36)
        for name, df in frames.items():
            with atomic_file(out / names[name]) as fh:
                fh.write(_table_bytes(df, fmt))
    else:
        with atomic_folder(out) as tmp:
            for name, df in frames.items():
                (tmp / names[name]).write_bytes(_table_bytes(df, fmt))
    return [out / names[name] for name in frames]
