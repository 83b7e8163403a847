"""kernels-3 traces priced with the parameters release v0.6.0 ships (issue #33): the pricing
path of each device, the framework overhead, the typed refusals, and a damaged or mismatched
parameter table refused by its digest."""

import json
import shutil

import numpy as np
import pytest
from click.testing import CliRunner

from dgtraces.cli import main
from dgtraces.errors import Code, DgtracesError
from dgtraces.reconstruct import kernels3_trace, reconstruct_trace, runs_frame
from dgtraces.store.release import Release
from dgtraces.tables.checks import validate_frame
from tests.paths import REPO


@pytest.fixture(scope="module")
def rel():
    return Release.open("0.6.0", REPO / "data")


def _tags(rec, column):
    return [t for cell in rec.pricing[column] for t in str(cell).split("+") if t]


def test_v100_prices_from_its_own_kernels_and_the_sums_are_the_layers(rel):
    rec = kernels3_trace("v100", "resnet50-v1.5", 32, rel)
    run, lt = rec.run, rec.layer_timings
    assert run["collector_version"] == "dgtraces.reconstruct/kernels-3"
    assert run["fwd_ms"] == pytest.approx(lt["fwd_ms"].sum())
    assert run["iter_ms"] == pytest.approx(run["fwd_ms"] + run["bwd_ms"] + run["update_ms"])
    tags = _tags(rec, "fwd_priced_by") + _tags(rec, "bwd_priced_by")
    assert tags.count("b1") > 100 and "c" in tags and not any("@" in t for t in tags)
    detail = json.loads(run["params_json"])
    assert detail["basis"] == "kernels" and detail["framework"] == "pytorch-ddp"
    assert detail["kernels_digest"] and detail["release"] == "0.6.0"
    assert set(detail["priced_by"]) == set(lt["layer"])
    validate_frame("layer_timings", lt)
    runs_frame([rec])  # a schema-valid runs row


def test_k80_goes_through_the_m40_and_a_datasheet_gpu_through_the_prior(rel):
    k80 = kernels3_trace("k80", "googlenet", 64, rel)
    assert all(t.endswith("@m40") for t in _tags(k80, "bwd_priced_by") if t != "c")
    assert json.loads(k80.run["params_json"])["basis"] == "transfer:m40"
    assert json.loads(k80.run["params_json"])["framework"] == "caffe-mpi"  # the K80 default
    a100 = kernels3_trace("a100", "resnet50", 32, rel)
    tags = set(_tags(a100, "fwd_priced_by"))
    assert tags <= {"b2", "b3", "c"} and "b2" in tags
    assert json.loads(a100.run["params_json"])["basis"] == "prior"
    same = kernels3_trace("v100-dgxs-32gb", "resnet50", 32, rel)
    v100 = kernels3_trace("v100", "resnet50", 32, rel)
    np.testing.assert_allclose(same.layer_timings["fwd_ms"], v100.layer_timings["fwd_ms"])


def test_an_aliased_device_records_the_memory_constants_that_priced_it(rel):
    """v100-dgxs-32gb is priced with v100's stage-F constants; its params_json says so."""
    from dgtraces.reconstruct.kernels3.trace import model_of

    same = json.loads(kernels3_trace("v100-dgxs-32gb", "resnet50", 32, rel).run["params_json"])
    v100 = json.loads(kernels3_trace("v100", "resnet50", 32, rel).run["params_json"])
    assert same["memory"] == v100["memory"]
    e_mem, floor = model_of(rel).memory("v100-dgxs-32gb")
    assert same["memory"]["e_mem"] == pytest.approx(e_mem)
    assert same["memory"]["floor_us"] == pytest.approx(floor)


def test_framework_overhead_comes_from_the_registry_and_the_fit(rel):
    none = kernels3_trace("v100", "alexnet", 64, rel, framework="none")
    mx = kernels3_trace("v100", "alexnet", 64, rel, framework="mxnet-kvstore")
    o = json.loads(mx.run["params_json"])["overhead_us_per_layer"]
    stored = rel.table("method_params")
    want = stored[(stored["scope"] == "framework") & (stored["name"] == "overhead")
                  & (stored["family"] == "mxnet")]["value_us"].iloc[0]
    assert o == pytest.approx(want)
    diff = mx.layer_timings["fwd_ms"] - none.layer_timings["fwd_ms"]
    np.testing.assert_allclose(diff, o * 1e-3)
    assert mx.run["run_id"].endswith("-k3-mxnet-kvstore") and none.run["run_id"] != mx.run[
        "run_id"]
    with pytest.raises(DgtracesError) as e:
        kernels3_trace("v100", "alexnet", 64, rel, framework="mxnet-kvstor")
    assert e.value.code == Code.UNKNOWN_FRAMEWORK
    with pytest.raises(DgtracesError) as e:
        reconstruct_trace("v100", "alexnet", 64, framework="mxnet-kvstore")  # roofline-1.1
    assert e.value.code == Code.BAD_INPUT


def test_refusals_are_typed(rel):
    for args, code in ((("k80", "alexnet", 16, rel, "amp"), Code.NO_CALIBRATION),
                       (("h300", "alexnet", 16, rel), Code.UNKNOWN_DEVICE),
                       (("v100", "alexnet", 0, rel), Code.BAD_INPUT),
                       (("v100", "alexnet-x", 16, rel), Code.UNKNOWN_MODEL),
                       (("v100", "alexnet", 16, Release.open("0.5.0", REPO / "data")),
                        Code.NO_CALIBRATION)):
        with pytest.raises(DgtracesError) as e:
            kernels3_trace(*args)
        assert e.value.code == code, args
    amp = kernels3_trace("v100", "resnet50", 64, rel, "amp")
    fp32 = kernels3_trace("v100", "resnet50", 64, rel)
    assert amp.run["iter_ms"] < fp32.run["iter_ms"]  # tensor cores


def test_extrapolation_is_flagged_in_the_row_and_the_run(rel):
    rec = kernels3_trace("k80", "googlenet", 64, rel)
    flagged = list(rec.pricing.loc[rec.pricing["extrapolated"], "layer"])
    detail = json.loads(rec.run["params_json"])
    assert flagged and detail["extrapolated_layers"] == sorted(flagged)
    assert "extrapolated" in rec.run["notes"]


def test_a_damaged_or_mismatched_parameter_table_is_refused(tmp_path):
    root = tmp_path / "data"
    shutil.copytree(REPO / "data", root)
    rel = Release.open("0.6.0", root)
    shard = rel.files("method_params", verify=False)[0]
    blob = bytearray(shard.read_bytes())
    blob[len(blob) // 2] ^= 0xFF
    shard.write_bytes(bytes(blob))
    with pytest.raises(DgtracesError) as e:
        kernels3_trace("v100", "alexnet", 16, Release.open("0.6.0", root))
    assert e.value.code == Code.INTEGRITY


def test_reconstruct_trace_reads_the_latest_release(rel):
    a = reconstruct_trace("t4", "vgg16", 16, method="kernels-3")
    b = kernels3_trace("t4", "vgg16", 16, rel)
    np.testing.assert_allclose(a.layer_timings["bwd_ms"], b.layer_timings["bwd_ms"])


def test_cli_trace_and_report(tmp_path):
    r = CliRunner().invoke(main, ["reconstruct", "--method", "kernels-3", "--device", "k80",
                                  "--model", "alexnet", "--batch-size", "16"])
    assert r.exit_code == 0, r.output
    assert "kernels priced by" in r.output and "@m40" in r.output
    r = CliRunner().invoke(main, ["reconstruct", "--report", "--method", "kernels-3",
                                  "--release", "0.6.0", "--fragment", str(tmp_path / "f")])
    assert r.exit_code == 0, r.output
    clause_lines = [x for x in r.output.splitlines() if x.startswith(("  1", "  2", "  3"))]
    assert len(clause_lines) == 14 and "adoption" in r.output
    assert all(("met" in x) and (x.rstrip().endswith(("yes", "no"))) for x in clause_lines)
    assert (tmp_path / "f" / "reconstruction_kernels3.md").is_file()
    assert (tmp_path / "f" / "reconstruction_kernels3.png").is_file()
    r = CliRunner().invoke(main, ["reconstruct", "--refit", "--device", "v100"])
    assert r.exit_code != 0 and isinstance(r.exception, DgtracesError)
    assert r.exception.code == Code.BAD_INPUT
