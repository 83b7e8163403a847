"""The exploration script's baseline must be the shipped cost model, so the variants in
docs/reconstruction_variants.md are compared against what the dataset actually uses."""

import importlib.util
import sys

import pytest

from dgtraces.reconstruct.roofline.calibration import calibrate
from dgtraces.reconstruct.roofline.costmodel import layer_arrays, predict_ms
from tests.paths import REPO

SCRIPT = REPO / "scripts" / "explore_reconstruction.py"


@pytest.fixture(scope="module")
def explore():
    spec = importlib.util.spec_from_file_location("explore_reconstruction", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    try:
        spec.loader.exec_module(mod)
        yield mod
    finally:
        sys.modules.pop(spec.name, None)


@pytest.mark.parametrize("device", ["k80", "v100"])
@pytest.mark.parametrize("model", ["alexnet-mxnet", "resnet50-mxnet", "resnet50", "googlenet"])
@pytest.mark.parametrize("phase,batch", [("train", 32), ("inference", 1), ("inference", 64)])
def test_baseline_is_the_shipped_model(explore, device, model, phase, batch):
    cal = calibrate(device)
    shipped = predict_ms(layer_arrays(model), cal.result.params, cal.device, batch, phase)
    P = cal.result.params.as_dict()
    assert explore.predict(model, P, cal.device, batch, phase, {}) == pytest.approx(
        shipped, rel=1e-12)


def test_each_mechanism_changes_what_it_claims(explore):
    cal = calibrate("v100")
    P = cal.result.params.as_dict()

    def t(model, phase, m, batch=64):
        return explore.predict(model, P, cal.device, batch, phase, m)

    base_r, base_a = t("resnet50-mxnet", "train", {}), t("alexnet-mxnet", "train", {})
    # forks exist in ResNet, not in AlexNet
    assert t("resnet50-mxnet", "train", {"split": True}) > base_r
    assert t("alexnet-mxnet", "train", {"split": True}) == pytest.approx(base_a, rel=1e-12)
    # AlexNet-MXNet's conv2 is 5x5 stride 1; ResNet has no 5x5
    assert t("alexnet-mxnet", "train", {"fast5": True}) < base_a
    assert t("resnet50-mxnet", "train", {"fast5": True}) == pytest.approx(base_r, rel=1e-12)
    # folding touches inference only; the fused BN both phases
    assert t("resnet50-mxnet", "train", {"fold": True}) == pytest.approx(base_r, rel=1e-12)
    assert t("resnet50-mxnet", "inference", {"fold": True}) < t("resnet50-mxnet",
                                                                 "inference", {})
    assert t("resnet50-mxnet", "train", {"fused_bn": True}) < base_r
    # the exponent form with k = 1 is the shipped saturation term
    assert t("resnet50-mxnet", "train", {"sat": "pow"}) == pytest.approx(base_r, rel=1e-12)
