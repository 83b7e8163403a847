import json
import subprocess
import sys
from itertools import product

import pytest

from dgtraces.errors import DgtracesError
from dgtraces.reconstruct import METHOD_VERSION, method_id, reconstruct_trace, runs_frame
from dgtraces.reconstruct.roofline.calibration import (
    calibrate,
    calibration_rows,
    fitted_rows,
    observation,
)
from dgtraces.reconstruct.roofline.costmodel import Device, Params, layer_arrays, predict_ms, subset
from dgtraces.reconstruct.roofline.fit import Observation, fit
from dgtraces.tables.checks import validate_tables

FAKE = Device("fake", peak_tflops=6.0, bandwidth_gb_s=300.0)
TRUE = Params(eff_gemm=0.55, eff_bwd=0.75, eff_mem=0.45, launch_us=12.0, n_half=3e4)


def synthetic(params, dev, models=("alexnet", "resnet50"), batches=(1, 4, 16, 64, 256)):
    arrays = {m: layer_arrays(m) for m in models}
    return [Observation(m, b, ph, predict_ms(arrays[m], params, dev, b, ph))
            for m in models for b in batches for ph in ("train", "inference")]


def test_fit_recovers_known_parameters():
    res = fit(FAKE, synthetic(TRUE, FAKE))
    got, want = res.params.as_dict(), TRUE.as_dict()
    for name in want:
        assert got[name] == pytest.approx(want[name], rel=0.02), name
    assert res.rms_log < 1e-4
    assert max(abs(e) for e in res.errors_pct) < 0.05


def test_fit_recovers_winograd_factor():
    true = Params(**{**TRUE.as_dict(), "wino": 1.8})
    res = fit(FAKE, synthetic(true, FAKE, models=("alexnet", "resnet50-mxnet")),
              winograd=True)
    assert res.params.wino == pytest.approx(1.8, rel=0.02)
    assert res.free_parameters == 6 and res.rms_log < 1e-3


def test_fit_needs_enough_observations():
    with pytest.raises(DgtracesError) as e:
        fit(FAKE, synthetic(TRUE, FAKE, models=("alexnet",), batches=(1, 4))[:4])
    assert e.value.code == "NO_CALIBRATION"


# Published rows the fitted model misses by more than 5% (reported in
# cards/fragments/reconstruction.md with their causes). strict: if one starts passing, this
# list must be updated; the 5% bar itself is never relaxed.
# Fitted on the architectures the rows ran (dgtraces.reconstruct.variants), V100 with wino.
# Model structures tried to close them: docs/reconstruction_variants.md.
KNOWN_MISSES = {4, 6, 9, 10, 12, 14, 15, 19, 23}


def _row_params():
    out = []
    for dev in ("k80", "v100"):
        for r in fitted_rows(dev):
            marks = [pytest.mark.xfail(strict=True, reason="known miss, see the card")] \
                if r.row in KNOWN_MISSES else []
            out.append(pytest.param(dev, r.row, id=f"{dev}-row{r.row}", marks=marks))
    return out


@pytest.mark.parametrize("device,row", _row_params())
def test_reconstructed_totals_match_fitted_rows_within_5pct(device, row):
    r = next(r for r in fitted_rows(device) if r.row == row)
    arch = observation(r).model  # the architecture the row's framework ran
    if r.phase == "train" and arch == r.model:  # a Caffe spec: the dataset's own trace
        total = reconstruct_trace(device, r.model, r.batch_size).run["iter_ms"]
    else:  # a fitting-only variant, or the inference-mode forward (same parameters)
        cal = calibrate(device)
        total = predict_ms(layer_arrays(arch), cal.result.params, cal.device,
                           r.batch_size, r.phase)
    published_ms = 1000.0 * r.batch_size / r.img_per_s
    assert abs(total / published_ms - 1) <= 0.05


def test_fitted_rows_exclude_variants_and_count_per_device():
    assert len(fitted_rows("k80")) == 13 and len(fitted_rows("v100")) == 10
    assert all(r.model in ("alexnet", "resnet50") for r in fitted_rows("v100"))
    v15 = [r for r in calibration_rows("v100") if r.model == "resnet50v1.5"]
    assert len(v15) == 2 and all(r.batch_size is None for r in v15)


def test_reconstructed_row_carries_provenance_method_and_sources():
    rec = reconstruct_trace("v100", "googlenet", 32, timestamp_utc="2026-12-02T15:00:00Z")
    run = rec.run
    assert run["provenance"] == "reconstructed"
    assert run["collector_version"] == method_id() and METHOD_VERSION in run["run_id"]
    assert "calibration.csv" in run["source"] and "devices.csv" in run["source"]
    detail = json.loads(run["params_json"])
    assert set(detail["params"]) >= {"eff_gemm", "eff_bwd", "eff_mem", "launch_us", "n_half"}
    assert len(detail["calibration_rows"]) == 10 + 2  # fitted fp32 rows + the v1.5 amp pair
    assert detail["model_fitted"] is False  # googlenet is extrapolated
    frames = validate_tables({"runs": runs_frame([rec]), "layer_timings": rec.layer_timings})
    lt = frames["layer_timings"]
    assert len(lt) == 158 and (lt["n"] == 1).all()
    assert lt["fwd_ms"].sum() == pytest.approx(run["fwd_ms"])
    assert run["iter_ms"] == pytest.approx(run["fwd_ms"] + run["bwd_ms"] + run["update_ms"])


@pytest.mark.parametrize("device", ["k80", "v100"])
def test_small_batches_latency_bound_large_ones_not(device):
    small = reconstruct_trace(device, "resnet50", 1)
    large = reconstruct_trace(device, "resnet50", 256)

    def latency_share(rec):
        b = rec.bound
        lat = b["fwd_latency_ms"].sum() + b["bwd_latency_ms"].sum()
        return lat / (rec.run["fwd_ms"] + rec.run["bwd_ms"])

    assert latency_share(small) > 0.5
    assert latency_share(large) < 0.2
    assert (small.bound["fwd_bound"] == "latency").mean() > 0.5
    assert (large.bound["fwd_bound"] == "latency").mean() < 0.2
    per_img = [reconstruct_trace(device, "alexnet", b).run["iter_ms"] / b for b in (1, 16, 256)]
    assert per_img[0] > per_img[1] > per_img[2]


def test_amp_variant_v100_only():
    fp32 = reconstruct_trace("v100", "resnet50", 64).run
    amp = reconstruct_trace("v100", "resnet50", 64, "amp").run
    assert amp["iter_ms"] < fp32["iter_ms"] and amp["precision"] == "amp"
    eff = json.loads(amp["params_json"])["params"]["eff_tensor"]
    assert 0 < eff <= 1
    with pytest.raises(DgtracesError) as e:
        reconstruct_trace("k80", "resnet50", 64, "amp")
    assert e.value.code == "NO_CALIBRATION"


@pytest.mark.parametrize("args,code", [
    (("tpu9", "alexnet", 16), "UNKNOWN_DEVICE"),
    (("k80", "alexnet", 0), "BAD_INPUT"),
    (("k80", "alexnet", -4), "BAD_INPUT"),
    (("k80", "alexnet", 2.5), "BAD_INPUT"),
    (("k80", "alexnet", 16, "fp8"), "BAD_INPUT"),
    (("p100", "alexnet", 16), "NO_CALIBRATION"),
    (("h200", "resnet50", 16), "NO_CALIBRATION"),
    (("k80", "vgg19", 16), "UNKNOWN_MODEL"),
])
def test_bad_input_codes(args, code):
    with pytest.raises(DgtracesError) as e:
        reconstruct_trace(*args)
    assert e.value.code == code


def test_subset_keeps_named_layers_in_order():
    la = layer_arrays("googlenet")
    names = [n for n in la.layer if not n.startswith(("loss1", "loss2"))]
    sub = subset(la, names)
    assert list(sub.layer) == names and sub.blobs == la.blobs
    assert sub.fwd_flops.sum() < la.fwd_flops.sum()


def test_cli_writes_valid_files_and_reports_codes(tmp_path):
    out = tmp_path / "rec"
    res = subprocess.run([sys.executable, "-m", "dgtraces", "reconstruct", "--device", "k80",
                          "--model", "alexnet", "--batch-size", "32", "--out", str(out)],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    from dgtraces.contribute.files import validate_files

    counts = validate_files([out / "runs.parquet", out / "layer_timings.parquet"],
                            use_store=False)
    assert counts == {"runs": 1, "layer_timings": 23}
    bad = subprocess.run([sys.executable, "-m", "dgtraces", "reconstruct", "--device", "foo",
                          "--model", "alexnet", "--batch-size", "32"],
                         capture_output=True, text=True)
    assert bad.returncode == 1 and "[UNKNOWN_DEVICE]" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_cli_report_without_measured_release(empty_store):
    from click.testing import CliRunner

    from dgtraces.cli import main

    res = CliRunner().invoke(main, ["reconstruct", "--report"])
    assert res.exit_code == 0, res.output
    assert "k80: 13 calibration rows, 5 free parameters" in res.output
    assert "not available: CPU validation" in res.output
    assert "B-Caffe GoogLeNet backward vs k80 reconstruction" in res.output
    assert "session" not in res.output  # product output, not tooling talk
    missing = CliRunner().invoke(main, ["reconstruct", "--device", "k80"])
    assert missing.exit_code != 0 and missing.exception.code == "BAD_INPUT"


def test_report_for_an_unknown_release_raises(tmp_store):
    from click.testing import CliRunner

    from dgtraces.cli import main
    from dgtraces.evaluation.reconstruction import build_report

    with pytest.raises(DgtracesError) as exc:
        build_report("9.9.9")
    assert exc.value.code == "NOT_FOUND"
    res = CliRunner().invoke(main, ["reconstruct", "--report", "--release", "9.9.9"])
    assert res.exit_code != 0 and res.exception.code == "NOT_FOUND"


def test_the_no_calibration_hint_and_the_help_name_the_newest_method():
    """Acceptance review #14/#15: NO_CALIBRATION pointed to the superseded kernels-2.0 and
    `reconstruct --help` named kernels-2.x only; both name kernels-3, which reconstructs
    the device."""
    import re

    from click.testing import CliRunner

    from dgtraces.cli import main
    from dgtraces.reconstruct.roofline.calibration import calibrate

    with pytest.raises(DgtracesError) as exc:
        calibrate("h200")
    assert exc.value.code == "NO_CALIBRATION"
    (hinted,) = re.findall(r"--method (\S+?)`", str(exc.value))
    command = main.get_command(None, "reconstruct")
    methods = next(p for p in command.params if p.name == "method").type.choices
    assert hinted == methods[-1] == "kernels-3"
    res = CliRunner().invoke(main, ["reconstruct", "--method", hinted, "--device", "h200",
                                    "--model", "alexnet", "--batch-size", "32"])
    assert res.exit_code == 0, res.output
    device_help = next(p for p in command.params if p.name == "device").help
    assert "kernels-3" in device_help


@pytest.mark.parametrize("method", ["roofline-1.1", "kernels-2.0", "kernels-3"])
def test_a_batch_no_gpu_holds_is_plausibility(method):
    """Acceptance review #26: a batch of 10**8 images per device was reconstructed."""
    from dgtraces.reconstruct import MAX_BATCH

    with pytest.raises(DgtracesError) as exc:
        reconstruct_trace("v100", "resnet50", 10 ** 8, method=method)
    assert exc.value.code == "PLAUSIBILITY" and exc.value.failures[0].column == "batch_size"
    assert reconstruct_trace("v100", "alexnet", MAX_BATCH, method=method).run["batch_size"] \
        == MAX_BATCH


def test_whole_model_times_equal_the_layer_sums_exactly():
    """predict_ms skips the bound labels and keeps the per-batch traffic on the arrays
    (issue #36: the fits call it thousands of times); its figures stay bit-equal to the sums
    of layer_costs, under every phase, precision and dispatch rule, for arrays used before
    with other parameters and for fresh ones."""
    from dgtraces.reconstruct.roofline.costmodel import layer_costs, use_dispatch

    dev = Device("x", 14.0, 900.0, 112.0)
    used = layer_arrays("googlenet")
    kernels = used.fwd_kernels.copy()
    for params in (Params(0.5, 0.6, 0.7, 8.0, 1e4, eff_tensor=0.4, wino=1.7),
                   Params(0.3, 0.2, 0.4, 30.0, 1e5)):
        for rule in ("layer", "iteration"):
            with use_dispatch(rule):
                for phase, prec, batch in product(
                        ("train", "inference", "fwd", "bwd", "fwdbwd"), ("fp32", "amp"),
                        (1, 32, 48.0)):
                    c = layer_costs(layer_arrays("googlenet"), params, dev, batch, prec,
                                    training=phase != "inference")
                    fwd = float(c.fwd_ms.sum()) + c.host_fwd_ms
                    bwd = float(c.bwd_ms.sum()) + c.host_bwd_ms
                    want = {"train": fwd + bwd + c.update_ms, "fwdbwd": fwd + bwd,
                            "bwd": bwd}.get(phase, fwd)
                    assert predict_ms(used, params, dev, batch, phase, prec) == want
                    assert set(c.fwd_bound) <= {"compute", "memory", "latency"}
                    assert len(c.fwd_bound) == len(c.bwd_bound) == len(used.layer)
    assert (used.fwd_kernels == kernels).all() and used.fwd_kernels.flags.writeable
