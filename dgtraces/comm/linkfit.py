"""Links fitted from a user's own measurements: ``predict --link-fit FILE|RUN``.

Accepted, all turned into one allreduce fit ``T = alpha + beta n`` among ``P`` workers and
inverted through the ring cost (:func:`.links.ring_link_from_allreduce`) into a per-hop link:

* ``INTERCONNECT[@WORKERS]``: an ``allreduce`` row of the ``comm_fits`` table of a release
  (e.g. ``loopback-gloo@2``);
* a ``comm_fits`` file (CSV or Parquet, the table's columns), as written by
  ``dgtraces collect comm`` and by the nccl-tests importer: its allreduce row;
* a ``comm`` file (points: ``collective, workers, message_bytes, time_ms``): fitted here
  with the collector's weighted alpha-beta fit;
* a folder holding either (a ``collect comm`` output folder);
* a raw nccl-tests log (``all_reduce_perf`` output; recognised by its ``# nThread`` /
  ``# Using devices`` header): imported with :mod:`dgtraces.importers.nccl_tests` and its
  allreduce ``comm_fits`` row used;
* an OSU ``osu_allreduce`` text output (``# Size  Avg Latency(us)`` rows, optionally
  ``P,size`` as in the B-Caffe logs); ``@WORKERS`` gives P when the file does not (default 2).

Messages under 12 KiB are left out of OSU and point fits (eager protocol, another regime), as
for the shipped ``10gbe-mpi`` row.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import Code, DgtracesError, Failure
from .links import Link, ring_link_from_allreduce

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from dgtraces.store.release import Release

MIN_FIT_BYTES = 12288
OSU_WORKERS = 2
ACCEPTED = ("a comm_fits or comm table (.csv/.parquet), a folder holding one, a raw nccl-tests "
            "log (all_reduce_perf), an OSU osu_allreduce output, or INTERCONNECT[@WORKERS] of "
            "a release's comm_fits")


def _bad(message: str, found: object, expected: str = "a comm_fits/comm file, an OSU "
         "output or INTERCONNECT[@WORKERS]", code: str = Code.BAD_INPUT) -> DgtracesError:
    return DgtracesError(f"--link-fit: {message}", code=code,
                         failures=[Failure(code, message, column="link_fit",
                                           expected=expected, found=repr(found)[:80])])


def _split_workers(spec: str) -> tuple[str, int | None]:
    if "@" not in spec:
        return spec, None
    name, _, w = spec.rpartition("@")
    if not w.isdigit() or int(w) < 2:
        raise _bad("@WORKERS must be an integer >= 2", spec)
    return name, int(w)


def _pick_fit(fits: pd.DataFrame, workers: int | None, what: str) -> dict:
    need = {"collective", "workers", "alpha_us", "beta_us_per_byte"}
    if not need <= set(fits.columns):
        raise _bad(f"{what} lacks comm_fits columns {sorted(need - set(fits.columns))}", what)
    rows = fits[fits["collective"] == "allreduce"]
    if workers is not None:
        rows = rows[rows["workers"] == workers]
    if rows.empty:
        raise _bad(f"no allreduce fit in {what}" + (f" for {workers} workers" if workers
                                                    else ""), what, code=Code.NOT_FOUND)
    sort = ["workers", "r2"] if "r2" in rows else ["workers"]
    return rows.sort_values(sort, ascending=[True, False][:len(sort)]).iloc[0].to_dict()


def _fit_points(points: pd.DataFrame, workers: int | None, what: str) -> dict:
    from ..fitting import fit_alpha_beta

    rows = points[(points["collective"] == "allreduce")] if "collective" in points else points
    if workers is None and "workers" in rows and len(rows):
        workers = int(rows["workers"].min())
    if "workers" in rows:
        rows = rows[rows["workers"] == workers]
    rows = rows[rows["message_bytes"] >= MIN_FIT_BYTES]
    if len(rows) < 2:
        raise _bad(f"fewer than 2 allreduce points >= {MIN_FIT_BYTES} bytes in {what}", what)
    fit = fit_alpha_beta(rows["message_bytes"].to_numpy(),
                         rows["time_ms"].to_numpy() * 1000.0).row()  # relative weights
    return dict(fit, workers=workers or OSU_WORKERS, collective="allreduce",
                provenance=str(rows["provenance"].iloc[0]) if "provenance" in rows
                else "measured", source=f"alpha-beta fit of {len(rows)} points of {what}")


# a fit file is handed in (a comm/comm_fits table someone shared): read within bounds, its
# Parquet footer not trusted (#29 high, variant: the contribution limits of one table)
MAX_ROWS, MAX_CELLS, MAX_BYTES, MAX_FIELD_CHARS = 5_000_000, 20_000_000, 256 << 20, 65_536


def _read_table(path: Path) -> pd.DataFrame:
    import pandas as pd

    from dgtraces.io import bounded
    from dgtraces.tables.checks import column_cap

    cols = max(column_cap("comm"), column_cap("comm_fits"))  # before parsing a header (#36)
    if path.suffix.lower() == ".parquet":
        return bounded.read_parquet(path, max_rows=MAX_ROWS, max_cells=MAX_CELLS,
                                    max_bytes=MAX_BYTES, max_field_chars=MAX_FIELD_CHARS,
                                    max_columns=cols)
    size = path.stat().st_size  # a CSV within the same bounds as a Parquet file
    if size > MAX_BYTES:
        raise bounded.bad_file(path.name, "file too large", f"<= {MAX_BYTES} bytes", size)
    bounded.check_csv(path, MAX_ROWS, MAX_CELLS, cols)
    df = pd.read_csv(path)
    for col in df.select_dtypes(include=["object", "string"]).columns:
        longest = df[col].astype("string").str.len().max()
        if pd.notna(longest) and longest > MAX_FIELD_CHARS:
            raise bounded.bad_file(path.name, f"huge field in column {col!r}",
                                   f"<= {MAX_FIELD_CHARS} characters", int(longest))
    return df


def _is_nccl_tests(path: Path) -> bool:
    """Whether ``path`` looks like an nccl-tests log (its header lines)."""
    with path.open("r", encoding="utf-8", errors="replace") as f:
        head = f.read(65536)
    return "# Using devices" in head or bool(re.search(r"^#\s*nThread\s+\d+", head, re.M))


def _osu(path: Path, workers: int | None) -> pd.DataFrame | None:
    """OSU allreduce text output as comm points, or None if the file is not one."""
    import pandas as pd

    from ..importers.base import read_input  # size-checked before it is read (#29)

    text = read_input(path).decode("utf-8", errors="replace")
    if "Latency" not in text:
        return None
    rows = []
    for line in text.splitlines():
        parts = line.replace(",", " ").split()
        if not parts or line.lstrip().startswith("#"):
            continue
        try:
            nums = [float(x) for x in parts]
        except ValueError:
            continue
        if len(nums) == 3:  # P,size latency (B-Caffe logs)
            p, size, us = nums
        elif len(nums) == 2:
            p, (size, us) = workers or OSU_WORKERS, nums
        else:
            continue
        rows.append({"workers": int(p), "message_bytes": int(size), "time_ms": us / 1000.0})
    if not rows:
        return None
    df = pd.DataFrame(rows)
    return df.assign(collective="allreduce", provenance="measured")


def _from_path(path: Path, workers: int | None) -> dict:
    if path.is_dir():
        for stem in ("comm_fits", "comm"):
            for ext in (".parquet", ".csv"):
                if (path / f"{stem}{ext}").is_file():
                    return _from_path(path / f"{stem}{ext}", workers)
        raise _bad("folder holds no comm_fits or comm table", str(path), code=Code.NOT_FOUND)
    if path.suffix.lower() in (".csv", ".parquet"):
        df = _read_table(path)
        if "beta_us_per_byte" in df.columns:
            return _pick_fit(df, workers, str(path))
        if {"message_bytes", "time_ms"} <= set(df.columns):
            return _fit_points(df, workers, str(path))
        raise _bad("a CSV/Parquet that is neither a comm_fits nor a comm table", str(path))
    if _is_nccl_tests(path):
        from ..importers.nccl_tests import import_log

        imported = import_log(path)
        return _pick_fit(imported.comm_fits, workers, f"nccl-tests log {path.name}")
    osu = _osu(path, workers)
    if osu is None:
        raise _bad("unrecognised file format", str(path), expected=ACCEPTED, code=Code.BAD_FILE)
    return _fit_points(osu, workers, f"OSU output {path.name}")


def link_from_fit(spec: str, release: "Release | str | None" = None) -> Link:
    """The per-hop :class:`Link` of an allreduce fit named by ``spec`` (see module doc); a
    release's ``comm_fits`` are read from ``release`` (a Release or a version, default
    latest)."""
    from dgtraces.store.release import as_release

    if not isinstance(spec, str) or not spec:
        raise _bad("empty", spec)
    target, workers = _split_workers(spec)
    path = Path(target)
    if path.exists():
        fit = _from_path(path, workers)
        origin = str(path)
    else:
        rel = as_release(release)
        if "comm_fits" not in rel.entries:
            raise _bad(f"release {rel.version} has no comm_fits table and no file {target!r} "
                       "exists", spec, code=Code.NOT_FOUND)
        fits = rel.cached("comm_fits")
        fit = _pick_fit(fits[fits["interconnect"] == target], workers,
                        f"comm_fits of release {rel.version} (interconnect {target})")
        origin = f"comm_fits of release {rel.version}"
    alpha, bw = ring_link_from_allreduce(float(fit["alpha_us"]),
                                         float(fit["beta_us_per_byte"]), int(fit["workers"]))
    return Link(f"fit:{Path(target).name}", alpha, bw, str(fit.get("provenance", "measured")),
                f"--link-fit {spec}: allreduce fit among {int(fit['workers'])} workers "
                f"(alpha {float(fit['alpha_us']):.4g} us, beta "
                f"{float(fit['beta_us_per_byte']):.4g} us/byte) from {origin}: "
                f"{fit.get('source', '')}; inverted through the ring cost")
