"""An error names only options of the command that printed it (issue #36, trial): ``predict``
on a GPU without calibration rows said ``--method kernels-2.0``, an option ``predict`` does
not have (it is ``reconstruct``'s). An option of another command is named with its command
(```dgtraces reconstruct --method kernels-2.0```)."""

import re

import click
import pytest
from click.testing import CliRunner

from dgtraces.cli import main

OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
OTHER_COMMAND = re.compile(r"`dgtraces [^`]*`")  # an option of a named command


def _options(name: str) -> set[str]:
    cmd = main.get_command(click.Context(main), name)
    return {o for p in cmd.params for o in getattr(p, "opts", []) if o.startswith("--")}


CASES = [
    ["predict", "--model", "alexnet", "--device", "t4", "--batch-size", "32"],
    ["predict", "--model", "alexnet", "--device", "v100", "--batch-size", "32",
     "--servers", "2"],
    ["predict", "--model", "alexnet", "--device", "cpu", "--batch-size", "7"],
    ["sweep", "--models", "alexnet", "--device", "t4", "--batch-sizes", "32"],
    ["validate-comm", "tests/fixtures/nccl_tests/all_reduce_perf_8xh100.log"],
    ["collective", "--workers", "12", "--gpus-per-node", "8"],
]


@pytest.mark.parametrize("args", CASES, ids=lambda a: " ".join(a[:4]))
def test_an_error_names_only_its_commands_options(args):
    from dgtraces.errors import DgtracesError
    from tests.paths import REPO

    args = [str(REPO / a) if a.startswith("tests/") else a for a in args]
    res = CliRunner().invoke(main, args)
    assert isinstance(res.exception, DgtracesError), res.output
    text = OTHER_COMMAND.sub("", res.exception.report())
    named = set(OPTION.findall(text))
    assert named <= _options(args[0]), (named - _options(args[0]), text)
