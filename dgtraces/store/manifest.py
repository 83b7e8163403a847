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
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from dgtraces.errors import Code, DgtracesError, Failure, IntegrityError, StoreError, VersionError
from dgtraces.io.files import TMP_PREFIX

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

DATASET = "dgtraces"
MANIFEST = "manifest.json"
# user input: "0.3.0" or "v0.3.0"; at most 9 digits a part (a 5000-digit part was a
# ValueError traceback past Python's int-conversion limit, a 4000-digit one an OS error; #36)
_SEMVER = re.compile(r"v?([0-9]{1,9})\.([0-9]{1,9})\.([0-9]{1,9})")
_FOLDER = re.compile(r"v(0|[1-9][0-9]{0,8})\.(0|[1-9][0-9]{0,8})\.(0|[1-9][0-9]{0,8})")  # vX.Y.Z


def is_release_name(p: Path) -> bool:
    """``p`` is named exactly ``vX.Y.Z`` (no leading zeros, ASCII digits)."""
    return bool(_FOLDER.fullmatch(p.name))


def is_release_folder(p: Path) -> bool:
    """A release folder's name is exactly ``vX.Y.Z`` (no leading zeros) and it is a real
    folder, not a link to another one."""
    return is_release_name(p) and p.is_dir() and not p.is_symlink()


def data_root(root: str | os.PathLike | None = None) -> Path:
    """The data folder: ``root``, else ``$DGTRACES_DATA``, else the checkout's ``data/``,
    else the user data directory seeded from the packaged releases (see
    :mod:`dgtraces.store.locate`)."""
    from dgtraces.store.locate import locate

    return locate(root).root


def releases_dir(root=None) -> Path:
    return data_root(root) / "releases"


def parse_version(version: str) -> tuple[int, int, int]:
    text = str(version)
    m = _SEMVER.fullmatch(text.strip()) if len(text) <= 64 else None
    if not m:
        shown = repr(text) if len(text) <= 64 else f"{text[:40]!r}... ({len(text)} characters)"
        raise VersionError(f"malformed release version {shown}; expected X.Y.Z (at most 9 "
                           "digits a part)")
    return int(m[1]), int(m[2]), int(m[3])


def norm_version(version: str) -> str:
    return ".".join(map(str, parse_version(version)))


def list_releases(root=None) -> list[str]:
    """Release folders, oldest first. A folder whose manifest is missing is listed too (and
    is INTEGRITY when read), and so is a link or a file named like a release (a release
    folder swapped for a link; #36): neither makes readers fall back to an older release."""
    rdir = releases_dir(root)
    if not rdir.is_dir():
        return []
    found = []
    for p in rdir.iterdir():
        if is_release_name(p):
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
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        raise IntegrityError(f"release {version}: {path} is a link or a file, not the "
                             "release's own folder; nothing of this release is served (no "
                             "fallback to an older release)", hint=VERIFY_HINT,
                             failures=[Failure(Code.INTEGRITY, "release folder replaced by "
                                               "a link or a file", file=str(path))])
    if is_release_folder(path) and not (path / MANIFEST).is_file():
        raise IntegrityError(f"release {version}: {path / MANIFEST} is missing; its files "
                             "cannot be checked, so nothing of this release is served (no "
                             "fallback to an older release)", hint=VERIFY_HINT,
                             failures=[Failure(Code.INTEGRITY, "manifest missing",
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
                            f"dgtraces' release and staging code writes", code=Code.BAD_INPUT,
                            failures=[Failure(Code.BAD_INPUT, "output inside the data folder",
                                              file=str(target), column=option,
                                              expected=f"a path outside {data}")])


def manifest_digest(manifest: Mapping) -> str:
    body = {k: v for k, v in manifest.items() if k != "digest"}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


VERIFY_HINT = "run `dgtraces verify`"
MIGRATE_HINT = "run `dgtraces migrate-store` once (it rewrites old releases into shards)"
SHARDS = "shards"
_TABLE_NAME = re.compile(r"[A-Za-z0-9_]+")  # fullmatch (#29 M3)
HEX64 = re.compile(r"[0-9a-f]{64}")


def shards_dir(root=None) -> Path:
    """The shared shard pool ``data/shards/<table>/<sha256>.parquet``."""
    return data_root(root) / SHARDS


def shard_path(table: str, sha256: str, root=None) -> Path:
    return shards_dir(root) / table / f"{sha256}.parquet"


def is_legacy(entry: Mapping) -> bool:
    """A v1 manifest entry (``file``: one ``<table>.parquet`` inside the release folder),
    written before the shard layout; still readable, rewritten by ``migrate-store``."""
    return "file" in entry and "shards" not in entry


def _num_failures(name: str, entry: Mapping, where: str, label: str) -> Failure | None:
    for key, ok in (("bytes", lambda v: type(v) is int and v >= 0),
                    ("rows", lambda v: type(v) is int and v >= 0),
                    ("sha256", lambda v: isinstance(v, str) and bool(HEX64.fullmatch(v)))):
        if not ok(entry.get(key)):
            return Failure(Code.INTEGRITY, f"table {name}: {label} entry {key!r} missing or "
                           "malformed", file=where, column=key,
                           expected="64 hex digits" if key == "sha256" else "an integer >= 0",
                           found=repr(entry.get(key))[:80])
    return None


def entry_failure(name, entry, where: str) -> Failure | None:
    """An INTEGRITY failure unless the manifest entry of table ``name`` is well formed:
    a list of ``shards`` (each with whole ``bytes`` and ``rows`` and a hex ``sha256``, which
    alone names the file: no path is ever read from a manifest), or the legacy ``file``
    naming exactly ``<name>.parquet`` in the release folder with its bytes/rows/sha256."""
    if not (isinstance(name, str) and _TABLE_NAME.fullmatch(name) and isinstance(entry, dict)):
        return Failure(Code.INTEGRITY, f"table {name!r}: malformed manifest entry", file=where,
                       found=repr(entry)[:120])
    shards = entry.get("shards")
    if shards is None:
        if entry.get("file") != f"{name}.parquet":
            return Failure(Code.INTEGRITY, f"table {name!r}: manifest file entry is not "
                           f"'<table>.parquet'", file=where, column="file",
                           expected=f"{name}.parquet", found=repr(entry.get("file"))[:120])
        return _num_failures(name, entry, where, "manifest")
    if "file" in entry:  # a path next to the shard list would be ambiguous: refused
        return Failure(Code.INTEGRITY, f"table {name}: both 'file' and 'shards'", file=where,
                       column="file", expected="absent", found=repr(entry["file"])[:120])
    if not isinstance(shards, list) or not all(isinstance(s, dict) for s in shards):
        return Failure(Code.INTEGRITY, f"table {name}: 'shards' is not a list of entries",
                       file=where, column="shards", found=repr(shards)[:120])
    for s in shards:
        bad = _num_failures(name, s, where, "shard")
        if bad is not None:
            return bad
    digests = [s["sha256"] for s in shards]
    if len(set(digests)) != len(digests):  # its rows would be served twice (#29)
        twice = sorted({d for d in digests if digests.count(d) > 1})
        return Failure(Code.INTEGRITY, f"table {name}: a shard listed twice", file=where,
                       column="shards", expected="each shard once", found=twice[0][:16])
    for key in ("rows", "bytes"):
        total = sum(s[key] for s in shards)
        if type(entry.get(key)) is not int or entry[key] != total:
            return Failure(Code.INTEGRITY, f"table {name}: {key} differ from the sum of its "
                           "shards", file=where, column=key, expected=total,
                           found=repr(entry.get(key))[:40])
    return None


def read_manifest(version: str | None = None, root=None) -> dict:
    """The manifest of a release; INTEGRITY if it is not JSON, an entry is malformed or its
    digest does not match."""
    return manifest_at(release_path(version, root))


def manifest_at(folder: Path) -> dict:
    path = folder / MANIFEST
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:  # nested too deep: #36
        raise IntegrityError(f"{path}: manifest is not valid JSON ({exc})",
                             hint=VERIFY_HINT) from None
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
    if manifest.get("digest") != manifest_digest(manifest):
        raise IntegrityError(f"{path}: manifest digest mismatch (the manifest was edited)",
                             hint=VERIFY_HINT)
    return manifest


def entry_files(folder: Path, name: str, entry: Mapping) -> list[tuple[Path, dict]]:
    """(path, {sha256, bytes, rows}) of every file of one table of the release in
    ``folder``, in row order: its shards in the pool, or the legacy in-folder file."""
    if is_legacy(entry):
        return [(folder / entry["file"], {k: entry[k] for k in ("sha256", "bytes", "rows")})]
    pool = folder.parent.parent / SHARDS  # releases/vX.Y.Z -> data/shards
    return [(pool / name / f"{s['sha256']}.parquet", s) for s in entry["shards"]]


def export_names(name: str, entry: Mapping) -> list[tuple[str, dict]]:
    """(relative file name, {sha256, bytes, rows}) of each file of one table as exports
    lay them out: ``<table>/<sha256>.parquet`` per shard (legacy: ``<table>.parquet``)."""
    if is_legacy(entry):
        return [(entry["file"], {k: entry[k] for k in ("sha256", "bytes", "rows")})]
    return [(f"{name}/{s['sha256']}.parquet", s) for s in entry["shards"]]


def checked_files(folder: Path, entries: Mapping[str, dict]) -> dict[str, list[Path]]:
    """Table -> its files (shards in row order); INTEGRITY listing every missing one."""
    files = {name: [p for p, _ in entry_files(folder, name, e)]
             for name, e in sorted(entries.items())}
    missing = [Failure(Code.INTEGRITY, f"table {name}: file missing", file=str(p),
                       expected="present", found="absent")
               for name, ps in files.items() for p in ps if not p.is_file()]
    if missing:
        raise IntegrityError(f"release {folder.name}: {len(missing)} file(s) listed in "
                             f"the manifest are missing", failures=missing, hint=VERIFY_HINT)
    return files


def write_parquet(df: "pd.DataFrame", path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(df.reset_index(drop=True), preserve_index=False)
    pq.write_table(table, path, compression="zstd", write_statistics=True)
    with open(path, "rb+") as fh:
        os.fsync(fh.fileno())


def clean_stale_temps(root=None) -> list[Path]:
    """Remove temp folders/files left by an interrupted write (in releases/ and in the shard
    pool); returns what was removed."""
    removed = []
    pool = shards_dir(root)
    for folder in (releases_dir(root), pool,
                   *(sorted(pool.iterdir()) if pool.is_dir() else [])):
        if folder.is_dir() and not folder.name.startswith(TMP_PREFIX):
            for p in folder.iterdir():
                if p.name.startswith(TMP_PREFIX):
                    shutil.rmtree(p) if p.is_dir() else p.unlink()
                    removed.append(p)
    return removed


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
