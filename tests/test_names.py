"""Names (issue #28 point 7): case-insensitive where unambiguous, else a did-you-mean with
one listing of the known names; missing layers named as missing."""

import pytest
from click.testing import CliRunner

from dgtraces.cli import main
from dgtraces.errors import DgtracesError, did_you_mean, suggestions
from dgtraces.models import MODELS
from dgtraces.names import canonical, listing, match
from dgtraces.predict import resolve
from dgtraces.reconstruct.roofline.calibration import get_device
from dgtraces.tables.checks import check_tables
from dgtraces.tables.coverage import incomplete_failures
from tests.contribute.test_contribute import variant


def test_canonical_and_suggestions():
    assert canonical("V100", ["v100", "k80"]) == "v100"
    assert canonical("AlexNet", MODELS) == "alexnet"
    assert canonical("ab", ["AB", "ab2", "Ab"]) is None  # ambiguous by case: not guessed
    assert suggestions("alexnett", MODELS)[0] == "alexnet"
    assert suggestions("Conv1", ["conv1", "conv2"]) == ["conv1"]
    assert did_you_mean("zzzz", MODELS) == ""
    assert listing([f"n{i:02d}" for i in range(50)], limit=3) == "n00, n01, n02, ... (47 more)"
    with pytest.raises(DgtracesError) as exc:
        match("v10", ["v100", "k80"], what="device", code="UNKNOWN_DEVICE")
    (f,) = exc.value.failures
    assert exc.value.code == "UNKNOWN_DEVICE" and f.expected == "k80, v100"
    assert f.found == "'v10'"


def test_cli_and_api_take_names_in_any_case():
    out = CliRunner().invoke(main, ["predict", "--model", "AlexNet", "--device", "K80",
                                    "--batch-size", "64", "--json"])
    assert out.exit_code == 0, out.output
    lower = CliRunner().invoke(main, ["predict", "--model", "alexnet", "--device", "k80",
                                      "--batch-size", "64", "--json"])
    import json

    got, want = json.loads(out.output), json.loads(lower.output)
    assert got["model"] == "alexnet" and got["trace_device"] == "k80"
    assert got["inputs"]["device"] == "k80" and "--device k80" in got["reproduce"]
    assert got["iter_ms"] == pytest.approx(want["iter_ms"])
    assert resolve("ResNet50", "V100", 64).run_id == resolve("resnet50", "v100", 64).run_id
    assert get_device("V100").device == "v100"
    with pytest.raises(DgtracesError) as exc:
        get_device("v10")
    assert exc.value.code == "UNKNOWN_DEVICE"
    bad = CliRunner().invoke(main, ["predict", "--model", "alexnett", "--device", "k80",
                                    "--batch-size", "64"])
    assert bad.exit_code == 2 and "'alexnet'" in bad.output.split("did you mean")[1]


def test_contribution_model_typo_lists_the_models_once_and_suggests():
    runs, lt = variant()
    runs["model"] = "alexnett"
    _, failures = check_tables({"runs": runs, "layer_timings": lt.drop(columns="grad_bytes")})
    (f,) = [f for f in failures if f.column == "model"]
    assert f.code == "SCHEMA" and f.found == "'alexnett'"
    assert f.expected == listing(MODELS)  # the list once, in expected
    assert "isin" not in f.line() and f.line().count("googlenet") == 1


def test_wrong_layer_names_list_the_models_layers():
    runs, lt = variant()
    lt = lt.drop(columns="grad_bytes")
    lt.loc[0, "layer"] = "Conv1"
    _, failures = check_tables({"runs": runs, "layer_timings": lt})
    (f,) = failures
    assert f.code == "UNKNOWN_LAYER" and f.found == "'Conv1'"
    assert "conv1" in f.expected.split(", ") and "fc8" in f.expected.split(", ")
    assert suggestions("Conv1", f.expected.split(", ")) == ["conv1"]


def test_incomplete_trace_names_missing_layers_as_missing():
    runs, lt = variant()
    (f,) = incomplete_failures(runs, lt.iloc[3:], "layer_timings.csv")
    assert f.code == "INCOMPLETE_TRACE"
    assert f.expected == "timing rows for all 23 layers" and f.found == "20 layers timed"
    assert "conv1" not in (f.found or "")  # missing layers are not what was found
