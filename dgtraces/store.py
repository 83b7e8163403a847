"""Versioned, immutable releases under ``data/releases/vX.Y.Z/`` with a verified manifest.

A release folder holds one Parquet file per table plus ``manifest.json`` (version, schema
version, per-file bytes, sha256 and row counts, and a digest of the manifest itself).
Releases are written into a temp folder beside the target and renamed into place last, so a
crash leaves either the old state or the complete new release. Nothing here prints.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from .datadirs import DATA_ENV  # noqa: F401  (re-exported: store.DATA_ENV)
from .errors import DgtracesError, Failure, IntegrityError, StoreError, VersionError
from .tables_io import TMP_PREFIX, atomic_file, atomic_folder, fsync_dir

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

DATASET = "dgtraces"
MANIFEST = "manifest.json"
ISO_UTC = "%Y-%m-%dT%H:%M:%SZ"
STAMP_UTC = "%Y%m%dT%H%M%SZ"  # compact, for ids and folder names
_SEMVER = re.compile(r"v?(\d+)\.(\d+)\.(\d+)")  # user input: "0.3.0" or "v0.3.0"
_FOLDER = re.compile(r"v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)")  # exactly vX.Y.Z


def is_release_folder(p: Path) -> bool:
    """A release folder's name is exactly ``vX.Y.Z`` (no leading zeros) and it is a real
    folder, not a link to another one."""
    return bool(_FOLDER.fullmatch(p.name)) and p.is_dir() and not p.is_symlink()


def data_root(root: str | os.PathLike | None = None) -> Path:
    """The data folder: ``root``, else ``$DGTRACES_DATA``, else the checkout's ``data/``,
    else the user data directory seeded from the packaged releases (see
    :mod:`dgtraces.datadirs`)."""
    from .datadirs import locate

    return locate(root).root


def releases_dir(root=None) -> Path:
    return data_root(root) / "releases"


def parse_version(version: str) -> tuple[int, int, int]:
    m = _SEMVER.fullmatch(str(version).strip())
    if not m:
        raise VersionError(f"malformed release version {version!r}; expected X.Y.Z")
    return int(m[1]), int(m[2]), int(m[3])


def norm_version(version: str) -> str:
    return ".".join(map(str, parse_version(version)))


def list_releases(root=None) -> list[str]:
    """Release folders, oldest first. A folder whose manifest is missing is listed too (and
    is INTEGRITY when read): a deleted manifest never makes readers fall back to an older
    release."""
    rdir = releases_dir(root)
    if not rdir.is_dir():
        return []
    found = []
    for p in rdir.iterdir():
        if is_release_folder(p):
            found.append(norm_version(p.name))
    return sorted(found, key=parse_version)


def latest(root=None) -> str:
    rels = list_releases(root)
    if not rels:
        raise StoreError(f"no release found under {releases_dir(root)}")
    return rels[-1]


def latest_or_none(root=None) -> str | None:
    """The latest release, or None for a store without any."""
    rels = list_releases(root)
    return rels[-1] if rels else None


def release_path(version: str | None = None, root=None) -> Path:
    version = latest(root) if version is None else norm_version(version)
    path = releases_dir(root) / f"v{version}"
    if is_release_folder(path) and not (path / MANIFEST).is_file():
        raise IntegrityError(f"release {version}: {path / MANIFEST} is missing; its files "
                             "cannot be checked, so nothing of this release is served (no "
                             "fallback to an older release)", hint=VERIFY_HINT,
                             failures=[Failure("INTEGRITY", "manifest missing",
                                               file=str(path / MANIFEST))])
    if not is_release_folder(path):
        raise StoreError(f"release {version} not found; available: "
                         f"{', '.join(list_releases(root)) or 'none'}")
    return path


def refuse_inside_data(path: str | os.PathLike, option: str = "--out", root=None) -> None:
    """BAD_INPUT if ``path`` lies inside the data folder (releases, staging, journal, lock):
    only the store's own code writes there."""
    data = data_root(root).resolve()
    target = Path(path).resolve()
    if target == data or target.is_relative_to(data):
        raise DgtracesError(f"refused: {path} is inside the data folder {data}, which only "
                            f"dgtraces' release and staging code writes", code="BAD_INPUT",
                            failures=[Failure("BAD_INPUT", "output inside the data folder",
                                              file=str(target), column=option,
                                              expected=f"a path outside {data}")])


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _digest(manifest: Mapping) -> str:
    body = {k: v for k, v in manifest.items() if k != "digest"}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


_fsync_dir = fsync_dir  # one implementation, in tables_io


def utc_now(fmt: str = ISO_UTC) -> str:
    """The current UTC time, ISO 8601 with ``Z`` by default (``STAMP_UTC`` for ids)."""
    return datetime.now(UTC).strftime(fmt)


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temp file in the same folder, fsync, then rename."""
    with atomic_file(path) as fh:
        fh.write(data)


VERIFY_HINT = "run `dgtraces verify`"
_TABLE_NAME = re.compile(r"^[A-Za-z0-9_]+$")


_HEX64 = re.compile(r"[0-9a-f]{64}")


def entry_failure(name, entry, where: str) -> Failure | None:
    """An INTEGRITY failure unless the manifest entry of table ``name`` names exactly
    ``<name>.parquet`` (a plain file in the release folder, never a path elsewhere) and
    carries whole ``bytes`` and ``rows`` and a hex ``sha256``."""
    file = entry.get("file") if isinstance(entry, dict) else None
    if not (isinstance(name, str) and _TABLE_NAME.match(name) and file == f"{name}.parquet"):
        return Failure("INTEGRITY", f"table {name!r}: manifest file entry is not "
                       f"'<table>.parquet'", file=where, column="file",
                       expected=f"{name}.parquet", found=repr(file)[:120])
    for key, ok in (("bytes", lambda v: type(v) is int and v >= 0),
                    ("rows", lambda v: type(v) is int and v >= 0),
                    ("sha256", lambda v: isinstance(v, str) and bool(_HEX64.fullmatch(v)))):
        if not ok(entry.get(key)):
            return Failure("INTEGRITY", f"table {name}: manifest entry {key!r} missing or "
                           "malformed", file=where, column=key,
                           found=repr(entry.get(key))[:80])
    return None


def read_manifest(version: str | None = None, root=None) -> dict:
    """The manifest of a release; INTEGRITY if it is not JSON or a table's ``file`` entry
    is anything but ``<table>.parquet``."""
    return manifest_at(release_path(version, root))


def manifest_at(folder: Path) -> dict:
    path = folder / MANIFEST
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise IntegrityError(f"{path}: manifest is not valid JSON ({exc})",
                             hint=VERIFY_HINT) from exc
    entries = manifest.get("tables") if isinstance(manifest, dict) else None
    if not isinstance(entries, dict):
        raise IntegrityError(f"{path}: manifest has no tables mapping", hint=VERIFY_HINT)
    if manifest.get("version") != folder.name[1:]:  # a copied or renamed release folder
        raise IntegrityError(f"{path}: manifest is of release {manifest.get('version')!r}, "
                             f"not of its folder {folder.name}", hint=VERIFY_HINT)
    bad = [f for f in (entry_failure(n, e, str(path)) for n, e in entries.items()) if f]
    if bad:
        raise IntegrityError(f"{path}: {len(bad)} bad file entr(y/ies)", failures=bad,
                             hint=VERIFY_HINT)
    if manifest.get("digest") != _digest(manifest):
        raise IntegrityError(f"{path}: manifest digest mismatch (the manifest was edited)",
                             hint=VERIFY_HINT)
    return manifest


def table_paths(version: str | None = None, root=None) -> dict[str, Path]:
    """Table name -> Parquet path of a release; INTEGRITY (hint: verify) listing every file
    the manifest names that is missing."""
    folder = release_path(version, root)
    return checked_paths(folder, manifest_at(folder)["tables"])


def checked_paths(folder: Path, entries: Mapping[str, dict]) -> dict[str, Path]:
    paths = {name: folder / e["file"] for name, e in sorted(entries.items())}
    missing = [Failure("INTEGRITY", f"table {name}: file missing", file=str(p),
                       expected="present", found="absent")
               for name, p in paths.items() if not p.is_file()]
    if missing:
        raise IntegrityError(f"release {folder.name}: {len(missing)} table file(s) listed in "
                             f"the manifest are missing", failures=missing, hint=VERIFY_HINT)
    return paths


def tables(version: str | None = None, root=None) -> dict[str, dict]:
    """Table name -> manifest entry (file, bytes, sha256, rows) for a release."""
    return read_manifest(version, root)["tables"]


def read_table(table: str, version: str | None = None, root=None) -> "pd.DataFrame":
    import pandas as pd

    folder = release_path(version, root)
    entries = manifest_at(folder)["tables"]
    if not isinstance(table, str) or table not in entries:
        raise StoreError(f"table {table!r} not in release {version or latest(root)}; "
                         f"tables: {', '.join(sorted(entries))}", code="NOT_FOUND")
    from .integrity import verify_files

    path = checked_paths(folder, entries)[table]
    verify_files(folder, entries, [table])  # INTEGRITY if the bytes differ from the manifest
    return pd.read_parquet(path)


def read_all(version: str | None = None, root=None) -> dict[str, "pd.DataFrame"]:
    return {name: read_table(name, version, root) for name in tables(version, root)}


def _write_parquet(df: "pd.DataFrame", path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(df.reset_index(drop=True), preserve_index=False)
    pq.write_table(table, path, compression="zstd", write_statistics=True)
    with open(path, "rb+") as fh:
        os.fsync(fh.fileno())


def clean_stale_temps(root=None) -> list[Path]:
    """Remove temp folders/files left by an interrupted write; returns what was removed."""
    rdir = releases_dir(root)
    removed = []
    if rdir.is_dir():
        for p in rdir.iterdir():
            if p.name.startswith(TMP_PREFIX):
                shutil.rmtree(p) if p.is_dir() else p.unlink()
                removed.append(p)
    return removed


def write_release(version: str, frames: Mapping[str, "pd.DataFrame"], *, root=None,
                  parent: str | None = None, notes: str = "", validate: bool = True,
                  allow_older: bool = False) -> Path:
    """Validate ``frames`` and write them as a new immutable release; returns its folder.

    Refuses (code VERSION) an existing version or one not newer than the latest.
    """
    from .checks import validate_tables

    version = norm_version(version)
    existing = list_releases(root)
    if version in existing or (releases_dir(root) / f"v{version}").exists():
        raise VersionError(f"release {version} exists already; releases are immutable")
    if existing and not allow_older and parse_version(version) <= parse_version(existing[-1]):
        raise VersionError(f"release {version} is not newer than the latest "
                           f"({existing[-1]})")
    import pandas as pd

    if not isinstance(frames, Mapping) or not frames:
        raise DgtracesError("a release needs at least one table (a mapping name -> "
                            "DataFrame)", code="EMPTY")
    bad = sorted(str(n) for n, df in frames.items() if not isinstance(df, pd.DataFrame))
    if bad:
        raise DgtracesError(f"not DataFrames: {', '.join(bad)}", code="BAD_INPUT")
    frames = dict(frames)
    if validate:
        frames = validate_tables(frames)
    rdir = releases_dir(root)
    rdir.mkdir(parents=True, exist_ok=True)
    with atomic_folder(rdir / f"v{version}", exists_ok=True, tmp_name=(
            f"{TMP_PREFIX}v{version}-{os.getpid()}-{secrets.token_hex(3)}")) as tmp:
        entries = {}
        for name in sorted(frames):
            df = frames[name]
            file = f"{name}.parquet"
            _write_parquet(df, tmp / file)
            entries[name] = {"file": file, "bytes": (tmp / file).stat().st_size,
                             "sha256": sha256_file(tmp / file), "rows": int(len(df)),
                             "columns": [str(c) for c in df.columns]}
        from .schema import SCHEMA_VERSION

        manifest = {
            "dataset": DATASET,
            "version": version,
            "schema_version": SCHEMA_VERSION,
            "created_utc": utc_now(),
            "parent": parent,
            "notes": notes,
            "tables": entries,
        }
        manifest["digest"] = _digest(manifest)
        with open(tmp / MANIFEST, "w", encoding="utf-8") as fh:
            json.dump(manifest, fh, indent=2, sort_keys=True)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
    return rdir / f"v{version}"


def merge_frames(frames: Mapping[str, "pd.DataFrame"], additions: Mapping[str, "pd.DataFrame"],
                 replace: Iterable[str] = ()) -> dict[str, "pd.DataFrame"]:
    """``frames`` with the rows of ``additions`` appended table by table (a new dict);
    tables named in ``replace``, or new to ``frames``, are taken from ``additions`` as is."""
    import pandas as pd

    out = dict(frames)
    replace = set(replace)
    for name, df in additions.items():
        if name in out and name not in replace:
            out[name] = pd.concat([out[name], df], ignore_index=True)
        else:
            out[name] = df
    return out


def extend_release(version: str, additions: Mapping[str, "pd.DataFrame"], *,
                   base: str | None = None, root=None, notes: str = "",
                   replace: Iterable[str] = ()) -> Path:
    """New release = ``base`` (default latest) + rows in ``additions``.

    Tables named in ``replace`` are replaced instead of appended to.
    """
    base = latest(root) if base is None else norm_version(base)
    frames = merge_frames(read_all(base, root), additions, replace)
    return write_release(version, frames, root=root, parent=base, notes=notes)


@dataclass
class VerifyReport:
    releases: list[str] = field(default_factory=list)
    files_checked: int = 0
    failures: list[Failure] = field(default_factory=list)
    stale_temps: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures


def _verify_one(path: Path, report: VerifyReport) -> None:
    def fail(msg, file=None, expected=None, found=None):
        report.failures.append(Failure("INTEGRITY", msg, file=file, expected=expected,
                                       found=found))

    mpath = path / MANIFEST
    try:
        manifest = json.loads(mpath.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        fail(f"manifest unreadable: {exc}", str(mpath))
        return
    if not isinstance(manifest, dict) or not isinstance(manifest.get("tables"), dict):
        fail("manifest is not a mapping with a tables mapping", str(mpath))
        return
    if manifest.get("digest") != _digest(manifest):
        fail("manifest digest mismatch (the manifest was edited)", str(mpath),
             manifest.get("digest"), _digest(manifest))
    if manifest.get("version") != path.name[1:]:
        fail("manifest version differs from folder name", str(mpath), path.name,
             manifest.get("version"))
    listed = {MANIFEST}
    for name, entry in sorted(manifest.get("tables", {}).items()):
        bad = entry_failure(name, entry, str(mpath))
        if bad is not None:
            report.failures.append(bad)
            continue
        fpath = path / entry["file"]
        listed.add(entry["file"])
        report.files_checked += 1
        if not fpath.is_file():
            fail(f"table {name}: file missing", str(fpath))
            continue
        size = fpath.stat().st_size
        if size != entry["bytes"]:
            fail(f"table {name}: size changed", str(fpath), entry["bytes"], size)
        digest = sha256_file(fpath)
        if digest != entry["sha256"]:
            fail(f"table {name}: sha256 changed", str(fpath), entry["sha256"], digest)
    for extra in sorted(p.name for p in path.iterdir() if p.name not in listed):
        fail("file not listed in the manifest", str(path / extra))


def verify(root=None) -> VerifyReport:
    """Check every release's manifest digest, file sizes and sha256; lists stale temps."""
    report = VerifyReport()
    rdir = releases_dir(root)
    if not rdir.is_dir():
        report.failures.append(Failure("NOT_FOUND", "no releases folder", file=str(rdir)))
        return report
    for p in sorted(rdir.iterdir()):
        if p.name.startswith(TMP_PREFIX):
            report.stale_temps.append(str(p))
        elif is_release_folder(p):
            if not (p / MANIFEST).is_file():
                report.failures.append(Failure("INTEGRITY", "release folder has no manifest",
                                               file=str(p)))
                continue
            report.releases.append(norm_version(p.name))
            _verify_one(p, report)
        else:  # stray files, loose names (0.3.0, v0.03.0), links to other folders
            report.failures.append(Failure("INTEGRITY", "unexpected entry in releases (a "
                                           "release is a real folder named exactly vX.Y.Z)",
                                           file=str(p)))
    report.releases.sort(key=parse_version)
    return report
