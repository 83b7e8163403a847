"""The model registry is the one declaration every model-naming site reads."""

import importlib
import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from dgtraces.cli import COMMANDS, main
from dgtraces.errors import DgtracesError
from dgtraces.models import MODELS, build_spec, get_spec, layers_frame
from dgtraces.models.registry import REGISTRY, Role, entry, fitted, keys, with_aux


def test_every_builder_returns_its_key_title_and_citation():
    for e in REGISTRY:
        spec = build_spec(e.key)
        assert (spec.name, spec.title, spec.source) == (e.key, e.title, e.citation)
        assert spec.layers and e.family in MODELS and e.name
    assert len({e.key for e in REGISTRY}) == len(REGISTRY)


def test_roles_split_dataset_models_from_fitting_variants():
    # the first three models, in the order of every release's layers table; more may follow
    assert MODELS == keys() and MODELS[:3] == ("alexnet", "googlenet", "resnet50")
    assert {"alexnet-tf", "alexnet-mxnet", "resnet50-mxnet"} <= set(keys(Role.FITTING))
    assert not set(keys(Role.FITTING)) & set(MODELS)
    assert keys(None) == MODELS + keys(Role.FITTING)
    assert set(layers_frame()["model"]) == set(MODELS)
    with pytest.raises(DgtracesError) as exc:
        get_spec("alexnet-mxnet")  # a fitting variant is not a dataset model
    assert exc.value.code == "UNKNOWN_MODEL"
    for bad in ("vgg", ["alexnet"]):
        with pytest.raises(DgtracesError) as exc:
            entry(bad)
        assert exc.value.code == "UNKNOWN_MODEL"


def test_reconstruction_and_collectors_read_the_registry():
    from dgtraces.reconstruct.roofline import calibration, cpu
    from dgtraces.reconstruct.variants import VARIANTS

    assert calibration.FITTED_MODELS == fitted() and fitted()[:2] == ("alexnet", "resnet50")
    assert "googlenet" not in fitted()  # held out: no calibration row
    assert cpu.FITTED_MODELS is calibration.FITTED_MODELS
    assert tuple(VARIANTS) == keys(Role.FITTING)
    assert "googlenet" in with_aux() and not {"alexnet", "resnet50"} & set(with_aux())


def _params(cmd: click.Command):
    yield from cmd.params
    if isinstance(cmd, click.Group):
        for sub in cmd.commands.values():
            yield from _params(sub)


def test_every_model_option_is_a_choice_of_the_registry():
    seen = 0
    for target, _ in COMMANDS.values():
        module, attr = target.split(":")
        cmd = getattr(importlib.import_module(module), attr)
        for p in _params(cmd):
            if "--model" in p.opts:
                assert isinstance(p.type, click.Choice) and tuple(p.type.choices) == MODELS
                seen += 1
    # collect layers/ssgd, import kineto/bcaffe/caffe-time/pipedream, predict, reconstruct
    assert seen == 8


def test_cli_refuses_unknown_models_with_a_usage_error():
    runner = CliRunner()
    for args in (["predict", "--model", "vgg19", "--device", "k80", "--batch-size", "8"],
                 ["sweep", "--models", "resnet50,vgg19", "--device", "k80"],
                 ["reconstruct", "--model", "alexnet-mxnet", "--device", "k80"]):
        res = runner.invoke(main, args)
        assert res.exit_code == 2, (args, res.output)


def test_aux_is_refused_for_models_without_aux_classifiers(tmp_path):
    res = CliRunner().invoke(main, ["collect", "layers", "--model", "alexnet", "--batch-size",
                                    "1", "--aux", "--out", str(tmp_path / "o")])
    assert isinstance(res.exception, DgtracesError) and res.exception.code == "BAD_INPUT"


def test_card_lists_the_release_models_from_the_registry(mini_release_root):
    from dgtraces.publish import card as cards
    from dgtraces.store.release import Release

    old = Release.open("0.1.0", mini_release_root)
    assert cards.release_models(old) == ("alexnet",)  # its layers
    text = cards.render_card(old)
    assert f"| `alexnet` | {entry('alexnet').title} | {entry('alexnet').citation} |" in text
    assert "`resnet50`" not in text and "(AlexNet)" in text
    assert cards.release_models(Release.open()) == MODELS  # the shipped latest release
    assert cards.pretty_name(("alexnet",)) == "dgtraces: layer-wise DL training traces (AlexNet)"
    assert "for AlexNet and ResNet-50, with" in cards.summary(("alexnet", "resnet50"))


def test_registry_and_cli_help_import_no_pandas():
    code = ("import sys, dgtraces.models.registry, dgtraces.cli.predict, dgtraces.cli.sweep,"
            " dgtraces.cli.collect;"
            "print('pandas' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"
