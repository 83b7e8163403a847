"""Provenance figures of a release for the card and Croissant, in time that follows the
new rows.

Per table: rows, rows per provenance, (provenance, source, rows) groups, and the rows that
cite B-Caffe or another third-party source (:data:`THIRD_PARTY`), whose own
licence then applies. A table without its own ``provenance``/``source`` columns takes them
from the row it references (``layer_timings`` from ``runs``, declared in
``schema.FOREIGN_KEYS``).

Each shard's groups come from one DuckDB scan of that shard (joined with ``runs`` where
needed), after the release's files are checked against the manifest (sha256, cached by
:mod:`dgtraces.store.integrity`). They are kept in a per-user cache file keyed by the shard's
sha256: a shard never changes under its name, and the rows it references are never
rewritten (keys are unique across a store's shards), so a release computes the groups of
its new shards only. The licence counts are then taken from the groups' sources. The
cache is an optimisation: unreadable or unwritable, it costs time only.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import TYPE_CHECKING, Any

from dgtraces.store.integrity import cache_dir

if TYPE_CHECKING:  # pragma: no cover
    from dgtraces.store.release import Release

BCAFFE_PATTERN = r"(?i)b-caffe"  # sources of rows derived from the shyhuai/B-Caffe logs
# third-party sources whose own licence applies to the rows citing them (besides B-Caffe):
# (source regex, repository, Hub licence id, licence URL)
THIRD_PARTY = (
    (r"soumith/convnet-benchmarks", "soumith/convnet-benchmarks", "mit",
     "https://opensource.org/license/mit"),
    (r"msr-fiddle/pipedream", "msr-fiddle/pipedream", "mit",
     "https://opensource.org/license/mit"),
    (r"pytorch/kineto", "pytorch/kineto", "bsd-3-clause",
     "https://opensource.org/license/bsd-3-clause"),
    (r"baidu-research/DeepBench", "baidu-research/DeepBench", "apache-2.0",
     "https://opensource.org/license/apache-2-0"),
)


CACHE_NAME = "card-stats.json"
CACHE_VERSION = 1  # bump when the groups' definition changes
CACHE_MAX_ENTRIES = 20_000
_MEMO: dict[str, list] = {}


def provenance_from(table: str, cols: set[str], entries: dict, src: str,
                    ref_src: dict[str, str]) -> tuple[str, str | None] | None:
    """(SQL relation giving ``provenance`` and ``source`` per row of ``table`` read from
    ``src``, the referenced table or None): its own columns, or those of the row it
    references (``ref_src``: relation of each table); None if neither."""
    from dgtraces.tables.schema import FOREIGN_KEYS

    if {"provenance", "source"} <= cols:
        return f"(SELECT provenance, source FROM {src})", None
    for fk in FOREIGN_KEYS:
        if len(fk.columns) != 1 or fk.via:
            continue
        (col,), ref, (ref_col,) = fk.columns, fk.parent, fk.parent_columns
        ref_cols = set(entries.get(ref, {}).get("columns") or [])
        if fk.table == table and col in cols and {"provenance", "source"} <= ref_cols:
            return (f"(SELECT coalesce(r.provenance, 'unknown') AS provenance, "
                    f"coalesce(r.source, '{ref} row not found') AS source FROM {src} t "
                    f'LEFT JOIN {ref_src[ref]} r ON t."{col}" = r."{ref_col}")'), ref
    return None


def _load() -> dict[str, list]:
    try:
        data = json.loads((cache_dir() / CACHE_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


def _save(entries: dict[str, list]) -> None:
    from dgtraces.io.files import atomic_write_bytes

    keep = dict(list(entries.items())[-CACHE_MAX_ENTRIES:])
    try:
        atomic_write_bytes(cache_dir() / CACHE_NAME, json.dumps(keep).encode())
    except OSError:
        pass


def _licensed(groups: list, pattern: str) -> int:
    rx = re.compile(pattern)
    return sum(n for _, source, n in groups if isinstance(source, str) and rx.search(source))


def _summary(rows: int, groups: list, via: str | None) -> dict[str, Any]:

    counts: Counter = Counter()
    for prov, source, n in groups:
        counts[(prov, source)] += n
    ordered = sorted(((p, s, n) for (p, s), n in counts.items()),
                     key=lambda g: (g[0] is None, g[0] or "", -g[2], g[1] is None, g[1] or ""))
    provenance: dict = {}
    for prov, _, n in ordered:
        provenance[prov] = provenance.get(prov, 0) + n
    third = {repo: hits for pattern, repo, _, _ in THIRD_PARTY
             if (hits := _licensed(ordered, pattern))}
    return {"rows": rows, "provenance": provenance, "sources": ordered,
            "bcaffe": _licensed(ordered, BCAFFE_PATTERN), "via": via, "third_party": third}


class _ShardGroups:
    """(provenance, source, rows) groups of one shard: memo, cache file, else one scan."""

    def __init__(self) -> None:
        self.cache: dict[str, list] | None = None
        self.dirty = False
        self.con: Any = None

    def __call__(self, table: str, path, columns: list[str], sha256: str, relation: str,
                 ref: str | None) -> list[tuple]:
        key = f"v{CACHE_VERSION}:{table}:{sha256}:{ref or 'own'}"
        found = _MEMO.get(key)
        if found is None:
            self.cache = _load() if self.cache is None else self.cache
            found = self.cache.get(key)
        if not isinstance(found, list):
            from dgtraces.store.duck import connect, scan

            self.con = connect() if self.con is None else self.con
            src = scan([path], columns)
            found = [list(r) for r in self.con.execute(
                f"SELECT provenance, source, count(*) FROM {relation.replace('{src}', src)} "
                "GROUP BY ALL").fetchall()]
            self.cache = {} if self.cache is None else self.cache  # loaded above
            self.cache[key] = found
            self.dirty = True
        _MEMO[key] = found
        return [tuple(g) for g in found]

    def close(self) -> None:
        if self.con is not None:
            self.con.close()
        if self.dirty and self.cache is not None:
            _save(self.cache)


def provenance_stats(release: Release) -> dict[str, dict]:
    """Per table of an open release: rows, provenance counts, (provenance, source, rows)
    groups (ordered by provenance, rows descending, source), B-Caffe rows and third-party
    rows per repository; ``via`` names the table provenance is taken from (None: its own)."""
    from dgtraces.store import manifest as store
    from dgtraces.store.duck import scan

    folder = release.path
    entries = dict(release.entries)
    files = release.files(verify=True)
    ref_src = {t: scan(files[t], list(e.get("columns") or [])) for t, e in entries.items()}
    groups_of = _ShardGroups()
    stats: dict[str, dict] = {}
    try:
        for table, entry in sorted(entries.items()):
            found = provenance_from(table, set(entry.get("columns") or []), entries, "{src}",
                                    ref_src)
            groups: list = []
            if found is not None:
                relation, ref = found
                for path, want in store.entry_files(folder, table, entry):
                    groups += groups_of(table, path, list(entry.get("columns") or []),
                                        want["sha256"], relation, ref)
            stats[table] = _summary(int(entry["rows"]), groups,
                                    found[1] if found is not None else None)
    finally:
        groups_of.close()
    return stats
