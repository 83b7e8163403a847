"""export-chakra: the predictor's DAG as Chakra ET files, read back byte by byte."""

import itertools
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from dgtraces.cli import main
from dgtraces.errors import DgtracesError
from dgtraces.export import load_run_trace
from dgtraces.export.chakra import build_et, read_et, write_et
from dgtraces.predict import Cluster, Policy, predict_trace
from tests.paths import REPO

pb = pytest.importorskip("dgtraces.export.chakra.et_def_pb2",
                         reason="protobuf (extra [sim]) is not installed")

RELEASE = "0.3.0"
REC = "rec-v100-resnet50-b32-fp32-v1.1"
CHAKRA_DIR = REPO / "dgtraces" / "export" / "chakra"


@pytest.fixture
def trace(monkeypatch):
    monkeypatch.delenv("DGTRACES_DATA", raising=False)
    return load_run_trace(REC, RELEASE)


def read_stream(path):
    """Chakra's framing decoded independently: varint32 length, then that many bytes."""
    data, pos, out = Path(path).read_bytes(), 0, []
    while pos < len(data):
        size = shift = 0
        while True:
            byte = data[pos]
            pos += 1
            size |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                break
        out.append(data[pos:pos + size])
        pos += size
    assert pos == len(data)
    return pb.GlobalMetadata.FromString(out[0]), [pb.Node.FromString(m) for m in out[1:]]


def attrs(msg):
    return {a.name: getattr(a, a.WhichOneof("value")) for a in msg.attr}


def test_nodes_durations_sizes_and_dependencies(trace, tmp_path):
    cluster, policy = Cluster(4, 4, "pcie3", "10gbe", "ring"), Policy("wfbp")
    paths = write_et(tmp_path / "r50", build_et(trace, cluster, policy), 4)
    assert [p.name for p in paths] == [f"r50.{r}.et" for r in range(4)]
    assert len({p.read_bytes() for p in paths}) == 1  # every NPU runs the same DAG
    meta, nodes = read_stream(paths[2])
    m = attrs(meta)
    assert m["provenance"] == "modelled" and m["trace_run_id"] == REC and m["workers"] == 4
    _, sched = predict_trace(trace, cluster, policy)
    comp = [n for n in nodes if n.type == pb.COMP_NODE]
    comm = [n for n in nodes if n.type == pb.COMM_COLL_NODE]
    # io and h2d are untimed in this trace: forward + backward per layer, then the update
    assert len(comp) == 2 * 228 + 1 and len(comm) == len(sched.messages) > 1
    assert [n.id for n in nodes] == list(range(len(nodes)))
    by_name = {n.name: n for n in comp}
    for layer, f, b in zip(trace.layers, trace.fwd_ms, trace.bwd_ms, strict=True):
        assert by_name[f"fwd/{layer}"].duration_micros == round(f * 1000)
        assert by_name[f"bwd/{layer}"].duration_micros == round(b * 1000)
    assert by_name["update"].duration_micros == round(trace.update_ms * 1000)
    assert sum(attrs(n)["comm_size"] for n in comm) == sum(trace.grad_bytes)
    assert all(attrs(n)["comm_type"] == pb.ALL_REDUCE for n in comm)
    # dependencies: topological, the DAG's edges
    ids = {n.name: n.id for n in nodes}
    assert all(d < n.id for n in nodes for d in n.data_deps)
    first, last = trace.layers[0], trace.layers[-1]
    assert list(by_name[f"fwd/{first}"].data_deps) == []
    assert list(by_name[f"fwd/{trace.layers[1]}"].data_deps) == [ids[f"fwd/{first}"]]
    assert list(by_name[f"bwd/{last}"].data_deps) == [ids[f"fwd/{last}"]]
    for k, (msg, node) in enumerate(zip(sched.messages, comm, strict=True)):
        want = {ids[f"bwd/{msg.layers[-1]}"]} | ({comm[k - 1].id} if k else set())
        assert set(node.data_deps) == want
    assert set(by_name["update"].data_deps) == {ids[f"bwd/{first}"], comm[-1].id}


def test_timed_io_becomes_a_cpu_node_and_naive_waits_for_the_whole_backward(trace):
    timed = replace(trace, io_ms=5.0, h2d_ms=1.0)
    graph = build_et(timed, Cluster(2), Policy("naive"))
    io, h2d = graph.nodes[0], graph.nodes[1]
    assert (io.name, h2d.name) == ("io", "h2d") and attrs(io)["is_cpu_op"] is True
    assert io.duration_micros == 5000 and list(h2d.data_deps) == [io.id]
    comm = [n for n in graph.nodes if n.type == pb.COMM_COLL_NODE]
    last_bwd = next(n.id for n in graph.nodes if n.name == f"bwd/{trace.layers[0]}")
    assert list(comm[0].data_deps) == [last_bwd]  # naive: no overlap with the backward
    assert all(set(b.data_deps) == {last_bwd, a.id} for a, b in itertools.pairwise(comm))
    assert sum(attrs(n)["comm_size"] for n in comm) == sum(trace.grad_bytes)


def test_reader_refuses_truncated_files_and_bad_worker_counts(trace, tmp_path):
    path = write_et(tmp_path / "x", build_et(trace, Cluster(2), Policy("wfbp")), 1)[0]
    meta, nodes = read_et(path)
    assert (meta, nodes) == read_stream(path)  # the library's reader agrees with ours
    path.write_bytes(path.read_bytes()[:-3])
    with pytest.raises(DgtracesError) as exc:
        read_et(path)
    assert exc.value.code == "BAD_FILE"
    with pytest.raises(DgtracesError) as exc:
        write_et(tmp_path / "y", build_et(trace, Cluster(2), Policy("wfbp")), 0)
    assert exc.value.code == "BAD_INPUT"


def test_missing_protobuf_is_a_typed_error(trace, monkeypatch):
    monkeypatch.setitem(sys.modules, "google.protobuf", None)
    with pytest.raises(DgtracesError) as exc:
        build_et(trace, Cluster(2), Policy("wfbp"))
    assert exc.value.code == "MISSING_DEPENDENCY"


def test_cli_writes_one_file_per_worker(monkeypatch, tmp_path):
    monkeypatch.delenv("DGTRACES_DATA", raising=False)
    res = CliRunner().invoke(main, ["export-chakra", "--run-id", REC, "--release", RELEASE,
                                    "--workers", "3", "--policy", "bucketed",
                                    "--out", str(tmp_path / "et" / "r50")])
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in (tmp_path / "et").iterdir()) == [
        "r50.0.et", "r50.1.et", "r50.2.et"]
    meta, _ = read_et(tmp_path / "et" / "r50.0.et")
    attrs = {a.name: a.string_val for a in meta.attr}
    assert attrs["algorithm"] == "auto"  # predict's default for a GPU run (issue #25)
    ring = CliRunner().invoke(main, ["export-chakra", "--run-id", REC, "--release", RELEASE,
                                     "--workers", "3", "--algorithm", "ring",
                                     "--out", str(tmp_path / "ring" / "r50")])
    assert ring.exit_code == 0, ring.output
    meta, _ = read_et(tmp_path / "ring" / "r50.0.et")
    assert {a.name: a.string_val for a in meta.attr}["algorithm"] == "ring"
    bad = CliRunner().invoke(main, ["export-chakra", "--run-id", REC, "--release", RELEASE,
                                    "--workers", "0", "--out", str(tmp_path / "z")])
    assert bad.exit_code != 0 and bad.exception.code == "BAD_INPUT"


def test_vendored_module_is_generated_from_the_shipped_proto(tmp_path):
    pytest.importorskip("grpc_tools", reason="grpcio-tools regenerates et_def_pb2.py")
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{CHAKRA_DIR}",
                    f"--python_out={tmp_path}", "et_def.proto"], check=True)
    fresh = (tmp_path / "et_def_pb2.py").read_text()
    shipped = (CHAKRA_DIR / "et_def_pb2.py").read_text()
    assert fresh.split("AddSerializedFile(")[1].split(")")[0] == \
        shipped.split("AddSerializedFile(")[1].split(")")[0]


def _attr(node, name):
    """An attribute as ASTRA-sim 2.x's feeder looks it up (by name; missing: it aborts)."""
    hits = [a for a in node.attr if a.name == name]
    if not hits:
        raise KeyError(f"Attribute {name} not found in node {node.id}")
    return hits[0]


def _roofline_ns(node, peak_flop_s, mem_bytes_s):
    """ASTRA-sim 2.x's ``Workload::issue_comp`` with ``roofline-enabled: 1``: intensity =
    num_ops / tensor_size, perf = min(peak, bandwidth x intensity), time = num_ops / perf."""
    ops = _attr(node, "num_ops").int64_val
    size = _attr(node, "tensor_size").uint64_val
    perf = min(peak_flop_s, mem_bytes_s * ops / size)
    return ops / perf * 1e9


def test_compute_nodes_carry_num_ops_and_tensor_size(trace, tmp_path):
    """#28 point 12: with ASTRA-sim's roofline on, every COMP_NODE needs num_ops (FLOPs) and
    tensor_size (bytes); they come from the layers table for the worker's batch."""
    from dgtraces.models import layers_frame

    graph = build_et(trace, Cluster(4, 4, "pcie3", "10gbe", "ring"), Policy("wfbp"))
    _, nodes = read_et(write_et(tmp_path / "et", graph, 4)[0])
    comp = {n.name: n for n in nodes if n.type == pb.COMP_NODE}
    for n in comp.values():
        assert _attr(n, "num_ops").WhichOneof("value") == "int64_val"
        assert _attr(n, "tensor_size").WhichOneof("value") == "uint64_val"
        assert _attr(n, "num_ops").int64_val >= 1 and _attr(n, "tensor_size").uint64_val >= 1
    rows = layers_frame("resnet50").set_index("layer")
    b = trace.batch_size
    conv1, r2a = rows.loc["conv1"], rows.loc["res2a_branch1"]
    assert _attr(comp["fwd/conv1"], "num_ops").int64_val == b * conv1["fwd_flops"]
    assert _attr(comp["fwd/conv1"], "tensor_size").uint64_val == (
        b * (conv1["in_bytes"] + conv1["act_bytes"]) + conv1["grad_bytes"])
    assert _attr(comp["bwd/res2a_branch1"], "num_ops").int64_val == b * r2a["bwd_flops"]
    assert _attr(comp["bwd/res2a_branch1"], "tensor_size").uint64_val == (
        b * (r2a["act_bytes"] + 2 * r2a["in_bytes"]) + 2 * r2a["grad_bytes"])
    grad = int(rows["grad_bytes"].sum())
    assert _attr(comp["update"], "num_ops").int64_val == 2 * grad // 4
    assert _attr(comp["update"], "tensor_size").uint64_val == 3 * grad
    # a V100-like roofline (15.7 TFLOP/s, 900 GB/s) times every node, finite and positive;
    # the forward pass takes the sum of max(compute, memory) time of its layers
    peak, bw = 15.7e12, 900e9
    times = {name: _roofline_ns(n, peak, bw) for name, n in comp.items()}
    assert all(0 < t < 1e9 for t in times.values())
    want = sum(max(b * r["fwd_flops"] / peak, (b * (r["in_bytes"] + r["act_bytes"])
                                               + r["grad_bytes"]) / bw)
               for _, r in rows.iterrows()) * 1e9
    assert sum(t for name, t in times.items() if name.startswith("fwd/")) == pytest.approx(want)


def test_the_schema_is_cited_at_the_last_main_commit_everywhere():
    """#36 item 11: 6dc63e14 is a pull request's merge preview on no branch; the schema is
    cited at a1120dd, the last commit on Chakra's main to touch et_def.proto, in the code,
    the vendored proto, the docs and the tests (the CHANGELOG keeps its history)."""
    from dgtraces.export.chakra import SCHEMA_COMMIT
    from tests.paths import REPO

    assert SCHEMA_COMMIT.startswith("a1120dd") and len(SCHEMA_COMMIT) == 40
    stale = ("6dc63e147b9d115286626cc122459e44d9d08401", "f5124d76bb7c3ba2ad67cb8386ad0f450a88e88e")
    files = [*(REPO / "dgtraces").rglob("*.p*"), *(REPO / "docs").rglob("*.md"),
             REPO / "README.md"]
    cited = [f for f in files if any(c in f.read_text(errors="replace") for c in stale)]
    assert cited == []
    assert SCHEMA_COMMIT in (REPO / "docs" / "simulators.md").read_text()


def test_metadata_names_the_chakra_commit_the_schema_was_checked_against(trace, tmp_path):
    import re

    from dgtraces.export.chakra import SCHEMA_COMMIT

    header = (CHAKRA_DIR / "et_def.proto").read_text()
    cited = re.findall(r"commit ([0-9a-f]{40})", header)
    assert cited == [SCHEMA_COMMIT]
    graph = build_et(trace, Cluster(2), Policy("wfbp"))
    meta, _ = read_et(write_et(tmp_path / "et", graph, 2)[0])
    attrs = {a.name: a.string_val for a in meta.attr}
    assert attrs["chakra_schema_commit"] == SCHEMA_COMMIT


def track_local_mem(nodes):
    """ASTRA-sim 2.x's local memory tracker (``track-local-mem: 1``) as its code reads every
    node when it ends (astra-sim ``astra-sim/workload/LocalMemUsageTracker.cc``, master
    4b6e0279 and 518bd513): ``recordReads`` and ``recordWrites`` look the ``inputs`` and
    ``outputs`` attributes up by name (missing: ``runtime_error("Attribute 'inputs' not found
    in node N")``, the run stops), take a string list of tensor name, size, name, size...
    (an odd count throws; a size must parse with ``stoull``), and a tensor written twice hits
    ``assert(false)``. Returns tensor -> size in bytes."""
    sizes, written = {}, set()
    for node in nodes:
        for field in ("inputs", "outputs"):
            hits = [a for a in node.attr if a.name == field]
            if not hits:
                raise RuntimeError(f"Attribute '{field}' not found in node {node.id}")
            if hits[0].WhichOneof("value") != "string_list":
                continue  # the tracker skips an attribute that is no string list
            values = list(hits[0].string_list.values)
            if len(values) % 2:
                raise RuntimeError("IO infos list size is not even.")
            for name, size in zip(values[::2], values[1::2], strict=True):
                assert size.isdigit(), (node.name, name, size)
                if field == "outputs" and int(size):
                    assert name not in written, f"{name} written twice"
                    written.add(name)
                sizes.setdefault(name, int(size))
    return sizes


@pytest.mark.parametrize("policy", ["wfbp", "bucketed", "naive"])
def test_every_node_names_its_tensors_for_the_memory_tracker(trace, tmp_path, policy):
    """#36 item 10: with ASTRA-sim's own example configuration (hgx_h100_8gpu.json,
    track-local-mem: 1) every NPU stopped at "Attribute 'inputs' not found in node 0"."""
    from dgtraces.export.work import task_tensors, task_work

    timed = replace(trace, io_ms=5.0, h2d_ms=1.0)
    graph = build_et(timed, Cluster(4, 4), Policy(policy))
    _, nodes = read_et(write_et(tmp_path / "et", graph, 4)[0])
    sizes = track_local_mem(nodes)
    grads = {n: b for n, b in zip(trace.layers, trace.grad_bytes, strict=True)}
    assert sizes["act/fc1000"] == 32 * 1000 * 4 and sizes["grad/fc1000"] == grads["fc1000"]
    reduced = [n for n in sizes if n.startswith("reduced/")]
    assert sum(sizes[n] for n in reduced) == sum(trace.grad_bytes)
    # Chakra's own IOInfo carries the same tensors
    first = nodes[[n.name for n in nodes].index("fwd/conv1")]
    assert first.inputs.values == '["input/batch", "weight/conv1"]'
    assert first.outputs.types == '["Tensor(float)"]'
    # the tensors decompose the roofline's tensor_size of the layer tasks and the update
    work, tensors = task_work(trace), task_tensors(trace, graph_messages(trace, policy))
    for tid in ("fwd/conv1", "bwd/res5c_branch2c", "update"):
        t = tensors[tid]
        assert sum(b for _, b in t.inputs + t.outputs) == work[tid].tensor_size, tid


def graph_messages(trace, policy):
    return predict_trace(trace, Cluster(4, 4), Policy(policy))[1].messages


def test_the_tracker_replay_stops_where_astra_sim_stopped(trace, tmp_path):
    graph = build_et(trace, Cluster(2), Policy("wfbp"))
    _, nodes = read_et(write_et(tmp_path / "et", graph, 2)[0])
    for node in nodes:
        kept = [a for a in node.attr if a.name not in ("inputs", "outputs")]
        del node.attr[:]
        node.attr.extend(kept)
    with pytest.raises(RuntimeError, match="Attribute 'inputs' not found in node 0"):
        track_local_mem(nodes)


@pytest.mark.parametrize("extra", [[], ["--h2d-ms", "0"], ["--io-ms", "5", "--io-overlap"],
                                   ["--h2d-link", "pcie4", "--policy", "bucketed"]])
def test_export_chakra_and_predict_agree_for_the_same_options(monkeypatch, tmp_path, extra):
    """#36 item 12: export-chakra left out predict's modelled input copy (91.33 vs 92.56 ms);
    its DAG is now predict's for the same options: the same iteration time, and a node per
    timed input phase (the read a CPU node, the copy a GPU one: ASTRA-sim 2.x's statistics
    take GPU and COMM nodes only)."""
    import json

    monkeypatch.delenv("DGTRACES_DATA", raising=False)
    common = ["--run-id", REC, "--release", RELEASE, "--workers", "4", "--gpus-per-node", "4",
              *extra]
    res = CliRunner().invoke(main, ["predict", *common, "--json"])
    assert res.exit_code == 0, res.output
    predicted = json.loads(res.output)
    res = CliRunner().invoke(main, ["export-chakra", *common, "--out", str(tmp_path / "et")])
    assert res.exit_code == 0, res.output
    meta, nodes = read_et(tmp_path / "et.0.et")
    b = predicted["breakdown"]  # predict adds the overhead terms (#35) after the DAG; the
    # export's metadata records them beside the DAG's iteration
    assert attrs(meta)["iter_ms"] == pytest.approx(
        predicted["iter_ms"] - b["sync_ms"] - b["input_ms"], abs=1e-9)
    assert attrs(meta)["sync_ms"] == pytest.approx(b["sync_ms"], abs=1e-9)
    phases = {n.name: n for n in nodes if n.name in ("io", "h2d")}
    for name in ("io", "h2d"):
        ms = predicted["breakdown"][name]
        assert (name in phases) == (ms > 0), name
        if ms > 0:
            assert phases[name].duration_micros == round(ms * 1000)
            assert attrs(phases[name])["is_cpu_op"] is (name == "io")


def test_the_printed_iteration_is_labelled_before_overheads_and_gives_predicts_total(tmp_path):
    """Acceptance review #25: export-chakra printed 'modelled iteration 336.378 ms' where
    predict printed 344.079 ms with the same options (the sync term); the DAG time is
    labelled as such and the total with the overheads matches predict's."""
    import json
    import re

    from click.testing import CliRunner

    from dgtraces.cli import main

    args = ["--run-id", REC, "--release", RELEASE, "--workers", "8", "--gpus-per-node", "4",
            "--intra", "pcie3", "--inter", "10gbe"]
    out = CliRunner().invoke(main, ["export-chakra", *args, "--out", str(tmp_path / "x")])
    assert out.exit_code == 0, out.output
    pred = json.loads(CliRunner().invoke(main, ["predict", *args, "--json"]).output)
    dag, total = (float(x) for x in re.search(
        r"DAG iteration \(before overheads\) ([\d.]+) ms; .*? ([\d.]+) ms, as predict",
        out.output).groups())
    assert total == pytest.approx(pred["iter_ms"], abs=5e-4)
    assert dag == pytest.approx(pred["iter_ms"] - pred["breakdown"]["sync_ms"], abs=5e-4)
