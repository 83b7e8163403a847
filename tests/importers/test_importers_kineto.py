"""Kineto importer on real torch.profiler fixtures (tests/fixtures/make_kineto.py) and on
small inline traces."""

import gzip
import json
import statistics

import pytest
from click.testing import CliRunner

from dgtraces.cli import main
from dgtraces.contribute.files import validate_files
from dgtraces.errors import DgtracesError
from dgtraces.importers.kineto import import_trace
from dgtraces.models import layer_records
from tests.paths import FIXTURES

FIX = FIXTURES
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
    assert run["layer_sum_ratio"] == pytest.approx(_ratio_from_events(ev), rel=1e-9)
    assert run["fwd_ms"] >= lt["fwd_ms"].sum() * 0.9
    assert res.unscoped == tuple(r["layer"] for r in layer_records("alexnet")
                                 if r["layer"] not in LAYERS)
    assert json.loads(run["params_json"])["layers_without_scope"] == list(res.unscoped)


def _ratio_from_events(ev):
    """layer_sum_ratio of the scopes fixture recomputed from its raw events: per-layer
    medians (fwd: flat scopes; bwd: autograd nodes whose sequence number belongs to a forward
    op inside the layer's scope) over the medians of the per-iteration fwd / bwd spans."""
    scopes = sorted((e for e in ev if e.get("cat") == "user_annotation"
                     and e["name"] in LAYERS), key=lambda e: e["ts"])
    seen, owner = {}, {}
    for s in scopes:
        s["it"] = seen[s["name"]] = seen.get(s["name"], -1) + 1
    for op in ev:
        args = op.get("args") or {}
        if op.get("cat") == "cpu_op" and "Sequence number" in args \
                and not args.get("Fwd thread id"):
            inside = [s for s in scopes if s["ts"] <= op["ts"]
                      and op["ts"] + op["dur"] <= s["ts"] + s["dur"]]
            if inside:
                owner[args["Sequence number"]] = (inside[-1]["name"], inside[-1]["it"])
    nodes = [(owner[e["args"]["Sequence number"]], e) for e in ev
             if e["name"].startswith("autograd::engine::evaluate_function:")
             and e["args"].get("Sequence number") in owner]
    fwd, bwd, spans = {}, {}, {}
    for s in scopes:
        fwd.setdefault(s["name"], []).append(s["dur"] / 1000)
        spans.setdefault(("f", s["it"]), []).extend((s["ts"], s["ts"] + s["dur"]))
    per = {}
    for key, e in nodes:
        per[key] = per.get(key, 0.0) + e["dur"] / 1000
        spans.setdefault(("b", key[1]), []).extend((e["ts"], e["ts"] + e["dur"]))
    for (layer, _), ms in per.items():
        bwd.setdefault(layer, []).append(ms)
    med = statistics.median
    layer_sum = sum(med(v) for v in fwd.values()) + sum(med(v) for v in bwd.values())
    whole = sum(med([max(v) - min(v) for (kind, _), v in spans.items() if kind == k])
                for k in "fb") / 1000
    return layer_sum / whole


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
        (dict(path=SCOPES), {"batch_size": 8.7}, "BAD_INPUT"),
        (dict(path=SCOPES), {"batch_size": "abc"}, "BAD_INPUT"),
        (dict(path=tmp_path / "ts.json", text=json.dumps({"traceEvents": [
            {"ph": "X", "name": "conv1", "ts": "abc", "dur": 5}]})), {}, "BAD_FILE"),
        (dict(path=tmp_path / "ts2.json", text=json.dumps({"traceEvents": [
            {"ph": "X", "name": "conv1", "ts": None, "dur": 5}]})), {}, "BAD_FILE"),
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
    assert all(layer in r.output for layer in ("conv3", "conv5", "fc8"))  # layers without scope
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
    log = str(reference.path("bcaffe/allreduce2.log"))  # the same log twice: refused
    r = runner.invoke(main, ["import", "osu", log, log, "--out", str(tmp_path / "o")])
    assert r.exception.code == "DUPLICATE" and not (tmp_path / "o").exists()


def test_default_run_id_tells_apart_files_named_alike(tmp_path):
    import hashlib

    ids = []
    for sub, data in (("a", SCOPES.read_bytes()), ("b", MODULES.read_bytes()),
                      ("c", SCOPES.read_bytes())):
        (tmp_path / sub).mkdir()
        path = tmp_path / sub / "trace.json.gz"
        path.write_bytes(data)
        res = import_trace(path, "alexnet", batch_size=2,
                           map_path=MAP if sub == "b" else None)
        digest = hashlib.sha256(data).hexdigest()[:8]
        ids.append(res.runs.iloc[0]["run_id"])
        assert ids[-1] == f"kineto-alexnet-trace-{digest}"
        assert set(res.layer_timings["run_id"]) == {ids[-1]}
    assert ids[0] != ids[1] and ids[0] == ids[2]  # same bytes, same id


def test_shipped_traces_are_parsed_once_and_handed_out_fresh(tmp_path, monkeypatch):
    """A shipped reference trace is decoded once per process (issue #36); each caller gets its
    own list and metadata, and a user's file (outside dgtraces/reference) is never kept."""
    from dgtraces.importers.kineto import parse
    from dgtraces.reference import ROOT

    shipped = next((ROOT / "gpu" / "kineto").glob("*.json.gz"))
    calls = []
    real = parse._parse
    monkeypatch.setattr(parse, "_parse", lambda p: calls.append(p) or real(p))
    monkeypatch.setattr(parse, "_SHIPPED", {})
    first = parse.load_trace(shipped)
    first[0].clear()
    first[1]["planted"] = 1
    second = parse.load_trace(shipped)
    assert len(calls) == 1 and second[0] and "planted" not in second[1]
    assert second[2] == first[2] and second[0] == parse._parse(shipped)[0]
    own = tmp_path / "own.json.gz"
    own.write_bytes(shipped.read_bytes())
    parse.load_trace(own)
    parse.load_trace(own)
    assert calls.count(own) == 2
