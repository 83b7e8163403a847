"""Validating a contribution: schemas and keys, structure, plausibility, duplicates.

:func:`check` never writes anything. It raises one
:class:`~dgtraces.errors.ValidationError` listing every failure it found (schema and key
failures first: the later checks need well-typed tables), with the most fundamental code
on the error itself (see :data:`CODE_ORDER`).

Duplicates are found by content, not by name: a run's *fingerprint* is a sha256 over its
descriptive columns and the sorted per-layer timing rows (floats rounded to 1e-6 ms), so a
renamed copy of a stored or staged run is still a DUPLICATE.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..coverage import device_peaks, incomplete_failures, reference_peaks, throughput_failures
from ..errors import Failure, ValidationError
from . import plausibility as pl
from .intake import DEFAULT_LIMITS, Contribution, Limits, read_contribution
from .metadata import device_keys, json_failures
from .template import EXAMPLE_RUN_PREFIX, EXAMPLE_SOURCE, PLACEHOLDER_CONTRIBUTOR

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

CODE_ORDER = ("SCHEMA", "CROSS_TABLE", "METADATA", "UNKNOWN_LAYER", "GRAD_MISMATCH",
              "UNKNOWN_DEVICE", "DEVICE_MISMATCH", "PLAUSIBILITY", "DUPLICATE")
RUN_DESCRIPTORS = ("model", "device", "framework", "precision", "batch_size", "threads")
TIMING_COLUMNS = ("layer", "fwd_ms", "bwd_ms", "fwd_p10_ms", "fwd_p90_ms", "bwd_p10_ms",
                  "bwd_p90_ms", "comm_ms", "n")
SEP = "\x1f"


@dataclass
class Known:
    """Content already in the store or in staging (for duplicate and device checks)."""

    run_ids: set = field(default_factory=set)
    fingerprints: set = field(default_factory=set)
    iter_ids: set = field(default_factory=set)
    comm_keys: set = field(default_factory=set)
    digests: set = field(default_factory=set)
    devices: dict = field(default_factory=dict)  # device key -> kind (cpu | gpu)
    peaks: dict = field(default_factory=dict)  # device key -> datasheet peak FLOP/s

    def update(self, other: "Known") -> "Known":
        for name in self.__dataclass_fields__:
            getattr(self, name).update(getattr(other, name))
        return self


@dataclass
class Checked:
    """A contribution that passed every check, with the keys staging records."""

    meta: dict
    frames: dict
    files: dict
    digest: str
    fingerprints: dict  # run_id -> fingerprint
    iter_ids: list
    comm_keys: list
    base_release: str | None = None  # latest release when checked (None: empty store)

    @property
    def rows(self) -> dict[str, int]:
        return {name: int(len(df)) for name, df in self.frames.items()}


def _rounded(df: "pd.DataFrame") -> "pd.DataFrame":
    import numpy as np

    out = df.copy()
    with np.errstate(over="ignore", invalid="ignore"):  # huge values round to themselves
        for col in out.columns:
            if out[col].dtype.kind == "f":
                out[col] = out[col].round(6)
    return out


def joined(df: "pd.DataFrame", cols) -> list[str]:
    """Row keys: the columns' text joined by a separator (missing values as <NA>)."""
    parts = [df[c].astype("string").fillna("<NA>") for c in cols]
    return list(parts[0].str.cat(parts[1:], sep=SEP)) if len(parts) > 1 else list(parts[0])


def run_fingerprints(runs: "pd.DataFrame", lt: "pd.DataFrame") -> dict[str, str]:
    """run_id -> sha256 of (descriptors, sorted timing rows); order- and name-independent."""
    import numpy as np
    import pandas as pd

    lt = lt.sort_values(["run_id", "layer"], kind="stable")
    cols = [c for c in TIMING_COLUMNS if c in lt.columns]
    rows = pd.util.hash_pandas_object(_rounded(lt[cols]), index=False).to_numpy()
    rid = lt["run_id"].astype(str).to_numpy()
    uniq, start = np.unique(rid, return_index=True)
    ends = list(start[1:]) + [len(rid)]
    desc_cols = [c for c in RUN_DESCRIPTORS if c in runs.columns]
    desc = dict(zip(runs["run_id"].astype(str), joined(runs, desc_cols), strict=True))
    out = {}
    for run_id, a, b in zip(uniq, start, ends, strict=True):
        h = hashlib.sha256(desc.get(run_id, "").encode())
        h.update(rows[a:b].tobytes())
        out[str(run_id)] = h.hexdigest()
    return out


def comm_keys(comm: "pd.DataFrame") -> list[str]:
    from ..schema import KEYS

    return joined(comm, KEYS["comm"])


def content_digest(frames: Mapping[str, "pd.DataFrame"]) -> str:
    """sha256 of the normalised tables (sorted columns and rows, rounded floats)."""
    import pandas as pd

    from ..schema import KEYS

    h = hashlib.sha256()
    for name in sorted(frames):
        df = frames[name]
        df = df[sorted(df.columns)].sort_values(list(KEYS[name]), kind="stable")
        h.update(name.encode() + b"\0" + SEP.join(df.columns).encode() + b"\0")
        h.update(pd.util.hash_pandas_object(_rounded(df), index=False).to_numpy().tobytes())
    return h.hexdigest()


def _candidate_runs(version: str, root, lt: "pd.DataFrame | None") -> list[str] | None:
    """Stored runs whose per-run layer count and fwd/bwd sums match a run of ``lt`` (the
    contribution's timings) within the fingerprint's rounding: the only ones whose
    fingerprints can equal a new run's. One DuckDB aggregate over the stored shards (memory
    per stored run, not per row). None: no usable ``lt`` (compute every fingerprint)."""
    import pandas as pd

    from .. import store
    from ..shards import _duck, _scan

    if lt is None or not {"run_id", "fwd_ms", "bwd_ms"} <= set(lt.columns):
        return None
    new = pd.DataFrame({"run_id": lt["run_id"].astype("string"),
                        "f": pd.to_numeric(lt["fwd_ms"], errors="coerce"),
                        "b": pd.to_numeric(lt["bwd_ms"], errors="coerce")})
    agg = new.groupby("run_id").agg(n=("f", "size"), f=("f", "sum"), b=("b", "sum"))
    con = _duck()
    try:
        con.register("c", agg.reset_index(drop=True))
        files = store.table_files(version, root)["layer_timings"]
        rows = con.execute(
            "SELECT DISTINCT s.run_id FROM (SELECT run_id, count(*) AS n, "
            "sum(coalesce(fwd_ms, 0)) AS f, sum(coalesce(bwd_ms, 0)) AS b FROM "
            f"{_scan(files, ['run_id', 'fwd_ms', 'bwd_ms'])} GROUP BY run_id) s JOIN c "
            "ON s.n = c.n AND abs(s.f - c.f) <= s.n * 1e-6 + 1e-9 * abs(c.f) "
            "AND abs(s.b - c.b) <= s.n * 1e-6 + 1e-9 * abs(c.b)").fetchall()
    finally:
        con.close()
    return [r[0] for r in rows]


def store_known(root=None, frames: Mapping[str, "pd.DataFrame"] | None = None) -> Known:
    """Keys, fingerprints and devices of the latest release (empty store: nothing).

    With ``frames`` (the contribution's tables), run fingerprints are computed only for
    the stored runs that could match one of its runs (:func:`_candidate_runs`), so memory
    follows the contribution, not the store; key columns are read alone (column
    projection over the shards).
    """
    import pyarrow as pa
    import pyarrow.dataset as ds

    from .. import store

    known = Known()
    known.peaks.update(reference_peaks())
    version = store.latest_or_none(root)
    if version is None:
        return known
    tables = store.tables(version, root)

    def read(name, columns=None, run_ids=None):
        if name not in tables:
            return None
        data = store.dataset(name, version, root)
        where = None if run_ids is None else ds.field("run_id").isin(
            pa.array(run_ids, type=data.schema.field("run_id").type))
        return data.to_table(columns=columns, filter=where).to_pandas()

    runs = read("runs")
    if runs is not None:
        known.run_ids.update(runs["run_id"].astype(str))
        if "layer_timings" in tables and tables["layer_timings"]["rows"]:
            cands = _candidate_runs(version, root, (frames or {}).get("layer_timings"))
            lt = read("layer_timings", run_ids=cands) if cands != [] else None
            if lt is not None and len(lt):
                known.fingerprints.update(run_fingerprints(runs, lt).values())
    it = read("iterations", ["iter_id"])
    if it is not None:
        known.iter_ids.update(it["iter_id"].astype(str))
    from ..schema import KEYS

    comm = read("comm", list(KEYS["comm"]))
    if comm is not None:
        known.comm_keys.update(comm_keys(comm))
    devices = read("devices", ["device", "kind"])
    if devices is not None:
        known.devices.update(zip(devices["device"].astype(str), devices["kind"].astype(str),
                                 strict=True))
    known.peaks.update(device_peaks(devices))
    return known


def _duplicates(frames, files, fingerprints: dict, known: Known) -> list[Failure]:
    out: list[Failure] = []
    runs = frames["runs"].reset_index(drop=True)
    seen: dict[str, str] = {}
    for row, rid in enumerate(runs["run_id"].astype(str)):
        fp = fingerprints.get(rid)
        where = dict(file=files.get("runs"), row=row, column="run_id", found=repr(rid))
        if rid in known.run_ids:
            out.append(Failure("DUPLICATE", "run_id already in the store or staging",
                               expected="a new run_id", **where))
        if fp is not None and fp in known.fingerprints:
            out.append(Failure("DUPLICATE", "same timings as a run in the store or staging",
                               expected="new content", **where))
        elif fp is not None and fp in seen:
            out.append(Failure("DUPLICATE", f"same timings as run {seen[fp]!r} in this "
                               "contribution", expected="new content", **where))
        if fp is not None:
            seen.setdefault(fp, rid)
    for name, known_keys, col in (("iterations", known.iter_ids, "iter_id"),
                                  ("comm", known.comm_keys, "message_bytes")):
        df = frames.get(name)
        if df is None:
            continue
        keys = df["iter_id"].astype(str) if name == "iterations" else comm_keys(df)
        for row, key in enumerate(keys):
            if key in known_keys:
                out.append(Failure("DUPLICATE", f"{name} row already in the store or staging",
                                   file=files.get(name), row=row, column=col,
                                   found=repr(key.replace(SEP, "/"))))
    return out


def placeholder_failures(meta: dict, runs: "pd.DataFrame", files) -> list[Failure]:
    """The ``--template`` markers left in place: its contributor (METADATA), a ``source``
    starting with its EXAMPLE marker or a ``run_id`` with its prefix (PLAUSIBILITY: the
    template's numbers are placeholders, not measurements)."""
    out = []
    if str(meta.get("contributor", "")).strip() == PLACEHOLDER_CONTRIBUTOR:
        out.append(Failure("METADATA", "the template's placeholder contributor",
                           file="contribution.yaml", column="contributor",
                           expected="your name and e-mail", found=PLACEHOLDER_CONTRIBUTOR))
    markers = (("source", lambda v: v.lstrip().startswith(EXAMPLE_SOURCE)),
               ("run_id", lambda v: v.startswith(EXAMPLE_RUN_PREFIX)))
    for col, is_marker in markers:
        for row, value in enumerate(runs[col].astype("string").fillna("")):
            if is_marker(value):
                out.append(Failure("PLAUSIBILITY", f"template placeholder {col} (its numbers "
                                   "are not measurements)", file=files.get("runs"), row=row,
                                   column=col, expected="your own value",
                                   found=repr(value)[:80]))
    return out


def check(contrib: Contribution, known: Known) -> Checked:
    """Run every check on a read contribution; raise one error listing all failures."""
    from ..checks import check_tables

    frames, files = dict(contrib.frames), contrib.files
    lt = frames["layer_timings"]
    gcols = [c for c in pl.GRAD_COLUMNS if c in lt.columns]
    grads = lt[gcols].reset_index(drop=True) if gcols else None
    frames["layer_timings"] = lt.drop(columns=gcols)
    frames, failures = check_tables(frames, files=files)
    failures = list(contrib.meta_failures) + failures
    if any(f.code in ("SCHEMA", "CROSS_TABLE") for f in failures):
        _refuse(contrib, failures)  # the later checks need typed values and intact keys
    runs, lt = frames["runs"], frames["layer_timings"]
    if not contrib.meta_failures:  # a bad field is reported once, not again as non-JSON
        failures += json_failures(contrib.meta)
    failures += placeholder_failures(contrib.meta, runs, files)
    failures += pl.finite_failures(frames, files)
    if grads is not None:
        failures += pl.grad_failures(lt, grads, runs, files.get("layer_timings"))
    failures += pl.layer_sum_failures(runs, lt, files)
    if contrib.meta.get("partial") is not True:
        failures += incomplete_failures(runs, lt, files.get("runs"))
    failures += throughput_failures(runs, lt, known.peaks, files.get("runs"))
    failures += pl.device_failures(frames, files, {**known.devices, **device_keys(contrib.meta)})
    fingerprints = run_fingerprints(runs, lt)
    failures += _duplicates(frames, files, fingerprints, known)
    digest = content_digest(frames)
    if digest in known.digests:
        failures.append(Failure("DUPLICATE", "identical contribution already staged",
                                found=digest[:16]))
    if failures:
        _refuse(contrib, failures)
    return Checked(meta=contrib.meta, frames=frames, files=dict(files), digest=digest,
                   fingerprints=fingerprints,
                   iter_ids=list(frames["iterations"]["iter_id"].astype(str))
                   if "iterations" in frames else [],
                   comm_keys=comm_keys(frames["comm"]) if "comm" in frames else [])


def _refuse(contrib: Contribution, failures: list[Failure]) -> None:
    """Raise one ValidationError listing ``failures``; its code is the first of CODE_ORDER
    present."""
    codes = {f.code for f in failures}
    code = next(c for c in CODE_ORDER + tuple(sorted(codes)) if c in codes)
    raise ValidationError(f"{contrib.source}: {len(failures)} failure(s)", code=code,
                          failures=failures)


def validate_contribution(path: str | os.PathLike, *, root=None,
                          limits: Limits = DEFAULT_LIMITS) -> Checked:
    """Read ``path`` and check it against the latest release and the staging area."""
    from .. import store
    from .staging import staged_known

    contrib = read_contribution(path, limits)
    base = store.latest_or_none(root)
    known = store_known(root, contrib.frames).update(staged_known(root))
    checked = check(contrib, known)
    checked.base_release = base
    return checked
