"""The reviewed mapping of published scaling rows to predictor options (issue #35 item 2)."""

from __future__ import annotations

from collections import Counter

import pytest
import yaml

from dgtraces.errors import Code, DgtracesError
from dgtraces.evaluation import published_mapping as pm
from tests.paths import REPO


def test_every_reference_row_is_matched_by_exactly_one_setup():
    rows = pm.mapped_rows()
    assert len(rows) == 193 + 25
    by_file = Counter(f for f, _, _ in rows)
    assert by_file == {pm.NEW_FILE: 193, pm.OLD_FILE: 25}
    for s in pm.load_mapping():
        assert sum(1 for _, _, hit in rows if hit is s) == s.rows, s.id
    # the sources the issue names are covered, each row scored or listed with a reason
    sources = {r.get("source_repo") for f, r, s in rows if f == pm.NEW_FILE}
    assert sources == {"NVIDIA/DeepLearningExamples", "Oneflow-Inc/DLPerf",
                       "rossumai/keras-multi-gpu", "PaddlePaddle/Paddle"}
    assert all(s.scored or s.reason for _, _, s in rows)


def test_scored_setups_cite_their_evidence_for_the_profile_and_links():
    for s in pm.load_mapping():
        if s.scored and s.file == pm.NEW_FILE:
            assert {"profile", "links", "nccl", "loader"} <= set(s.evidence), s.id
            assert s.profile not in (None, "none"), s.id


def _write(tmp_path, setups, name="mapping.yaml"):
    path = tmp_path / name  # a new name per content: load_mapping caches by path
    path.write_text(yaml.safe_dump(setups))
    return path


GOOD = {"id": "x", "file": pm.OLD_FILE, "match": {"update": "nothing"}, "rows": 1,
        "status": "scored", "model": "resnet50", "device": "v100", "profile": "horovod@>=0.21",
        "algorithm": "nccl", "nccl_version": "2.7.5", "intra": "nvlink2", "inter": "none",
        "loader": "synthetic"}


@pytest.mark.parametrize("field,value,code", [
    ("profile", "horovod@0.99", Code.UNKNOWN_FRAMEWORK),
    ("intra", "nvlink9", Code.UNKNOWN_LINK),
    ("inter", "opa-100", Code.UNKNOWN_LINK),  # Omni-Path: no preset (ib-xdr is one since #34)
    ("device", "v200", Code.UNKNOWN_DEVICE),
    ("model", "resnet51", Code.UNKNOWN_MODEL),
    ("algorithm", "butterfly", Code.BAD_INPUT),
    ("policy", "eager", Code.BAD_INPUT),
    ("nccl_version", "1.3.0", Code.UNKNOWN_NCCL),  # NCCL 1: no model (2.18.1 is one since #34)
    ("nccl_version", "3.1", Code.UNKNOWN_NCCL),  # no NCCL 3
    ("nccl_version", "latest", Code.UNKNOWN_NCCL),  # a release, not a default
    ("nccl_date", "May 2019", Code.BAD_INPUT),  # with nccl_version: exactly one of them
    ("nccl_version", None, Code.BAD_INPUT),  # an nccl setup names its release
    ("loader", "magic", Code.BAD_INPUT),
    ("servers", 0, Code.BAD_INPUT),
    ("colour", "red", Code.BAD_INPUT),
])
def test_a_setup_naming_an_option_the_predictor_lacks_fails_loudly(tmp_path, field, value,
                                                                   code):
    good = dict(GOOD, profile="horovod@0.16-0.20")
    assert pm.load_mapping(_write(tmp_path, [good]))[0].profile == "horovod@0.16-0.20"
    with pytest.raises(DgtracesError) as exc:
        pm.load_mapping(_write(tmp_path, [dict(good, **{field: value})], "bad.yaml"))
    assert exc.value.code == code
    assert "'x'" in exc.value.message  # names the setup


def test_each_setups_nccl_release_becomes_a_modelled_release(tmp_path):
    """Rules R1-R4 of docs/predictor-published.md (the NCCL revision)."""
    base = {k: v for k, v in GOOD.items() if k != "nccl_version"}
    cases = [({"nccl_version": "2.4.8"}, "2.4"), ({"nccl_version": "2.6.3"}, "2.4"),
             ({"nccl_version": "2.7.3"}, "2.7"), ({"nccl_version": "2.8.4"}, "2.7"),
             ({"nccl_version": "2.12.10"}, "2.12"), ({"nccl_version": "2.18.1"}, "2.18"),
             ({"nccl_version": "2.31.2"}, "2.30"), ({"nccl_version": "2.3.7"}, "2.4"),
             ({"nccl_date": "2017-09-01"}, "2.4"), ({"nccl_date": "2019-05-01"}, "2.4"),
             ({"nccl_date": "2020-07-01"}, "2.7"), ({"nccl_date": "2023-06-01"}, "2.12"),
             ({"nccl_date": "2023-10-10"}, "2.18")]
    for i, (given, key) in enumerate(cases):
        (s,) = pm.load_mapping(_write(tmp_path, [dict(base, **given)], f"n{i}.yaml"))
        assert pm.nccl_model(s)[0].key == key, given
    older = pm.nccl_model(pm.load_mapping(_write(tmp_path, [dict(base, nccl_version="2.3.7")],
                                                "older.yaml"))[0])[1]
    assert "R4" in older
    # every shipped nccl setup resolves; its evidence says 'inferred' exactly for R2 and R3
    for s in pm.load_mapping():
        if s.algorithm == pm.NCCL:
            assert pm.nccl_model(s)[0].key in ("2.4", "2.7", "2.12"), s.id
            ev = s.evidence["nccl"]
            assert ("inferred" in ev) is (s.nccl_date is not None or "(rule R2)" in ev), s.id


def test_unmatched_or_doubly_matched_rows_fail(tmp_path):
    setups = pm.load_mapping()
    old_rows = [{"source": "s", "update": "nothing"}]
    one = pm.load_mapping(_write(tmp_path, [GOOD]))
    assert pm.match_rows(one, pm.OLD_FILE, old_rows) == [one[0]]
    with pytest.raises(DgtracesError) as exc:
        pm.match_rows(setups, pm.OLD_FILE, old_rows)  # matched by none
    assert exc.value.code == Code.INTEGRITY
    twice = pm.load_mapping(_write(tmp_path, [GOOD, dict(GOOD, id="y")], "twice.yaml"))
    with pytest.raises(DgtracesError) as exc:
        pm.match_rows(twice, pm.OLD_FILE, old_rows)
    assert exc.value.code == Code.INTEGRITY


def test_not_representable_needs_a_reason(tmp_path):
    bad = {"id": "n", "file": pm.NEW_FILE, "match": {"gpu": "x"}, "rows": 1,
           "status": "not representable"}
    with pytest.raises(DgtracesError) as exc:
        pm.load_mapping(_write(tmp_path, [bad], "nr.yaml"))
    assert exc.value.code == Code.BAD_INPUT


def test_docs_table_is_generated_from_the_mapping():
    doc = (REPO / "docs" / "predictor-published.md").read_text()
    block = doc.split("<!-- mapping:begin -->\n", 1)[1].split("\n<!-- mapping:end -->", 1)[0]
    assert block == pm.mapping_markdown()
