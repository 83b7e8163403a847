"""kernels-2.1 (issue #27): form pieces, bounds, folds, the adoption rule and bad input, on
small inputs (no full stage-2 fit: seconds, not minutes)."""

import dataclasses

import numpy as np
import pandas as pd
import pytest

from dgtraces.errors import Code, DgtracesError
from dgtraces.evaluation import kernels21 as ev
from dgtraces.evaluation.kernels import SourceComparison
from dgtraces.reconstruct import reconstruct_trace
from dgtraces.reconstruct.kernels2 import stage2_traces as k21
from dgtraces.reconstruct.kernels2.gemm import CLASSES
from dgtraces.reconstruct.kernels2.network import net_times
from dgtraces.reconstruct.kernels2.stage1 import stage1
from dgtraces.reconstruct.kernels2.traces import blocks_from, folds
from dgtraces.reconstruct.roofline.costmodel import layer_arrays


@pytest.fixture(scope="module")
def base():
    return stage1().params


def _params(base, t0_mem=5.0, scale=1.0, e_mem=0.8):
    e = base.eff()
    v = {f"e_{c}": scale * e[i] for i, c in enumerate(CLASSES)}
    return k21.build(base, {**v, "e_mem": e_mem}, {"t0_mem_us": t0_mem, "h_us": 10.0})


def test_per_class_scales_and_memory_floor_act_where_they_should(base):
    p = _params(base)
    assert p.eff() == pytest.approx(base.eff())
    assert p.mem_floor_us() == 5.0 and base.mem_floor_us() == base.t0_us
    la = layer_arrays("alexnet-owt")
    assert list(la.kind[:2]) == ["conv", "relu"]  # conv1 (+ its bias kernel), conv1/relu
    t5 = net_times("alexnet-owt", "titanx-maxwell", p, 16)
    t20 = net_times("alexnet-owt", "titanx-maxwell", _params(base, t0_mem=20.0), 16)
    # memory-bound kernels (relu; conv1's bias add) pay t0_mem, the GEMM pays stage-1 t0
    assert t20.fwd_ms[1] - t5.fwd_ms[1] == pytest.approx(la.fwd_kernels[1] * 15e-3)
    assert t20.fwd_ms[0] - t5.fwd_ms[0] == pytest.approx((la.fwd_kernels[0] - 1) * 15e-3)
    slow = net_times("alexnet-owt", "titanx-maxwell", _params(base, scale=0.5), 16)
    assert slow.fwd_ms[0] > t5.fwd_ms[0] and slow.fwd_ms[1] == pytest.approx(t5.fwd_ms[1])


def test_bounds_follow_the_pre_registration(base):
    box = k21.class_box(base, "layers", with_h=True)
    assert box.names == ("e_fwd", "e_dgrad", "e_wgrad", "e_wino", "e_gemm", "e_mem",
                         "t0_mem_us", "h_us")
    assert box.hi[:5] == pytest.approx([1, 1, 1, 4 / 2.25, 1])
    assert box.lo[:5] == pytest.approx([0.05] * 5)
    assert (box.lo[6], box.hi[6]) == (0.5, 50.0) and (box.lo[7], box.hi[7]) == (0.5, 200.0)
    for theta in (np.full(8, -100.0), np.full(8, 100.0), np.zeros(8)):
        v = np.array(list(box.values(theta).values()))
        assert ((v >= box.lo - 1e-12) & (v <= box.hi + 1e-12)).all()
    tb = k21.class_box(base, "throughputs", with_h=True)
    assert tb.names == ("kappa", "e_mem", "h_us")
    assert (tb.hi[0] * base.eff() <= k21.E_UPPER + 1e-12).all()
    assert (tb.lo[0] * base.eff() >= 0.05 - 1e-12).all()
    with pytest.raises(DgtracesError) as e:
        k21.class_box(base, "per-layer", with_h=False)
    assert e.value.code == Code.BAD_INPUT


def test_folds_are_the_pre_registered_layer_groups():
    r = folds("resnet50-v1.5")
    assert sorted(set(r.values())) == ["head", "layer1", "layer2", "layer3", "layer4", "stem"]
    assert r["maxpool"] == "stem" and r["layer3.5.relu#3"] == "layer3" and r["fc"] == "head"
    g = folds("googlenet")
    assert len(set(g.values())) == 11 and g["pool3/3x3_s2"] == "inception_3b"
    assert g["pool2/3x3_s2"] == "stem" and g["loss3/classifier"] == "head"
    a = folds("alexnet-owt")
    assert len(set(a.values())) == 8 and a["pool5/3x3_s2"] == "conv5/3x3_s1"
    with pytest.raises(DgtracesError) as e:
        folds("vgg16")
    assert e.value.code == Code.BAD_INPUT


def _runs(rids, framework="caffe (convnet-benchmarks, caffe time)"):
    return pd.DataFrame([{"run_id": r, "provenance": "published", "device_kind": "gpu",
                          "device": "titanx-maxwell", "model": "alexnet-owt",
                          "batch_size": 128, "framework": framework} for r in rids])


def test_runs_of_one_setup_are_one_block_with_the_same_folds():
    lt = pd.DataFrame({"run_id": ["r1", "r1", "r2", "r2"],
                       "layer": ["conv1", "fc8", "conv1", "fc8"],
                       "fwd_ms": [2.0, 1.0, 2.2, 0.0], "bwd_ms": [4.0, 2.0, 4.4, 2.1]})
    (b,) = blocks_from(_runs(["r1", "r2"]), lt, "titanx-maxwell")
    assert len(b.measured_ms) == 7  # r2 fc8 fwd is 0: no row
    for layer in ("conv1", "fc8"):
        assert len(set(b.fold[b.layer == layer])) == 1
    assert set(b.fold) == {"conv1", "fc8"}
    assert blocks_from(_runs(["r1"], framework="B-Caffe (Caffe fork)"), lt,
                       "titanx-maxwell") == ()


def test_fit_recovers_device_constants_from_synthetic_rows(base, monkeypatch):
    lt = pd.DataFrame({"run_id": "r1", "layer": list(folds("alexnet-owt"))})
    lt["fwd_ms"], lt["bwd_ms"] = 1.0, 1.0
    (b,) = blocks_from(_runs(["r1"]), lt, "titanx-maxwell")
    true = _params(base, t0_mem=8.0, scale=0.6, e_mem=0.5)
    b = dataclasses.replace(b, measured_ms=b.predict(true, "titanx-maxwell"))
    monkeypatch.setattr(k21, "MAX_ITER", 25)
    got = k21.fit21("titanx-maxwell", [], (b,), "layers", fixed={"h_us": 0.0})
    fit = b.predict(got, "titanx-maxwell")
    assert np.abs(np.log(fit / b.measured_ms)).max() < 0.02
    assert got.t0_mem_us == pytest.approx(8.0, rel=0.1)
    with pytest.raises(DgtracesError) as e:  # h_us neither fitted nor given
        k21.fit21("titanx-maxwell", [], (b,), "layers")
    assert e.value.code == Code.NO_CALIBRATION
    with pytest.raises(DgtracesError) as e:  # 3 rows for 7 constants
        k21.fit21("titanx-maxwell", [], (b.select(np.arange(3)),), "layers",
                  fixed={"h_us": 0.0})
    assert e.value.code == Code.NO_CALIBRATION


def test_adoption_rule_from_the_reports_numbers():
    roof = {"kineto-w0": 56.7, "kineto-w4": 57.0}
    ok, why = ev.adoption({"kineto-w0": 40.0, "kineto-w4": 41.0}, roof,
                          {"k80": 20.0, "v100": 9.2}, {"k80": 24.8, "v100": 9.2})
    assert ok and len(why) == 4
    ok, why = ev.adoption({"kineto-w0": 40.0, "kineto-w4": 57.0}, roof,
                          {"k80": 20.0, "v100": 9.0}, {"k80": 24.8, "v100": 9.2})
    assert not ok and why[1].endswith("FAIL")
    ok, why = ev.adoption({"kineto-w0": 40.0, "kineto-w4": 41.0}, roof,
                          {"k80": 20.0, "v100": 9.3}, {"k80": 24.8, "v100": 9.2})
    assert not ok and why[3].endswith("FAIL")
    with pytest.raises(DgtracesError) as e:
        ev.adoption({"kineto-w0": 40.0}, roof, {"k80": 1.0}, {"k80": 2.0})
    assert e.value.code == Code.BAD_INPUT
    with pytest.raises(DgtracesError) as e:
        ev.adoption(roof, roof, {"k80": 1.0}, {"v100": 2.0})
    assert e.value.code == Code.BAD_INPUT


def test_goals_are_reported_met_or_not():
    t = pd.DataFrame({"layer": ["c", "c", "b"], "kind": ["conv", "conv", "bn"],
                      "direction": ["fwd", "bwd", "fwd"], "measured_ms": [1.0, 2.0, 1.0],
                      "predicted_ms": [1.1, 3.0, 1.0]})
    t["ape_pct"] = (t["predicted_ms"] / t["measured_ms"] - 1).abs() * 100
    c = SourceComparison("kineto-x", "v100-dgxs-32gb", "resnet50-v1.5", 32, t)
    g = ev.goals([c], {"v100": (5.0, -8.0, 30.0)})
    assert g[0].endswith(": met") and g[1].endswith("NOT met")  # conv fwd 10%, bwd 50%
    # layer c: 4.1 ms against 3 (36.7%), layer b exact: 18.3%
    assert "all kinds 18.3%" in g[2] and g[2].endswith(": met")
    assert "2/3 rows" in g[3] and g[3].endswith("NOT met")


def test_kernels21_dispatch_and_bad_input(base, monkeypatch):
    p = _params(base)
    fake = k21.Calibration21("titanx-maxwell", p, "traces", (), ())
    monkeypatch.setattr(k21, "calibrate21", lambda device: fake)
    rec = reconstruct_trace("titanx-maxwell", "alexnet", 32, method="kernels-2.1",
                            timestamp_utc="2026-12-04T00:00:00Z")
    r = rec.run
    assert r["collector_version"] == "dgtraces.reconstruct/kernels-2.1"
    assert r["run_id"].endswith("-v2.1") and "t0_mem" in r["source"]
    assert rec.layer_timings["fwd_ms"].sum() == pytest.approx(r["fwd_ms"])
    la = layer_arrays("alexnet")
    # the latency share as net_times charges it: t0 per GEMM kernel, the memory floor (5 us
    # here) for every other kernel, a conv's or fc's bias kernel included
    gemm = (la.kind == "conv") | (la.kind == "fc")
    n_fwd, n_bwd = np.where(gemm, 1, 0), np.where(gemm, 2, 0)
    n_bwd[0] = 1  # conv1 takes the data: no data gradient
    for d, n in (("fwd", n_fwd), ("bwd", n_bwd)):
        k = getattr(la, f"{d}_kernels")
        want = (n * base.t0_us + (k - n) * 5.0) * 1e-3
        assert rec.bound[f"{d}_latency_ms"].to_numpy() == pytest.approx(want)
    bad = {Code.NO_CALIBRATION: ("titanx-maxwell", "amp"),
           Code.UNKNOWN_DEVICE: ("no-such-gpu", "fp32")}
    for code, (device, precision) in bad.items():
        with pytest.raises(DgtracesError) as e:
            reconstruct_trace(device, "alexnet", 32, precision, method="kernels-2.1")
        assert e.value.code == code
    with pytest.raises(DgtracesError) as e:
        ev.kfold("k80")  # no fitted traces
    assert e.value.code == Code.BAD_INPUT


def test_cli_report_of_kernels21_refuses_the_figure_options(tmp_path):
    from click.testing import CliRunner

    from dgtraces.cli import main

    bad = CliRunner().invoke(main, ["reconstruct", "--report", "--method", "kernels-2.1",
                                    "--figure", str(tmp_path / "k.png")])
    assert bad.exit_code == 1 and bad.exception.code == Code.BAD_INPUT
