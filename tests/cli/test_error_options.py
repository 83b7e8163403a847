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


def _refused(args):
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 1 and res.exception is not None, res.output
    return res.exception


GPU = ["predict", "--model", "resnet50", "--device", "v100", "--batch-size", "64",
       "--workers", "8", "--gpus-per-node", "4"]


def test_error_reports_show_five_failures_and_say_how_many_more(monkeypatch, capsys):
    """Acceptance review #20: INCOMPLETE_TRACE printed 94 failure lines."""
    import sys

    from dgtraces.cli import SHOWN_FAILURES, run

    monkeypatch.setattr(sys, "argv", ["dgtraces", "predict", "--run-id",
                                      "bcaffe-googlenet-tmp4comm"])
    with pytest.raises(SystemExit) as done:
        run()
    assert done.value.code == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("error [INCOMPLETE_TRACE]")
    assert sum(line.startswith("  - ") for line in err) == SHOWN_FAILURES
    assert err[SHOWN_FAILURES + 1] == f"  ... and {94 - SHOWN_FAILURES} more"


def test_error_wordings_name_the_right_cause_and_bound():
    """Acceptance review #20: the wordings that contradicted their own bound or blamed the
    wrong thing."""
    from dgtraces.comm.collective_time import MAX_BYTES, parse_size
    from dgtraces.errors import DgtracesError
    from dgtraces.predict.overheads import Overheads

    exc = _refused(GPU + ["--framework", "horovd"])  # the known names once, not three times
    assert exc.code == "UNKNOWN_FRAMEWORK"
    assert exc.report().count("caffe-mpi@1.0-2.0") == 1
    with pytest.raises(DgtracesError) as rate:
        Overheads(host_decode_img_s=0.0)
    assert rate.value.failures[0].expected == "> 0"
    with pytest.raises(DgtracesError) as cv:
        Overheads(iteration_cv=-1.0)
    assert cv.value.failures[0].expected == ">= 0"
    zero = _refused(GPU + ["--inter", "ethernet:0gbps"])
    assert zero.code == "BAD_INPUT" and zero.failures[0].expected != "KIND:RATEgbps"
    assert parse_size("1TiB") == MAX_BYTES  # the bound the error states is reachable
    pat = _refused(["collective", "--algorithm", "nccl-pat", "--nccl", "2.18"])
    assert pat.code == "UNSUPPORTED_HARDWARE"  # 2.18 has no PAT: the release, not all-reduce
    assert _refused(["collective", "--algorithm", "nccl-pat"]).code == "BAD_INPUT"
    sharp = _refused(["collective", "--workers", "64", "--intra", "nvlink4", "--inter",
                      "ib-ndr,sharp", "--nccl", "2.4"])
    assert sharp.code == "UNSUPPORTED_HARDWARE" and sharp.failures[0].column == "--inter"
