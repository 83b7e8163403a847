"""Citable predictions (issue #28 point 4 and its Goal): ``dgtraces cite``, the manifest
digest and every input in ``predict --json``, a ``reproduce:`` command that re-runs the
number, the optimism caveat on multi-worker predictions, the parity plot's row scope."""

import json
import shlex

import pytest
from click.testing import CliRunner

from dgtraces.cli import main
from dgtraces.predict import Cluster, Policy, predict, resolve
from dgtraces.predict.captions import is_validation_note, validation_note
from dgtraces.publish.citation import cite
from dgtraces.store import manifest as store

ARGS = ["predict", "--model", "resnet50", "--device", "v100", "--batch-size", "64",
        "--workers", "8", "--gpus-per-node", "4", "--calibrate-img-s", "300",
        "--policy", "bucketed", "--bucket-mib", "10", "--release", "0.3.0"]


def test_cite_prints_bibtex_with_the_release_digest():
    c = cite("0.3.0")
    digest = store.read_manifest("0.3.0")["digest"]
    assert c.release == "0.3.0" and c.digest == digest
    assert c.bibtex.count("@") == 3 and f"sha256:{digest}" in c.bibtex
    res = CliRunner().invoke(main, ["cite", "--release", "0.3.0"])
    assert res.exit_code == 0 and c.bibtex in res.output
    latest = CliRunner().invoke(main, ["cite"])
    assert store.read_manifest(store.latest())["digest"] in latest.output
    bad = CliRunner().invoke(main, ["cite", "--release", "9.9.9"])
    assert bad.exit_code == 1 and bad.exception.code == "NOT_FOUND"


def test_predict_json_carries_digest_inputs_and_a_command_that_reruns_it():
    res = CliRunner().invoke(main, [*ARGS, "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["dataset_release"] == "0.3.0"
    assert out["dataset_digest"] == store.read_manifest("0.3.0")["digest"]
    inputs = out["inputs"]
    assert inputs["calibrate_img_s"] == 300 and inputs["bucket_mib"] == 10
    assert inputs["workers"] == 8 and inputs["inter"] == "10gbe" and inputs["release"] == "0.3.0"
    assert "timeline" not in inputs and "as_json" not in inputs
    words = shlex.split(out["reproduce"])
    assert words[:2] == ["dgtraces", "predict"] and "--calibrate-img-s" in words
    again = CliRunner().invoke(main, [*words[1:], "--json"])
    assert json.loads(again.output)["iter_ms"] == pytest.approx(out["iter_ms"], rel=1e-12)
    text = CliRunner().invoke(main, ARGS).output
    assert out["reproduce"] in text and out["dataset_digest"] in text


def test_multi_worker_predictions_carry_the_validation_caveat():
    trace = resolve("resnet50", "v100", 64, release="0.3.0")
    many = predict(trace, Cluster(8, 4, release="0.3.0"), Policy("wfbp"))
    one = predict(trace, Cluster(1, release="0.3.0"), Policy("wfbp"))
    assert validation_note("gpu", "none") in many.notes
    assert not any(is_validation_note(n) for n in one.notes)
    assert predict(trace, Cluster(1, release="0.3.0"), Policy("wfbp"),
                   calibrate_img_s=250.0).inputs["calibrate_img_s"] == 250.0


def test_parity_title_names_the_rows_behind_each_mape():
    from dgtraces.evaluation.validation import parity_title, validate

    res = validate("0.3.0")
    head = res.headline()["measured"]
    assert head["rows"] == 9 and head["scope"] == "2-worker cpu runs"
    assert f"measured MAPE {head['mape_pct']:.1f}% (n=9: 2-worker cpu runs)" in \
        parity_title(res)


def test_reproduce_pins_the_options_that_shape_the_number_at_their_defaults():
    """Acceptance review #6: options equal to today's default were left out of
    ``reproduce:`` (--nccl, --nccl-time, --intra, --inter, --h2d-link), so a package with
    other defaults would re-run another number; each is written, as resolved."""
    from dgtraces.comm.nccl_versions import DEFAULT_VERSION

    args = ["predict", "--model", "alexnet", "--device", "h200", "--batch-size", "512",
            "--workers", "8", "--gpus-per-node", "8", "--intra", "nvlink4", "--json"]
    out = json.loads(CliRunner().invoke(main, args).output)
    words = shlex.split(out["reproduce"])
    pinned = {w: words[i + 1] for i, w in enumerate(words) if w.startswith("--")}
    assert pinned["--nccl"] == DEFAULT_VERSION and pinned["--nccl-time"] == "run"
    assert pinned["--inter"] == "10gbe" and pinned["--intra"] == "nvlink4"
    assert pinned["--h2d-link"] == "pcie5"  # the H200's host link, resolved
    assert {"--overheads", "--framework", "--release", "--algorithm"} <= set(pinned)
    again = json.loads(CliRunner().invoke(main, [*words[1:], "--json"]).output)
    assert again["iter_ms"] == pytest.approx(out["iter_ms"], rel=1e-12)
