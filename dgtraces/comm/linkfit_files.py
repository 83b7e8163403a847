"""The files ``--link-fit`` reads (issue #36 item 5: it trusted them): each is validated
before a fit is taken from it.

* Only a regular file is opened (:func:`dgtraces.io.lines.check_regular`, before opening): a
  FIFO would block forever and ``/dev/zero`` never ends (BAD_FILE).
* A ``comm_fits`` or ``comm`` table (CSV or Parquet) is read within the bounds of a
  contribution's table and validated against that table's schema, the columns it has
  (:func:`dgtraces.tables.checks.validate_columns`): text in a number column, a negative
  alpha or time, a column the table does not have are SCHEMA; a spelled-out ``NaN`` or
  ``inf`` is PLAUSIBILITY.
* An OSU ``osu_allreduce`` output: every number must be finite (``1e999`` is PLAUSIBILITY,
  naming the line), sizes and process counts whole and > 0 (BAD_FILE); its points are then
  validated as ``comm`` rows.
* A raw nccl-tests log is imported by :mod:`dgtraces.importers.nccl_tests` (its typed
  errors: a truncated log BAD_FILE, a contradictory name BAD_INPUT, ...); a log of another
  collective than all-reduce is BAD_INPUT: no fit is made from it (a log whose first lines
  name another binary, e.g. ``alltoall_perf``, before any of its rows is read).
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import Code, DgtracesError, Failure

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

MIN_FIT_BYTES = 12288
OSU_WORKERS = 2
ACCEPTED = ("a comm_fits or comm table (.csv/.parquet), a folder holding one, a raw nccl-tests "
            "log (all_reduce_perf), an OSU osu_allreduce output, or INTERCONNECT[@WORKERS] of "
            "a release's comm_fits")
# a fit file is handed in (a comm/comm_fits table someone shared): read within bounds, its
# Parquet footer not trusted (#29 high, variant: the contribution limits of one table)
MAX_ROWS, MAX_CELLS, MAX_BYTES, MAX_FIELD_CHARS = 5_000_000, 20_000_000, 256 << 20, 65_536


def bad(message: str, found: object, expected: str = "a comm_fits/comm file, an OSU "
        "output or INTERCONNECT[@WORKERS]", code: str = Code.BAD_INPUT,
        column: str = "link_fit") -> DgtracesError:
    """A ``--link-fit`` error (BAD_INPUT unless ``code``)."""
    return DgtracesError(f"--link-fit: {message}", code=code,
                         failures=[Failure(code, message, column=column,
                                           expected=expected, found=repr(found)[:80])])


def pick_fit(fits: pd.DataFrame, workers: int | None, what: str) -> dict:
    """The allreduce row of a ``comm_fits`` table (validated against its schema) for
    ``workers`` (default: the fewest), the best r2 first."""
    from dgtraces.tables.checks import validate_columns

    need = {"collective", "workers", "alpha_us", "beta_us_per_byte"}
    if not need <= set(fits.columns):
        raise bad(f"{what} lacks comm_fits columns {sorted(need - set(fits.columns))}", what)
    fits = validate_columns("comm_fits", fits, file=what)
    rows = fits[fits["collective"] == "allreduce"]
    if workers is not None:
        rows = rows[rows["workers"] == workers]
    if rows.empty:
        raise bad(f"no allreduce fit in {what}" + (f" for {workers} workers" if workers
                                                   else ""), what, code=Code.NOT_FOUND)
    sort = ["workers", "r2"] if "r2" in rows else ["workers"]
    return rows.sort_values(sort, ascending=[True, False][:len(sort)]).iloc[0].to_dict()


def fit_points(points: pd.DataFrame, workers: int | None, what: str) -> dict:
    """An allreduce fit of ``comm`` points (validated against the comm schema) of messages
    >= :data:`MIN_FIT_BYTES`, with the collector's relative weights."""
    from ..fitting import fit_alpha_beta
    from ..tables.checks import validate_columns

    points = validate_columns("comm", points, file=what)  # non-finite times: PLAUSIBILITY
    rows = points[(points["collective"] == "allreduce")] if "collective" in points else points
    if workers is None and "workers" in rows and len(rows):
        workers = int(rows["workers"].min())
    if "workers" in rows:
        rows = rows[rows["workers"] == workers]
    rows = rows[rows["message_bytes"] >= MIN_FIT_BYTES]
    if len(rows) < 2:
        raise bad(f"fewer than 2 allreduce points >= {MIN_FIT_BYTES} bytes in {what}", what)
    fit = fit_alpha_beta(rows["message_bytes"].to_numpy(),
                         rows["time_ms"].to_numpy() * 1000.0).row()  # relative weights
    return dict(fit, workers=workers or OSU_WORKERS, collective="allreduce",
                provenance=str(rows["provenance"].iloc[0]) if "provenance" in rows
                else "measured", source=f"alpha-beta fit of {len(rows)} points of {what}")


def read_table(path: Path) -> pd.DataFrame:
    """A comm/comm_fits CSV or Parquet file within the bounds of one contributed table; a
    CSV's text columns stay text and only empty cells are missing (``NaN`` is refused by the
    schema check, not read as missing)."""
    from dgtraces.io import bounded
    from dgtraces.tables.checks import column_cap, read_file

    cols = max(column_cap("comm"), column_cap("comm_fits"))  # before parsing a header (#36)
    if path.suffix.lower() == ".parquet":
        return bounded.read_parquet(path, max_rows=MAX_ROWS, max_cells=MAX_CELLS,
                                    max_bytes=MAX_BYTES, max_field_chars=MAX_FIELD_CHARS,
                                    max_columns=cols)
    size = path.stat().st_size  # a CSV within the same bounds as a Parquet file
    if size > MAX_BYTES:
        raise bounded.bad_file(path.name, "file too large", f"<= {MAX_BYTES} bytes", size)
    bounded.check_csv(path, MAX_ROWS, MAX_CELLS, cols)
    df = read_file(path, _csv_table(path))
    for col in df.select_dtypes(include=["object", "string"]).columns:
        longest = df[col].astype("string").str.len().max()
        if longest is not None and longest == longest and longest > MAX_FIELD_CHARS:
            raise bounded.bad_file(path.name, f"huge field in column {col!r}",
                                   f"<= {MAX_FIELD_CHARS} characters", int(longest))
    return df


def _csv_table(path: Path) -> str | None:
    """The table a CSV's header names (comm_fits, comm), so its text columns read as text."""
    import csv

    with path.open("r", encoding="utf-8", errors="replace", newline="") as fh:
        header = set(next(csv.reader([fh.readline(1 << 20)]), []))
    return ("comm_fits" if "beta_us_per_byte" in header else
            "comm" if {"message_bytes", "time_ms"} <= header else None)


HEAD_BYTES = 65536  # what is read to recognise a log and the binary it names


def _head(path: Path) -> str:
    from dgtraces.io.lines import open_regular

    with open_regular(path) as fh:
        return fh.read(HEAD_BYTES).decode("utf-8", errors="replace")


def is_nccl_tests(path: Path) -> bool:
    """Whether ``path`` (a regular file) looks like an nccl-tests log (its header lines)."""
    head = _head(path)
    return "# Using devices" in head or bool(re.search(r"^#\s*nThread\s+\d+", head, re.M))


def nccl_tests_fit(path: Path, workers: int | None) -> dict:
    """The allreduce fit of a raw nccl-tests log, with the importer's typed errors; a log
    of another collective is BAD_INPUT."""
    from ..importers.nccl_tests import import_log
    from ..importers.nccl_tests.reader import NAMED

    # a log naming another binary (alltoall_perf) is refused before its rows are read: its
    # rows may be what an all-reduce row cannot be (all-to-all's 0-byte sizes)
    named = sorted({m[1] for m in NAMED.finditer(_head(path))} - {"all_reduce"})
    if named:
        raise bad(f"an nccl-tests log of {', '.join(f'{n}_perf' for n in named)} (named in its "
                  "first lines); a link fit needs an all-reduce log (all_reduce_perf)",
                  named[0], "allreduce", column="collective")
    imported = import_log(path)
    if imported.collective != "allreduce":
        raise bad(f"an nccl-tests {imported.collective} log ({imported.collective_how}); a "
                  "link fit needs an all-reduce log (all_reduce_perf)", imported.collective,
                  "allreduce", column="collective")
    return pick_fit(imported.comm_fits, workers, f"nccl-tests log {path.name}")


def osu_points(path: Path, workers: int | None) -> pd.DataFrame | None:
    """OSU allreduce text output as comm points, or None if the file is not one."""
    import pandas as pd

    from ..importers.base import read_input  # size-checked before it is read (#29)

    text = read_input(path).decode("utf-8", errors="replace")
    if "Latency" not in text:
        return None
    rows = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        parts = line.replace(",", " ").split()
        if not parts or line.lstrip().startswith("#"):
            continue
        try:
            nums = [float(x) for x in parts]
        except ValueError:
            continue
        if len(nums) not in (2, 3):
            continue
        rows.append(_osu_row(nums, workers, path, lineno))
    if not rows:
        return None
    return pd.DataFrame(rows).assign(collective="allreduce", provenance="measured")


def _osu_row(nums: list[float], workers: int | None, path: Path, lineno: int) -> dict:
    """``[P,] size latency_us`` of one OSU line: finite (PLAUSIBILITY), P and size whole and
    > 0 (BAD_FILE)."""
    if not all(math.isfinite(x) for x in nums):
        raise _at(path, lineno, "a number that is not finite", nums, "finite numbers",
                  Code.PLAUSIBILITY)
    p, size, us = nums if len(nums) == 3 else (workers or OSU_WORKERS, *nums)
    for name, value in (("processes", p), ("size", size)):
        if not (float(value).is_integer() and 0 < value <= 2 ** 53):
            raise _at(path, lineno, f"{name} is not a whole number > 0", value,
                      "a whole number > 0", Code.BAD_FILE)
    return {"workers": int(p), "message_bytes": int(size), "time_ms": us / 1000.0}


def _at(path: Path, lineno: int, message: str, found: object, expected: str,
        code: Code) -> DgtracesError:
    return DgtracesError(f"--link-fit: {path.name} line {lineno}: {message}", code=code,
                         failures=[Failure(code, message, file=str(path), row=lineno,
                                           expected=expected, found=repr(found)[:80])])
