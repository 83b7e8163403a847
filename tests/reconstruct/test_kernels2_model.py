"""kernels-2.0 (issue #27): DeepBench parsing, the GEMM engine, conv shapes, fits, traces."""

import dataclasses

import numpy as np
import pytest

from dgtraces.errors import Code, DgtracesError
from dgtraces.reconstruct import reconstruct_trace, runs_frame
from dgtraces.reconstruct.deepbench import SHEETS, conv_kernels, gemm_kernels, specs
from dgtraces.reconstruct.kernels2.gemm import (
    ConvShape,
    Gpu,
    KernelParams,
    conv_gemm,
    fc_gemm,
    gemm_list,
    gemm_seconds,
    get_gpu,
)
from dgtraces.reconstruct.kernels2.stage1 import (
    fit_stage1,
    kernel_set,
    predict_ms,
)

FAKE = Gpu("fake", peak_tflops=8.0, bandwidth_gb_s=400.0, sm_count=10)
# gamma = 5: tiles smaller than 128x128 run far slower, so 128x128 is always picked
UNIT = KernelParams(1.0, 1.0, 1.0, 1.0, 1.0, gamma=5.0, t0_us=0.0, e_mem=1.0)


def _one(m, n, k, cls="fwd", split=False, p=UNIT):
    g = gemm_list([(m, n, k, 1, cls, split, 0.0, "fake")], lambda d: FAKE)
    return float(gemm_seconds(g, p)[0])


def test_deepbench_sheets_parse_every_conv_and_gemm_row():
    for sheet in SHEETS:  # the seven of v0.5.0 and V100's fp32 and FP16-input sheets
        assert len(conv_kernels(sheet)) == 94 and len(gemm_kernels(sheet)) == 160, sheet
    assert len(SHEETS) == 9 and len(conv_kernels()) == 7 * 94  # default: kernels-2.x's seven
    assert SHEETS["V100-FP16"].precision == "amp" and SHEETS["V100"].device == "v100"
    v100 = conv_kernels("V100")[0]  # ,DeepSpeech,700,161,1,4,32,20,5,0,0,2,2,7.8E-2,N/A*,0.127
    assert (v100.shape.r, v100.shape.s, v100.shape.n) == (5, 20, 4)
    assert v100.fwd_ms == pytest.approx(0.078) and v100.dgrad_ms is None
    fp16 = conv_kernels("V100-FP16")[0]  # the same problem, FP16 inputs: 0.591 ms forward
    assert fp16.shape == v100.shape and fp16.fwd_ms == pytest.approx(0.591)
    assert fp16.algo == "IMPLICIT_PRECOMP_GEMM" and specs("V100-FP16")["Cudnn Version"] == \
        "7.6.2.24"
    p100 = conv_kernels("P100")[0]  # ,,700,161,1,4,32,5,20,0,0,2,2,0.142,0.482,0.301
    s = p100.shape
    assert (s.w, s.h, s.c, s.n, s.k, s.r, s.s) == (700, 161, 1, 4, 32, 5, 20)
    assert (s.p, s.q) == (79, 341)  # floor: the sheet states 78.5 x 340.5
    assert p100.fwd_ms == pytest.approx(0.142) and p100.wgrad_ms == pytest.approx(0.301)
    t4 = conv_kernels("T4")[0]  # T4 lists S before R and pad_w before pad_h
    assert (t4.shape.r, t4.shape.s, t4.shape.stride_h, t4.shape.stride_w) == (5, 20, 2, 2)
    assert t4.dgrad_ms is None and t4.algo == "IMPLICIT_GEMM"  # "N/A*": not measured
    assert specs("T4")["Cudnn Version"] == "7.6.2.24"


def test_unknown_sheet_and_device_are_typed_with_known_names():
    with pytest.raises(DgtracesError) as e:
        conv_kernels("V200")
    assert e.value.code == Code.UNKNOWN_DEVICE and "TitanXp" in str(e.value)
    assert "V100-FP16" in str(e.value)
    with pytest.raises(DgtracesError) as e:
        get_gpu("titanx-pascall")
    assert e.value.code == Code.UNKNOWN_DEVICE and "titanx-pascal" in str(e.value)


def test_winograd_rule_matches_deepbench_algorithm_column():
    convs = conv_kernels()
    rule = [k.shape.winograd("fwd") for k in convs]
    wino = ["WINOGRAD" in k.algo for k in convs]
    picked = sum(w for r, w in zip(rule, wino, strict=True) if r) / sum(rule)
    stray = sum(w for r, w in zip(rule, wino, strict=True) if not r) / (len(rule) - sum(rule))
    assert picked > 0.85 and stray < 0.02  # 169/189 and 5/469
    cs = ConvShape(8, 64, 56, 56, 64, 3, 3, 1, 1, 56, 56)
    assert cs.winograd("fwd") and not cs.winograd("wgrad")
    assert not dataclasses.replace(cs, c=32).winograd("fwd")
    assert not dataclasses.replace(cs, stride_h=2, stride_w=2, p=28, q=28).winograd("fwd")


def test_conv_directions_have_their_implicit_gemm_shapes():
    cs = ConvShape(4, 256, 56, 56, 128, 1, 1, 2, 2, 28, 28)  # strided 1x1
    assert conv_gemm(cs, "fwd", "fake")[:5] == (4 * 28 * 28, 128, 256, 1, "fwd")
    assert conv_gemm(cs, "dgrad", "fake")[:5] == (4 * 56 * 56, 256, 128, 1, "dgrad")
    assert conv_gemm(cs, "wgrad", "fake")[:5] == (128, 256, 4 * 28 * 28, 1, "wgrad")
    wino = conv_gemm(ConvShape(2, 64, 14, 14, 128, 3, 3, 1, 1, 14, 14), "fwd", "fake")
    assert wino[:5] == (2 * 7 * 7, 128, 64, 16, "wino") and wino[6] > 0
    assert fc_gemm(32, 2048, 1000, "wgrad", "fake")[:3] == (1000, 2048, 32)
    with pytest.raises(DgtracesError) as e:
        conv_gemm(cs, "bwd", "fake")
    assert e.value.code == Code.BAD_INPUT


def test_waves_quantise_by_tiles_against_sms():
    k = 4096
    full = _one(128 * 10, 128, k)  # 10 tiles of 128x128: one wave on 10 SMs
    assert full == pytest.approx(2 * 128 * 128 * k / (8e12 / 10))
    # one more row of tiles starts a second wave: the time doubles
    assert _one(128 * 10 + 1, 128, k) == pytest.approx(2 * full)
    # a GEMM filling a tenth of the device costs the same wave as the full one
    assert _one(128, 128, k) == pytest.approx(full)
    # with every tile equally efficient (gamma = 0) thin tiles spread one 128x128 GEMM
    # over 8 SMs: 8x faster
    flat = dataclasses.replace(UNIT, gamma=0.0)
    assert _one(128, 128, k, p=flat) == pytest.approx(full / 8)


def test_split_k_fills_the_device_for_a_long_reduction():
    m, n, k = 128, 128, 10 * 4096  # one tile: split-K runs it on all 10 SMs
    t_split = _one(m, n, k, split=True)
    t_one = _one(m, n, k, split=False)
    assert t_one == pytest.approx(2 * m * n * k / (8e12 / 10))
    assert t_split < t_one / 5


def test_stage1_fit_recovers_constants_from_synthetic_kernels():
    ks = kernel_set()
    keep = np.zeros(len(ks.observed_ms), bool)
    keep[::12] = True
    sub = ks.select(keep)
    true = KernelParams(0.7, 0.6, 0.5, 0.8, 0.65, gamma=0.6, t0_us=6.0)
    sub.observed_ms = predict_ms(sub, true)
    got = fit_stage1(ks=sub)
    assert got.rms_log < 1e-3
    for name in ("e_fwd", "e_dgrad", "e_wgrad", "e_gemm", "t0_us"):
        assert getattr(got.params, name) == pytest.approx(getattr(true, name), rel=0.05)


def test_kernels_method_reconstructs_a_gpu_without_throughputs():
    rec = reconstruct_trace("titanx-maxwell", "alexnet", 32, method="kernels-2.0",
                            timestamp_utc="2026-12-03T00:00:00Z")
    r = rec.run
    assert r["collector_version"] == "dgtraces.reconstruct/kernels-2.0"
    assert r["provenance"] == "reconstructed" and r["run_id"].endswith("-v2.0")
    assert rec.layer_timings["fwd_ms"].sum() == pytest.approx(r["fwd_ms"])
    assert r["iter_ms"] >= r["fwd_ms"] + r["bwd_ms"]
    assert "DeepBench" in r["source"] and len(runs_frame([rec])) == 1
    conv = rec.layer_timings.set_index("layer")
    assert conv.loc["conv2", "bwd_ms"] > conv.loc["conv2", "fwd_ms"] > 0


def test_kernels_method_refuses_amp_unknown_method_and_unknown_device():
    with pytest.raises(DgtracesError) as e:
        reconstruct_trace("v100", "alexnet", 16, "amp", method="kernels-2.0")
    assert e.value.code == Code.NO_CALIBRATION
    with pytest.raises(DgtracesError) as e:
        reconstruct_trace("v100", "alexnet", 16, method="kernels-4")
    assert e.value.code == Code.BAD_INPUT
    with pytest.raises(DgtracesError) as e:
        reconstruct_trace("gpu-unstated", "alexnet", 16, method="kernels-2.0")
    assert e.value.code == Code.UNKNOWN_DEVICE


def test_default_method_is_still_roofline_11():
    rec = reconstruct_trace("k80", "alexnet", 16)
    assert rec.run["collector_version"] == "dgtraces.reconstruct/roofline-1.1"


def test_a_device_with_peaks_but_no_sm_count_is_no_calibration(monkeypatch):
    from dgtraces import reference

    rows = reference.rows

    def without_v100(name):
        got = rows(name)
        return [r for r in got if r["device"] != "v100"] if name == "gpu_sms.csv" else got

    monkeypatch.setattr(reference, "rows", without_v100)
    with pytest.raises(DgtracesError) as e:
        get_gpu("v100")
    assert e.value.code == Code.NO_CALIBRATION
    assert get_gpu("k80").sm_count == 13


def test_cli_unknown_device_is_typed_and_roofline_refusal_says_what_would(tmp_path):
    from click.testing import CliRunner

    from dgtraces.cli import main
    from dgtraces.reconstruct.kernels2.gemm import gpus

    args = ["reconstruct", "--model", "alexnet", "--batch-size", "16"]
    bad = CliRunner().invoke(main, [*args, "--method", "kernels-2.0", "--device", "tpu9",
                                    "--out", str(tmp_path / "a")])
    assert bad.exit_code == 1 and bad.exception.code == Code.UNKNOWN_DEVICE
    assert {"k80", "v100", "t4", "h100"} <= set(gpus())  # the known ones the error lists
    # roofline-1.1 has no throughputs for a DeepBench-only GPU; kernels-2.0 models it
    old = CliRunner().invoke(main, [*args, "--device", "t4", "--out", str(tmp_path / "b")])
    assert old.exit_code == 1 and old.exception.code == Code.NO_CALIBRATION
    new = CliRunner().invoke(main, [*args, "--method", "kernels-2.0", "--device", "t4",
                                    "--out", str(tmp_path / "c")])
    assert new.exit_code == 0, new.output
    assert (tmp_path / "c" / "runs.parquet").is_file()
