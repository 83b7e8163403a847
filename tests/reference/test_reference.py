import hashlib
import json

import pytest

import dgtraces.reference as ref
from tests.paths import SHARED_REFERENCE


def test_reference_copies_are_unchanged():
    sums = json.loads((ref.ROOT / "SHA256SUMS.json").read_text())
    # scaling_published.csv, 13 files under gpu/, 3 under nccl-tests/raw, 18 under deepbench/,
    # 2 under scaling/ (issue #35)
    assert len(sums) == 49
    for name, digest in sums.items():
        assert hashlib.sha256(ref.path(name).read_bytes()).hexdigest() == digest, name


def test_reference_matches_shared_when_present():
    shared = SHARED_REFERENCE
    if not shared.is_dir():
        pytest.skip("no ../shared/reference beside the clone (the sha256 test above holds)")
    for name in json.loads((ref.ROOT / "SHA256SUMS.json").read_text()):
        assert (shared / name).read_bytes() == ref.path(name).read_bytes(), name


def test_rows_are_fresh_copies_of_the_csv():
    first = ref.rows("devices.csv")
    first[0]["device"] = "changed"
    assert ref.rows("devices.csv")[0]["device"] != "changed"
    assert {r["device"] for r in ref.rows("devices.csv")} >= {"k80", "v100"}


def test_datasheet_devices_share_the_columns_and_cite_a_source():
    base = ref.rows("devices.csv")
    extra = ref.rows("devices_datasheet.csv")
    assert list(extra[0]) == list(base[0])
    assert {"a100", "a100-pcie", "h100", "h100-pcie"} <= {r["device"] for r in extra}
    assert all("datasheet" in r["source"] for r in extra)
    assert not {r["device"] for r in extra} & {r["device"] for r in base}
    assert ref.device_rows() == base + extra
