"""The shard pool is hashed before reuse (issue #29 M5): a corrupt file planted under the
name of the next release's shard is replaced, not adopted; ``verify`` hashes shards no
release lists, and refuses a shard listed twice and an edited ``columns`` list, even in a
manifest whose digest was recomputed to match."""

import json
import shutil

import pytest

import dgtraces
from dgtraces.contribute import contribute
from dgtraces.contribute.release import build_release
from dgtraces.errors import DgtracesError
from dgtraces.io import files as fileio
from dgtraces.query import engine as query
from dgtraces.store import integrity, release
from dgtraces.store import manifest as store
from dgtraces.store import verify as verify_mod
from tests.attack_tally import record
from tests.contribute.test_contribute import variant, write_contrib

CLS = "shard pool / manifest tampering"


def _released(base, tmp_path, name):
    root = base / name
    shutil.copytree(base / "seed", root)
    contribute(write_contrib(tmp_path / f"c-{name}", *variant("r-pool")), root=root)
    return root


@pytest.fixture
def seed(store, tmp_path):
    shutil.copytree(store, tmp_path / "pools" / "seed")
    return tmp_path / "pools"


def _new_shards(root, before):
    return sorted(set((store.data_root(root) / "shards").rglob("*.parquet")) - before)


def test_a_planted_shard_is_replaced_not_adopted(seed, tmp_path, monkeypatch):
    probe = _released(seed, tmp_path, "probe")
    pool = set((probe / "shards").rglob("*.parquet"))
    build_release("0.9.0", root=probe)
    names = [p.relative_to(probe) for p in _new_shards(probe, pool)]
    assert names
    root = _released(seed, tmp_path, "victim")
    monkeypatch.setenv("DGTRACES_DATA", str(root))
    for rel in names:  # corrupt files with the names the release will write
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(b"PAR1 planted, not the shard PAR1")
    assert not verify_mod.verify(root).ok  # deep verify sees them before the release
    build_release("0.9.0", root=root)
    integrity.forget()
    listed = {p for fs in release.table_files("0.9.0", root).values() for p in fs}
    adopted = [root / rel for rel in names if root / rel in listed]
    report = verify_mod.verify(root)
    # only the planted files no release lists (a devices shard names its entry) remain bad
    ok = len(adopted) >= 2 and all(fileio.sha256_file(p) == p.stem for p in listed) and \
        {f.file for f in report.failures} <= {str(root / r) for r in names} - set(map(str, listed))
    record(f"{CLS} (planted shard)", ok)
    assert ok, report.failures
    assert len(dgtraces.load("runs")) >= 1


def test_verify_hashes_unlisted_shards(store):
    folder = store / "shards" / "runs"
    folder.mkdir(parents=True, exist_ok=True)
    fake = folder / ("ab" * 32 + ".parquet")
    fake.write_bytes(b"not what the name says")
    report = verify_mod.verify(store)
    ok = not report.ok and any(f.file == str(fake) for f in report.failures)
    record(f"{CLS} (unlisted corrupt shard)", ok)
    assert ok
    assert verify_mod.verify(store, deep=False).ok  # the release pre-check stays cheap


def _rewrite(root, version, edit):
    """Edit a manifest consistently: its digest recomputed, as an attacker would."""
    mpath = root / "releases" / f"v{version}" / store.MANIFEST
    manifest = json.loads(mpath.read_text())
    edit(manifest)
    manifest["digest"] = store.manifest_digest(manifest)
    mpath.write_text(json.dumps(manifest, indent=2, sort_keys=True))
    integrity.forget()


def _twice(manifest):
    entry = manifest["tables"]["layers"]
    entry["shards"].append(dict(entry["shards"][0]))
    for key in ("rows", "bytes"):
        entry[key] = sum(s[key] for s in entry["shards"])


def test_a_shard_listed_twice_is_integrity(store):
    _rewrite(store, "0.1.0", _twice)
    assert not verify_mod.verify(store).ok
    readers = {"load": lambda: dgtraces.load("layers"),
               "sql": lambda: query.sql("SELECT count(*) FROM layers")}
    for how, reader in readers.items():
        with pytest.raises(DgtracesError) as exc:
            reader()
        record(f"{CLS} (shard listed twice, {how})", exc.value.code == "INTEGRITY")
        assert exc.value.code == "INTEGRITY"


@pytest.mark.parametrize("edit", ["renamed", "dropped", "reordered"])
def test_an_edited_columns_list_fails_verify(store, edit):
    def change(manifest):
        cols = manifest["tables"]["layers"]["columns"]
        if edit == "renamed":
            cols[0] = "tampered"
        elif edit == "dropped":
            cols.pop()
        else:
            cols.reverse()

    _rewrite(store, "0.1.0", change)
    report = verify_mod.verify(store)
    ok = not report.ok and any("columns" in f.message for f in report.failures)
    record(f"{CLS} (edited columns)", ok)
    assert ok


@pytest.mark.parametrize("fails", ["README.md", "croissant.json"])
def test_rerunning_a_release_regenerates_a_card_a_full_disk_stopped(store, tmp_path,
                                                                   monkeypatch, fails):
    """issue #29 low: the release commits, the card write hits ENOSPC (reported, not
    undone); rerunning the same release found it complete and left the card missing."""
    import errno


    real = fileio.atomic_write_bytes

    def full_disk(path, data, *a, **kw):
        if path.name == fails:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real(path, data, *a, **kw)

    contribute(write_contrib(tmp_path / "c", *variant("r-card")), root=store)
    monkeypatch.setattr(fileio, "atomic_write_bytes", full_disk)
    first = build_release("0.9.0", root=store)
    assert any("card not regenerated" in n for n in first.notes)
    monkeypatch.setattr(fileio, "atomic_write_bytes", real)
    again = build_release("0.9.0", root=store)
    cards = tmp_path / "cards"
    from dgtraces.publish.card import render_card
    from dgtraces.store.release import Release

    ok = (cards / "README.md").read_text() == render_card(Release.open("0.9.0", store)) and \
        (cards / "croissant.json").is_file() and \
        any("regenerated the card" in n for n in again.notes)
    record("full disk: card after a rerun", ok)
    assert ok, again.notes
    assert build_release("0.9.0", root=store).notes == \
        ["release 0.9.0 is complete already; nothing staged since"]  # current: not rewritten


def test_edited_shard_row_counts_fail_verify(store):
    """A consistent rewrite of the rows a shard is said to hold (totals adjusted too)."""
    def change(manifest):
        entry = manifest["tables"]["layers"]
        entry["shards"][0]["rows"] += 7
        entry["rows"] += 7

    _rewrite(store, "0.1.0", change)
    report = verify_mod.verify(store)
    ok = not report.ok and any("rows" in f.message for f in report.failures)
    record(f"{CLS} (edited rows)", ok)
    assert ok


def test_a_shared_shard_fails_once_per_release_and_each_failure_names_it(mini_release_root,
                                                                         tmp_path):
    """Acceptance review #22: a flipped byte in a shard two releases share printed the same
    failure twice, naming neither release."""
    import shutil

    root = tmp_path / "data"
    shutil.copytree(mini_release_root, root)
    (shard,) = release.table_files("0.1.0", root)["layers"]
    assert shard in release.table_files("0.2.0", root)["layers"]  # shared
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))
    failures = [f for f in verify_mod.verify(root).failures if f.file == str(shard)]
    assert len(failures) == 2 and len({f.message for f in failures}) == 2
    assert {f.message.split(":")[0] for f in failures} == {"release 0.1.0", "release 0.2.0"}
