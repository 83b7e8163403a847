"""Review fixes: zip file/folder clashes, device entries, JSON-safe metadata, wrapping
folders, lock timeouts."""

import zipfile

import pytest
from click.testing import CliRunner

from dgtraces.cli import main
from dgtraces.contribute import contribute
from dgtraces.contribute.intake import read_contribution
from dgtraces.contribute.validate import Known, check
from dgtraces.errors import DgtracesError
from tests.contribute.test_contribute import (
    META,
    TEST_DEVICE,
    TEST_DEVICE_NAME,
    refused,
    variant,
    write_contrib,
)


@pytest.mark.parametrize("names, clash", [(("a", "a/b"), "a"), (("a/b", "a"), "a"),
                                          (("x/y", "x/y/z"), "x/y")])
def test_zip_member_that_is_file_and_folder(store, tmp_path, names, clash):
    runs, lt = variant()
    folder = write_contrib(tmp_path / "c", runs, lt)
    zpath = tmp_path / "clash.zip"
    with zipfile.ZipFile(zpath, "w") as zf:
        for p in folder.iterdir():
            zf.write(p, p.name)
        for name in names:
            zf.writestr(name, "x")
    err = refused(zpath, store, "UNSAFE_ARCHIVE", dry_run=True)
    assert err.failures[0].found == clash


def test_device_entry_with_unknown_key_or_date_is_refused_at_dry_run(store, tmp_path):
    runs, lt = variant()
    dated = META + "    since: 2024-01-01\n"  # a YAML date in the devices entry
    err = refused(write_contrib(tmp_path / "c", runs, lt, meta=dated), store, "METADATA",
                  dry_run=True)
    assert {(f.column, f.found) for f in err.failures} == {("devices[0]", "since")}
    named = META.replace(f"name: {TEST_DEVICE_NAME}", "name: 2024-01-01")
    err = refused(write_contrib(tmp_path / "d", runs, lt, meta=named), store, "METADATA",
                  dry_run=True)
    assert [f.column for f in err.failures] == ["devices[0].name"]


def test_check_refuses_metadata_that_is_not_json(store, tmp_path):
    import datetime

    runs, lt = variant()
    contrib = read_contribution(write_contrib(tmp_path / "c", runs, lt))
    contrib.meta["notes"] = {"when": datetime.date(2024, 1, 1)}  # parse_meta bypassed
    with pytest.raises(DgtracesError) as exc:
        check(contrib, Known(devices={TEST_DEVICE: "gpu"}))
    assert exc.value.code == "METADATA"
    assert [f.found for f in exc.value.failures] == ["TypeError"]


def test_wrapping_folder_must_stand_alone(store, tmp_path):
    runs, lt = variant()
    outer = tmp_path / "outer"
    write_contrib(outer / "mytraces", runs, lt)
    assert contribute(outer, root=store, dry_run=True).rows["runs"] == 1
    (outer / "runs.csv").write_text("ignored before the fix\n")
    err = refused(outer, store, "BAD_FILE", dry_run=True)
    assert err.failures[0].found == "runs.csv"
    zpath = tmp_path / "wrapped.zip"
    with zipfile.ZipFile(zpath, "w") as zf:
        for p in (outer / "mytraces").iterdir():
            zf.write(p, f"mytraces/{p.name}")
        zf.writestr("stray.txt", "x")
    assert refused(zpath, store, "BAD_FILE", dry_run=True).failures[0].found == "stray.txt"


@pytest.mark.parametrize("args", [["contribute", "PATH"], ["staging", "reject", "ID"],
                                  ["release", "0.1.1"]])
def test_negative_lock_timeout_is_a_usage_error(store, tmp_path, args):
    runs, lt = variant()
    path = str(write_contrib(tmp_path / "c", runs, lt))
    args = [path if a == "PATH" else "20260101T000000Z-0123456789ab" if a == "ID" else a
            for a in args]
    res = CliRunner().invoke(main, args + ["--lock-timeout", "-1"])
    assert res.exit_code == 2  # click usage error: nothing ran
    assert not (store / "staging").exists()


def test_store_lock_refuses_negative_timeout(store):
    from dgtraces.store.lock import store_lock

    with pytest.raises(DgtracesError) as exc:
        with store_lock(store, timeout=-1):
            pass
    assert exc.value.code == "BAD_INPUT"
