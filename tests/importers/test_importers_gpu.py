"""caffe-time, pipedream and kineto-automap importers on the shipped GPU files and on
small hand-made fixtures; release v0.4.0 row counts and licences (issue #13)."""

import pytest

from dgtraces import reference
from dgtraces.errors import DgtracesError
from dgtraces.importers.caffe_time import import_log
from dgtraces.importers.pipedream import import_graph

CAFFE = "gpu/convnet-benchmarks/caffe/output_{}.log"
PD = "gpu/pipedream/{}/graph.txt"
KINETO = "gpu/kineto/resnet50_v100_b32_num_workers_{}.pt.trace.json.gz"

SMALL_LOG = """      dim: 4
I0 caffe.cpp:335] Testing for 3 iterations.
I0 caffe.cpp:366] Average time per layer:
I0 caffe.cpp:369]      input\tforward: 0.001 ms.
I0 caffe.cpp:372]      input\tbackward: 0.001 ms.
{body}I0 caffe.cpp:377] Average Forward pass: 2 ms.
I0 caffe.cpp:379] Average Backward pass: 4 ms.
I0 caffe.cpp:381] Average Forward-Backward: 6 ms.
"""


def _log(tmp_path, layers, tail=True, name="t.log"):
    from dgtraces.models import inferred

    body = "".join(f"I0 caffe.cpp:369] {n}\tforward: 0.5 ms.\nI0 caffe.cpp:372] {n}\tbackward:"
                   f" 1.5 ms.\n" for n in layers)
    text = SMALL_LOG.format(body=body)
    if not tail:
        text = text[:text.index("I0 caffe.cpp:377]")]
    p = tmp_path / name
    p.write_text(text)
    assert inferred  # the spec is importable
    return p


def test_caffe_time_shipped_logs():
    a = import_log(reference.path(CAFFE.format("alexnet")), "alexnet-owt")
    assert a.coverage == 1.0 and a.batch_size == 128 and len(a.matched) == 16
    assert [u[0] for u in a.unmatched] == ["input"]
    run = a.runs.iloc[0]
    assert run["provenance"] == "published" and run["device"] == "titanx-maxwell"
    assert run["iter_ms"] == 128.729 and "MIT" in run["source"]
    assert "6f718dbcfdaefe1af6c04ab2be3927e0728b599e" in run["source"]
    lt = a.layer_timings.set_index("layer")
    assert lt.loc["conv1", "fwd_ms"] == 4.6583 and lt.loc["conv1", "bwd_ms"] == 14.4471
    g = import_log(reference.path(CAFFE.format("googlenet")), "googlenet")
    assert g.coverage > 0.95 and len(g.matched) == 137
    assert sum(u[0].endswith("_split") for u in g.unmatched) == 9  # listed, not dropped


def test_caffe_time_fixtures_and_errors(tmp_path):
    from dgtraces.models import layer_records

    names = [r["layer"] for r in layer_records("alexnet-owt")]
    res = import_log(_log(tmp_path, names), "alexnet-owt", device="titanx-maxwell",
                     source="hand-made fixture")
    assert res.batch_size == 4 and res.runs.iloc[0]["provenance"] == "measured"
    assert (res.layer_timings["n"] == 3).all() and len(res.layer_timings) == len(names)
    cut = _log(tmp_path, names, tail=False, name="cut.log")
    for bad, code in ((lambda: import_log(cut, "alexnet-owt", device="d", source="s"),
                       "BAD_FILE"),
                      (lambda: import_log(_log(tmp_path, names), "resnet50", device="d",
                                          source="s"), "MODEL_MISMATCH"),
                      (lambda: import_log(_log(tmp_path, names), "vgg19"), "UNKNOWN_MODEL"),
                      (lambda: import_log(_log(tmp_path, names), "alexnet-owt"), "BAD_INPUT"),
                      (lambda: import_log(reference.path(CAFFE.format("alexnet")),
                                          "googlenet"), "MODEL_MISMATCH")):
        with pytest.raises(DgtracesError) as exc:
            bad()
        assert exc.value.code == code
    half = tmp_path / "half.log"
    half.write_text(_log(tmp_path, names).read_text().replace(
        "I0 caffe.cpp:372] conv1\tbackward: 1.5 ms.\n", ""))
    with pytest.raises(DgtracesError) as exc:
        import_log(half, "alexnet-owt", device="d", source="s")
    assert exc.value.code == "BAD_FILE"
    garbled = tmp_path / "garbled.log"
    garbled.write_text(_log(tmp_path, names).read_text().replace("forward: 0.5 ms.",
                                                                 "forward: x ms.", 1))
    with pytest.raises(DgtracesError) as exc:
        import_log(garbled, "alexnet-owt", device="d", source="s")
    assert exc.value.code == "BAD_FILE"


@pytest.mark.parametrize("folder, model, batch, nodes", [
    ("alexnet", "alexnet-owt", 256, 20), ("resnet50", "resnet50-v1.5", 128, 174),
    ("vgg16", "vgg16", 128, 38), ("inception_v3", "inception-v3", 128, 321)])
def test_pipedream_shipped_graphs(folder, model, batch, nodes):
    res = import_graph(reference.path(PD.format(folder)), model)
    assert res.batch_size == batch and len(res.mapped) == nodes
    assert {u[1].split("(")[0] for u in res.unmatched} <= {"Input", "Size", "View"}
    run = res.runs.iloc[0]
    assert run["device"] == "gpu-unstated" and run["provenance"] == "published"
    assert abs(run["layer_sum_ratio"] - 1) < 0.05


def test_pipedream_fixture_and_errors(tmp_path):
    node = ("node{} -- {} -- forward_compute_time=1.000, backward_compute_time=2.000, "
            "activation_size={:.3f}, parameter_size={:.3f}\n")
    text = (node.format(1, "Input", 2 * 3 * 224 * 224 * 4, 0)
            + node.format(2, "Conv2d(3, 64, kernel_size=(11, 11))", 2 * 64 * 55 * 55 * 4,
                          (64 * 3 * 121 + 64) * 4)
            + node.format(3, "ReLU(inplace)", 2 * 64 * 55 * 55 * 4, 0)
            + "\tnode1 -- node2\n\tnode2 -- node3\n")
    good = tmp_path / "graph.txt"
    good.write_text(text)
    res = import_graph(good, "alexnet-owt", device="d", source="fixture")
    assert res.batch_size == 2 and res.mapped == {"node2": "conv1", "node3": "conv1/relu"}
    cut = tmp_path / "cut.txt"
    cut.write_text(text + "\tnode3 -- node4\n")
    bad = tmp_path / "bad.txt"
    bad.write_text(text.replace("forward_compute_time=1.000", "forward_compute_time=abc", 1))
    for path, model, code in ((cut, "alexnet-owt", "BAD_FILE"), (bad, "alexnet-owt", "BAD_FILE"),
                              (good, "vgg16", "MODEL_MISMATCH")):
        with pytest.raises(DgtracesError) as exc:
            import_graph(path, model, device="d", source="s")
        assert exc.value.code == code


@pytest.mark.parametrize("workers", [0, 4])
def test_kineto_automap_on_the_v100_traces(workers):
    from dgtraces.importers.kineto import import_trace

    res = import_trace(reference.path(KINETO.format(workers)), "resnet50-v1.5", batch_size=None)
    assert res.coverage >= 0.95 and abs(res.kernel_share - 1) <= 0.10
    run = res.runs.iloc[0]
    assert run["device"] == "v100-dgxs-32gb" and run["batch_size"] == 32
    assert run["provenance"] == "published" and "BSD" in run["source"]
    assert res.iterations == 6 and (res.layer_timings["n"] == 6).all()


def test_kineto_without_profiler_step_is_a_typed_error(tmp_path):
    import json

    from dgtraces.importers.kineto import import_trace

    trace = {"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::conv2d", "ts": 1,
                              "dur": 5, "pid": 1, "tid": 1,
                              "args": {"Input Dims": [[2, 3, 224, 224], [64, 3, 7, 7]]}}]}
    p = tmp_path / "t.json"
    p.write_text(json.dumps(trace))
    with pytest.raises(DgtracesError) as exc:
        import_trace(p, "resnet50-v1.5", batch_size=2)
    assert exc.value.code == "BAD_FILE"


def test_release_v040_rows_by_source_and_licences():
    from dgtraces.store import manifest as store
    from dgtraces.store import release

    if "0.4.0" not in store.list_releases():
        pytest.skip("release v0.4.0 not in this store")
    f = release.read_all("0.4.0")
    runs = f["runs"]
    pub = runs[(runs["provenance"] == "published") & (runs["device_kind"] == "gpu")
               & (runs["device"] != "k80")]
    by_repo = pub["source"].str.split(" ").str[0].value_counts().to_dict()
    assert by_repo == {"soumith/convnet-benchmarks": 2, "msr-fiddle/pipedream": 4,
                       "pytorch/kineto": 2}
    lt = f["layer_timings"][f["layer_timings"]["run_id"].isin(pub["run_id"])]
    assert len(lt) == 16 + 137 + 20 + 174 + 38 + 321 + 2 * 174
    assert pub["source"].str.contains("licence (?:MIT|BSD-3-Clause)").all()
    pairs = set(zip(pub["device"], pub["model"], strict=True))
    assert len(pairs) >= 5 and {"alexnet-owt", "googlenet", "resnet50-v1.5"} <= set(pub["model"])
    assert {"titanx-maxwell", "v100-dgxs-32gb"} <= set(f["devices"]["device"])
    assert "gpu-unstated" not in set(f["devices"]["device"])


def test_cli_gpu_import_commands(tmp_path):
    from click.testing import CliRunner

    from dgtraces.cli import main

    r = CliRunner().invoke(main, ["import", "caffe-time", str(reference.path(
        CAFFE.format("alexnet"))), "--model", "alexnet-owt", "--out", str(tmp_path / "c")])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "c" / "layer_timings.csv").read_text().count("\n") == 17
    r = CliRunner().invoke(main, ["import", "pipedream", str(reference.path(
        PD.format("vgg16"))), "--model", "vgg16", "--out", str(tmp_path / "p")])
    assert r.exit_code == 0, r.output
    assert "gpu-unstated" in (tmp_path / "p" / "runs.csv").read_text()
    r = CliRunner().invoke(main, ["import", "pipedream", str(reference.path(
        PD.format("vgg16"))), "--model", "resnet50", "--out", str(tmp_path / "x")])
    assert isinstance(r.exception, DgtracesError) and r.exception.code == "MODEL_MISMATCH"
    assert not (tmp_path / "x").exists()


def test_datasheet_devices_are_read_with_the_shipped_ones():
    from dgtraces.importers.published import devices_frame
    from dgtraces.reconstruct.roofline.calibration import devices

    keys = [r["device"] for r in reference.device_rows()]
    assert {"k80", "v100", "titanx-maxwell", "v100-dgxs-32gb"} <= set(keys)
    assert len(keys) == len(set(keys))
    df = devices_frame(reference.DEVICE_FILES).set_index("device")
    assert df.loc["titanx-maxwell", "kind"] == "gpu" and df.loc["v100-dgxs-32gb", "memory_gb"] == 32
    assert all(len(s) > 20 for s in df.loc[["titanx-maxwell", "v100-dgxs-32gb"], "source"])
    assert "gpu-unstated" not in devices()


def test_reconstruction_against_real_gpu_layers():
    from dgtraces.importers.gpu_sources import gpu_tables
    from dgtraces.reconstruct.roofline.gpu import compare_gpu

    t = gpu_tables()
    comps, skipped = compare_gpu(t["runs"], t["layer_timings"])
    assert [c.device for c in comps] == ["v100-dgxs-32gb", "v100-dgxs-32gb"]
    c = comps[0]
    assert len(c.table) == 158 and set(c.by_kind()["kind"]) >= {"conv", "bn", "relu"}
    assert c.layer_mape == pytest.approx(c.table["ape_pct"].mean())
    total = c.table["reconstructed_ms"].sum() / c.table["measured_ms"].sum() - 1
    assert c.iteration_error_pct == pytest.approx(100 * total)
    assert len(skipped) == 6
    assert sum("Titan X" in s for s in skipped) == 2 and sum("no GPU" in s for s in skipped) == 4


def _op(name, ts, dur, tid=1, dims=None, seq=None, fwd_tid=0):
    args = {"Input Dims": dims or [], "Fwd thread id": fwd_tid}
    if seq is not None:
        args["Sequence number"] = seq
    return {"ph": "X", "cat": "cpu_op", "name": name, "ts": ts, "dur": dur, "pid": 1,
            "tid": tid, "args": args}


def test_kineto_automap_cpu_fixture_uses_op_times(tmp_path):
    """A hand-made CPU trace of alexnet-owt's first three layers, two ProfilerSteps."""
    import json

    from dgtraces.importers.kineto import import_trace

    events = []
    for step, t0 in enumerate((0, 1000)):
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}",
                       "ts": t0, "dur": 900, "pid": 1, "tid": 1, "args": {}})
        seq = 10 * step
        events += [
            _op("aten::conv2d", t0 + 10, 100, dims=[[2, 3, 224, 224], [64, 3, 11, 11], [64]],
                seq=seq),
            _op("aten::relu_", t0 + 120, 20, dims=[[2, 64, 55, 55]], seq=seq + 1),
            _op("aten::max_pool2d", t0 + 150, 30, dims=[[2, 64, 55, 55]], seq=seq + 2),
            _op("aten::sum", t0 + 190, 5, dims=[[2, 64, 27, 27]], seq=seq + 3),  # the loss
            _op("MaxPool2DWithIndicesBackward0", t0 + 300, 60, tid=2, seq=seq + 2, fwd_tid=1),
            _op("ReluBackward0", t0 + 370, 40, tid=2, seq=seq + 1, fwd_tid=1),
            _op("ConvolutionBackward0", t0 + 420, 200, tid=2, seq=seq, fwd_tid=1),
        ]
    p = tmp_path / "cpu.json"
    p.write_text(json.dumps({"traceEvents": events}))
    res = import_trace(p, "alexnet-owt", batch_size=None, source="hand-made fixture")
    assert res.time_basis == "cpu ops" and res.iterations == 2
    lt = res.layer_timings.set_index("layer")
    assert list(lt.index) == ["conv1", "conv1/relu", "pool1/3x3_s2"]
    assert lt.loc["conv1", "fwd_ms"] == 0.1 and lt.loc["conv1", "bwd_ms"] == 0.2
    assert lt.loc["pool1/3x3_s2", "bwd_ms"] == 0.06 and (lt["n"] == 2).all()
    run = res.runs.iloc[0]
    assert run["device"] == "cpu" and run["provenance"] == "measured" and run["batch_size"] == 2
    assert "aten::sum" in [n for n, _, _ in res.unmapped.names]
    with pytest.raises(DgtracesError) as exc:  # the same ops do not fit another net
        import_trace(p, "vgg16", batch_size=None, source="s")
    assert exc.value.code == "EMPTY"


def test_release_v040_layers_are_every_spec():
    from dgtraces.models import layers_frame
    from dgtraces.store import manifest as store
    from dgtraces.store import release

    if "0.4.0" not in store.list_releases():
        pytest.skip("release v0.4.0 not in this store")
    got = release.read_table("layers", "0.4.0").sort_values(["model", "layer_idx"])
    want = layers_frame().sort_values(["model", "layer_idx"])
    assert len(got) == len(want) == 409 + 554
    assert list(got["layer"]) == list(want["layer"])
