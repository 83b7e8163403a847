"""Writing releases as content-addressed Parquet shards.

Layout (under the data folder)::

    shards/<table>/<sha256>.parquet   the shard pool: written once, never rewritten
    releases/vX.Y.Z/manifest.json     per table: rows, bytes, columns and its shard list

A release's manifest lists every shard of every table it includes (sha256, bytes, rows),
in row order: its parent's shards, then the shards of its new rows. So a release stores
only its new rows; older shards are shared. The file name is the sha256 of the file's
bytes, so identical content is stored once, and a shard never changes under its name.

Writing order (crash safety): each shard is written to a temp file in its table folder,
fsynced, hashed and renamed to ``<sha256>.parquet`` (an existing one with that name is the
same content and is kept); then the keys are checked with DuckDB over the shard files;
then the manifest is written into a temp release folder that is renamed into place, **the
commit point**. A crash before it leaves at most shards no manifest lists (``verify``
reports them as unreferenced; a rerun reuses them).

Key checks cost O(new rows) in memory: DuckDB reads only the key columns of the older
shards and joins them with the new rows' keys (``memory_limit`` set); no table of the store
is loaded into pandas.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from dgtraces.errors import (
    Code,
    DgtracesError,
    Failure,
    IntegrityError,
    ValidationError,
    VersionError,
)
from dgtraces.io import files as fileio
from dgtraces.io.files import atomic_folder, fsync_dir
from dgtraces.store import duck, release
from dgtraces.store import manifest as store

if TYPE_CHECKING:  # pragma: no cover
    from typing import TypeAlias

    import pandas as pd
    import pyarrow as pa

    Source: TypeAlias = "pd.DataFrame | pa.Table | Path"

BATCH_ROWS = 128 * 1024  # record batch and row group size of streamed shards
MAX_REPORTED = 20


def _arrow(df: pd.DataFrame) -> pa.Table:
    import pyarrow as pa

    return pa.Table.from_pandas(df.reset_index(drop=True), preserve_index=False)


def _conform(batch, schema, table: str, origin: str):
    """``batch`` (Table or RecordBatch) with ``schema``'s columns in its order and types."""
    names = list(batch.schema.names)
    if sorted(names) != sorted(schema.names):
        raise ValidationError(f"{origin}: columns of table {table} differ from its earlier "
                              "shards",
                              failures=[Failure(Code.SCHEMA, "shard columns differ", file=origin,
                                                expected=", ".join(schema.names),
                                                found=", ".join(names))])
    batch = batch.select(schema.names)
    return batch if batch.schema.equals(schema) else batch.cast(schema)


def write_shard(table: str, source: Source, root: Path, schema=None
                ) -> tuple[dict, Path, bool]:
    """Write ``source`` (DataFrame, Arrow table, or a Parquet file streamed in record
    batches) into the pool of the data folder ``root`` (resolved by the caller, as for
    :func:`check_version`, :func:`commit` and :func:`base_state`; the public writers below
    resolve it once) as one shard of ``table``, with ``schema`` when given (the
    table's earlier shards: same columns, order and types). Returns its manifest entry
    ``{sha256, bytes, rows}``, its path and whether this call created it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = store.shards_dir(root) / table
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f"{fileio.TMP_PREFIX}{secrets.token_hex(6)}.parquet"
    try:
        rows = 0
        if isinstance(source, Path):  # streamed: memory is one record batch
            from dgtraces.io.bounded import counted

            reader = _checked(source)
            schema = schema if schema is not None else reader.schema_arrow
            with pq.ParquetWriter(tmp, schema, compression="zstd") as writer:
                for batch in counted(reader, BATCH_ROWS, source.name):
                    writer.write_batch(_conform(batch, schema, table, str(source)))
                    rows += batch.num_rows
        else:
            data = _arrow(source) if not isinstance(source, pa.Table) else source
            if schema is not None:
                data = _conform(data, schema, table, f"new {table} rows")
            pq.write_table(data, tmp, compression="zstd", write_statistics=True,
                           row_group_size=BATCH_ROWS)
            rows = data.num_rows
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        digest = fileio.sha256_file(tmp)
        final = folder / f"{digest}.parquet"
        created = final.is_symlink() or not final.is_file() or \
            fileio.sha256_file(final) != digest  # a planted/corrupt file is replaced (#29 M5)
        if created:
            os.replace(tmp, final)
            fsync_dir(folder)
        return {"sha256": digest, "bytes": final.stat().st_size, "rows": rows}, final, created
    finally:
        if tmp.exists():
            tmp.unlink()


def _checked(source: Path):
    """A staged Parquet file as a streamed reader, its pages checked (#29 high)."""
    from dgtraces.io.bounded import MAX_STREAM_FILE_BYTES, MAX_STREAM_ROWS, parquet_reader

    return parquet_reader(source, max_rows=MAX_STREAM_ROWS, max_bytes=MAX_STREAM_FILE_BYTES)


def key_failures(new: Mapping[str, Sequence[Path]], old: Mapping[str, Sequence[Path]],
                 result: Mapping[str, Sequence[Path]]) -> list[Failure]:
    """Primary keys unique across shards and foreign keys present, as DuckDB queries.

    ``new``: table -> its new shards; ``old``: table -> the shards the new ones are
    appended to (the parent's; absent for a replaced table); ``result``: table -> every
    shard of the release being written. Memory is bounded by the new rows' keys.
    """
    from dgtraces.tables.schema import CATALOG_PARENTS, FOREIGN_KEYS, KEYS

    out: list[Failure] = []
    con = duck.connect()
    try:
        for table, files in sorted(new.items()):
            if not files or table not in KEYS:
                continue
            keys = list(KEYS[table])
            cols = ", ".join(duck.quote(k) for k in keys)
            fresh = duck.scan(files, keys)
            queries = [("within the new rows", (f"SELECT {cols} FROM {fresh} GROUP BY ALL "
                                                f"HAVING count(*) > 1 LIMIT {MAX_REPORTED}"))]
            lo, hi = con.execute(f"SELECT min({duck.quote(keys[0])}), max({duck.quote(keys[0])}) "
                                 f"FROM {fresh}").fetchall()[0]
            if old.get(table) and lo is not None:
                # the new keys are the hash table; older shards stream by, and the range of
                # the first key column lets DuckDB skip their row groups by Parquet stats
                queries.append(("already in an earlier shard", (
                    f"SELECT DISTINCT {cols} FROM (SELECT * FROM {duck.scan(old[table], keys)} "
                    f"WHERE {duck.quote(keys[0])} BETWEEN $lo AND $hi) o "
                    f"SEMI JOIN {fresh} n USING ({cols}) LIMIT {MAX_REPORTED}")))
            for where, sql in queries:
                params = {"lo": lo, "hi": hi} if "$lo" in sql else None
                for row in con.execute(sql, params).fetchall():
                    out.append(Failure(Code.SCHEMA, f"{table}: primary key {where}",
                                       column=keys[0], expected="unique (" + ", ".join(keys)
                                       + ")", found=repr(tuple(row))[:160]))
        for fk in FOREIGN_KEYS:
            # derived (via) keys and the shipped model catalog are checked on the new rows in
            # pandas (validate_tables, contribute); stored keys are checked here
            if fk.via or fk.parent in CATALOG_PARENTS or fk.table == fk.parent:
                continue
            child, parent = fk.table, fk.parent
            changed = child in new or (parent in new and parent not in old)
            children = (new.get(child) if parent in old or parent not in new
                        else result.get(child))
            if not changed or not children:
                continue
            cols = ", ".join(duck.quote(c) for c in fk.columns)
            present = " AND ".join(f"{duck.quote(c)} IS NOT NULL" for c in fk.columns)
            src = duck.scan(children, fk.columns)
            rows = f"(SELECT DISTINCT {cols} FROM {src} WHERE {present})"
            parents = result.get(parent) or []
            if parents:
                renamed = ", ".join(f"{duck.quote(p)} AS {duck.quote(c)}"
                                    for p, c in zip(fk.parent_columns, fk.columns, strict=True))
                rows = (f"(SELECT * FROM {rows} c ANTI JOIN (SELECT {renamed} FROM "
                        f"{duck.scan(parents, fk.parent_columns)}) p USING ({cols}))")
            for value in con.execute(f"SELECT * FROM {rows} LIMIT {MAX_REPORTED}").fetchall():
                found = value[0] if len(value) == 1 else tuple(value)
                out.append(Failure(fk.code, f"{child}.{'/'.join(fk.columns)} not in "
                                   f"{parent}", column=fk.columns[0],
                                   expected=f"a {parent}.{'/'.join(fk.parent_columns)}",
                                   found=repr(found)[:160]))
    finally:
        con.close()
    return out


def check_version(version: str, root: Path, allow_older: bool = False) -> str:
    """The normalised ``version``; VERSION if it exists or is not newer than the latest."""
    version = store.norm_version(version)
    existing = store.list_releases(root)
    if version in existing or (store.releases_dir(root) / f"v{version}").exists():
        raise VersionError(f"release {version} exists already; releases are immutable")
    if existing and not allow_older and \
            store.parse_version(version) <= store.parse_version(existing[-1]):
        raise VersionError(f"release {version} is not newer than the latest "
                           f"({existing[-1]})")
    return version


def commit(version: str, entries: Mapping[str, dict], *, root: Path, parent: str | None,
           notes: str, created_utc: str | None = None) -> Path:
    """Write ``releases/v<version>/manifest.json`` (temp folder renamed into place: the
    commit point). ``entries``: table -> {columns, shards}."""
    from dgtraces.tables.schema import SCHEMA_VERSION

    tables = {}
    for name, e in sorted(entries.items()):
        shards = [{"sha256": s["sha256"], "bytes": s["bytes"], "rows": s["rows"]}
                  for s in e["shards"]]
        tables[name] = {"rows": sum(s["rows"] for s in shards),
                        "bytes": sum(s["bytes"] for s in shards),
                        "columns": list(e["columns"]), "shards": shards}
    manifest = {"dataset": store.DATASET, "version": version, "layout": "shards",
                "schema_version": SCHEMA_VERSION,
                "created_utc": created_utc or fileio.utc_now(), "parent": parent,
                "notes": notes, "tables": tables}
    manifest["digest"] = store.manifest_digest(manifest)
    rdir = store.releases_dir(root)
    rdir.mkdir(parents=True, exist_ok=True)
    with atomic_folder(rdir / f"v{version}", exists_ok=True, tmp_name=(  # the commit point
            f"{fileio.TMP_PREFIX}v{version}-{os.getpid()}-{secrets.token_hex(3)}")) as tmp:
        with open(tmp / store.MANIFEST, "w", encoding="utf-8") as fh:
            json.dump(manifest, fh, indent=2, sort_keys=True)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
    return rdir / f"v{version}"


def base_state(base: str | None, root: Path
               ) -> tuple[dict[str, dict], dict[str, list[Path]]]:
    """(table -> {columns, shards}, table -> shard files) of release ``base`` (None: empty).
    A legacy (v1) release cannot be a base: INTEGRITY with the migrate hint."""
    if base is None:
        return {}, {}
    rel = release.Release.open(base, root)  # the manifest read once
    manifest = rel.manifest
    legacy = sorted(n for n, e in manifest["tables"].items() if store.is_legacy(e))
    if legacy:
        raise IntegrityError(f"release {base} is in the old one-file-per-table layout; new "
                             "releases are built on shard releases only",
                             hint=store.MIGRATE_HINT)
    files = rel.files()
    return ({n: {"columns": e["columns"], "shards": list(e["shards"])}
             for n, e in manifest["tables"].items()}, files)


def append(version: str, sources: Mapping[str, Sequence[Source]], *, base: str | None,
           root=None, notes: str = "", replace: Iterable[str] = (),
           created_utc: str | None = None, parent: str | None = None
           ) -> tuple[Path, dict[str, int]]:
    """Release ``version`` = ``base``'s shards + new shards written from ``sources``
    (table -> DataFrames / Arrow tables / Parquet files, already schema-valid); tables in
    ``replace`` drop the base's shards; ``parent`` (default ``base``) is what the manifest
    records. Keys are checked with DuckDB before the commit;
    shards this call created are removed again on refusal. Returns (folder, new rows)."""
    import pyarrow.parquet as pq

    root = store.data_root(root)  # resolved once for the base, the pool and the commit
    entries, files = base_state(base, root)
    replace = set(replace)
    old = {t: fs for t, fs in files.items() if t not in replace}
    new: dict[str, list[Path]] = {}
    created: list[Path] = []
    added: dict[str, int] = {}
    for staged in (i for items in sources.values() for i in items if isinstance(i, Path)):
        _checked(staged)  # every staged file checked before anything is written
    try:
        for table, items in sorted(sources.items()):
            keep = table in entries and table not in replace
            schema = pq.read_schema(files[table][0]) if keep and files[table] else None
            entry = entries[table] if keep else {"columns": None, "shards": []}
            for item in items:
                shard, path, fresh = write_shard(table, item, root, schema)
                created += [path] if fresh else []
                if schema is None:
                    schema = pq.read_schema(path)
                entry["columns"] = entry["columns"] or list(schema.names)
                entry["shards"].append(shard)
                new.setdefault(table, []).append(path)
                added[table] = added.get(table, 0) + shard["rows"]
            entries[table] = entry
        result = {t: old.get(t, []) + new.get(t, []) for t in entries}
        bad = key_failures(new, old, result)
        if bad:
            code = Code.SCHEMA if any(f.code == Code.SCHEMA for f in bad) else Code.CROSS_TABLE
            raise ValidationError(f"{len(bad)} key failure(s) across shards", code=code,
                                  failures=bad)
        path = commit(version, entries, root=root, parent=parent or base, notes=notes,
                      created_utc=created_utc)
    except BaseException:
        for p in created:
            p.unlink(missing_ok=True)
        raise
    return path, added


def _frames_checked(frames, base: str | None, root: Path) -> dict[str, pd.DataFrame]:
    """Schemas of the new rows and their cross-table keys (with the base's runs, read as
    two columns), raising one ValidationError listing every failure."""
    from dgtraces.tables.checks import validate_tables

    known_runs = None
    rel = release.Release.open(base, root) if base is not None else None
    if rel is not None and "runs" in rel.entries and \
            ("layer_timings" in frames or "iterations" in frames):
        known_runs = rel.table("runs", columns=["run_id", "model"])
    return validate_tables(frames, known_runs=known_runs)


def _frames_or_refuse(frames) -> dict:
    import pandas as pd

    if not isinstance(frames, Mapping) or not frames:
        raise DgtracesError("a release needs at least one table (a mapping name -> "
                            "DataFrame)", code=Code.EMPTY)
    bad = sorted(str(n) for n, df in frames.items() if not isinstance(df, pd.DataFrame))
    if bad:
        raise DgtracesError(f"not DataFrames: {', '.join(bad)}", code=Code.BAD_INPUT)
    return dict(frames)


def write_release(version: str, frames: Mapping[str, pd.DataFrame], *, root=None,
                  parent: str | None = None, notes: str = "", validate: bool = True,
                  allow_older: bool = False) -> Path:
    """Validate ``frames`` (every table whole) and write them as a new immutable release of
    one new shard per table (content already in the pool is shared); returns its folder.

    Refuses (code VERSION) an existing version or one not newer than the latest.
    """
    root = store.data_root(root)  # resolved once
    version = check_version(version, root, allow_older)
    frames = _frames_or_refuse(frames)
    if validate:
        from dgtraces.tables.checks import validate_tables

        frames = validate_tables(frames)
    return append(version, {t: [df] for t, df in frames.items()}, base=None, root=root,
                  notes=notes, parent=parent)[0]


def extend_release(version: str, additions: Mapping[str, pd.DataFrame], *,
                   base: str | None = None, root=None, notes: str = "",
                   replace: Iterable[str] = ()) -> Path:
    """New release = ``base`` (default latest) + the rows in ``additions`` as new shards.

    Tables named in ``replace`` are replaced instead of appended to. Only the new rows are
    validated in pandas; keys across shards are checked by DuckDB.
    """
    root = store.data_root(root)  # resolved once
    base = store.latest(root) if base is None else store.norm_version(base)
    version = check_version(version, root)
    additions = _frames_checked(_frames_or_refuse(additions), base, root)
    return append(version, {t: [df] for t, df in additions.items()}, base=base, root=root,
                  notes=notes, replace=replace)[0]


def copy_release(version: str, dest_root, root=None) -> Path:
    """Copy release ``version`` (its manifest and every file it lists: shards into the
    destination's pool, legacy files into its folder) into the data folder ``dest_root``;
    existing shards there are kept (same name, same content). Returns the new folder."""
    version = store.norm_version(version)
    rel = release.Release.open(version, root)  # the manifest read once
    src, manifest = rel.path, rel.manifest
    dest = store.releases_dir(dest_root) / f"v{version}"
    if dest.exists():
        raise VersionError(f"release {version} exists already in {dest_root}")
    with atomic_folder(dest) as staged:
        for name, entry in sorted(manifest["tables"].items()):
            for path, _ in store.entry_files(src, name, entry):
                if store.is_legacy(entry):
                    shutil.copyfile(path, staged / path.name)
                    continue
                target = store.shard_path(name, path.stem, dest_root)
                if not target.exists():
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(path, target)
        shutil.copyfile(src / store.MANIFEST, staged / store.MANIFEST)
    return dest
