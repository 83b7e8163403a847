import numpy as np
import pytest

from dgtraces.models import MODELS, layers_frame
from dgtraces.reconstruct.roofline.calibration import (
    WINOGRAD_DEVICES,
    calibrate,
    fitted_rows,
    get_device,
    loo,
    observation,
)
from dgtraces.reconstruct.roofline.costmodel import layer_arrays, predict_ms
from dgtraces.reconstruct.roofline.fit import fit
from dgtraces.reconstruct.variants import VARIANTS, architecture, get_variant_spec


def _flops(arch, layer):
    la = layer_arrays(arch)
    return float(la.fwd_flops[list(la.layer).index(layer)])


def test_mxnet_alexnet_has_no_groups_and_a_5x5_fc_input():
    # conv2 (and conv4/5) run ungrouped: twice bvlc_alexnet's MACs at the same size
    assert _flops("alexnet-mxnet", "conv2") == 2 * 96 * 25 * 256 * 26 * 26 + 256 * 26 * 26
    assert _flops("alexnet", "conv2") == 2 * 48 * 25 * 256 * 27 * 27 + 256 * 27 * 27
    assert _flops("alexnet-mxnet", "conv4") == 2 * 384 * 9 * 384 * 12 * 12 + 384 * 12 * 12
    assert _flops("alexnet", "conv4") == 2 * 192 * 9 * 384 * 13 * 13 + 384 * 13 * 13
    la = layer_arrays("alexnet-mxnet")
    assert la.params[list(la.layer).index("fc6")] == 256 * 5 * 5 * 4096 + 4096
    assert (la.kind == "lrn").sum() == 2


def test_tf_alexnet_is_ungrouped_without_lrn():
    la = layer_arrays("alexnet-tf")
    assert "lrn" not in set(la.kind)
    assert la.params[list(la.layer).index("fc6")] == 256 * 6 * 6 * 4096 + 4096
    assert la.params[list(la.layer).index("conv1")] == 64 * 3 * 121 + 64


def test_resnet_variants_cost_more_than_v1():
    v1 = layer_arrays("resnet50").fwd_flops.sum()
    for arch in ("resnet50-mxnet", "resnet50-v1.5-dle"):
        assert 1.04 < layer_arrays(arch).fwd_flops.sum() / v1 < 1.08, arch
    spec = get_variant_spec("resnet50-mxnet")
    # pre-activation: every unit starts with BN on its input
    assert spec.layers[[x.name for x in spec.layers].index("stage2_unit1_bn1_bn")].kind == "bn"
    la = layer_arrays("resnet50-mxnet")
    assert la.winograd.sum() == 16 - 3  # a 3x3 stride-1 conv per unit, 3 units strided


def test_rows_map_to_the_architecture_their_framework_ran():
    assert architecture("tensorflow-1.1", "alexnet") == "alexnet-tf"
    assert architecture("tensorflow-1.1", "resnet50") == "resnet50"
    assert architecture("mxnet-1.2.0rc1", "alexnet") == "alexnet-mxnet"
    assert architecture("mxnet-1.2.0rc1", "resnet50") == "resnet50-mxnet"
    assert architecture("caffe", "googlenet") == "googlenet"
    assert {observation(r).model for r in fitted_rows("v100")} == {"alexnet-mxnet",
                                                                  "resnet50-mxnet"}
    # fitting only: never part of the dataset's models or layers table
    assert not set(VARIANTS) & set(MODELS)
    assert not set(VARIANTS) & set(layers_frame()["model"])
    assert all(v.confidence in ("high", "medium", "low") and v.citation for v in VARIANTS.values())
    # the fit's v1.5 (NVIDIA DLE, Caffe granularity bn + scale) is the dataset's torchvision
    # resnet50-v1.5 architecture: equal parameters and FLOPs
    from dgtraces.models import build_spec
    from dgtraces.models.spec import infer

    fit, data = (infer(build_spec(k)) for k in ("resnet50-v1.5-dle", "resnet50-v1.5"))
    for col in ("params", "fwd_flops", "bwd_flops"):
        assert sum(getattr(i, col) for i in fit if i.layer.kind != "softmax") == sum(
            getattr(i, col) for i in data)


def test_winograd_only_where_adopted_and_not_under_amp():
    assert calibrate("k80").result.params.wino is None
    for d in WINOGRAD_DEVICES:
        assert 1.0 <= calibrate(d).result.params.wino <= 2.25
    cal = calibrate("v100")
    la = layer_arrays("resnet50")
    no_wino = cal.amp.__class__(**{**cal.amp.as_dict(), "wino": None})
    assert predict_ms(la, cal.amp, cal.device, 64, "train", "amp") == pytest.approx(
        predict_ms(la, no_wino, cal.device, 64, "train", "amp"))


def test_loo_refits_without_the_held_out_row():
    errs = loo("v100", True, False)
    rows = fitted_rows("v100")
    assert len(errs) == len(rows) and np.isfinite(errs).all()
    obs = [observation(r) for r in rows]
    p = fit(get_device("v100"), obs[1:]).params
    o = obs[0]
    want = 100 * (predict_ms(layer_arrays(o.model), p, get_device("v100"), o.batch_size,
                             o.phase) / o.time_ms - 1)
    assert errs[0] == pytest.approx(want)


def test_fragment_states_variants_loo_and_a_cause_for_every_miss():
    from dgtraces.evaluation.fragment import markdown
    from dgtraces.evaluation.reconstruction import LOO_CONFIGS, build_report

    rep = build_report(frames={})
    rep.loo = {d: {name: (1.0, -4.0, 12.0) for name in LOO_CONFIGS} for d in ("k80", "v100")}
    md = markdown(rep)
    assert "symbols/alexnet.py" in md and "tf_cnn_benchmarks/models/alexnet_model.py" in md
    assert "| k80 | variants, 5 parameters | 5.7% | 4.0% |" in md
    assert "no cause identified" not in md
    assert sum(len(rep.misses(d)) for d in rep.calibrations) == 9
