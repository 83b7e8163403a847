import pytest

from dgtraces.errors import UnknownModelError
from dgtraces.models import MODELS, blobs, get_spec, inferred, layers_frame, padded_param_count


def total(model, aux=True):
    return sum(i.params for i in inferred(model) if aux or not i.layer.aux)


def test_exact_parameter_totals():
    assert total("alexnet") == 60_965_224
    assert total("resnet50") == 25_557_032
    assert total("googlenet", aux=False) == 6_998_552
    assert total("googlenet", aux=True) == 13_378_280


def test_googlenet_published_totals_are_64_padded_blob_counts():
    # The figures B-Caffe logs sum to (and the issue quotes) pad each blob to 64 elements.
    assert padded_param_count("googlenet", aux=False) == 6_999_360
    assert padded_param_count("googlenet", aux=True) == 13_379_136
    assert len(blobs("googlenet")) == 128
    assert blobs("googlenet")[0].numel == 9408  # conv1/7x7_s2: 7*7*3*64


def test_resnet_bn_running_stats_are_buffers_not_params():
    rows = {r.layer.name: r for r in inferred("resnet50")}
    assert rows["bn_conv1"].params == 0 and rows["bn_conv1"].buffers == 2 * 64 + 1
    assert rows["scale_conv1"].params == 2 * 64
    assert rows["conv1"].params == 7 * 7 * 3 * 64  # no bias in the Caffe definition
    assert sum(r.buffers for r in rows.values()) == 53_173


def test_alexnet_shapes_and_flops():
    rows = {r.layer.name: r for r in inferred("alexnet")}
    assert (rows["conv1"].out.c, rows["conv1"].out.h) == (96, 55)
    assert rows["pool1"].out.h == 27 and rows["pool2"].out.h == 13 and rows["pool5"].out.h == 6
    assert rows["conv2"].params == 256 * 48 * 25 + 256  # group 2
    assert rows["fc6"].params == 9216 * 4096 + 4096
    # conv1 forward: 2 * 96*55*55 * (3*11*11) MACs + bias adds
    assert rows["conv1"].fwd_flops == 2 * 96 * 55 * 55 * 363 + 96 * 55 * 55
    # the first layer computes no input gradient
    assert rows["conv1"].bwd_flops == rows["conv1"].fwd_flops
    assert rows["conv2"].bwd_flops == 2 * rows["conv2"].fwd_flops - 256 * 27 * 27


def test_googlenet_structure():
    rows = {r.layer.name: r for r in inferred("googlenet")}
    assert rows["inception_3a/output"].out.c == 256
    assert rows["inception_4e/output"].out.c == 832
    assert rows["inception_5b/output"].out.c == 1024
    assert rows["pool5/7x7_s1"].out.h == 1
    assert rows["loss1/ave_pool"].out.h == 4 and rows["loss1/fc"].params == 2048 * 1024 + 1024
    assert sum(r.layer.aux for r in rows.values()) == 16


def test_resnet_structure():
    rows = {r.layer.name: r for r in inferred("resnet50")}
    assert rows["pool1"].out.h == 56
    assert rows["res3a_branch2a"].layer.stride == 2  # original (v1) stride placement
    assert rows["res5c"].out.c == 2048 and rows["res5c"].out.h == 7
    gmacs = sum(r.fwd_flops for r in rows.values() if r.layer.kind in ("conv", "fc")) / 2e9
    assert 3.8 < gmacs < 3.9  # ResNet-50 v1: about 3.86 GMACs


def test_layers_frame_columns_and_units():
    df = layers_frame()
    assert set(df["model"]) == set(MODELS)
    assert (df["grad_bytes"] == 4 * df["params"]).all()
    assert df.groupby("model")["layer"].apply(lambda s: s.is_unique).all()
    a = df[df.model == "alexnet"].set_index("layer")
    assert a.loc["fc8", "act_bytes"] == 4000 and a.loc["fc8", "in_bytes"] == 4 * 4096


def test_unknown_model_has_code():
    with pytest.raises(UnknownModelError) as exc:
        get_spec("vgg19")
    assert exc.value.code == "UNKNOWN_MODEL"


def test_padded_count_needs_a_positive_alignment():
    from dgtraces.errors import DgtracesError
    from dgtraces.models import padded_param_count

    for align in (0, -64, 2.5, True):
        with pytest.raises(DgtracesError) as exc:
            padded_param_count("alexnet", align=align)
        assert exc.value.code == "BAD_INPUT"


def test_non_string_names_are_unknown_models():
    import dgtraces
    from dgtraces.errors import DgtracesError

    for call in (lambda: get_spec(["alexnet"]), lambda: inferred(["alexnet"]),
                 lambda: layers_frame(5)):
        with pytest.raises(DgtracesError) as exc:
            call()
        assert exc.value.code == "UNKNOWN_MODEL"
    with pytest.raises(DgtracesError) as exc:
        dgtraces.load(["layers"])
    assert exc.value.code == "NOT_FOUND"
