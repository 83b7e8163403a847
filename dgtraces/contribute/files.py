"""``dgtraces validate``: loose CSV/Parquet files checked as a contribution's tables are
(the contribution size limits, schemas, foreign keys against the latest release's parents,
gradient sizes), without staging anything. Nothing here prints.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from dgtraces.errors import Code, DgtracesError, Failure, MissingFileError, ValidationError
from dgtraces.tables.checks import check_tables, needed_parents, table_for_path

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from dgtraces.store.release import Release


def store_parents(frames: Mapping[str, "pd.DataFrame"], latest: Callable[[], Release]
                  ) -> dict[str, "pd.DataFrame"]:
    """The latest release's rows of each parent table the frames reference but lack;
    ``latest`` opens that release (called once, only when a parent is needed). A parent
    that is not there (no release, no such table: NOT_FOUND) is left out; a damaged release
    (INTEGRITY) raises, never read as "no parents" (#36 item 3)."""
    from dgtraces.errors import StoreError

    parents = sorted(needed_parents(frames))
    if not parents:
        return {}
    try:
        rel = latest()
    except StoreError as exc:
        if exc.code != Code.NOT_FOUND:
            raise
        return {}
    known = {}
    for parent in parents:
        try:
            known[parent] = rel.table(parent)
        except StoreError as exc:
            if exc.code != Code.NOT_FOUND:
                raise
    return known


def validate_files(paths, table: str | None = None, *, use_store: bool = True,
                   root=None) -> dict[str, int]:
    """Validate files (never modifies them). Returns table -> rows; raises with a report."""
    from dgtraces.contribute.intake import read_bounded
    from dgtraces.tables.schema import TABLES

    if table is not None and table not in TABLES:
        raise DgtracesError(f"unknown table {table!r}", code=Code.BAD_INPUT,
                            failures=[Failure(Code.BAD_INPUT, "unknown table", column="--table",
                                              expected=" | ".join(TABLES), found=repr(table))])
    frames: dict[str, "pd.DataFrame"] = {}
    files: dict[str, str] = {}
    for path in paths:
        if not Path(path).is_file():  # before guessing a table from a name that isn't there
            raise MissingFileError(f"{path}: no such file")
        name = table or table_for_path(path)
        if name in frames:
            raise DgtracesError(f"two files for table {name!r}: {files[name]} and {path}",
                                code=Code.BAD_INPUT)
        frames[name] = read_bounded(Path(path), table=name)  # the contribution limits apply
        files[name] = str(path)
    from dgtraces.contribute.plausibility import grad_failures, split_grad_columns

    grads = split_grad_columns(frames)
    from dgtraces.store.release import Release

    known = store_parents(frames, lambda: Release.open(None, root)) if use_store else {}
    typed, failures = check_tables(frames, files=files, known=known)
    if grads is not None and not failures:  # checked as `contribute` does
        runs = typed["runs"] if "runs" in typed else known.get("runs")
        if runs is not None:
            failures = grad_failures(typed["layer_timings"], grads, runs,
                                     files.get("layer_timings"))
    if failures:
        code = Code.SCHEMA if any(f.code == Code.SCHEMA for f in failures) else failures[0].code
        hint = None
        if use_store and needed_parents(frames):  # parents were looked up in the store
            from dgtraces.store.manifest import data_root, latest_or_none

            from .validate import empty_store_hint

            data = data_root(root)
            if latest_or_none(data) is None:
                hint = empty_store_hint(data)
        raise ValidationError(f"{len(failures)} validation failure(s) in "
                              f"{len(paths)} file(s)", code=code, failures=failures,
                              hint=hint)
    return {name: len(df) for name, df in frames.items()}
