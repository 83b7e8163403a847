"""Validating a contribution: schemas and keys, structure, plausibility, duplicates.

:func:`check` never writes anything outside a private temp folder. It raises one
:class:`~dgtraces.errors.ValidationError` listing every failure it found (schema and key
failures first: the later checks need well-typed tables), with the most fundamental code
on the error itself (see :data:`CODE_ORDER`).

``runs``, ``iterations`` and ``comm`` are checked in memory; ``layer_timings`` (the table
that grows with a contribution) is checked in chunks by :mod:`dgtraces.contribute.stream`,
so memory does not grow with it. Duplicates are found by content, not by name
(:mod:`dgtraces.contribute.identity`): a renamed copy of a stored or staged run is still a
DUPLICATE.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from dgtraces.tables.coverage import incomplete_failures, throughput_failures

from ..errors import Code, Failure, ValidationError
from . import plausibility as pl
from . import stream
from .identity import (
    SEP,
    combined_digest,
    comm_keys,
    frame_digest,
    run_hashes,
    runs_digest,
)
from .intake import DEFAULT_LIMITS, META_FILE, Contribution, Limits, read_contribution
from .known import Known, store_known
from .metadata import device_keys, device_names, json_failures
from .template import PLACEHOLDERS

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

CODE_ORDER = ("SCHEMA", "CROSS_TABLE", "METADATA", "UNKNOWN_LAYER", "GRAD_MISMATCH",
              "UNKNOWN_DEVICE", "DEVICE_MISMATCH", "PLAUSIBILITY", "DUPLICATE")
__all__ = ["CODE_ORDER", "SEP", "Checked", "Known", "check", "store_known",
           "validate_contribution"]


@dataclass
class Checked:
    """A contribution that passed every check, with the keys staging records. Streamed
    tables stay in a temp spool (``spools``) until staged."""

    meta: dict
    frames: dict
    files: dict
    digest: str
    fingerprints: dict  # run_id -> fingerprint
    iter_ids: list
    comm_keys: list
    base_release: str | None = None  # latest release when checked (None: empty store)
    spools: dict = field(default_factory=dict)  # table -> stream.Spool
    run_sums: "pd.DataFrame | None" = None  # per new run: n, f, b (store_known matches it)
    _tmp: object = field(default=None, repr=False)  # keeps the spool folder alive

    @property
    def rows(self) -> dict[str, int]:
        out = {name: int(len(df)) for name, df in self.frames.items()}
        out.update({name: sp.rows for name, sp in self.spools.items()})
        return out


def _duplicates(frames, files, fingerprints: dict, known: Known) -> list[Failure]:
    out: list[Failure] = []
    runs = frames["runs"].reset_index(drop=True)
    seen: dict[str, str] = {}
    for row, rid in enumerate(runs["run_id"].astype(str)):
        fp = fingerprints.get(rid)
        where = dict(file=files.get("runs"), row=row, column="run_id", found=repr(rid))
        if rid in known.run_ids:
            out.append(Failure(Code.DUPLICATE, "run_id already in the store or staging",
                               expected="a new run_id", **where))
        if fp is not None and fp in known.fingerprints:
            out.append(Failure(Code.DUPLICATE, "same timings as a run in the store or staging",
                               expected="new content", **where))
        elif fp is not None and fp in seen:
            out.append(Failure(Code.DUPLICATE, f"same timings as run {seen[fp]!r} in this "
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
                out.append(Failure(Code.DUPLICATE, f"{name} row already in the store or staging",
                                   file=files.get(name), row=row, column=col,
                                   found=repr(key.replace(SEP, "/"))))
    return out


def meta_placeholder_failures(meta: dict) -> list[Failure]:
    """The ``--template``'s placeholders left in ``contribution.yaml`` (contributor,
    hardware, software, the example device and its name: METADATA). It needs only
    ``contribution.yaml``, so it is reported with the layout and schema problems."""
    out = []
    devices = meta.get("devices")
    entries = [d for d in devices if isinstance(d, dict)] if isinstance(devices, list) else []
    for ph in PLACEHOLDERS:
        if ph.file != META_FILE:
            continue
        if ph.field.startswith("devices."):
            key = ph.field.split(".", 1)[1]
            found = [d.get(key) for d in entries]
        else:
            found = [meta.get(ph.field)]
        if any(ph.matches(v) for v in found):
            out.append(Failure(Code.METADATA, f"the template's placeholder {ph.field}",
                               file=META_FILE, column=ph.field,
                               expected="your own value", found=ph.value[:80]))
    return out


def placeholder_failures(runs: "pd.DataFrame", files) -> list[Failure]:
    """The ``--template``'s placeholders left in ``runs`` (:data:`PLACEHOLDERS`: a
    ``source`` starting with its EXAMPLE marker, a ``run_id`` with its prefix, the example
    device, host, timestamp and notes; PLAUSIBILITY: the template's numbers are
    placeholders, not measurements)."""
    out = []
    for ph in PLACEHOLDERS:
        if ph.file != "runs" or ph.field not in runs.columns:
            continue
        for row, value in enumerate(runs[ph.field].astype("string").fillna("")):
            if ph.matches(value):
                out.append(Failure(Code.PLAUSIBILITY, f"template placeholder {ph.field} (its "
                                   "numbers are not measurements)", file=files.get("runs"),
                                   row=row, column=ph.field, expected="your own value",
                                   found=repr(value)[:80]))
    return out


def _per_run(sp, runs: "pd.DataFrame", files: dict, partial: bool, known: Known,
             later: stream.Failures, fingerprints: dict,
             progress: Callable[[str], object] | None = None) -> str:
    """Pass 2 over the spool, whole runs at a time: layer sums, coverage and throughput per
    run, run fingerprints; returns the table's digest. Runs with no timing row are checked
    at the end against an empty table."""
    import numpy as np
    import pandas as pd

    runs = runs.reset_index(drop=True)
    seen = np.zeros(len(runs), dtype=bool)
    ids = runs["run_id"].astype(str)

    def checked(lt: "pd.DataFrame", rows, pos) -> None:
        sub = runs.iloc[pos].reset_index(drop=True)
        found = pl.layer_sum_failures(sub, lt, files)
        if not partial:
            found += incomplete_failures(sub, lt, files.get("runs"))
        found += throughput_failures(sub, lt, known.peaks, files.get("runs"))
        found = stream.shifted(found, files.get(sp.table), rows)
        later.extend(stream.shifted(found, files.get("runs"), pos))
        prints, per_run = run_hashes(sub, lt, digests=True)
        fingerprints.update(prints)
        digests.update(per_run)

    digests: dict[str, str] = {}
    done = 0
    for lt, rows in stream.run_groups(sp, sp.chunk_rows):
        pos = np.flatnonzero(ids.isin(lt["run_id"].astype(str).unique()).to_numpy())
        seen[pos] = True
        checked(lt, rows, pos)
        done += len(lt)
        if progress is not None:
            progress(f"{sp.table}: {done:,} of {sp.rows:,} rows checked run by run")
    digest = runs_digest(sp.table, sp.dtypes, digests)
    empty = pd.DataFrame({c: pd.Series(dtype=d) for c, d in sp.dtypes.items()})
    if not seen.all():
        checked(empty, np.zeros(0, dtype="int64"), np.flatnonzero(~seen))
    return digest


def check(contrib: Contribution, known: Known,
          known_for: Callable[["pd.DataFrame"], Known] | None = None) -> Checked:
    """Run every check on a read contribution; raise one error listing all failures.
    ``known_for(sums)`` adds what the store knows, given the contribution's per-run sums
    (:func:`dgtraces.contribute.stream.run_sums`)."""
    from dgtraces.tables.checks import check_tables

    files = dict(contrib.files)
    first, later = stream.Failures(), stream.Failures()
    first.extend(contrib.layout_failures)
    first.extend(contrib.meta_failures)
    first.extend(meta_placeholder_failures(contrib.meta))  # metadata only: never hidden
    frames, found = check_tables(dict(contrib.frames), files=files)
    first.extend(found)
    tmp = tempfile.TemporaryDirectory(prefix="dgtraces-spool-")
    spools = {}
    for table, path in contrib.streamed.items():
        sp = stream.spool(path, table, files[table], frames["runs"], contrib.limits,
                          Path(tmp.name), first, later, contrib.progress)
        if sp is not None:
            spools[table] = sp
    if {"SCHEMA", "CROSS_TABLE"} & set(first.per_code):
        _refuse(contrib, first.all())  # the later checks need typed values and intact keys
    runs, sp = frames["runs"], spools["layer_timings"]
    sums = stream.run_sums(sp)
    known = Known().update(known)
    if known_for is not None:
        known.update(known_for(sums))
    if not contrib.meta_failures:  # a bad field is reported once, not again as non-JSON
        later.extend(json_failures(contrib.meta))
    later.extend(placeholder_failures(runs, files))
    later.extend(pl.missing_time_failures(frames, files))
    later.extend(pl.provenance_failures(frames, files))
    declared = device_keys(contrib.meta)  # the store's / staged kind wins (#29 M2)
    later.extend(pl.declared_device_failures(declared, known.devices))
    later.extend(pl.device_failures(frames, files, {**declared, **known.devices}))
    later.extend(pl.host_failures(frames, files, {**device_names(contrib.meta), **known.names},
                                  {**declared, **known.devices}))
    fingerprints: dict[str, str] = {}
    digests = {name: frame_digest(name, df) for name, df in frames.items()}
    digests[sp.table] = _per_run(sp, runs, files, contrib.meta.get("partial") is True, known,
                                 later, fingerprints, contrib.progress)
    later.extend(_duplicates(frames, files, fingerprints, known))
    digest = combined_digest(digests)
    if digest in known.digests:
        later.extend([Failure(Code.DUPLICATE, "identical contribution already staged",
                              found=digest[:16])])
    failures = first.all() + later.all()
    if failures:
        _refuse(contrib, failures)
    return Checked(meta=contrib.meta, frames=frames, files=files, digest=digest,
                   fingerprints=fingerprints,
                   iter_ids=list(frames["iterations"]["iter_id"].astype(str))
                   if "iterations" in frames else [],
                   comm_keys=comm_keys(frames["comm"]) if "comm" in frames else [],
                   spools=spools, run_sums=sums, _tmp=tmp)


def _refuse(contrib: Contribution, failures: list[Failure]) -> None:
    """Raise one ValidationError listing ``failures``; its code is the first of CODE_ORDER
    present."""
    codes = {f.code for f in failures}
    code = next(c for c in CODE_ORDER + tuple(sorted(codes)) if c in codes)
    raise ValidationError(f"{contrib.source}: {len(failures)} failure(s)", code=code,
                          failures=failures)


def validate_contribution(path: str | os.PathLike, *, root: Path,
                          limits: Limits = DEFAULT_LIMITS,
                          progress: Callable[[str], object] | None = None) -> Checked:
    """Read ``path`` and check it against the latest release and the staging area of the
    data folder ``root`` (resolved by the caller: :func:`dgtraces.store.manifest.data_root`;
    ``progress``: see :func:`dgtraces.contribute.contribute`)."""
    from dgtraces.store import manifest as store

    from .staging import staged_known

    contrib = read_contribution(path, limits)
    contrib.progress = progress
    try:
        base = store.latest_or_none(root)
        checked = check(contrib, staged_known(root), lambda sums: store_known(root, sums))
    except ValidationError as exc:
        if base is None:
            exc.hint = empty_store_hint(root)
        raise
    finally:
        contrib.close()
    checked.base_release = base
    return checked


def empty_store_hint(root: Path) -> str:
    """What a refusal against a store without any release must say (#36 trial: an empty
    ``DGTRACES_DATA`` folder was never named, so "device not in the store's devices table"
    read as if the device were unknown to dgtraces)."""
    env = os.environ.get("DGTRACES_DATA")
    how = (" ($DGTRACES_DATA)" if env and Path(env).expanduser().resolve() == root.resolve()
           else "")
    return (f"checked against the store at {root}{how}, which holds no release: it knows no "
            "devices or runs of its own; point DGTRACES_DATA at a store with releases, "
            "or unset it to use the default one")
