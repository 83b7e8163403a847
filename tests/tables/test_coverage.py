"""Incomplete traces and unit errors (issue #14 item 9): a contribution lacking layers is
INCOMPLETE_TRACE unless declared partial, the predictor never picks an incomplete run by
default, and times 1000x off (us as ms, s as ms) are PLAUSIBILITY with the implied FLOP/s."""

import pandas as pd
import pytest

from dgtraces.contribute import contribute
from dgtraces.errors import DgtracesError
from dgtraces.predict.trace import pick_run
from dgtraces.tables import coverage
from tests.attack_tally import record
from tests.contribute.test_contribute import META, variant, write_contrib


@pytest.mark.parametrize("model,drop", [("resnet50", ["res5c_branch2b"]),
                                        ("alexnet", ["conv1"]), ("alexnet", ["relu7", "fc8"]),
                                        ("googlenet", ["conv2/3x3"])])
def test_missing_layers_are_incomplete_trace(store, tmp_path, model, drop):
    runs, lt = variant("inc1", model=model, batch=8)
    lt = lt[~lt["layer"].isin(drop)]
    with pytest.raises(DgtracesError) as exc:
        contribute(write_contrib(tmp_path / "c", runs, lt), root=store)
    codes = {f.code for f in exc.value.failures}
    record("trace lacking layers", "INCOMPLETE_TRACE" in codes)
    assert "INCOMPLETE_TRACE" in codes, exc.value.report()


def test_declared_partial_is_accepted_and_aux_free_googlenet_is_complete(store, tmp_path):
    runs, lt = variant("part1", model="resnet50", batch=8)
    lt = lt[lt["layer"] != "res5c_branch2b"]
    meta = META + "partial: true\n"
    contribute(write_contrib(tmp_path / "c", runs, lt, meta=meta), root=store)
    g_runs, g_lt = variant("gnoaux", model="googlenet", batch=8)
    from dgtraces.models import layers_frame

    aux = set(layers_frame("googlenet").query("aux")["layer"])
    assert coverage.missing_layers("googlenet", set(g_lt["layer"]) - aux) == []
    with pytest.raises(DgtracesError) as exc:
        contribute(write_contrib(tmp_path / "c2", runs.assign(run_id="p2"),
                                 lt.assign(run_id="p2"), meta=META + 'partial: "true"\n'),
                   root=store)
    assert exc.value.code == "METADATA" or "METADATA" in exc.value.codes


def test_default_run_choice_skips_incomplete_runs():
    runs, lt = variant("full", model="alexnet", batch=8)
    runs = pd.concat([runs, runs.assign(run_id="a-inc", provenance="measured")])
    runs["provenance"] = ["reconstructed", "measured"]  # the incomplete one ranks first
    lt = pd.concat([lt, lt[lt["layer"] != "fc8"].assign(run_id="a-inc")])
    dev = runs["device"].iloc[0]
    assert pick_run(runs, lt, "alexnet", dev, 8) == "full"
    assert pick_run(runs[runs.run_id == "a-inc"], lambda: lt, "alexnet", dev, 8) is None


@pytest.mark.parametrize("scale,device", [(1000.0, "test-gpu"), (1000.0, "k80"),
                                          (0.001, "k80")])
def test_unit_errors_are_plausibility_with_implied_flops(store, tmp_path, scale, device):
    """The template runs at 100 GFLOP/s: x1000 slower is below any GPU (generic range and
    the K80 datasheet); x1000 faster (100 TFLOP/s) is caught against the K80's datasheet
    peak (a device without datasheet figures only has the generic range, up to 2.5 PFLOP/s)."""
    runs, lt = variant("unit1", scale=scale)
    runs["flagged"], runs["device"] = False, device
    meta = META + "  - {device: k80, kind: gpu, name: NVIDIA Tesla K80}\n" \
        if device == "k80" else META
    with pytest.raises(DgtracesError) as exc:
        contribute(write_contrib(tmp_path / "c", runs, lt, meta=meta), root=store)
    hits = [f for f in exc.value.failures if f.code == "PLAUSIBILITY" and "FLOP/s" in f.message]
    record("consistent unit error (x1000 / x0.001)", len(hits) == 1)
    assert len(hits) == 1 and hits[0].found.endswith("FLOP/s"), exc.value.report()


def test_datasheet_peak_bounds():
    runs, lt = variant("k1", batch=32)
    runs["device"] = "k80"
    total = coverage.throughput_failures(runs, lt, {"k80": {"fp32": 4.37e12}}, "runs.csv")
    ms = (lt["fwd_ms"] + lt["bwd_ms"]).sum()
    from dgtraces.models import layers_frame

    lf = layers_frame("alexnet")
    implied = (lf["fwd_flops"] + lf["bwd_flops"]).sum() * 32 / (ms / 1e3)
    want = not 4.37e12 / coverage.BELOW_PEAK <= implied <= 4.37e12 * coverage.ABOVE_PEAK
    assert bool(total) == want
    fast = coverage.throughput_failures(runs, lt.assign(fwd_ms=lt.fwd_ms * 1e-4,
                                                        bwd_ms=lt.bwd_ms * 1e-4),
                                        {"k80": {"fp32": 4.37e12}}, "runs.csv")
    assert len(fast) == 1 and "above" in fast[0].message


def test_backward_only_runs_are_compared_with_backward_flops():
    """A trace with only bwd_ms counts only bwd_flops: the implied FLOP/s does not include
    forward FLOPs that were never timed."""
    from dgtraces.models import layers_frame

    runs, lt = variant("k2", batch=32)
    runs["device"] = "k80"
    lf = layers_frame("alexnet").set_index("layer")
    bwd_only = lt.assign(fwd_ms=float("nan"))
    ms = bwd_only["bwd_ms"].sum()
    implied = lf["bwd_flops"].sum() * 32 / (ms / 1e3)
    # a peak that puts the backward-only FLOP/s just under the upper bound, and
    # forward+backward FLOP/s (had they been counted) above it
    both = (lf["fwd_flops"] + lf["bwd_flops"]).sum() * 32 / (ms / 1e3)
    peak = (implied + both) / 2 / coverage.ABOVE_PEAK
    assert coverage.throughput_failures(runs, bwd_only, {"k80": {"fp32": peak}}, "runs.csv") == []
    assert len(coverage.throughput_failures(runs, lt.assign(fwd_ms=0.0), {"k80": {"fp32": peak}},
                                            "runs.csv")) == 1
