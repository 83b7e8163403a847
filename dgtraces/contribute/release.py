"""``release X.Y.Z``: previous release + staged contributions -> a new immutable release.

Crash safety (a SIGKILL anywhere leaves the old state or the complete new release, and a
rerun of the same command completes):

1. under the store lock, finish or discard a pending journal of an earlier run (below);
2. refuse a malformed/existing/older version (VERSION), an empty staging area (EMPTY), a
   store whose ``verify`` fails (INTEGRITY);
3. write ``data/.release-journal.json`` (version, parent, staged ids) atomically;
4. :func:`dgtraces.store.shards.append` streams each staged table into the shard pool as a new
   shard (record batches; content-addressed, so a rerun reuses them), checks keys across
   the shards with DuckDB, writes the manifest (the parent's shards + the new ones) into a
   temp folder and renames it into place: **the commit point**. Nothing of the store is
   loaded into pandas (the models check reads the ``layers.model`` column only): time and
   memory follow the new rows. Before it, nothing visible has changed (staging untouched; a stale
   temp folder is removed by the rerun). After it, the remaining steps are idempotent:
5. CHANGELOG entry (skipped if its heading is present), card regeneration (skipped with a
   note if :mod:`dgtraces.publish.card` is unavailable), removal of the released staged entries,
   and finally removal of the journal.

A rerun that finds a journal whose release exists completes steps 5; one whose release
does not exist discards the journal and starts over. Test-only hooks:
``DGTRACES_TEST_RELEASE_DELAY`` (seconds slept at each checkpoint) and
``DGTRACES_TEST_RELEASE_CRASH`` (checkpoint name at which the process SIGKILLs itself).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from dgtraces.io import files as fileio
from dgtraces.io.markdown_text import md_inline
from dgtraces.store import lock, release, shards, verify
from dgtraces.store import manifest as store
from dgtraces.store.locate import sidecar_dir

from ..errors import Code, DgtracesError, IntegrityError, StoreError, VersionError
from . import staging

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

JOURNAL = ".release-journal.json"
CHANGELOG_ENV = "DGTRACES_CHANGELOG"
CARDS_ENV = "DGTRACES_CARDS"
RELEASES_HEADING = "## Dataset releases"
CHECKPOINTS = ("start", "journal", "committed", "changelog", "card", "staging", "done")


@dataclass
class ReleaseResult:
    version: str
    path: Path
    parent: str | None
    ids: list[str]
    rows_added: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    resumed: bool = False
    models: list[str] = field(default_factory=list)  # registry models added to ``layers``


def _checkpoint(name: str) -> None:
    delay = os.environ.get("DGTRACES_TEST_RELEASE_DELAY")
    if delay:
        time.sleep(float(delay))
    if os.environ.get("DGTRACES_TEST_RELEASE_CRASH") == name:
        os.kill(os.getpid(), signal.SIGKILL)


def changelog_path(root=None) -> Path:
    """$DGTRACES_CHANGELOG, else CHANGELOG.md beside the data folder (a temp store gets its
    own)."""
    env = os.environ.get(CHANGELOG_ENV)
    return Path(env) if env else sidecar_dir(root) / "CHANGELOG.md"


def cards_path(root=None) -> Path:
    env = os.environ.get(CARDS_ENV)
    return Path(env) if env else sidecar_dir(root) / "cards"


def changelog_entry(version: str, entries: list[dict], day: str,
                    models: list[dict] | tuple = ()) -> str:
    lines = [f"### [v{version}] - {day}", "#### Added"]
    for m in models:
        lines.append(f"- Model `{m['key']}` ({m['title']}; {m['citation']}): {m['rows']} "
                     "layers rows.")
    for info in entries:
        meta = info["meta"]
        rows = ", ".join(f"{n} {t} rows" for t, n in sorted(info["rows"].items()))
        lines.append(f"- Contribution `{md_inline(info['id'])}` by "
                     f"{md_inline(meta['contributor'])} ({md_inline(meta['license'])}): "
                     f"{rows}.")
    return "\n".join(lines) + "\n"


def add_changelog_entry(path: Path, version: str, text: str) -> bool:
    """Insert ``text`` right under the "Dataset releases" heading; False if that release's
    heading line is present already."""
    old = path.read_text("utf-8") if path.is_file() else "# Changelog\n"
    if re.search(rf"^### \[v{re.escape(version)}\]", old, re.MULTILINE):
        return False
    if RELEASES_HEADING in old:
        head, tail = old.split(RELEASES_HEADING, 1)
        rest = tail.lstrip("\n")
        new = f"{head}{RELEASES_HEADING}\n\n{text}" + (f"\n{rest}" if rest else "")
    else:
        new = old.rstrip("\n") + f"\n\n{RELEASES_HEADING}\n\n{text}"
    fileio.atomic_write_bytes(path, new.encode("utf-8"))
    return True


def _card(version: str, root, notes: list[str]) -> None:
    try:
        from dgtraces.publish import write_card
    except ImportError:
        notes.append("card not regenerated: dgtraces.publish.card.write_card is not available; "
                     "run the card generator after installing it")
        return
    try:
        write_card(out_dir=str(cards_path(root)), version=version, root=root)
    except Exception as exc:  # the release is committed: report, never undo it
        notes.append(f"card not regenerated: {type(exc).__name__}: {str(exc)[:200]}")


def _card_current(version: str, root) -> bool:
    """Whether the card folder holds the card of ``version`` (README.md, croissant.json)
    as it renders now."""
    try:
        from dgtraces.publish import croissant
        from dgtraces.publish.card import provenance_stats, render_card
        from dgtraces.store.release import Release

        rel = Release.open(version, root)
        stats = provenance_stats(rel)
        folder = cards_path(root)
        return (folder / "README.md").read_text("utf-8") == \
            render_card(rel, stats=stats) and \
            (folder / "croissant.json").read_text("utf-8") == \
            croissant.render(rel, stats=stats)
    except (OSError, UnicodeDecodeError, ImportError):
        return False


def _finish(journal: dict, root, notes: list[str]) -> None:
    version = journal["version"]
    infos = journal["entries"]
    day = journal["created_utc"][:10]
    if not add_changelog_entry(changelog_path(root), version,
                               changelog_entry(version, infos, day,
                                               journal.get("models", []))):
        notes.append(f"CHANGELOG already has v{version}")
    _checkpoint("changelog")
    _card(version, root, notes)
    _checkpoint("card")
    data = store.data_root(root)  # resolved once for every entry and the journal
    for info in infos:
        staging.remove_entry(info["id"], data)
    _checkpoint("staging")
    os.unlink(data / JOURNAL)
    _checkpoint("done")


def _clean_stale_temps(root) -> None:
    """Remove temp files of the journal and the CHANGELOG left by a killed run (their
    writers hold the store lock, which the caller holds now)."""
    for folder, name in ((store.data_root(root), JOURNAL),
                         (changelog_path(root).parent, changelog_path(root).name)):
        if folder.is_dir():
            for p in folder.glob(f"{fileio.TMP_PREFIX}{name}.*"):
                p.unlink(missing_ok=True)


def _recover(root, notes: list[str]) -> dict | None:
    """Finish (committed) or discard (not committed) a pending journal; return it if
    it was finished."""
    path = store.data_root(root) / JOURNAL
    if not path.is_file():
        return None
    try:
        journal = json.loads(path.read_text("utf-8"))
        version = store.norm_version(journal["version"])
        if not (isinstance(journal.get("entries"), list)
                and isinstance(journal.get("created_utc"), str)):
            raise TypeError("entries/created_utc")
    except (ValueError, KeyError, TypeError, AttributeError, StoreError, RecursionError) as exc:
        raise IntegrityError(f"{path}: the release journal is unreadable ({exc!r:.120}); "
                             "it is written only by `dgtraces release`: restore it or, if "
                             "no release was interrupted, delete it", hint=store.VERIFY_HINT
                             ) from None
    if version in store.list_releases(root):
        notes.append(f"completed the interrupted release {version}")
        _finish(journal, root, notes)
        return journal
    for p in store.releases_dir(root).glob(f"{fileio.TMP_PREFIX}v{version}-*"):
        shutil.rmtree(p, ignore_errors=True)
    os.unlink(path)
    notes.append(f"discarded the uncommitted release {version} (staging was untouched)")
    return None


def device_rows(entry_id: str, meta: dict, known: set[str]) -> list[dict]:
    """``devices`` rows for the devices a contribution declares in contribution.yaml and
    the store lacks: key, name and kind as the contributor reported them, no datasheet
    figures (null), provenance ``measured``, the contribution as source."""
    rows = []
    for dev in meta.get("devices") or []:
        if dev["device"] in known:
            continue
        known.add(dev["device"])
        rows.append({"device": dev["device"], "name": str(dev["name"]), "kind": dev["kind"],
                     "peak_fp32_tflops": None, "peak_fp16_tensor_tflops": None,
                     "mem_bandwidth_gb_s": None, "memory_gb": None, "provenance": "measured",
                     "source": f"contribution {entry_id} by {meta['contributor']} "
                               "(contribution.yaml devices)",
                     "notes": "declared by the contributor; no datasheet figures"})
    return rows


def model_layers(models, frames: dict) -> "tuple[pd.DataFrame | None, list[dict]]":
    """The ``layers`` rows of registry ``models`` (UNKNOWN_MODEL for a name that is not a
    dataset model) and their changelog facts; DUPLICATE for a model already in ``frames``
    (its ``layers`` frame needs the ``model`` column only)."""
    from ..models import layers_frame
    from ..models.registry import entry

    models = list(dict.fromkeys(models))
    if not models:
        return None, []
    df = layers_frame(models)  # UNKNOWN_MODEL first
    have = set(frames["layers"]["model"]) if "layers" in frames else set()
    if have & set(models):
        raise DgtracesError(f"the latest release's layers table has {sorted(have & set(models))}"
                            " already", code=Code.DUPLICATE)
    counts = df["model"].value_counts()
    return df, [{"key": m, "title": entry(m).title, "citation": entry(m).citation,
                 "rows": int(counts[m])} for m in models]


def _sources(parent: str | None, entries, root, models=()
             ) -> tuple[dict[str, list], list[dict]]:
    """What the new shards are written from: the registry models' layers rows, then each
    staged entry's Parquet files (streamed) and the devices its contribution.yaml declares
    that the store lacks, table by table. Of the store it reads two key columns."""
    import pandas as pd

    from dgtraces.tables.checks import validate_frame

    base = release.Release.open(parent, root) if parent else None  # its manifest read once
    tables = base.entries if base is not None else {}
    have = ({"layers": base.table("layers", columns=["model"])}
            if base is not None and "layers" in tables else {})
    known = (set(base.table("devices", columns=["device"])["device"])
             if base is not None and "devices" in tables else set())
    layers, model_info = model_layers(models, have)
    sources: dict[str, list] = {"layers": [layers]} if layers is not None else {}
    for entry in entries:
        for table in sorted(entry.info["rows"]):
            sources.setdefault(table, []).append(entry.path / f"{table}.parquet")
        devices = device_rows(entry.id, entry.info["meta"], known)
        if devices:
            sources.setdefault("devices", []).append(validate_frame("devices",
                                                                    pd.DataFrame(devices)))
    return sources, model_info


def build_release(version: str, *, root=None, timeout: float = lock.LOCK_TIMEOUT,
                  models: tuple[str, ...] | list[str] = ()) -> ReleaseResult:
    """Build release ``version`` from the latest release, every staged contribution and
    the ``layers`` rows of registry ``models`` (each must be new to the ``layers`` table)."""
    version = store.norm_version(version)
    notes: list[str] = []
    data = store.data_root(root)  # staging's data folder, resolved once
    with lock.store_lock(root, timeout):
        _clean_stale_temps(root)
        done = _recover(root, notes)
        if staging.staging_dir(data).is_dir():  # half-deleted entries of a killed run
            staging.clean_temps(staging.staging_dir(data))
        if done is not None and done["version"] == version:
            return ReleaseResult(version, store.release_path(version, root), done["parent"],
                                 [e["id"] for e in done["entries"]], notes=notes, resumed=True)
        _checkpoint("start")
        releases = store.list_releases(root)
        if releases and releases[-1] == version and not staging.list_staged(data):
            notes.append(f"release {version} is complete already; nothing staged since")
            if not _card_current(version, root):  # e.g. the disk was full (#29)
                _card(version, root, notes)
                notes.append(f"regenerated the card of {version}")
            manifest = store.read_manifest(version, root)
            return ReleaseResult(version, store.release_path(version, root),
                                 manifest.get("parent"), [], notes=notes, resumed=True)
        parent = releases[-1] if releases else None
        if version in releases or (parent and store.parse_version(version)
                                   <= store.parse_version(parent)):
            raise VersionError(f"release {version} exists or is not newer than the latest "
                               f"({parent})")
        entries = staging.list_staged(data)
        if not entries and not models:
            raise DgtracesError("the staging area is empty: nothing to release", code=Code.EMPTY,
                                hint="stage contributions with `dgtraces contribute PATH`, "
                                     "or add registry models with --add-models")
        report = verify.verify(root, deep=False)  # manifests, presence, sizes (no hashing)
        if not report.ok and releases:
            raise IntegrityError(f"the store fails verify ({len(report.failures)} "
                                 "failure(s)); fix it before releasing",
                                 failures=report.failures)
        sources, model_info = _sources(parent, entries, root, models)
        created = fileio.utc_now()
        journal = {"version": version, "parent": parent, "created_utc": created,
                   "models": model_info,
                   "entries": [{"id": e.id, "rows": e.info["rows"], "meta": e.info["meta"]}
                               for e in entries]}
        fileio.atomic_write_bytes(store.data_root(root) / JOURNAL,
                                 json.dumps(journal, indent=2, sort_keys=True).encode())
        _checkpoint("journal")
        who = "; ".join(f"{e.id} by {e.contributor} ({e.info['meta']['license']})"
                        for e in entries)
        what = "; ".join(([f"contributions: {who}"] if entries else [])
                         + ([f"models: {', '.join(m['key'] for m in model_info)}"]
                            if model_info else []))
        try:
            path, added = shards.append(version, sources, base=parent, root=root, notes=what,
                                        created_utc=created)
        except DgtracesError:  # refused before the commit point: nothing to finish
            os.unlink(store.data_root(root) / JOURNAL)
            raise
        _checkpoint("committed")
        _finish(journal, root, notes)
    return ReleaseResult(version, path, parent, [e.id for e in entries], added, notes,
                         models=[m["key"] for m in model_info])
