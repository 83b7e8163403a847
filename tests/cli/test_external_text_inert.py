"""Every printed external string goes through the same ``inert()`` (issue #36 item 6): the GPU
names ``import nccl-tests`` prints, the op and scope names of ``import kineto``, the layer
names of ``import caffe-time``, a log's name in ``validate-comm`` and the fit source in
``predict --link-fit``'s link lines reach the terminal escaped (``dgtraces.cli.echo``)."""

import csv
import json

import pytest
from click.testing import CliRunner

from dgtraces.cli import main
from tests.attack_tally import record
from tests.importers.test_importers_gpu import _log
from tests.io.test_terminal_text import _control_free
from tests.paths import FIXTURES

CLS = "terminal control sequence from an imported file"
PAYLOADS = ["\x1b]0;pwned\x07", "\x1b[2J", "\x9b2J", "\u202eevil"]
NCCL_LOG = FIXTURES / "nccl_tests" / "all_reduce_perf_8xh100.log"


def _shown_inert(res, where: str) -> bool:
    ok = res.exit_code == 0 and _control_free(res.output) and \
        ("\\x" in res.output or "\\u" in res.output)
    record(f"{CLS} ({where})", ok)
    return ok


def _nccl_log(tmp_path, payload, name="all_reduce_perf_evil.log"):
    path = tmp_path / name
    path.write_text(NCCL_LOG.read_text().replace("NVIDIA H100 80GB HBM3",
                                                 f"NVIDIA H100{payload} 80GB HBM3"))
    return path


@pytest.mark.parametrize("payload", PAYLOADS)
def test_import_nccl_tests_prints_gpu_names_inertly(tmp_path, payload):
    res = CliRunner().invoke(main, ["import", "nccl-tests", str(_nccl_log(tmp_path, payload)),
                                    "--out", str(tmp_path / "out")])
    assert _shown_inert(res, "import nccl-tests"), repr(res.output)


def test_validate_comm_prints_a_log_name_inertly(tmp_path):
    log = _nccl_log(tmp_path, "", name="all_reduce_perf_\x1b[2J.log")
    res = CliRunner().invoke(main, ["validate-comm", str(log), "--intra", "nvlink4"])
    assert _shown_inert(res, "validate-comm"), repr(res.output)


def _x(name, ts, dur, cat="cpu_op", **args):
    return {"ph": "X", "name": name, "cat": cat, "pid": 1, "tid": 1, "ts": ts, "dur": dur,
            "args": args}


@pytest.mark.parametrize("payload", PAYLOADS[:2])
def test_import_kineto_prints_op_and_scope_names_inertly(tmp_path, payload):
    events = [_x("conv1", 0, 100, "user_annotation"), _x("aten::conv2d", 5, 10),
              _x(f"scope{payload}", 120, 30, "user_annotation"),
              _x(f"aten::op{payload}", 150, 10)]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    res = CliRunner().invoke(main, ["import", "kineto", str(path), "--model", "alexnet",
                                    "--batch-size", "1", "--out", str(tmp_path / "out")])
    assert _shown_inert(res, "import kineto"), repr(res.output)
    assert res.output.count("\\x1b") == 2  # the scope and the op name


@pytest.mark.parametrize("payload", PAYLOADS[:2])
def test_import_caffe_time_prints_layer_names_inertly(tmp_path, payload):
    from dgtraces.models import layer_records

    names = [r["layer"] for r in layer_records("alexnet-owt")] + [f"extra{payload}"]
    res = CliRunner().invoke(main, ["import", "caffe-time", str(_log(tmp_path, names)),
                                    "--model", "alexnet-owt", "--device", "titanx-maxwell",
                                    "--source", "hand-made fixture",
                                    "--out", str(tmp_path / "out")])
    assert _shown_inert(res, "import caffe-time"), repr(res.output)


def test_predict_link_fit_prints_the_fit_source_inertly(tmp_path):
    fit = dict(collective="allreduce", backend="nccl", interconnect="ib-x8", workers=8,
               alpha_us=28.7, beta_us_per_byte=5.8e-06, bandwidth_gb_s=171.3, r2=0.9999,
               n_points=28, min_bytes=8, max_bytes=1073741824, provenance="reconstructed",
               source="fit of a log \x1b]0;pwned\x07 on node-a")
    path = tmp_path / "comm_fits.csv"
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(fit))
        w.writeheader()
        w.writerow(fit)
    res = CliRunner().invoke(main, ["predict", "--model", "resnet50", "--device", "v100",
                                    "--batch-size", "64", "--workers", "16",
                                    "--gpus-per-node", "8", "--link-fit", str(path)])
    assert _shown_inert(res, "predict --link-fit"), repr(res.output)
