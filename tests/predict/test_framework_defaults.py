"""Issue #35 item 1: validated defaults. ``--overheads measured`` and ``--framework auto`` (the
profile the trace's run implies) in predict, sweep, validate-predictor, both exports and the
demo; the profile stated as given or inferred, ``none (not inferable)`` otherwise; typed errors
for an unknown framework and an input term asked for without its measurement."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from dgtraces.cli import main
from dgtraces.errors import Code
from dgtraces.reference.frameworks import AUTO, choose_framework, infer_framework

KINETO = "kineto-resnet50-v1.5-resnet50_v100_b32_num_workers_0-a91798b5"
RECON = ["--model", "resnet50", "--device", "v100", "--batch-size", "64"]


@pytest.mark.parametrize("run,key,how", [
    ({"framework": "pytorch 2.13.0"}, "pytorch-ddp@>=1.8", "inferred from the run's source"),
    ({"framework": "pytorch (kineto trace)"}, "pytorch-ddp@>=1.8", "inferred"),
    ({"framework": "pytorch", "params_json": '{"framework_profile": "horovod@0.16-0.20"}'},
     "horovod@0.16-0.20", "inferred from the run's metadata"),
    ({"framework": "reconstructed (calibrated on mxnet-1.2.0rc1, tensorflow-1.1)"}, None,
     "not inferable"),
    ({"framework": "caffe (convnet-benchmarks, caffe time)"}, None, "not inferable"),
    (None, None, "not inferable"),
])
def test_a_run_implies_exactly_one_profile_or_none(run, key, how):
    got = infer_framework(run)
    assert (None if got.profile is None else got.profile.key) == key
    assert got.how.startswith(how)
    assert choose_framework(AUTO, run) == got
    given = choose_framework("horovod", run)
    assert given.profile.key == "horovod@>=0.21" and given.how == "given"
    assert choose_framework("none", run).profile is None


def test_predict_states_whether_the_profile_was_inferred_or_given():
    run = CliRunner().invoke(main, ["predict", "--run-id", KINETO, "--workers", "8",
                                    "--gpus-per-node", "8", "--intra", "nvlink2"])
    assert run.exit_code == 0, run.output
    assert "framework: pytorch-ddp@>=1.8 (inferred from the run's source" in run.output
    assert "overhead sync:" in run.output  # the adopted term, by default
    recon = CliRunner().invoke(main, ["predict", *RECON, "--workers", "8"])
    assert "framework: none (not inferable" in recon.output
    given = CliRunner().invoke(main, ["predict", *RECON, "--workers", "8", "--framework",
                                      "horovod"])
    assert "framework: horovod@>=0.21 (given;" in given.output
    doc = json.loads(CliRunner().invoke(main, ["predict", *RECON, "--json"]).output)
    assert doc["framework"]["how"].startswith("not inferable")
    assert "--overheads sync" in doc["reproduce"] and "--framework none" in doc["reproduce"]


@pytest.mark.parametrize("command", [
    ["predict", *RECON], ["sweep", "--device", "v100", "--models", "resnet50"],
    ["validate-predictor", "--published"],
    ["export-chakra", "--run-id", KINETO, "--out", "x"],
    ["export-astra-sim", "--run-id", KINETO, "--out", "x.txt"]])
def test_every_command_refuses_an_unknown_framework_and_an_input_term_without_its_rate(
        command, tmp_path):
    cmd = [str(tmp_path / c) if c in ("x", "x.txt") else c for c in command]
    bad = CliRunner().invoke(main, cmd + ["--framework", "pytroch-ddp"])
    assert bad.exit_code == 1 and bad.exception.code == Code.UNKNOWN_FRAMEWORK
    assert bad.exception.failures[0].column == "--framework"  # names the option
    if command[0] == "validate-predictor":  # validation rows without a rate leave it off
        return
    missing = CliRunner().invoke(main, cmd + ["--overheads", "input"])
    assert missing.exit_code == 1 and missing.exception.code == Code.MISSING_MEASUREMENT
    assert missing.exception.failures[0].column == "--host-decode-img-s"


def test_exports_take_predicts_defaults_and_record_the_terms(tmp_path):
    out = tmp_path / "w.txt"
    res = CliRunner().invoke(main, ["export-astra-sim", "--run-id", KINETO, "--workers", "8",
                                    "--out", str(out)])
    assert res.exit_code == 0, res.output
    meta = json.loads((tmp_path / "w.txt.meta.json").read_text())
    assert meta["framework"]["framework"] == "pytorch-ddp@>=1.8"
    assert meta["overheads"] == "sync" and meta["sync_ms"] > 0
    none = CliRunner().invoke(main, ["export-astra-sim", "--run-id", KINETO, "--workers", "8",
                                     "--overheads", "none", "--framework", "none", "--out",
                                     str(tmp_path / "n.txt")])
    assert none.exit_code == 0 and (tmp_path / "n.txt").read_text() == out.read_text()
    et = CliRunner().invoke(main, ["export-chakra", "--run-id", KINETO, "--workers", "4",
                                   "--gpus-per-node", "4", "--out", str(tmp_path / "e")])
    assert et.exit_code == 0, et.output
    assert "framework: pytorch-ddp@>=1.8 (inferred" in et.output
    plain = CliRunner().invoke(main, ["export-chakra", "--run-id", KINETO, "--workers", "4",
                                      "--gpus-per-node", "4", "--framework", "none", "--out",
                                      str(tmp_path / "p")])
    # the profile's buckets (25 MiB, 1 MiB first) are the ET's all-reduces; without it, wfbp
    assert "5 COMM_COLL" in et.output and "5 COMM_COLL" not in plain.output


def test_the_demo_predicts_with_predicts_defaults(tmp_path):
    from dgtraces.demo import run_demo

    res = run_demo(tmp_path / "demo")
    p = res.predictions
    assert (p["overheads"] == "sync").all() and (p["sync_ms"] > 0).all()
    assert (p["iter_ms"] > p["dag_iter_ms"]).all()
    assert p["framework"].str.startswith("none (not inferable").all()  # reconstructed trace


@pytest.mark.parametrize("framework,key,stated", [
    ("pytorch 2.13.0", "pytorch-ddp@>=1.8", True),
    ("pytorch (PipeDream profiler)", "pytorch-ddp@>=1.8", False),  # 2019, version unknown
    ("pytorch 1.1.0", None, True),  # before DDP's bucketing defaults of the 1.8 profile
])
def test_inference_uses_the_stated_version_and_says_when_none_is_stated(framework, key,
                                                                         stated):
    """Acceptance review #23: PipeDream's 2019 runs were mapped to pytorch-ddp@>=1.8 as if
    their version were known; a stated version outside the profile infers none."""
    got = infer_framework({"framework": framework})
    assert (None if got.profile is None else got.profile.key) == key
    plain = f"inferred from the run's source: framework {framework!r}"
    assert (got.how == plain) is (stated and key is not None)
