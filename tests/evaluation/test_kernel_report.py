"""Per-source comparison of both cost models (issue #27), on small inline frames."""

import pandas as pd
import pytest

from dgtraces.errors import Code, DgtracesError
from dgtraces.evaluation.kernels import bcaffe, compare, layer_times


def _frames(device="v100-dgxs-32gb", model="alexnet", batch=16):
    names, fwd, bwd = layer_times("kernels-2.0", model, "v100", batch)
    runs = pd.DataFrame([
        {"run_id": "pub-1", "provenance": "published", "device_kind": "gpu",
         "device": device, "model": model, "batch_size": batch},
        {"run_id": "pub-2", "provenance": "published", "device_kind": "gpu",
         "device": "gpu-unstated", "model": model, "batch_size": batch},
        {"run_id": "rec-1", "provenance": "reconstructed", "device_kind": "gpu",
         "device": "v100", "model": model, "batch_size": batch}])
    # measured = exactly twice the kernels-2.0 time for conv1 and conv2, fwd and bwd
    lt = pd.DataFrame({"run_id": "pub-1", "layer": ["conv1", "conv2"],
                       "fwd_ms": [2 * fwd[0], 2 * fwd[list(names).index("conv2")]],
                       "bwd_ms": [2 * bwd[0], 2 * bwd[list(names).index("conv2")]]})
    return runs, lt


def test_compare_reports_per_kind_and_direction_and_says_what_is_not_modelled():
    runs, lt = _frames()
    comps, skipped = compare("kernels-2.0", runs, lt)
    assert [c.source for c in comps] == ["pub-1"] and len(skipped) == 1
    c = comps[0]
    assert c.device == "v100-dgxs-32gb" and len(c.table) == 4
    assert c.table["ape_pct"].to_numpy() == pytest.approx([50.0] * 4)
    k = c.by_kind()
    assert list(k["direction"]) == ["bwd", "fwd"] and (k["layers"] == 2).all()
    assert k["sum_error_pct"].to_numpy() == pytest.approx([-50.0, -50.0])
    assert c.layer_mape() == pytest.approx(50.0)
    assert bcaffe("kernels-2.0", runs, lt) is None  # no B-Caffe rows here


def test_roofline_cannot_model_a_gpu_without_calibration_rows_and_says_so():
    runs, lt = _frames(device="titanx-maxwell")
    comps, skipped = compare("roofline-1.1", runs, lt)
    assert comps == [] and any("NO_CALIBRATION" in s for s in skipped)
    comps, _ = compare("kernels-2.0", runs, lt)
    assert [c.device for c in comps] == ["titanx-maxwell"]


def test_unknown_method_is_bad_input():
    with pytest.raises(DgtracesError) as e:
        layer_times("roofline-9", "alexnet", "v100", 16)
    assert e.value.code == Code.BAD_INPUT


def test_summary_text_and_card_fragment_carry_both_methods(tmp_path, monkeypatch):
    from dgtraces.evaluation import kernel_summary as ks
    from dgtraces.reconstruct.kernels2.gemm import KernelParams
    from dgtraces.reconstruct.kernels2.stage1 import Stage1

    runs, lt = _frames()
    comps, skipped = compare("kernels-2.0", runs, lt)
    s1 = Stage1(KernelParams(0.8, 0.8, 0.6, 0.9, 0.7, 0.7, 20.0), 0.5, 3055, ("m40", "t4"))
    summary = ks.KernelSummary(
        None, {"roofline-1.1": [], "kernels-2.0": comps}, {"kernels-2.0": skipped},
        {"t4": {"fwd": (94, 33.0, 29.6)}},
        {"roofline-1.1": {"v100": (10.0, -20.0)}, "kernels-2.0": {"v100": (5.0, -5.0)}}, s1)
    text = summary.text()
    assert "pub-1" in text and "gpu-unstated" in text
    md = ks.markdown(summary)
    assert md[0] == "<!-- requires provenance: published -->"
    assert "| roofline-1.1 | 15.0% / 20.0% |" in md and "| kernels-2.0 | 5.0% / 5.0% |" in md
    assert "| `pub-1` | v100-dgxs-32gb | not modelled | 50.0% |" in md
    monkeypatch.setattr(ks, "figure", lambda summary, path: path.write_bytes(b"png"))
    paths = ks.write(summary, tmp_path / "frag")
    assert [p.name for p in paths] == [ks.FRAGMENT, ks.FIGURE]
    assert paths[0].read_text().splitlines() == md
