"""Non-ASCII digits outside contributions (issue #36, low): ``int("３２")`` is 32 and
``float("٣.٥")`` 3.5, so every number option of the CLI, ``--sizes`` and the log importers
took digits that the contribution checks refuse. Each now refuses them."""

import click
import pytest
from click.testing import CliRunner

from dgtraces import reference
from dgtraces.cli import COMMANDS, main
from dgtraces.errors import DgtracesError
from tests.attack_tally import record
from tests.importers.test_importers_gpu import _log

CLS = "non-ASCII digits"
FULLWIDTH = str.maketrans("0123456789", "０１２３４５６７８９")
ARABIC = str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩")


def _number_params(cmd: click.Command):
    for p in cmd.params:
        if isinstance(p.type, (click.types.IntParamType, click.types.FloatParamType)):
            yield cmd.name, p
    for sub in getattr(cmd, "commands", {}).values():
        yield from _number_params(sub)


def test_every_number_option_of_every_command_takes_ascii_digits_only():
    ctx = click.Context(main)
    params = [x for name in COMMANDS for x in _number_params(main.get_command(ctx, name))]
    assert len(params) > 40  # batch sizes, workers, times, rates, ...
    for command, p in params:
        with pytest.raises(click.BadParameter) as exc:
            p.type.convert("３２", p, None)
        assert "ASCII" in str(exc.value.message), (command, p.name)


@pytest.mark.parametrize("args", [
    ["predict", "--model", "alexnet", "--device", "v100", "--batch-size", "３２"],
    ["predict", "--model", "alexnet", "--device", "v100", "--batch-size", "32", "--io-ms",
     "٣.٥"],
    ["sweep", "--models", "alexnet", "--device", "v100", "--batch-sizes", "32",
     "--workers", "1", "--bucket-mib", "２５"],
], ids=["int", "float", "sweep-float"])
def test_a_number_option_refuses_non_ascii_digits(args):
    res = CliRunner().invoke(main, args)
    record(CLS, res.exit_code == 2)
    assert res.exit_code == 2, res.output  # a usage error, as "abc" is


@pytest.mark.parametrize("sizes", ["１０２４", "1٠24", "６４KiB"])
def test_collective_sizes_refuse_non_ascii_digits(sizes):
    from dgtraces.comm.collective_time import parse_sizes

    with pytest.raises(DgtracesError) as exc:
        parse_sizes(sizes)
    record(CLS, exc.value.code == "BAD_INPUT")
    assert exc.value.code == "BAD_INPUT"


def test_osu_bcaffe_caffe_time_logs_refuse_non_ascii_digits(tmp_path):
    from dgtraces.importers import bcaffe, caffe_time, osu
    from dgtraces.models import layer_records

    osu_log = tmp_path / "allreduce2.log"
    text = reference.path("bcaffe/allreduce2.log").read_text()
    osu_log.write_text(text.replace("2,64 ", "2,64".translate(ARABIC) + " "))
    b_log = tmp_path / "tmp4comm.log"
    lines = reference.path("bcaffe/tmp4comm.log").read_text().split("\n")
    lines[1] = lines[1].replace("[1, 64,", "[1, " + "64".translate(FULLWIDTH) + ",")
    b_log.write_text("\n".join(lines))
    names = [r["layer"] for r in layer_records("alexnet-owt")]
    c_log = _log(tmp_path, names)
    c_log.write_text(c_log.read_text().replace("forward: 0.5 ms.", "forward: ０.5 ms.", 1))
    src = "a hand-edited log"
    calls = {"osu": lambda: osu.import_log(osu_log, source=src, workers=2),
             "bcaffe": lambda: bcaffe.import_log(b_log, source=src, device="k80",
                                                 batch_size=64, workers=4),
             "caffe-time": lambda: caffe_time.import_log(c_log, "alexnet-owt", device="d",
                                                         source=src)}
    for name, call in calls.items():
        with pytest.raises(DgtracesError) as exc:
            call()
        record(f"{CLS} ({name} log)", exc.value.code == "BAD_FILE")
        assert exc.value.code == "BAD_FILE", (name, exc.value.report())
