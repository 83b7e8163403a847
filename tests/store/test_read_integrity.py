"""Readers check release files against the manifest (issue #14 item 7): a flipped byte, a
rewritten file, an edited or deleted manifest reach no reader; verification is cached by file
identity (a change with the mtime set back is still caught)."""

import os
import shutil

import pandas as pd
import pytest

import dgtraces
from dgtraces.errors import DgtracesError
from dgtraces.query import engine as query
from dgtraces.query import sandbox
from dgtraces.store import integrity, release
from dgtraces.store import manifest as store
from tests.attack_tally import record


@pytest.fixture
def own_store(mini_release_root, tmp_path, monkeypatch):
    root = tmp_path / "data"
    shutil.copytree(mini_release_root, root)
    monkeypatch.setenv("DGTRACES_DATA", str(root))
    integrity.forget()
    return root


READERS = {
    "load": lambda: dgtraces.load("runs"),
    "read_table": lambda: release.read_table("runs", "0.2.0"),
    "sql": lambda: query.sql("SELECT count(*) FROM layers"),
    "connect": lambda: dgtraces.connect().close(),
}


def flip_byte(path, keep_mtime=True):
    st = path.stat()
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    if keep_mtime:
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def rewrite(path, keep_mtime=True):
    st = path.stat()
    df = pd.read_parquet(path)
    df.loc[0, "source"] = "tampered"
    df.to_parquet(path)
    if keep_mtime:
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


TAMPER = {"flipped byte": flip_byte, "rewritten file": rewrite}


def _runs_file(root):
    """The one shard of the runs table of v0.2.0 (data/shards/runs/<sha256>.parquet)."""
    (path,) = release.table_files("0.2.0", root)["runs"]
    return path


@pytest.mark.parametrize("copy_max", [sandbox.PRIVATE_COPY_MAX_BYTES, 0])
@pytest.mark.parametrize("how", sorted(TAMPER))
@pytest.mark.parametrize("reader", sorted(READERS))
def test_tampered_file_is_integrity_even_after_a_cached_read(own_store, monkeypatch, reader,
                                                             how, copy_max):
    monkeypatch.setattr(sandbox, "PRIVATE_COPY_MAX_BYTES", copy_max)
    READERS[reader]()  # verified and cached
    runs_file = _runs_file(own_store)
    TAMPER[how](runs_file)
    with pytest.raises(DgtracesError) as exc:
        READERS[reader]()
    record(f"tampered release file ({how})", exc.value.code == "INTEGRITY")
    assert exc.value.code == "INTEGRITY"
    assert [f.file.rsplit("/", 1)[-1] for f in exc.value.failures] == [runs_file.name]


@pytest.mark.parametrize("reader", sorted(READERS))
def test_deleted_manifest_is_integrity_never_an_older_release(own_store, reader):
    (own_store / "releases" / "v0.2.0" / store.MANIFEST).unlink()
    with pytest.raises(DgtracesError) as exc:
        {**READERS, "load": lambda: dgtraces.load("layers")}[reader]()
    record("deleted manifest", exc.value.code == "INTEGRITY")
    assert exc.value.code == "INTEGRITY"
    assert store.latest() == "0.2.0"


def test_edited_manifest_is_integrity(own_store):
    mpath = own_store / "releases" / "v0.2.0" / store.MANIFEST
    mpath.write_text(mpath.read_text().replace('"notes": "all tables"', '"notes": "x"'))
    for reader in READERS.values():
        with pytest.raises(DgtracesError) as exc:
            reader()
        record("edited manifest", exc.value.code == "INTEGRITY")
        assert exc.value.code == "INTEGRITY"


def test_verification_is_cached_across_processes(own_store, monkeypatch):
    calls = []
    real = integrity.hash_stream
    monkeypatch.setattr(integrity, "hash_stream", lambda *a: calls.append(1) or real(*a))
    monkeypatch.setattr(sandbox, "PRIVATE_COPY_MAX_BYTES", 0)  # the real-file path
    query.sql("SELECT 1")
    assert len(calls) == 8  # every table hashed once
    integrity.forget()  # a new process: only the per-user cache file remains
    query.sql("SELECT 1")
    dgtraces.load("runs")
    assert len(calls) == 8
    assert (integrity.cache_dir() / integrity.CACHE_NAME).is_file()
    assert not any(p.name == integrity.CACHE_NAME for p in own_store.rglob("*"))
    path = _runs_file(own_store)
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1))
    dgtraces.load("runs")  # identity changed: hashed again (and still fine)
    assert len(calls) == 9


def test_corrupt_cache_file_only_costs_time(own_store):
    integrity.cache_dir().mkdir(parents=True, exist_ok=True)
    (integrity.cache_dir() / integrity.CACHE_NAME).write_text("{not json")
    assert len(dgtraces.load("runs")) == 2
