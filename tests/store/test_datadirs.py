"""Data folder resolution and seeding of a writable store from the packaged releases
(the wheel itself is exercised in tests/test_wheel.py)."""


import pytest

from dgtraces.store import locate as datadirs
from dgtraces.store import manifest as store
from dgtraces.store import release, verify
from dgtraces.store.shards import copy_release
from tests.paths import REPO


@pytest.fixture
def packaged(tmp_path, monkeypatch):
    """A fake installed package: v0.1.0 and v0.2.0 under <pkg>/_data/releases."""
    pkg = tmp_path / "site" / "_data"
    for v in ("0.1.0", "0.2.0"):  # manifests + the shards they list (pkg/shards)
        copy_release(v, pkg, REPO / "data")
    monkeypatch.setattr(datadirs, "packaged_root", lambda: pkg)
    monkeypatch.setattr(datadirs, "checkout_root", lambda: None)
    monkeypatch.setattr(datadirs, "user_root", lambda: tmp_path / "user")
    monkeypatch.setattr(datadirs, "_seeded", set())
    monkeypatch.delenv("DGTRACES_DATA", raising=False)
    return pkg


def test_checkout_reads_its_own_data(monkeypatch):
    monkeypatch.delenv("DGTRACES_DATA", raising=False)
    loc = datadirs.locate()
    assert (loc.kind, loc.root) == ("checkout", REPO / "data")
    assert datadirs.packaged_root() is None  # a checkout has no dgtraces/_data
    assert datadirs.sidecar_dir() == REPO


def test_user_store_is_seeded_on_first_use(packaged, tmp_path):
    loc = datadirs.locate()
    assert (loc.kind, loc.root) == ("user", tmp_path / "user")
    assert store.list_releases() == ["0.1.0", "0.2.0"]
    assert verify.verify().ok
    assert release.read_table("layers", "0.2.0").shape == release.read_table(
        "layers", "0.2.0", root=packaged).shape
    assert datadirs.sidecar_dir() == tmp_path / "user"  # CHANGELOG/cards inside the store


def test_seed_adds_missing_releases_and_never_overwrites(packaged, tmp_path):
    root = tmp_path / "mine"
    assert datadirs.seed(root) == ["v0.1.0", "v0.2.0"]
    marker = root / "releases" / "v0.1.0" / "manifest.json"
    marker.write_text(marker.read_text())  # same bytes, new mtime
    mtime = marker.stat().st_mtime_ns
    copy_release("0.3.0", packaged, REPO / "data")
    assert datadirs.seed(root) == ["v0.3.0"]  # an upgrade brings only the new release
    assert marker.stat().st_mtime_ns == mtime
    assert not [p for p in (root / "releases").iterdir() if p.name.startswith(".tmp")]


def test_env_store_is_seeded_and_unwritable_store_falls_back(packaged, tmp_path,
                                                             monkeypatch):
    monkeypatch.setenv("DGTRACES_DATA", str(tmp_path / "env"))
    assert datadirs.locate().kind == "env"
    assert store.list_releases() == ["0.1.0", "0.2.0"]

    def refuse(root, packaged=None):
        raise PermissionError(13, "read-only", str(root))

    monkeypatch.setattr(datadirs, "seed", refuse)
    monkeypatch.setenv("DGTRACES_DATA", str(tmp_path / "ro"))
    loc = datadirs.locate()
    assert (loc.kind, loc.root, loc.writable) == ("packaged", packaged, False)
    assert store.list_releases() == ["0.1.0", "0.2.0"]
