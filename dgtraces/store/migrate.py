"""``dgtraces migrate-store``: rewrite legacy releases (one ``<table>.parquet`` per table in
the release folder) into the shard layout, once, oldest release first.

Per release and table, under the store lock:

1. the legacy file is checked against its manifest (sha256, bytes): INTEGRITY otherwise;
2. if the parent release (already migrated) has the table and the file's first rows equal
   the parent's table (same values, same types, same order), the release lists the
   parent's shards plus one new shard of the remaining rows; otherwise the file itself
   becomes a shard, byte for byte (its sha256 is already its name);
3. the table read back from the new shards must equal the legacy file's table (Arrow
   equality: every value, type and row order), else nothing is committed (INTEGRITY);
4. the manifest is replaced atomically (the commit point: same version, created time,
   parent and notes; ``migrated_utc``, the legacy manifest digest and the legacy files'
   sha256 recorded), then the legacy files are removed.

Idempotent: a shard release is skipped, except that legacy files left by a run killed
between steps 4 and 5 are removed when their sha256 is a shard of the same table. Memory is
that of one legacy table (they predate the shard layout and are small).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from dgtraces.errors import Code, Failure, IntegrityError
from dgtraces.io import files as fileio
from dgtraces.io.files import atomic_file
from dgtraces.store import manifest as store
from dgtraces.store import release, shards


@dataclass
class MigrateResult:
    migrated: list[str] = field(default_factory=list)
    already: list[str] = field(default_factory=list)
    shared: dict[str, list[str]] = field(default_factory=dict)  # version -> tables reusing
    bytes_before: int = 0  # legacy files
    bytes_after: int = 0   # new shards written


def _legacy_table(path: Path, entry: dict):
    import pyarrow.parquet as pq

    digest = fileio.sha256_file(path) if path.is_file() else None
    if digest != entry["sha256"]:
        raise IntegrityError(f"{path}: differs from its manifest; not migrated",
                             failures=[Failure(Code.INTEGRITY, "legacy file changed",
                                               file=str(path), expected=entry["sha256"],
                                               found=digest)], hint=store.VERIFY_HINT)
    return pq.read_table(path)


def _table_shards(name: str, path: Path, entry: dict, parent: tuple[str | None, dict, dict],
                  root: Path, result: MigrateResult, version: str) -> list[dict]:
    import pyarrow.parquet as pq

    legacy = _legacy_table(path, entry)
    p_version, p_entries, p_files = parent
    if name in p_entries and p_files.get(name):
        schema = pq.read_schema(p_files[name][0])
        prior = release.dataset(name, p_version, root).to_table()
        n = prior.num_rows
        if legacy.num_rows >= n and legacy.schema.equals(schema) and \
                legacy.slice(0, n).equals(prior):
            out = list(p_entries[name]["shards"])
            if legacy.num_rows > n:
                shard, _, fresh = shards.write_shard(name, legacy.slice(n), root, schema)
                result.bytes_after += shard["bytes"] if fresh else 0
                out.append(shard)
            result.shared.setdefault(version, []).append(name)
            return out
    target = store.shard_path(name, entry["sha256"], root)
    if not target.exists():
        with atomic_file(target) as fh, open(path, "rb") as src:
            shutil.copyfileobj(src, fh)
        result.bytes_after += entry["bytes"]
    return [{"sha256": entry["sha256"], "bytes": entry["bytes"], "rows": entry["rows"]}]


def _check_equal(name: str, legacy_path: Path, shard_list: list[dict], root) -> None:
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    files = [str(store.shard_path(name, s["sha256"], root)) for s in shard_list]
    legacy = pq.read_table(legacy_path)
    got = ds.dataset(files, schema=pq.read_schema(files[0]), format="parquet").to_table()
    if not got.equals(legacy):
        raise IntegrityError(f"{legacy_path}: the shards do not read back equal to the "
                             "legacy file; nothing committed")


def _clean_leftovers(folder: Path, manifest: dict) -> None:
    """Legacy files of a migrated release whose content is one of its table's shards."""
    legacy = manifest.get("legacy_sha256") or {}
    for name, entry in manifest["tables"].items():
        left = folder / f"{name}.parquet"
        if left.is_file() and fileio.sha256_file(left) in {legacy.get(name), *(
                s["sha256"] for s in entry["shards"])}:
            left.unlink()


def migrate_release(version: str, root: Path, result: MigrateResult | None = None
                    ) -> MigrateResult:
    """Migrate one release of the data folder ``root`` (resolved by the caller:
    :func:`migrate`); its parent must be in the shard layout already, or absent."""
    result = MigrateResult() if result is None else result
    folder = store.release_path(version, root)
    manifest = store.read_manifest(version, root)
    if not any(store.is_legacy(e) for e in manifest["tables"].values()):
        _clean_leftovers(folder, manifest)
        result.already.append(version)
        return result
    releases = store.list_releases(root)
    parent_v = manifest.get("parent") if manifest.get("parent") in releases else None
    entries, files = shards.base_state(parent_v, root)
    parent = (parent_v, entries, files)
    tables = {}
    for name, entry in sorted(manifest["tables"].items()):
        legacy_path = folder / entry["file"]
        result.bytes_before += entry["bytes"]
        shard_list = _table_shards(name, legacy_path, entry, parent, root, result, version)
        _check_equal(name, legacy_path, shard_list, root)
        tables[name] = {"rows": entry["rows"], "bytes": sum(s["bytes"] for s in shard_list),
                        "columns": entry["columns"], "shards": shard_list}
    new = {k: v for k, v in manifest.items() if k not in ("tables", "digest")}
    new.update(layout="shards", tables=tables, migrated_utc=fileio.utc_now(),
               legacy_digest=manifest.get("digest"),
               legacy_sha256={n: e["sha256"] for n, e in manifest["tables"].items()})
    new["digest"] = store.manifest_digest(new)
    fileio.atomic_write_bytes(folder / store.MANIFEST,  # the commit point
                             (json.dumps(new, indent=2, sort_keys=True) + "\n").encode())
    _clean_leftovers(folder, new)
    result.migrated.append(version)
    return result


def migrate(root=None, timeout: float = 10.0) -> MigrateResult:
    """Migrate every legacy release, oldest first, under the store lock (idempotent)."""
    from dgtraces.store.lock import store_lock

    result = MigrateResult()
    root = store.data_root(root)  # resolved once for every release
    with store_lock(root, timeout):
        for version in store.list_releases(root):
            migrate_release(version, root, result)
    return result
