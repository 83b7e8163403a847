"""One kind per device (issue #29 M2): contribution.yaml cannot redeclare a device the
store or a staged contribution knows with another kind, two staged contributions cannot
declare one new device differently (checked again under the lock), and one file cannot
declare a device twice. Refusals leave the store byte-identical."""

import pytest

from dgtraces.contribute import contribute
from dgtraces.contribute.release import build_release
from dgtraces.contribute.staging import stage
from dgtraces.contribute.validate import validate_contribution
from dgtraces.errors import DgtracesError
from tests.attack_tally import record
from tests.contribute.test_contribute import (
    META,
    RUN_FIELDS,
    TEST_DEVICE,
    TEST_DEVICE_NAME,
    refused,
    tree_digest,
    variant,
    write_contrib,
)

CLS = "device redeclared with another kind"
# the device declared a CPU, named as the runs' host names it (#36 item 8)
AS_CPU = META.replace("kind: gpu", "kind: cpu").replace(f"name: {TEST_DEVICE_NAME}",
                                                       f"name: {RUN_FIELDS['host']}")


def _cpu_run(run_id):
    runs, lt = variant(run_id)
    runs["device_kind"] = "cpu"  # consistent with the (false) declaration
    return runs, lt


def _refused(folder, root, code="DEVICE_MISMATCH", how=""):
    err = None
    try:
        refused(folder, root, code)
        ok = True
    except (AssertionError, pytest.fail.Exception) as exc:  # record, then fail
        ok, err = False, exc
    record(f"{CLS}{how}", ok)
    if err is not None:
        raise err


def test_a_staged_device_cannot_be_redeclared(store, tmp_path):
    contribute(write_contrib(tmp_path / "a", *variant("r-a")), root=store)
    _refused(write_contrib(tmp_path / "b", *_cpu_run("r-b"), meta=AS_CPU), store,
             how=" (staged)")


def test_a_released_device_cannot_be_redeclared(store, tmp_path):
    contribute(write_contrib(tmp_path / "a", *variant("r-a")), root=store)
    build_release("0.9.0", root=store)
    _refused(write_contrib(tmp_path / "b", *_cpu_run("r-b"), meta=AS_CPU), store,
             how=" (store)")
    _refused(write_contrib(tmp_path / "c", *_cpu_run("r-c"), meta=AS_CPU), store,
             how=" (store, dry run)")
    # declared again with the same kind: fine (the release keeps one devices row)
    assert contribute(write_contrib(tmp_path / "d", *variant("r-d", scale=1.3)), root=store,
                      dry_run=True).rows["runs"] == 1


def test_two_contributions_racing_with_one_new_device(store, tmp_path):
    """Both validated before either is staged: the second is refused under the lock."""
    gpu = validate_contribution(write_contrib(tmp_path / "a", *variant("r-a")), root=store)
    cpu = validate_contribution(write_contrib(tmp_path / "b", *_cpu_run("r-b"), meta=AS_CPU),
                                root=store)
    stage(gpu, "a", root=store)
    before = tree_digest(store)
    with pytest.raises(DgtracesError) as exc:
        stage(cpu, "b", root=store)
    record(f"{CLS} (race)", exc.value.code == "DEVICE_MISMATCH")
    assert exc.value.code == "DEVICE_MISMATCH"
    assert tree_digest(store) == before


def test_one_file_declaring_a_device_twice(store, tmp_path):
    twice = META + f"  - device: {TEST_DEVICE}\n    kind: cpu\n    name: Test CPU\n"
    _refused(write_contrib(tmp_path / "a", *variant("r-a"), meta=twice), store, "METADATA",
             how=" (twice in one file)")


@pytest.mark.parametrize("table", ["runs", "iterations", "comm"])
def test_contributed_rows_cannot_claim_published(store, tmp_path, table):
    """issue #29 low: `published` rows restate a paper; only the package's importers add
    them. In every contributed table that has a provenance column."""
    from tests.conftest import _mini_frames

    runs, lt = variant("r-p")
    extra = {}
    if table == "runs":
        runs["provenance"] = "published"
    else:
        df = _mini_frames()[table].head(1).copy()
        for col in ("run_id", "trace_run_id"):
            if col in df.columns:
                df[col] = "r-p"
        if "device" in df.columns:
            df["device"] = runs["device"].iloc[0]
        df["provenance"] = "published"
        extra[table] = df
    err = refused(write_contrib(tmp_path / "c", runs, lt, extra=extra), store, "SCHEMA")
    ok = ("provenance", table) in {(f.column, (f.file or "").split(".")[0])
                                   for f in err.failures}
    record("contributed rows claiming published", ok)
    assert ok, err.report()
