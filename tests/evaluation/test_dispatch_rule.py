"""The pre-registered ``device-time`` rule (docs/gpu-traces.md, issue #13 item 5): the
switch changes what it claims (dispatch moved out of the layers, whole-model times kept),
the criterion is applied as declared, and the doc's before/after table is what the report
computes."""

from __future__ import annotations

import re

import numpy as np
import pytest

from dgtraces.errors import DgtracesError
from dgtraces.evaluation.dispatch import RuleFigures, criterion
from dgtraces.reconstruct.roofline.calibration import calibrate
from dgtraces.reconstruct.roofline.costmodel import (
    dispatch_rule,
    layer_arrays,
    layer_costs,
    predict_ms,
    use_dispatch,
)
from tests.paths import REPO

DOC = REPO / "docs" / "gpu-traces.md"
TOL = 0.05  # the doc prints one decimal


@pytest.mark.parametrize("device,model,batch", [("v100", "resnet50-v1.5", 32),
                                                ("k80", "googlenet", 32)])
def test_device_time_moves_dispatch_out_of_the_layers_only(device, model, batch):
    cal = calibrate(device)
    p, dev, la = cal.params("fp32"), cal.device, layer_arrays(model)
    before = layer_costs(la, p, dev, batch)
    with use_dispatch("iteration"):
        after = layer_costs(la, p, dev, batch)
        whole_after = {ph: predict_ms(la, p, dev, batch, ph)
                       for ph in ("train", "fwd", "bwd", "fwdbwd", "inference")}
    fwd_dispatch = la.fwd_kernels * p.launch_us * 1e-3
    bwd_dispatch = la.bwd_kernels * p.launch_us * 1e-3
    np.testing.assert_allclose(after.fwd_ms, before.fwd_ms - fwd_dispatch, rtol=1e-9)
    np.testing.assert_allclose(after.bwd_ms, before.bwd_ms - bwd_dispatch, rtol=1e-9)
    assert after.host_fwd_ms == pytest.approx(fwd_dispatch.sum())
    assert after.host_bwd_ms == pytest.approx(bwd_dispatch.sum())
    assert after.update_ms == before.update_ms and before.host_fwd_ms == 0.0
    assert (after.fwd_ms > 0).all() and (after.bwd_ms > 0).all()
    for ph, t in whole_after.items():  # the fit sees the same whole-model times
        assert t == pytest.approx(predict_ms(la, p, dev, batch, ph), rel=1e-12)
    assert dispatch_rule() == "layer"  # restored


def test_unknown_rule_and_restore_after_error():
    with pytest.raises(DgtracesError) as e, use_dispatch("kernel"):
        pass
    assert e.value.code == "BAD_INPUT"
    with pytest.raises(RuntimeError), use_dispatch("iteration"):
        raise RuntimeError("boom")
    assert dispatch_rule() == "layer"


def _figs(rule, gpu, cpu, bcaffe, loo):
    return RuleFigures(rule, {r: {"layer_mape_pct": m} for r, m in gpu.items()}, cpu, bcaffe,
                       loo)


def test_criterion_needs_all_three_parts():
    base = _figs("layer", {"a": 60.0, "b": 61.0}, {1: 70.0}, 50.0, {"k80": 0.3, "v100": 0.1})
    good = _figs("iteration", {"a": 20.0, "b": 21.0}, {1: 70.0}, 50.04, {"k80": 0.3,
                                                                         "v100": 0.1})
    assert criterion(base, good)["adopt"]
    one_trace = _figs("iteration", {"a": 20.0, "b": 62.0}, {1: 70.0}, 50.0, base.loo_rms)
    assert not criterion(base, one_trace)["a_v100_layers"]
    loo_worse = _figs("iteration", {"a": 20.0, "b": 21.0}, {1: 70.0}, 50.0,
                      {"k80": 0.3, "v100": 0.11})
    assert not criterion(base, loo_worse)["b_loo"] and not criterion(base, loo_worse)["adopt"]
    held_worse = _figs("iteration", {"a": 20.0, "b": 21.0}, {1: 70.0}, 50.2, base.loo_rms)
    v = criterion(base, held_worse)
    assert v["a_v100_layers"] and v["b_loo"] and not v["c_held_out"] and not v["adopt"]


def _doc_table() -> dict[str, tuple[str, str]]:
    text = DOC.read_text()
    block = text.split("<!-- dispatch-rule-table")[1].split("<!-- end dispatch-rule-table")[0]
    rows = {}
    for line in block.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and not cells[0].startswith(("figure", "---")):
            rows[cells[0]] = (cells[1], cells[2])
    return rows


def _nums(cell: str) -> list[float]:
    return [float(x) for x in re.findall(r"[-+]?\d+\.\d+", cell)]


def test_doc_figures_are_the_reports():
    from dgtraces.evaluation.reconstruction import build_report

    rep = build_report()
    assert rep.trial is not None
    doc = _doc_table()
    checked = 0
    for side, figs in ((0, rep.trial.before), (1, rep.trial.after)):
        for run, g in figs.gpu.items():
            assert _nums(doc[f"`{run}` per-layer MAPE"][side]) == pytest.approx(
                [g["layer_mape_pct"]], abs=TOL)
            assert _nums(doc[f"`{run}` whole mapped iteration"][side]) == pytest.approx(
                [g["iteration_error_pct"]], abs=TOL)
            for kind, k in g["kinds"].items():
                cell = doc[f"`{run}` {kind} ({k['layers']} layers): MAPE, sum error"][side]
                assert _nums(cell) == pytest.approx([k["mape_pct"], k["sum_error_pct"]],
                                                    abs=TOL)
                checked += 1
        for t, m in figs.cpu_mape.items():
            assert _nums(doc[f"CPU per-layer MAPE, {t} thread(s)"][side]) == pytest.approx(
                [m], abs=TOL)
        if figs.bcaffe_mape is not None:
            assert _nums(doc["B-Caffe K80 GoogLeNet backward MAPE"][side]) == pytest.approx(
                [figs.bcaffe_mape], abs=TOL)
    assert checked >= 10
    for dev in ("k80", "v100"):  # (b): whole-model times do not change, nor does LOO
        before, after = doc[f"{dev} leave-one-out rms log"]
        assert before == after
    adopted = rep.trial.verdict["adopt"]
    text = DOC.read_text()
    assert ("**Not adopted" in text) != adopted
