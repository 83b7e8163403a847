"""Hugging Face Hub export: a dataset folder that ``datasets.load_dataset`` reads as is.

Layout of ``OUT``::

    README.md           card with YAML ``configs``: one per table, its ``data_files`` the
                        table's shard list (data/<table>/<sha256>.parquet, in row order)
    croissant.json      Croissant 1.0 metadata (every shard, with its sha256)
    manifest.json       the release manifest, unchanged
    data/<table>/<sha256>.parquet  byte-for-byte copies of the release's shards (sha256
                        re-checked); a legacy release gives data/<table>.parquet

The shard names are content hashes, so on the Hub (docs/hub-hosting.md) a release commit
uploads only the shards that the repository does not hold yet. No loading script:
``datasets`` reads the Parquet files named in the YAML configs, and the
Hub streams them (``streaming=True``) without downloading a whole release. The folder is
built beside ``OUT`` and renamed into place, so a failure leaves no half-written export.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from dgtraces.errors import Code, Failure, IntegrityError
from dgtraces.io import files as fileio
from dgtraces.io.files import atomic_folder, check_out

DATA_DIR = "data"


def export(out: str | os.PathLike, version: str | None = None, root=None, *,
           fragments_dir: str | os.PathLike | None = None) -> list[Path]:
    """Write the Hub-ready folder of a release (default: latest) to ``out``; returns its files.

    ``out`` must not exist or be an empty folder (code ``BAD_INPUT`` otherwise).
    """
    from dgtraces.publish import croissant
    from dgtraces.publish.card import provenance_stats, render_card
    from dgtraces.store import manifest as store
    from dgtraces.store.release import Release

    store.refuse_inside_data(out, "out", root)  # the one data-folder guard (#29 M6)
    out = check_out(out)
    release = Release.open(version, root)  # the manifest read once for the whole folder
    src = release.path
    manifest = release.manifest
    version = manifest["version"]
    files = release.files()  # INTEGRITY (hint: verify) if a file is missing
    with atomic_folder(out) as tmp:
        (tmp / DATA_DIR).mkdir()
        bad = []
        for table, entry in sorted(manifest["tables"].items()):
            for (rel, want), path in zip(store.export_names(table, entry), files[table],
                                          strict=True):
                dst = tmp / DATA_DIR / rel
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, dst)
                digest = fileio.sha256_file(dst)
                if digest != want["sha256"]:
                    bad.append(Failure(Code.INTEGRITY, f"table {table}: sha256 differs from "
                                       f"the manifest", file=str(path),
                                       expected=want["sha256"], found=digest))
        if bad:
            raise IntegrityError(f"release {version} fails its manifest", failures=bad,
                                 hint=store.VERIFY_HINT)
        shutil.copyfile(src / store.MANIFEST, tmp / store.MANIFEST)
        stats = provenance_stats(release)  # one pass over the data for all three
        _copy_fragment_assets(tmp, fragments_dir, stats)
        fileio.atomic_write_bytes(tmp / "README.md", render_card(
            release, data_dir=DATA_DIR,
            fragments_dir=None if fragments_dir is None else Path(fragments_dir),
            stats=stats).encode())
        fileio.atomic_write_bytes(tmp / "croissant.json",
                                 croissant.render(release, DATA_DIR, stats).encode())
    return sorted(p for p in out.rglob("*") if p.is_file())


def _copy_fragment_assets(dest: Path, fragments_dir, stats: dict) -> None:
    """Copy the non-Markdown files (figures) that the release's card links to into
    ``dest/fragments/``, where its relative links (``fragments/<file>``, as in ``cards/``)
    expect them."""
    from dgtraces.publish.card import linked_figures

    for p in linked_figures(fragments_dir, stats):
        (dest / "fragments").mkdir(exist_ok=True)
        shutil.copyfile(p, dest / "fragments" / p.name)
