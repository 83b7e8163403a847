"""``--intra nvlink`` on an A100 (issue #36, trial): the alias ``nvlink`` is the V100's NVLink
2 (link_aliases.csv, as in v0.3), so an A100 or H100 prediction ran on V100 links without a
word. The bare alias is refused on a GPU with another NVLink, naming the GPU's own preset;
a preset named in full is taken as given."""

import pytest
from click.testing import CliRunner

from dgtraces.cli import main
from dgtraces.comm.fabrics import FABRICS, NVLINK_OF_DEVICE, check_nvlink_alias
from dgtraces.errors import DgtracesError
from dgtraces.reference import gpu_devices
from tests.attack_tally import record


def test_every_nvlink_gpu_names_a_preset_of_its_generation():
    assert set(NVLINK_OF_DEVICE) <= gpu_devices()
    assert all(FABRICS[link].hw == "nvlink" for link in NVLINK_OF_DEVICE.values())
    cc = {"p100": 60, "v100": 70, "a100": 80, "h100": 90}
    for device, want in cc.items():
        assert FABRICS[NVLINK_OF_DEVICE[device]].compcap == want


@pytest.mark.parametrize("device", ["a100", "h100", "h200", "p100"])
def test_the_v100_alias_is_refused_on_another_nvlink_gpu(device):
    with pytest.raises(DgtracesError) as exc:
        check_nvlink_alias(device, ["nvlink"])
    record("alias meaning another GPU's link", exc.value.code == "BAD_INPUT")
    assert exc.value.code == "BAD_INPUT"
    assert exc.value.failures[0].expected.split()[0] == NVLINK_OF_DEVICE[device]


@pytest.mark.parametrize("device, intra", [("v100", ["nvlink"]), ("a100", ["nvlink2"]),
                                           ("a100", ["nvlink3", "pcie4"]), ("t4", ["nvlink"]),
                                           ("cpu", ["nvlink"]), (None, ["nvlink"])])
def test_the_alias_on_its_own_gpu_and_full_names_are_taken(device, intra):
    check_nvlink_alias(device, intra)


@pytest.mark.parametrize("args", [
    ["predict", "--model", "resnet50", "--device", "a100", "--batch-size", "64",
     "--workers", "8", "--gpus-per-node", "8", "--intra", "nvlink", "--calibrate-img-s",
     "2000"],
    ["sweep", "--models", "resnet50", "--device", "h100", "--batch-sizes", "64",
     "--workers", "8", "--gpus-per-node", "8", "--intra", "nvlink,pcie4",
     "--calibrate-img-s", "3000"]], ids=["predict", "sweep"])
def test_the_commands_refuse_it(args):
    res = CliRunner().invoke(main, args)
    assert getattr(res.exception, "code", None) == "BAD_INPUT", res.output
