"""Developer-local reference files (issue #36, low): ``validate-comm`` read
``../shared/reference/nccl-tests/allreduce_points.csv`` unchecked (an edited or swapped file,
or one beside an installed package, changed the registered evaluation). It now counts only
as the file the rule was registered with (its sha256, at most 1 MiB); after issue #34 the
multi-node points file too (:data:`dgtraces.evaluation.comm_logs.POINT_FILES`)."""

import hashlib

import pytest

from dgtraces.evaluation import comm_logs as comm
from tests.attack_tally import record
from tests.paths import SHARED_REFERENCE

KONNASE = "konnase_dgx1like_v100x8"


def _shared_copy(tmp_path, name="allreduce_points.csv"):
    src = SHARED_REFERENCE / "nccl-tests" / name
    if not src.is_file():
        pytest.skip("../shared/reference is absent")
    return src.read_bytes()


def _multinode(tmp_path):
    """The pinned multi-node points beside the file a test plants."""
    name = "multinode_points.csv"
    (tmp_path / name).write_bytes(_shared_copy(tmp_path, name))


def test_the_pinned_copy_is_evaluated(tmp_path, monkeypatch):
    data = _shared_copy(tmp_path)
    assert hashlib.sha256(data).hexdigest() == comm.POINT_FILES["allreduce_points.csv"]
    (tmp_path / "allreduce_points.csv").write_bytes(data)
    _multinode(tmp_path)
    monkeypatch.setattr(comm, "SHARED", tmp_path)
    logs, notes = comm.reference_points()
    assert KONNASE in logs and notes == []


@pytest.mark.parametrize("how", ["edited", "grown"])
def test_another_file_there_is_not_evaluated(tmp_path, monkeypatch, how):
    lines = _shared_copy(tmp_path).decode().split("\n")
    if how == "edited":  # one time halved: the evaluation would move
        cells = lines[1].split(",")
        cells[6] = str(float(cells[6]) / 2)
        lines[1] = ",".join(cells)
    else:
        lines += [lines[1]] * (comm.SHARED_MAX_BYTES // len(lines[1]) + 1)
    (tmp_path / "allreduce_points.csv").write_text("\n".join(lines))
    _multinode(tmp_path)
    monkeypatch.setattr(comm, "SHARED", tmp_path)
    logs, notes = comm.reference_points()
    ok = KONNASE not in logs and len(notes) == 1 and len(logs) > 4
    record("unchecked developer-local reference file", ok)
    assert ok, notes


def test_an_absent_folder_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(comm, "SHARED", tmp_path / "nowhere")
    logs, notes = comm.reference_points()
    assert KONNASE not in logs and len(notes) == len(comm.POINT_FILES) and len(logs) == 4
