"""Contribution intake and validation: template, reason codes, hostile input, staging."""

import hashlib
import os
import shutil
import stat
import zipfile
from pathlib import Path

import pandas as pd
import pytest

from dgtraces.contribute import Limits, contribute
from dgtraces.contribute.staging import get_staged, list_staged, reject
from dgtraces.contribute.template import (
    EXAMPLE_DEVICE,
    EXAMPLE_DEVICE_NAME,
    EXAMPLE_HARDWARE,
    EXAMPLE_HOST,
    EXAMPLE_META,
    EXAMPLE_NOTES,
    EXAMPLE_RUN_PREFIX,
    EXAMPLE_SOFTWARE,
    EXAMPLE_SOURCE,
    EXAMPLE_TIMESTAMP,
    PLACEHOLDER_CONTRIBUTOR,
    PLACEHOLDERS,
    template_frames,
    write_template,
)
from dgtraces.errors import DgtracesError
from dgtraces.store.lock import store_lock
from tests.paths import REPO

CONTRIBUTOR = "Test Rig <rig@test.invalid>"
TEST_DEVICE, TEST_DEVICE_NAME = "test-gpu", "Test GPU 24 GB"
# every placeholder of the template replaced (in this order: the hardware names the device)
REPLACED = ((PLACEHOLDER_CONTRIBUTOR, CONTRIBUTOR),
            (EXAMPLE_HARDWARE, "1x Test GPU 24 GB, 16-core test host"),
            (EXAMPLE_SOFTWARE, "PyTorch 2.13.0, CUDA 12.4, driver 550"),
            (f"device: {EXAMPLE_DEVICE}", f"device: {TEST_DEVICE}"),
            (EXAMPLE_DEVICE_NAME, TEST_DEVICE_NAME))
META = EXAMPLE_META
for _old, _new in REPLACED:
    META = META.replace(_old, _new)
SOURCE = "test rig: FLOP-derived timings of the template"
RUN_FIELDS = {"device": TEST_DEVICE, "host": "Test host CPU",
              "timestamp_utc": "2026-02-03T04:05:06Z", "notes": None}


# ---- helpers shared with test_contribute_release.py and test_contribute_fuzz.py ----------

def make_store(base: Path) -> Path:
    """A temp store holding only the committed v0.1.0 (layers)."""
    from dgtraces.store.migrate import migrate
    from dgtraces.store.shards import copy_release

    root = base / "data"
    copy_release("0.1.0", root, REPO / "data")
    migrate(root)  # a no-op once the shipped releases are shards
    return root


def write_contrib(folder: Path, runs: pd.DataFrame, lt: pd.DataFrame, fmt: str = "csv",
                  meta: str = META, extra: dict | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "contribution.yaml").write_text(meta, encoding="utf-8")
    for name, df in {"runs": runs, "layer_timings": lt, **(extra or {})}.items():
        if fmt == "csv":
            df.to_csv(folder / f"{name}.csv", index=False)
        else:
            df.to_parquet(folder / f"{name}.parquet", index=False)
    return folder


def variant(run_id="r1", model="alexnet", batch=32, scale=1.0):
    runs, lt = template_frames(model, batch)
    runs["run_id"], lt["run_id"] = run_id, run_id
    runs["source"] = SOURCE
    for col, value in RUN_FIELDS.items():
        runs[col] = value
    for col in ("fwd_ms", "bwd_ms", "fwd_p10_ms", "fwd_p90_ms", "bwd_p10_ms", "bwd_p90_ms"):
        lt[col] = (lt[col] * scale).round(4)
    for col in ("fwd_ms", "bwd_ms", "iter_ms"):
        runs[col] = (runs[col] * scale).round(4)
    return runs, lt


def fill_template(folder: Path, run_id: str = "filled-alexnet-bs32") -> str:
    """Replace every placeholder of a ``write_template`` folder, as a contributor editing
    the files would (the times stay as written); returns the new run_id."""
    yaml_path = folder / "contribution.yaml"
    yaml_path.write_text(META)
    old_id = template_frames()[0]["run_id"].iloc[0]
    for name in ("runs.csv", "layer_timings.csv"):
        text = (folder / name).read_text().replace(old_id, run_id)
        for old, new in ((f"{EXAMPLE_SOURCE} - replace", "Replaced"),
                         (EXAMPLE_DEVICE, TEST_DEVICE), (EXAMPLE_HOST, RUN_FIELDS["host"]),
                         (EXAMPLE_TIMESTAMP, RUN_FIELDS["timestamp_utc"]),
                         (EXAMPLE_NOTES, "measured on the test rig")):
            text = text.replace(old, new)
        (folder / name).write_text(text)
    return run_id


def tree_digest(root: Path) -> str:
    """sha256 over every path and file's bytes under ``root``."""
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        h.update(str(p.relative_to(root)).encode() + b"\0")
        if p.is_file() and not p.is_symlink():
            h.update(p.read_bytes())
    return h.hexdigest()


def refused(path, root, code, **kw):
    """Contributing ``path`` fails with ``code`` and leaves the data tree byte-identical."""
    before = tree_digest(root)
    with pytest.raises(DgtracesError) as exc:
        contribute(path, root=root, **kw)
    assert exc.value.code == code, exc.value.report()
    assert tree_digest(root) == before
    return exc.value


# the ``store`` fixture (v0.1.0 only; CHANGELOG and cards in tmp_path) is in conftest.py


# ---- the happy path -------------------------------------------------------------------

def test_template_refused_until_its_placeholders_are_replaced(store, tmp_path):
    write_template(tmp_path / "tpl")
    err = refused(tmp_path / "tpl", store, "METADATA", dry_run=True)
    # every placeholder is refused (#36 item 8), not only the three markers
    assert {(f.code, f.column) for f in err.failures} == {
        ("METADATA" if ph.file == "contribution.yaml" else "PLAUSIBILITY", ph.field)
        for ph in PLACEHOLDERS}
    runs = template_frames()[0]
    assert runs["run_id"].iloc[0].startswith(EXAMPLE_RUN_PREFIX)
    fill_template(tmp_path / "tpl")
    assert contribute(tmp_path / "tpl", root=store, dry_run=True).rows["runs"] == 1


def test_template_passes_and_stages(store, tmp_path):
    write_template(tmp_path / "tpl")
    fill_template(tmp_path / "tpl")
    entry = contribute(tmp_path / "tpl", root=store)
    assert entry.info["rows"] == {"runs": 1, "layer_timings": 23}
    assert [e.id for e in list_staged(store)] == [entry.id]
    frames = get_staged(entry.id, store).frames()
    assert "grad_bytes" not in frames["layer_timings"].columns  # checked, then dropped
    assert frames["layer_timings"]["fwd_ms"].sum() == pytest.approx(
        template_frames()[1]["fwd_ms"].sum())
    assert not any(p.name.startswith(".tmp-") for p in (store / "staging").iterdir())
    # the same content again, under another run id, is a duplicate
    runs, lt = variant("renamed")
    err = refused(write_contrib(tmp_path / "again", runs, lt), store, "DUPLICATE")
    assert {f.column for f in err.failures} == {"run_id"}
    assert reject(entry.id, root=store).id == entry.id and list_staged(store) == []


def test_template_passes_against_the_shipped_releases(tmp_path, monkeypatch):
    from dgtraces.store import manifest as st

    root = tmp_path / "data"
    from dgtraces.store.migrate import migrate
    from dgtraces.store.shards import copy_release

    shipped = Path(st.__file__).resolve().parents[2] / "data"
    for version in st.list_releases(shipped):
        copy_release(version, root, shipped)
    migrate(root)  # a no-op once the shipped releases are shards
    monkeypatch.setenv("DGTRACES_DATA", str(root))
    assert st.list_releases(root)[-1] == st.latest()  # every shipped release, latest included
    write_template(tmp_path / "tpl")
    fill_template(tmp_path / "tpl")
    checked = contribute(tmp_path / "tpl", root=root, dry_run=True)
    assert checked.rows == {"runs": 1, "layer_timings": 23}


def test_devices_of_the_store_need_no_definition_and_keep_their_kind(mini_release_root,
                                                                     tmp_path, monkeypatch):
    from dgtraces.store import release

    root = tmp_path / "data"
    shutil.copytree(mini_release_root, root)
    monkeypatch.setenv("DGTRACES_DATA", str(root))
    devices = release.read_table("devices", root=root)
    assert len(devices) and set(devices["kind"]) <= {"cpu", "gpu"}
    meta = META[:META.index("devices:")]  # no devices: section
    for i, dev in enumerate(devices.itertuples()):
        runs, lt = variant(f"known-dev-{i}")
        runs["device"], runs["device_kind"] = dev.device, dev.kind
        folder = write_contrib(tmp_path / f"known{i}", runs, lt, meta=meta)
        assert contribute(folder, root=root, dry_run=True).rows["runs"] == 1
        runs["device_kind"] = {"cpu": "gpu", "gpu": "cpu"}[dev.kind]
        err = refused(write_contrib(tmp_path / f"kind{i}", runs, lt, meta=meta), root,
                      "DEVICE_MISMATCH")
        assert {(f.column, f.row) for f in err.failures} == {("device_kind", 0)}
    runs["device"] = "not-a-device"
    refused(write_contrib(tmp_path / "unknown", runs, lt, meta=meta), root, "UNKNOWN_DEVICE")


def test_zip_with_wrapping_folder_and_parquet_passes(store, tmp_path):
    runs, lt = variant("zip-run", "resnet50", 16)
    folder = write_contrib(tmp_path / "c" / "mytraces", runs, lt, fmt="parquet")
    zpath = tmp_path / "c.zip"
    with zipfile.ZipFile(zpath, "w", zipfile.ZIP_DEFLATED) as zf:
        for p in folder.iterdir():
            zf.write(p, f"mytraces/{p.name}")
    checked = contribute(zpath, root=store, dry_run=True)
    assert checked.rows == {"runs": 1, "layer_timings": 228}
    assert not (store / "staging").exists()


# ---- reason codes of validation ------------------------------------------------------

@pytest.mark.parametrize("mutate, code, column", [
    (lambda r, t: t.__setitem__("layer", t["layer"].replace("conv1", "conv_x")),
     "UNKNOWN_LAYER", "layer"),
    (lambda r, t: t.loc.__setitem__((4, "grad_bytes"), 1234), "GRAD_MISMATCH", "grad_bytes"),
    (lambda r, t: r.__setitem__("device", "tpu-v9"), "UNKNOWN_DEVICE", "device"),
    (lambda r, t: r.__setitem__("device_kind", "cpu"), "DEVICE_MISMATCH", "device_kind"),
    (lambda r, t: r.__setitem__("fwd_ms", r["fwd_ms"] * 3), "PLAUSIBILITY", "fwd_ms"),
    (lambda r, t: r.__setitem__("layer_sum_ratio", 0.5), "PLAUSIBILITY", "layer_sum_ratio"),
    (lambda r, t: t.loc.__setitem__((2, "comm_ms"), float("inf")), "PLAUSIBILITY", "comm_ms"),
    (lambda r, t: r.__setitem__("iter_ms", float("-inf")), "SCHEMA", "iter_ms"),
    (lambda r, t: t.loc.__setitem__((2, "bwd_ms"), float("nan")), "PLAUSIBILITY", "bwd_ms"),
    (lambda r, t: r.__setitem__("batch_size", 0), "SCHEMA", "batch_size"),
    (lambda r, t: r.__setitem__("batch_size", "abc"), "SCHEMA", "batch_size"),
    (lambda r, t: t.loc.__setitem__((1, "fwd_ms"), -1.0), "SCHEMA", "fwd_ms"),
    (lambda r, t: t.__setitem__("run_id", "other"), "CROSS_TABLE", "run_id"),
])
def test_validation_reason_codes(store, tmp_path, mutate, code, column):
    runs, lt = variant()
    lt = lt.astype({"grad_bytes": "int64"})
    runs, lt = runs.astype(object), lt.astype(object)
    mutate(runs, lt)
    err = refused(write_contrib(tmp_path / "c", runs, lt), store, code)
    hit = [f for f in err.failures if f.code == code]
    assert hit and column in {f.column for f in hit}
    assert all(f.file in ("runs.csv", "layer_timings.csv") for f in hit if f.row is not None)


def test_report_names_row_column_expected_found(store, tmp_path):
    runs, lt = variant()
    lt.loc[4, "grad_bytes"] = 999  # row 4 is conv2: 307,456 params -> 1,229,824 bytes
    err = refused(write_contrib(tmp_path / "c", runs, lt), store, "GRAD_MISMATCH")
    (f,) = err.failures
    assert (f.file, f.row, f.column) == ("layer_timings.csv", 4, "grad_bytes")
    assert f.found == "999 (structure: 1229824)"


@pytest.mark.parametrize("meta, code", [
    (META.replace("license: CC-BY-4.0", "license: proprietary"), "METADATA"),
    (META.replace(f"contributor: {CONTRIBUTOR}\n", ""), "METADATA"),
    ("a: &x [1, 2]\nb: *x\n", "BAD_FILE"),
    ("contributor: [unclosed\n", "BAD_FILE"),
    ("- just\n- a list\n", "METADATA"),
])
def test_metadata_refusals(store, tmp_path, meta, code):
    runs, lt = variant()
    refused(write_contrib(tmp_path / "c", runs, lt, meta=meta), store, code)


def test_missing_table_and_unexpected_file(store, tmp_path):
    runs, lt = variant()
    folder = write_contrib(tmp_path / "c", runs, lt)
    (folder / "notes.txt").write_text("hello")
    refused(folder, store, "BAD_FILE")
    (folder / "notes.txt").unlink()
    (folder / "runs.csv").unlink()
    refused(folder, store, "BAD_INPUT")


# ---- hostile input ---------------------------------------------------------------------

def _zip_with(path: Path, members: dict, folder: Path | None = None) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        if folder is not None:
            for p in folder.iterdir():
                zf.write(p, p.name)
        for info, data in members.items():
            zf.writestr(info, data)
    return path


def _symlink_info(name):
    info = zipfile.ZipInfo(name)
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    return info


@pytest.mark.parametrize("members", [
    {"../evil.csv": "x"},
    {"sub/../../evil.csv": "x"},
    {zipfile.ZipInfo("/abs/evil.csv"): "x"},
    {"C:/evil.csv": "x"},
    {_symlink_info("runs_link.csv"): "/etc/passwd"},
])
def test_unsafe_zip_members(store, tmp_path, members):
    runs, lt = variant()
    folder = write_contrib(tmp_path / "c", runs, lt)
    refused(_zip_with(tmp_path / "bad.zip", members, folder), store, "UNSAFE_ARCHIVE")


def test_zip_bomb_ratio_and_total_size(store, tmp_path):
    runs, lt = variant()
    folder = write_contrib(tmp_path / "c", runs, lt)
    bomb = _zip_with(tmp_path / "bomb.zip", {"README.md": b"\0" * (8 << 20)}, folder)
    refused(bomb, store, "UNSAFE_ARCHIVE")
    plain = _zip_with(tmp_path / "plain.zip", {}, folder)
    refused(plain, store, "UNSAFE_ARCHIVE", limits=Limits(max_total_bytes=2000))
    assert contribute(plain, root=store, dry_run=True).rows["runs"] == 1


def _understate(zpath: Path, name: str, size: int, crc: int | None = None) -> None:
    """Rewrite the central-directory entry of ``name``: uncompressed size ``size`` (and CRC)."""
    import struct

    raw = bytearray(zpath.read_bytes())
    at = raw.find(b"PK\x01\x02")
    while at >= 0:
        n = struct.unpack_from("<H", raw, at + 28)[0]
        if raw[at + 46:at + 46 + n].decode() == name:
            struct.pack_into("<I", raw, at + 24, size)
            if crc is not None:
                struct.pack_into("<I", raw, at + 16, crc)
            zpath.write_bytes(bytes(raw))
            return
        at = raw.find(b"PK\x01\x02", at + 4)
    raise AssertionError(f"{name} not in {zpath}")


def test_zip_member_with_understated_size_cannot_inflate(store, tmp_path):
    """A member whose header declares fewer bytes than its data holds is never written
    beyond the declared size: the zip reader stops there and the CRC check refuses it."""
    import zlib

    runs, lt = variant()
    folder = write_contrib(tmp_path / "c", runs, lt)
    payload = bytes(range(256)) * 1024  # 256 KiB of data behind a 1000-byte claim
    liar = _zip_with(tmp_path / "liar.zip", {"README.md": payload}, folder)
    _understate(liar, "README.md", 1000)
    with zipfile.ZipFile(liar) as zf:
        assert zf.getinfo("README.md").file_size == 1000  # the lie is what readers see
    err = refused(liar, store, "BAD_FILE")
    assert [f.file for f in err.failures] == ["README.md"]
    # a consistent CRC for the first 1000 bytes: the member is cut at its declared size
    _understate(liar, "README.md", 1000, zlib.crc32(payload[:1000]))
    with zipfile.ZipFile(liar) as zf:
        assert len(zf.read("README.md")) == 1000
    assert contribute(liar, root=store, dry_run=True).rows["runs"] == 1


def test_symlinks_in_folders(store, tmp_path):
    runs, lt = variant()
    folder = write_contrib(tmp_path / "c", runs, lt)
    os.symlink(tmp_path / "elsewhere", folder / "README.md")
    refused(folder, store, "UNSAFE_ARCHIVE")
    os.unlink(folder / "README.md")
    os.symlink(folder, tmp_path / "link")
    refused(tmp_path / "link", store, "UNSAFE_ARCHIVE")


def test_bad_bytes_huge_fields_truncated_parquet(store, tmp_path):
    runs, lt = variant()
    folder = write_contrib(tmp_path / "c", runs, lt)
    good = (folder / "runs.csv").read_bytes()
    (folder / "runs.csv").write_bytes(good.replace(b"Test host CPU", b"Exampl\xe9 h\xf4st"))
    refused(folder, store, "BAD_FILE")
    huge = runs.copy()
    huge["notes"] = "x" * 70_000
    write_contrib(folder, huge, lt)
    refused(folder, store, "BAD_FILE")
    pq_folder = write_contrib(tmp_path / "p", runs, lt, fmt="parquet")
    data = (pq_folder / "layer_timings.parquet").read_bytes()
    (pq_folder / "layer_timings.parquet").write_bytes(data[: len(data) // 2])
    refused(pq_folder, store, "BAD_FILE")
    (pq_folder / "layer_timings.parquet").write_bytes(b"PAR1" + b"\0" * 100)
    refused(pq_folder, store, "BAD_FILE")


def test_lock_held_elsewhere_gives_locked(store, tmp_path):
    runs, lt = variant()
    folder = write_contrib(tmp_path / "c", runs, lt)
    with store_lock(store):
        before = tree_digest(store)
        with pytest.raises(DgtracesError) as exc:
            contribute(folder, root=store, timeout=0.2)
        assert exc.value.code == "LOCKED" and tree_digest(store) == before
    assert contribute(folder, root=store, timeout=0.2).info["rows"]["runs"] == 1


def test_cli_contribute_exit_codes(store, tmp_path):
    import subprocess
    import sys

    runs, lt = variant()
    lt.loc[0, "layer"] = "nope"
    folder = write_contrib(tmp_path / "c", runs, lt)
    out = subprocess.run([sys.executable, "-m", "dgtraces", "contribute", str(folder)],
                         capture_output=True, text=True, env=dict(os.environ))
    assert out.returncode == 1 and "[UNKNOWN_LAYER]" in out.stderr
    assert "Traceback" not in out.stderr and "row 0" in out.stderr


def test_metadata_and_data_failures_in_one_report(store, tmp_path):
    runs, lt = variant()
    lt = lt.astype({"grad_bytes": "int64"}).astype(object)
    lt.loc[3, "layer"] = "conv_x"
    lt.loc[4, "grad_bytes"] = 1234
    runs = runs.astype(object)
    runs.loc[0, "device_kind"] = "cpu"
    meta = META.replace("license: CC-BY-4.0", "license: MIT")
    assert meta != META
    err = refused(write_contrib(tmp_path / "c", runs, lt, meta=meta), store, "METADATA")
    assert {"METADATA", "UNKNOWN_LAYER", "GRAD_MISMATCH", "DEVICE_MISMATCH"} <= err.codes
    # a schema failure stops the checks that need typed values, not the metadata report
    lt.loc[6, "fwd_ms"] = "abc"
    err = refused(write_contrib(tmp_path / "d", runs, lt, meta=meta), store, "SCHEMA")
    assert {"SCHEMA", "METADATA"} <= err.codes
