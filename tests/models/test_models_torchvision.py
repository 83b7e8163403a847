"""The torchvision-architecture specs (issue #13): exact parameter totals, shapes, features."""

import pytest

from dgtraces.models import get_spec, inferred, layers_frame
from dgtraces.models.builder import Builder
from dgtraces.models.spec import ModelSpec, Shape, infer


def total(model, aux=True):
    return sum(i.params for i in inferred(model) if aux or not i.layer.aux)


@pytest.mark.parametrize("model, params", [
    ("alexnet-owt", 61_100_840), ("resnet50-v1.5", 25_557_032), ("vgg16", 138_357_544),
    ("inception-v3", 27_161_264)])
def test_torchvision_parameter_totals(model, params):
    assert total(model) == params


def test_inception_aux_classifier_is_aux():
    assert total("inception-v3", aux=False) == 23_834_568  # torchvision, aux_logits=False
    aux = [i for i in inferred("inception-v3") if i.layer.aux]
    assert {i.layer.name.split(".")[0] for i in aux} == {"AuxLogits"}
    assert sum(i.params for i in aux) == 3_326_696


def test_inception_shapes_and_asymmetric_kernels():
    rows = {r.layer.name: r for r in inferred("inception-v3")}
    assert rows["Conv2d_1a_3x3.conv"].out.h == 149 and rows["maxpool2"].out.h == 35
    assert rows["Mixed_6a.cat"].out == Shape(768, 17, 17)
    assert rows["Mixed_7a.cat"].out == Shape(1280, 8, 8)
    assert rows["Mixed_7c.cat#3"].out == Shape(2048, 8, 8)
    assert rows["AuxLogits.avg_pool2d"].out.h == 5 and rows["AuxLogits.conv1.conv"].out.h == 1
    k17 = rows["Mixed_6b.branch7x7_2.conv"]
    assert (k17.layer.kernel, k17.layer.kw, k17.layer.pad, k17.layer.pw) == (1, 7, 0, 3)
    assert k17.params == 128 * 128 * 7
    assert rows["Mixed_6b.branch7x7_2.bn"].params == 2 * 128


def test_resnet50_v15_stride_in_the_3x3_and_affine_bn():
    rows = {r.layer.name: r for r in inferred("resnet50-v1.5")}
    assert rows["layer2.0.conv1"].out.h == 56 and rows["layer2.0.conv2"].out.h == 28
    assert rows["layer2.0.conv2"].layer.stride == 2 and rows["layer2.0.conv1"].layer.stride == 1
    assert rows["maxpool"].out.h == 56 and rows["avgpool"].out == Shape(2048, 1, 1)
    bn = rows["bn1"]
    assert bn.params == 128 and bn.buffers == 129
    # v1.5 has the same parameters as the Caffe v1 net but more forward FLOPs
    v1 = sum(i.fwd_flops for i in inferred("resnet50"))
    v15 = sum(i.fwd_flops for i in inferred("resnet50-v1.5"))
    assert total("resnet50") == total("resnet50-v1.5") and v15 > v1
    df = layers_frame("resnet50-v1.5").set_index("layer")
    assert df.loc["bn1", "bias_params"] == 64 and df.loc["conv1", "bias_params"] == 0


def test_alexnet_owt_and_vgg16_shapes():
    a = {r.layer.name: r for r in inferred("alexnet-owt")}
    assert a["conv1"].out == Shape(64, 55, 55) and a["pool5/3x3_s2"].out == Shape(256, 6, 6)
    assert a["fc6"].params == 9216 * 4096 + 4096
    v = {r.layer.name: r for r in inferred("vgg16")}
    assert v["features.30"].out == Shape(512, 7, 7)
    assert v["classifier.0"].params == 25088 * 4096 + 4096
    assert sum(r.layer.kind == "conv" for r in v.values()) == 13


def test_floor_and_ceil_pooling_differ():
    def spec(ceil):
        b = Builder()
        b.pool("p", "data", 3, 2, ceil=ceil)
        return ModelSpec("t", "t", "t", Shape(1, 8, 8), tuple(b.layers))
    assert infer(spec(True))[0].out.h == 4 and infer(spec(False))[0].out.h == 3


def test_rectangular_kernel_too_large_is_refused():
    b = Builder()
    b.conv("c", "data", 4, (1, 9))
    with pytest.raises(ValueError):
        infer(ModelSpec("t", "t", "t", Shape(1, 4, 4), tuple(b.layers)))


def test_new_spec_keys_are_registered_everywhere():
    from dgtraces.models import MODELS

    for name in ("alexnet-owt", "resnet50-v1.5", "vgg16", "inception-v3"):
        assert name in MODELS and get_spec(name).name == name


def test_torch_execution_of_the_spec_matches_its_shapes_and_parameters():
    """Inception-v3 (rectangular kernels, floor pools, affine BN, an aux head) run in torch
    layer by layer: every output shape and the parameter total equal the spec's."""
    torch = pytest.importorskip("torch")
    model = "inception-v3"
    from dgtraces.collect.net import CaffeNet

    net = CaffeNet(get_spec(model), aux=True)
    assert sum(p.numel() for p in net.parameters()) == total(model)
    shape = get_spec(model).input_shape
    blobs = {"data": torch.randn(2, shape.c, shape.h, shape.w)}  # BN on 1x1 needs 2
    labels = torch.tensor([1, 2])
    for name in net.order:
        blobs[name] = net.run_layer(name, [blobs[b] for b in net.bottoms[name]], labels)
    for item in inferred(model):
        out = blobs[item.layer.name]
        assert tuple(out.shape[1:]) in ((item.out.c, item.out.h, item.out.w),
                                        (item.out.c,)), item.layer.name
    loss = net(blobs["data"], labels)
    loss.backward()
    assert loss.item() > 0
