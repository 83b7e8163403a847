"""``dgtraces verify``: every release manifest and every file it names, each shard once
(readers check the files they open through :mod:`dgtraces.store.integrity`).

A release folder holds ``manifest.json`` only (shard layout) or ``manifest.json`` plus its
legacy ``<table>.parquet`` files. Shards live in the pool ``data/shards/<table>/`` named by
their sha256; several releases list the same shard and it is hashed once per run. A shard
that no release lists (left by a release interrupted before its commit point) is reported
in :attr:`VerifyReport.unreferenced`, not as a failure: nothing reads it, and a rerun of
that release reuses it (same content, same name) -- unless, hashed (``deep``), its bytes do
not match its name: that is a failure (a release writing that shard replaces it, #29 M5).
A shard listed twice in one table and a manifest ``columns`` list that differs from the
shards' own columns are failures too.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from dgtraces.errors import Code, Failure
from dgtraces.io import files as fileio
from dgtraces.store import manifest as store


@dataclass
class VerifyReport:
    releases: list[str] = field(default_factory=list)
    files_checked: int = 0
    failures: list[Failure] = field(default_factory=list)
    stale_temps: list[str] = field(default_factory=list)
    unreferenced: list[str] = field(default_factory=list)
    legacy: list[str] = field(default_factory=list)  # releases still in the v1 layout

    @property
    def ok(self) -> bool:
        return not self.failures


class _Checker:
    def __init__(self, report: VerifyReport, deep: bool = True) -> None:
        self.report = report
        self.deep = deep
        self.seen: dict[Path, tuple[str | None, int]] = {}  # file -> (sha256, bytes) found
        self.current: str | None = None  # the release being checked (its failures name it)

    def fail(self, msg, file=None, expected=None, found=None) -> None:
        """An INTEGRITY failure, prefixed with the release being checked: a shard two
        releases share fails once for each, and each says which."""
        if self.current is not None:
            msg = f"release {self.current}: {msg}"
        self.report.failures.append(Failure(Code.INTEGRITY, msg, file=file, expected=expected,
                                            found=found))

    def file(self, name: str, path: Path, want: dict) -> None:
        if path not in self.seen:
            if not path.is_file():
                self.fail(f"table {name}: file missing", str(path))
                return
            self.report.files_checked += 1
            self.seen[path] = (fileio.sha256_file(path) if self.deep else None,
                               path.stat().st_size)
        digest, size = self.seen[path]
        if size != want["bytes"]:
            self.fail(f"table {name}: size changed", str(path), want["bytes"], size)
        if self.deep and digest != want["sha256"]:
            self.fail(f"table {name}: sha256 changed", str(path), want["sha256"], digest)

    def release(self, path: Path) -> None:
        self.current = path.name[1:]
        try:
            self._release(path)
        finally:
            self.current = None

    def _release(self, path: Path) -> None:
        mpath = path / store.MANIFEST
        try:
            manifest = json.loads(mpath.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:  # deep nesting: #36
            self.fail(f"manifest unreadable: {exc}", str(mpath))
            return
        if not isinstance(manifest, dict) or not isinstance(manifest.get("tables"), dict):
            self.fail("manifest is not a mapping with a tables mapping", str(mpath))
            return
        if manifest.get("digest") != store.manifest_digest(manifest):
            self.fail("manifest digest mismatch (the manifest was edited)", str(mpath),
                      manifest.get("digest"), store.manifest_digest(manifest))
        if manifest.get("version") != path.name[1:]:
            self.fail("manifest version differs from folder name", str(mpath), path.name,
                      manifest.get("version"))
        listed = {store.MANIFEST}
        for name, entry in sorted(manifest["tables"].items()):
            bad = store.entry_failure(name, entry, str(mpath))
            if bad is not None:
                self.report.failures.append(bad)
                continue
            if store.is_legacy(entry):
                listed.add(entry["file"])
                if path.name[1:] not in self.report.legacy:
                    self.report.legacy.append(path.name[1:])
            files = store.entry_files(path, name, entry)
            for fpath, want in files:
                self.file(name, fpath, want)
            if self.deep and not store.is_legacy(entry):
                self.columns(name, entry, [(f, w) for f, w in files if f.is_file()])
        for extra in sorted(p.name for p in path.iterdir() if p.name not in listed):
            self.fail("file not listed in the manifest", str(path / extra))

    def pool(self, pool: Path) -> None:
        """Stray entries in the shard pool; shards no release lists."""
        if not pool.is_dir():
            return
        for tdir in sorted(pool.iterdir()):
            if tdir.name.startswith(fileio.TMP_PREFIX):
                self.report.stale_temps.append(str(tdir))
                continue
            if not tdir.is_dir() or tdir.is_symlink():
                self.fail("unexpected entry in the shard pool", str(tdir))
                continue
            for f in sorted(tdir.iterdir()):
                if f.name.startswith(fileio.TMP_PREFIX):
                    self.report.stale_temps.append(str(f))
                elif not (f.suffix == ".parquet" and store.HEX64.fullmatch(f.stem)
                          and f.is_file() and not f.is_symlink()):
                    self.fail("unexpected entry in the shard pool (a shard is "
                              "<sha256>.parquet)", str(f))
                elif f not in self.seen:
                    self.report.unreferenced.append(str(f))
                    if self.deep and fileio.sha256_file(f) != f.stem:  # #29 M5
                        self.fail("a shard no release lists does not hash to its name (a "
                                  "release would have adopted it)", str(f), f.stem,
                                  fileio.sha256_file(f))

    def columns(self, name: str, entry: dict, files: list[tuple[Path, dict]]) -> None:
        """The manifest's ``columns`` and shard rows against the shards' own footers."""
        import pyarrow.parquet as pq

        for fpath, want in files:
            try:
                md = pq.read_metadata(fpath)
            except Exception as exc:  # pyarrow raises various types
                self.fail(f"table {name}: shard unreadable ({type(exc).__name__})",
                          str(fpath))
                continue
            names = [c for c in md.schema.to_arrow_schema().names]
            if entry.get("columns") is not None and names != list(entry["columns"]):
                self.fail(f"table {name}: manifest columns differ from the shard's",
                          str(fpath), ", ".join(map(str, entry["columns"]))[:200],
                          ", ".join(names)[:200])
            if md.num_rows != want["rows"]:
                self.fail(f"table {name}: manifest rows differ from the shard's", str(fpath),
                          want["rows"], md.num_rows)


def verify(root=None, deep: bool = True) -> VerifyReport:
    """Check every release's manifest digest, file sizes and sha256 (each shard once);
    lists stale temps, shards no release lists, and releases still in the legacy layout.
    ``deep=False`` skips the hashing (manifests, presence and sizes only: a stat per file),
    which is what ``release`` runs before it builds on the store."""
    report = VerifyReport()
    check = _Checker(report, deep)
    rdir = store.releases_dir(root)
    if not rdir.is_dir():
        report.failures.append(Failure(Code.NOT_FOUND, "no releases folder", file=str(rdir)))
        return report
    for p in sorted(rdir.iterdir()):
        if p.name.startswith(fileio.TMP_PREFIX):
            report.stale_temps.append(str(p))
        elif store.is_release_folder(p):
            if not (p / store.MANIFEST).is_file():
                report.failures.append(Failure(Code.INTEGRITY, "release folder has no manifest",
                                               file=str(p)))
                continue
            report.releases.append(store.norm_version(p.name))
            check.release(p)
        else:  # stray files, loose names (0.3.0, v0.03.0), links to other folders
            report.failures.append(Failure(Code.INTEGRITY, "unexpected entry in releases (a "
                                           "release is a real folder named exactly vX.Y.Z)",
                                           file=str(p)))
    check.pool(rdir.parent / store.SHARDS)
    report.releases.sort(key=store.parse_version)
    report.legacy.sort(key=store.parse_version)
    return report
