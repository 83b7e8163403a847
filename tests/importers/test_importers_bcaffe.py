"""B-Caffe importer on the shipped logs and on small edited copies of them."""

import json

import pytest

from dgtraces import reference
from dgtraces.errors import DgtracesError
from dgtraces.importers.bcaffe import import_log
from dgtraces.models import blobs

LOG = reference.path("bcaffe/tmpcomm.log")


def _lines():
    return LOG.read_text().splitlines()


def _edited(tmp_path, edit, name="edited.log"):
    lines = _lines()
    edit(lines)
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


def _other(path, **kw):
    return import_log(path, "googlenet", source="test copy", device="k80", batch_size=64, **kw)


def test_tmpcomm_real_values():
    res = import_log(LOG)
    lt = res.layer_timings.set_index("layer")
    assert len(lt) == 64  # GoogLeNet layers with parameters (incl. aux classifiers)
    assert lt.loc["conv1/7x7_s2", "bwd_ms"] == pytest.approx(14.7441)
    assert lt.loc["conv1/7x7_s2", "comm_ms"] == pytest.approx((408 + 139) / 1000)
    assert lt["fwd_ms"].isna().all() and (lt["n"] == 1).all()
    assert set(lt.index) == {b.layer for b in blobs("googlenet")}
    run = res.runs.iloc[0]
    assert run["provenance"] == "published" and run["device"] == "k80"
    assert run["source"] == "shyhuai/B-Caffe logdata/tmpcomm.log (commit afc8063dca05)"
    assert run["bwd_ms"] == pytest.approx(lt["bwd_ms"].sum())
    assert 190 < run["bwd_ms"] < 210  # README: backward sums to about 200 ms
    assert run["timestamp_utc"] == "2017-02-07T16:23:08Z"
    params = json.loads(run["params_json"])
    assert params["inferred"]["workers"] == 2 and params["inferred"]["batch_size"] == 64
    assert params["padded_blobs"] == res.padded_blobs == 27
    assert "INFERRED" in run["notes"]


def test_zero_block_skipped_and_reprint_merged():
    two = import_log(reference.path("bcaffe/tmp2comm.log"))
    assert (two.blocks_total, two.blocks_zero, two.blocks_used) == (2, 1, 1)
    assert two.layer_timings.set_index("layer").loc["conv1/7x7_s2", "bwd_ms"] == \
        pytest.approx(14.6902)
    eight = import_log(reference.path("bcaffe/tmp8comm.log"))
    assert (eight.blocks_duplicate, eight.blocks_used) == (1, 1)
    params = json.loads(eight.runs.iloc[0]["params_json"])
    merged = params["merged_us_by_blob"][0]
    assert merged[0] == 1231 and merged[4] == 2405  # from the second print of the iteration
    assert params["fields"][-1] == "merged_us" and params["inferred"]["workers"] == 8


def test_two_distinct_blocks_are_averaged(tmp_path):
    def add_block(lines):
        lines += [ln.replace("[0, 9408, 14744.1, 408]", "[0, 9408, 14744.1, 1408]")
                  .replace("[1, 64, 14744.1, 139]", "[1, 64, 14744.1, 1139]") for ln in list(lines)]
    res = _other(_edited(tmp_path, add_block))
    conv1 = res.layer_timings.set_index("layer").loc["conv1/7x7_s2"]
    assert conv1["n"] == 2 and conv1["comm_ms"] == pytest.approx((547 + 2547) / 2 / 1000)


def test_true_size_accepted_wrong_size_rejected(tmp_path):
    true_size = _other(_edited(tmp_path, lambda ls: ls.__setitem__(
        9, ls[9].replace("[9, 128,", "[9, 96,"))))
    assert true_size.padded_blobs == 26
    with pytest.raises(DgtracesError) as exc:
        _other(_edited(tmp_path, lambda ls: ls.__setitem__(2, ls[2].replace("4096", "4100"))))
    assert exc.value.code == "GRAD_MISMATCH"
    f = exc.value.failures[0]
    assert (f.row, f.column, f.found) == (3, "numel", "4100")
    assert "conv2/3x3_reduce" in f.message


@pytest.mark.parametrize("edit, code", [
    (lambda ls: ls.__setitem__(5, ls[5].replace("]", ", oops]")), "BAD_FILE"),
    (lambda ls: ls.__setitem__(5, ls[5].replace("[5,", "[5x,")), "BAD_FILE"),
    (lambda ls: ls.__setitem__(5, ls[5].split("]")[0] + "] [5, 192"), "BAD_FILE"),
    (lambda ls: ls.pop(7), "BAD_FILE"),  # blob ids jump 6 -> 8
    (lambda ls: ls.__setitem__(5, ls[5].replace(", 20400,", ", -1,")), "PLAUSIBILITY"),
    (lambda ls: ls.__setitem__(5, ls[5].replace(", 20400,", ", 20401,")), "PLAUSIBILITY"),
    (lambda ls: ls.__delitem__(slice(100, None)), "GRAD_MISMATCH"),
])
def test_malformed_logs(tmp_path, edit, code):
    with pytest.raises(DgtracesError) as exc:
        _other(_edited(tmp_path, edit))
    assert exc.value.code == code


def test_all_zero_and_other_errors(tmp_path):
    zero = tmp_path / "zero.log"
    text = reference.path("bcaffe/tmp2comm.log").read_text().splitlines()[:128]
    zero.write_text("\n".join(text) + "\n")
    with pytest.raises(DgtracesError) as exc:
        _other(zero)
    assert exc.value.code == "EMPTY"
    copy = tmp_path / "copy.log"
    copy.write_text(LOG.read_text() + "\n")  # not byte-identical: no citation known
    with pytest.raises(DgtracesError) as exc:
        import_log(copy)
    assert exc.value.code == "BAD_INPUT"
    res = _other(copy, workers=4)
    assert res.runs.iloc[0]["source"] == "test copy" and res.inferred == {}
    with pytest.raises(DgtracesError) as exc:
        import_log(LOG, "alexnet")
    assert exc.value.code == "GRAD_MISMATCH"
    with pytest.raises(DgtracesError) as exc:
        import_log(LOG, "vgg19")
    assert exc.value.code == "UNKNOWN_MODEL"


def test_run_ids_shipped_stable_others_carry_their_hash(tmp_path):
    import hashlib

    assert import_log(LOG).runs.iloc[0]["run_id"] == "bcaffe-googlenet-tmpcomm"  # in v0.3.0
    ids = []
    for sub, edit in (("a", lambda ls: ls.append("# one run")),
                      ("b", lambda ls: ls.append("# another run"))):
        (tmp_path / sub).mkdir()
        path = _edited(tmp_path / sub, edit, name="tmpcomm.log")  # same name, not shipped
        res = _other(path)
        digest = hashlib.sha256(path.read_bytes()).hexdigest()[:8]
        ids.append(res.runs.iloc[0]["run_id"])
        assert ids[-1] == f"bcaffe-googlenet-tmpcomm-{digest}"
        assert set(res.layer_timings["run_id"]) == {ids[-1]}
    assert ids[0] != ids[1]
    assert _other(LOG, run_id="mine").runs.iloc[0]["run_id"] == "mine"


def test_stages_compose_to_import_log():
    """parse -> attribute -> build_rows is what import_log does, stage by stage."""
    from dgtraces import reference
    from dgtraces.importers import bcaffe as bc

    path = reference.path("bcaffe/tmpcomm.log")
    parsed = bc.parse(path.read_text(encoding="utf-8"), str(path))
    assert len(parsed.used) + parsed.zero + parsed.duplicate == len(parsed.blocks)
    attributed = bc.attribute(parsed, "googlenet")
    assert attributed.n == len(parsed.used)
    whole = bc.import_log(path, "googlenet")
    lt = whole.layer_timings.set_index("layer")
    for layer, (bwd, comm) in attributed.layers.items():
        assert lt.loc[layer, "bwd_ms"] == bwd and lt.loc[layer, "comm_ms"] == comm
