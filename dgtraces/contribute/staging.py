"""The staging area ``data/staging/<id>/``: validated contributions waiting for a release.

Every write to staging (stage, reject) and every release holds the store lock
(:func:`dgtraces.store.lock.store_lock`); it never writes without it.
An entry is written into ``staging/.tmp-<id>-<rand>/`` (tables as Parquet, the metadata,
``entry.json``), fsynced and renamed into place, so it appears completely or not at all.
Every function takes ``root``, the data folder resolved once by its caller
(:func:`dgtraces.store.manifest.data_root`: ``contribute``, the release builder, the CLI).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from dgtraces.io import files as fileio
from dgtraces.io.files import atomic_folder
from dgtraces.store import manifest as store
from dgtraces.store.lock import LOCK_TIMEOUT, store_lock

from ..errors import Code, DgtracesError, Failure, StoreError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from .validate import Checked, Known

STAGING = "staging"
ENTRY = "entry.json"
ID_RE = re.compile(r"[0-9]{8}T[0-9]{6}Z-[0-9a-f]{12}")  # fullmatch (#29 M3)


def staging_dir(root: Path) -> Path:
    """The staging folder of the data folder ``root`` (resolved by the caller:
    :func:`dgtraces.store.manifest.data_root`, as for every function here)."""
    return root / STAGING


@dataclass(frozen=True)
class StagedEntry:
    id: str
    path: Path
    info: dict

    @property
    def rows(self) -> dict[str, int]:
        return dict(self.info["rows"])

    @property
    def contributor(self) -> str:
        return str(self.info["meta"].get("contributor"))

    def frames(self) -> dict[str, "pd.DataFrame"]:
        import pandas as pd

        return {t: pd.read_parquet(self.path / f"{t}.parquet") for t in self.info["rows"]}


def _check_id(entry_id: str) -> str:
    if not ID_RE.fullmatch(str(entry_id)):
        raise DgtracesError(f"malformed staging id {entry_id!r}", code=Code.BAD_INPUT,
                            failures=[Failure(Code.BAD_INPUT, "bad staging id",
                                              expected=ID_RE.pattern,
                                              found=repr(entry_id)[:80])])
    return entry_id


def list_staged(root: Path) -> list[StagedEntry]:
    """Complete staged entries, oldest first (temp folders are ignored)."""
    sdir = staging_dir(root)
    if not sdir.is_dir():
        return []
    out = []
    for p in sorted(sdir.iterdir()):
        if ID_RE.fullmatch(p.name) and (p / ENTRY).is_file():
            out.append(StagedEntry(p.name, p, json.loads((p / ENTRY).read_text("utf-8"))))
    return out


def get_staged(entry_id: str, root: Path) -> StagedEntry:
    _check_id(entry_id)
    for entry in list_staged(root):
        if entry.id == entry_id:
            return entry
    raise StoreError(f"no staged contribution {entry_id!r}", code=Code.NOT_FOUND)


def staged_known(root: Path) -> "Known":
    from .known import Known
    from .metadata import device_keys, device_names

    known = Known()
    for entry in list_staged(root):
        info = entry.info
        known.run_ids.update(info["fingerprints"])
        known.fingerprints.update(info["fingerprints"].values())
        known.iter_ids.update(info["iter_ids"])
        known.comm_keys.update(info["comm_keys"])
        known.digests.add(info["digest"])
        known.devices.update(device_keys(info["meta"]))
        known.names.update(device_names(info["meta"]))
    return known


def clean_temps(sdir: Path) -> None:
    """Remove temp folders of interrupted stage/reject calls (caller holds the lock)."""
    for p in sdir.iterdir():
        if p.name.startswith(fileio.TMP_PREFIX):
            shutil.rmtree(p, ignore_errors=True)


def _recheck(checked: "Checked", root: Path) -> None:
    """Under the lock: staging may have changed since validation (concurrent contribute),
    and so may the latest release (a release that took in and cleared staging meanwhile)."""
    from .identity import SEP
    from .known import store_known

    known = staged_known(root)
    if store.latest_or_none(root) != checked.base_release:
        known.update(store_known(root, checked.run_sums))
    clash = (set(checked.fingerprints) & known.run_ids
             or set(checked.fingerprints.values()) & known.fingerprints
             or set(checked.iter_ids) & known.iter_ids
             or set(checked.comm_keys) & known.comm_keys
             or ({checked.digest} & known.digests))
    from .metadata import device_keys
    from .plausibility import declared_device_failures

    kinds = declared_device_failures(device_keys(checked.meta), known.devices)
    if kinds:  # another contribution declared the same new device meanwhile (#29 M2)
        raise DgtracesError("a device was declared with another kind meanwhile",
                            code=Code.DEVICE_MISMATCH, failures=kinds)
    if clash:
        raise DgtracesError("the same content was staged meanwhile", code=Code.DUPLICATE,
                            failures=[Failure(Code.DUPLICATE, "already staged",
                                              found=", ".join(sorted(clash))[:200]
                                              .replace(SEP, "/"))])


def _write_entry(tmp: Path, checked: "Checked", entry_id: str, source: str) -> None:
    import yaml

    from dgtraces.store.manifest import write_parquet

    for name, df in sorted(checked.frames.items()):
        write_parquet(df, tmp / f"{name}.parquet")
    for name, spooled in sorted(checked.spools.items()):  # streamed, in file order
        spooled.write(tmp / f"{name}.parquet")
    fileio.atomic_write_bytes(tmp / "contribution.yaml",
                             yaml.safe_dump(checked.meta, sort_keys=True).encode())
    info = {"id": entry_id, "digest": checked.digest, "source": Path(source).name,
            "created_utc": fileio.utc_now(),
            "rows": checked.rows, "fingerprints": checked.fingerprints,
            "iter_ids": checked.iter_ids, "comm_keys": checked.comm_keys,
            "meta": checked.meta}
    fileio.atomic_write_bytes(tmp / ENTRY, (json.dumps(info, indent=2, sort_keys=True)
                                           + "\n").encode())


def stage(checked: "Checked", source: str, *, root: Path,
          timeout: float = LOCK_TIMEOUT) -> StagedEntry:
    """Write a checked contribution into staging atomically, under the store lock."""
    stamp = fileio.utc_now(fileio.STAMP_UTC)
    entry_id = f"{stamp}-{checked.digest[:12]}"
    with store_lock(root, timeout):
        _recheck(checked, root)
        sdir = staging_dir(root)
        sdir.mkdir(parents=True, exist_ok=True)
        clean_temps(sdir)
        with atomic_folder(sdir / entry_id, tmp_name=(
                f"{fileio.TMP_PREFIX}{entry_id}-{secrets.token_hex(3)}")) as tmp:
            _write_entry(tmp, checked, entry_id, source)
    return get_staged(entry_id, root)


def remove_entry(entry_id: str, root: Path) -> bool:
    """Remove a staged entry (rename away, then delete); caller holds the lock.

    Returns False if it was already gone (idempotent, used by release recovery).
    """
    path = staging_dir(root) / _check_id(entry_id)
    if not path.exists():
        return False
    gone = path.parent / f"{fileio.TMP_PREFIX}gone-{entry_id}-{secrets.token_hex(3)}"
    os.rename(path, gone)
    fileio.fsync_dir(path.parent)
    shutil.rmtree(gone, ignore_errors=True)
    return True


def reject(entry_id: str, *, root: Path, timeout: float = LOCK_TIMEOUT) -> StagedEntry:
    """Drop a staged contribution; returns what was removed."""
    with store_lock(root, timeout):
        entry = get_staged(entry_id, root)
        remove_entry(entry_id, root)
    return entry
