"""Where the dataset lives: one resolution order for every reader and writer.

1. an explicit ``root`` argument;
2. ``$DGTRACES_DATA``;
3. a checkout's own ``data/`` (the repository this package was imported from);
4. the user data directory (``platformdirs.user_data_dir("dgtraces")``).

An installed wheel carries the releases as package data, ``dgtraces/_data/releases/`` and
the shard pool their manifests list, ``dgtraces/_data/shards/``
(``setup.py`` copies the checkout's ``data/releases/`` and ``data/shards/`` at build time;
read through :mod:`importlib.resources`). A store of kind 2 or 4 is created on first use and
seeded with every packaged release it lacks, so contributions, staging and new releases are
written there, never into site-packages. When that folder cannot be created (a read-only
home), reading falls back to the packaged releases themselves. Nothing here prints.
"""

from __future__ import annotations

import os
import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path

from dgtraces.errors import DgtracesError
from dgtraces.io.files import atomic_file, atomic_folder

DATA_ENV = "DGTRACES_DATA"
PACKAGED = "_data"  # folder inside the installed package (built from data/releases)
APP = "dgtraces"
KINDS = ("argument", "env", "checkout", "user", "packaged")
_seeded: set[Path] = set()


@dataclass(frozen=True)
class DataLocation:
    """A resolved data folder and how it was chosen (one of :data:`KINDS`)."""

    root: Path
    kind: str

    @property
    def writable(self) -> bool:
        return self.kind != "packaged"


def packaged_root() -> Path | None:
    """The releases shipped inside the installed package (``dgtraces/_data``), or None in a
    checkout, which reads its own ``data/``. Only unpacked installs are supported (a zipped
    package has no file paths for Parquet and DuckDB to read)."""
    from importlib.resources import files

    res = files("dgtraces") / PACKAGED
    if not (isinstance(res, Path) and (res / "releases").is_dir()):
        return None
    return res


def checkout_root() -> Path | None:
    """``<repo>/data`` when this package is imported from a source checkout."""
    repo = Path(__file__).resolve().parents[2]
    if (repo / "pyproject.toml").is_file() and (repo / "data").is_dir():
        return repo / "data"
    return None


def user_root() -> Path:
    """The per-user data directory (e.g. ``~/.local/share/dgtraces`` on Linux)."""
    from platformdirs import user_data_dir

    return Path(user_data_dir(APP, appauthor=False))


def seed(root: Path, packaged: Path | None = None) -> list[str]:
    """Copy every packaged release that ``root/releases`` lacks (each through a temp folder
    renamed into place, so a crash leaves no half release); returns the folder names copied.
    A release already present is never overwritten: releases are immutable."""
    packaged = packaged_root() if packaged is None else packaged
    if packaged is None:
        return []
    _seed_shards(packaged / "shards", root / "shards")  # before the manifests listing them
    src, dst = packaged / "releases", root / "releases"
    dst.mkdir(parents=True, exist_ok=True)
    copied = []
    for rel in sorted(p for p in src.iterdir() if p.is_dir() and p.name.startswith("v")):
        if (dst / rel.name).exists():
            continue
        try:
            with atomic_folder(dst / rel.name, exists_ok=True, tmp_name=(
                    f".tmp-seed-{rel.name}-{secrets.token_hex(3)}")) as tmp:
                shutil.copytree(rel, tmp, dirs_exist_ok=True)
        except DgtracesError:  # another process seeded it first (the folder appeared)
            pass
        copied.append(rel.name)
    return copied


def _seed_shards(src: Path, dst: Path) -> None:
    """Copy the packaged shards ``dst`` lacks (temp file renamed into place). A shard's name
    is its sha256, so one already there has the same content and is kept."""
    if not src.is_dir():
        return
    for shard in sorted(src.glob("*/*.parquet")):
        target = dst / shard.parent.name / shard.name
        if target.exists():
            continue
        with atomic_file(target) as fh, open(shard, "rb") as packaged:
            shutil.copyfileobj(packaged, fh)


def locate(root: str | os.PathLike | None = None) -> DataLocation:
    """The data folder by the order in the module docstring (seeding a store on first use)."""
    if root is not None:
        return DataLocation(Path(root), "argument")
    env = os.environ.get(DATA_ENV)
    if env:
        return _seeded_or_packaged(Path(env), "env")
    checkout = checkout_root()
    if checkout is not None:
        return DataLocation(checkout, "checkout")
    return _seeded_or_packaged(user_root(), "user")


def _seeded_or_packaged(root: Path, kind: str) -> DataLocation:
    packaged = packaged_root()
    if packaged is None or root in _seeded:
        return DataLocation(root, kind)
    try:
        seed(root, packaged)
    except OSError:
        return DataLocation(packaged, "packaged")
    _seeded.add(root)
    return DataLocation(root, kind)


def sidecar_dir(root: str | os.PathLike | None = None) -> Path:
    """Where a release's CHANGELOG.md and cards/ go: beside a ``data`` folder (a checkout,
    a temp store), inside the user data directory for the user store."""
    loc = locate(root)
    return loc.root if loc.kind == "user" else loc.root.resolve().parent
