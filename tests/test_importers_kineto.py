"""Kineto importer on real torch.profiler fixtures (tests/fixtures/make_kineto.py) and on
small inline traces."""

import gzip
import json
import statistics
from pathlib import Path

import pytest
from click.testing import CliRunner

from dgtraces.checks import validate_files
from dgtraces.cli import main
from dgtraces.errors import DgtracesError
from dgtraces.importers.kineto import import_trace

FIX = Path(__file__).resolve().parent / "fixtures"
SCOPES = FIX / "kineto_alexnet_scopes.json.gz"
MODULES = FIX / "kineto_alexnet_modules.json.gz"
MAP = FIX / "kineto_alexnet_map.csv"
LAYERS = ["conv1", "relu1", "norm1", "pool1", "conv2", "relu2", "norm2", "pool2"]


def _events(path):
    return [e for e in json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
            if e.get("ph") == "X"]


def test_record_function_scopes_fixture():
    res = import_trace(SCOPES, "alexnet", batch_size=2)
    lt = res.layer_timings.set_index("layer")
    assert list(lt.index) == LAYERS and res.iterations == 3 and (lt["n"] == 3).all()
    assert (lt["fwd_ms"] > 0).all() and (lt["bwd_ms"] > 0).all()
    ev = _events(SCOPES)
    conv1 = [e["dur"] / 1000 for e in ev if e.get("cat") == "user_annotation"
             and e["name"] == "conv1"]
    assert lt.loc["conv1", "fwd_ms"] == pytest.approx(statistics.median(conv1))
    scoped = sum(e["dur"] for e in ev if e.get("cat") == "user_annotation"
                 and e["name"] in LAYERS) / 1000
    assert res.mapped_fwd_ms == pytest.approx(scoped)  # flat scopes: no nesting to subtract
    nodes = [e for e in ev if e["name"].startswith("autograd::engine::evaluate_function:")]
    assert res.trace_bwd_ms == pytest.approx(sum(e["dur"] for e in nodes) / 1000)
    unmapped_bwd = sum(ms for name, _, ms in res.unmapped.names
                       if name.startswith("autograd::engine::evaluate_function:"))
    assert res.mapped_bwd_ms + unmapped_bwd == pytest.approx(res.trace_bwd_ms)
    pools = sum(e["dur"] for e in nodes if "MaxPool2DWithIndicesBackward0" in e["name"]) / 1000
    from dgtraces.importers.kineto import attribute, load_trace
    fwd, bwd, *_ = attribute(load_trace(SCOPES)[0], set(LAYERS), {})
    assert sum(v for (layer, _), v in bwd.items() if layer.startswith("pool")) == \
        pytest.approx(pools)
    names = {n for n, _, _ in res.unmapped.names}
    assert {"aten::sum", "autograd::engine::evaluate_function: SumBackward0",
            "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad"} <= names
    assert 0 < res.unmapped.share < 0.2
    assert "Optimizer.step#SGD.step" in res.unmapped.scopes
    run = res.runs.iloc[0]
    assert run["provenance"] == "measured" and not run["flagged"]
    assert run["layer_sum_ratio"] == pytest.approx(0.9525, abs=1e-3)
    assert run["fwd_ms"] >= lt["fwd_ms"].sum() * 0.9


def test_module_scopes_with_map_and_profiler_steps():
    res = import_trace(MODULES, "alexnet", batch_size=2, map_path=MAP)
    lt = res.layer_timings.set_index("layer")
    assert list(lt.index) == LAYERS and res.iterations == 2 and (lt["n"] == 2).all()
    assert (lt["bwd_ms"] > 0).all()
    run = res.runs.iloc[0]
    assert json.loads(run["params_json"])["iteration_basis"] == "ProfilerStep"
    steps = [e["dur"] / 1000 for e in _events(MODULES) if e["name"].startswith("ProfilerStep#")]
    assert run["iter_ms"] == pytest.approx(statistics.median(steps))
    assert "nn.Module: Sequential_0" in res.unmapped.scopes
    with pytest.raises(DgtracesError) as exc:
        import_trace(MODULES, "alexnet", batch_size=2)  # no map: nothing maps
    assert exc.value.code == "EMPTY"


def test_plain_json_and_bad_inputs(tmp_path):
    plain = tmp_path / "trace.json"
    plain.write_bytes(gzip.decompress(SCOPES.read_bytes()))
    a = import_trace(plain, "alexnet", batch_size=2).layer_timings
    b = import_trace(SCOPES, "alexnet", batch_size=2).layer_timings
    assert a.drop(columns="run_id").equals(b.drop(columns="run_id"))
    bad_map = tmp_path / "map.csv"
    bad_map.write_text("scope,layer\nnn.Module: Conv2d_0,conv99\n")
    cases = [
        (dict(path=tmp_path / "junk.json", text="{not json"), {}, "BAD_FILE"),
        (dict(path=SCOPES), {"map_path": bad_map}, "UNKNOWN_LAYER"),
        (dict(path=SCOPES), {"batch_size": 0}, "BAD_INPUT"),
        (dict(path=tmp_path / "missing.json"), {}, "NOT_FOUND"),
        (dict(path=SCOPES), {"map_path": tmp_path / "no-map.csv"}, "NOT_FOUND"),
    ]
    for spec, kw, code in cases:
        if "text" in spec:
            spec["path"].write_text(spec["text"])
        with pytest.raises(DgtracesError) as exc:
            import_trace(spec["path"], "alexnet", **{"batch_size": 2, **kw})
        assert exc.value.code == code
    with pytest.raises(DgtracesError) as exc:
        import_trace(SCOPES, "lenet", batch_size=2)
    assert exc.value.code == "UNKNOWN_MODEL"


def _x(name, ts, dur, cat="cpu_op", **args):
    return {"ph": "X", "name": name, "cat": cat, "pid": 1, "tid": 1, "ts": ts, "dur": dur,
            "args": args}


def test_inline_nesting_linking_and_gpu(tmp_path):
    seq = {"Sequence number": 7, "Fwd thread id": 0}
    events = [
        _x("conv1", 0, 100, "user_annotation"), _x("aten::conv2d", 5, 10, **seq),
        _x("relu1", 20, 20, "user_annotation"), _x("aten::relu", 22, 5, **{
            "Sequence number": 8, "Fwd thread id": 0}),
        _x("autograd::engine::evaluate_function: ReluBackward0", 200, 30, **{
            "Sequence number": 8, "Fwd thread id": 1}),
        _x("autograd::engine::evaluate_function: ConvolutionBackward0", 240, 50, **{
            "Sequence number": 7, "Fwd thread id": 1}),
        _x("ConvolutionBackward0", 241, 48, **{"Sequence number": 7, "Fwd thread id": 1}),
        _x("aten::mystery", 150, 10),
    ]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    res = import_trace(path, "alexnet", batch_size=1)
    lt = res.layer_timings.set_index("layer")
    assert lt.loc["conv1", "fwd_ms"] == pytest.approx(0.080)  # 100 us minus nested relu1
    assert lt.loc["relu1", "fwd_ms"] == pytest.approx(0.020)
    assert lt.loc["conv1", "bwd_ms"] == pytest.approx(0.050)  # outer node only, not nested
    assert lt.loc["relu1", "bwd_ms"] == pytest.approx(0.030)
    assert res.unmapped.names == (("aten::mystery", 1, pytest.approx(0.010)),)
    path.write_text(json.dumps({"traceEvents": events + [_x("sgemm", 10, 5, "kernel")]}))
    with pytest.raises(DgtracesError) as exc:
        import_trace(path, "alexnet", batch_size=1)
    assert exc.value.code == "BAD_INPUT"
    gpu = import_trace(path, "alexnet", batch_size=1, device="v100")
    assert gpu.gpu_events == 1 and gpu.runs.iloc[0]["device_kind"] == "gpu"


def test_cli_import_commands(tmp_path):
    runner = CliRunner()
    out = tmp_path / "k"
    r = runner.invoke(main, ["import", "kineto", str(MODULES), "--model", "alexnet",
                             "--batch-size", "2", "--map", str(MAP), "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "unmapped: 22 op(s)" in r.output and "aten::add_" in r.output
    assert validate_files([out / "runs.csv", out / "layer_timings.csv"],
                          use_store=False) == {"runs": 1, "layer_timings": 8}
    again = runner.invoke(main, ["import", "kineto", str(MODULES), "--model", "alexnet",
                                 "--batch-size", "2", "--map", str(MAP), "--out", str(out)])
    assert isinstance(again.exception, DgtracesError) and again.exception.code == "BAD_INPUT"
    from dgtraces import reference
    r = runner.invoke(main, ["import", "bcaffe", str(reference.path("bcaffe/tmp4ocomm.log")),
                             "--model", "resnet50", "--out", str(tmp_path / "b")])
    assert r.exception.code == "GRAD_MISMATCH"
    r = runner.invoke(main, ["import", "published", "--out", str(tmp_path / "p")])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "p" / "comm_fits.csv").is_file()
