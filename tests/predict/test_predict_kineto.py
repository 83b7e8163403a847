"""predict --kineto-dir: predicted timelines that Holistic Trace Analysis reads as a run."""

import json
import shutil
from itertools import pairwise

import pytest
from click.testing import CliRunner

from dgtraces.cli import main
from dgtraces.errors import DgtracesError
from dgtraces.export import load_run_trace
from dgtraces.predict import Cluster, Policy, predict_trace
from dgtraces.predict.kineto import COMM_STREAM, COMPUTE_STREAM, STEPS, write_kineto_dir
from tests.paths import SHARED_REFERENCE

# HTA 0.5 calls pandas APIs that pandas 3.1 deprecates; its warnings are not ours
pytestmark = pytest.mark.filterwarnings("ignore::Warning:hta.*")

RELEASE = "0.3.0"
REC = "rec-v100-resnet50-b32-fp32-v1.1"
MEASURED_KINETO = (SHARED_REFERENCE
                   / "gpu" / "kineto" / "resnet50_v100_b32_num_workers_0.pt.trace.json.gz")


@pytest.fixture
def predicted(monkeypatch):
    monkeypatch.delenv("DGTRACES_DATA", raising=False)
    trace = load_run_trace(REC, RELEASE)
    return predict_trace(trace, Cluster(4, 4, "pcie3", "10gbe", "ring"), Policy("wfbp"))


def _us(ms):
    return round(ms * 1000)


def _hta(folder):
    hta = pytest.importorskip("hta.trace_analysis",
                              reason="HolisticTraceAnalysis (extra [sim]) is not installed")
    return hta.TraceAnalysis(trace_dir=str(folder))


def test_files_carry_the_kineto_fields_hta_needs(predicted, tmp_path):
    pred, sched = predicted
    paths = write_kineto_dir(tmp_path / "k", sched, pred)
    assert [p.name for p in paths] == [f"rank{r}.modelled.pt.trace.json" for r in range(4)]
    doc = json.loads(paths[3].read_text())
    assert list(doc)[:2] == ["schemaVersion", "distributedInfo"]
    assert doc["distributedInfo"]["rank"] == 3 and doc["distributedInfo"]["world_size"] == 4
    assert doc["dgtraces"]["provenance"] == "modelled" and doc["deviceProperties"]
    events = doc["traceEvents"]
    steps = [e for e in events if e["name"].startswith("ProfilerStep#")]
    assert [e["ts"] for e in steps] == [k * _us(sched.iter_ms) for k in range(STEPS)]
    gpu = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy")]
    launches = {e["args"]["correlation"] for e in events if e.get("cat") == "cuda_runtime"}
    assert {e["args"]["correlation"] for e in gpu} == launches and len(launches) == len(gpu)
    comm = [e for e in gpu if e["args"]["stream"] == 13]
    assert len(comm) == STEPS * len(sched.messages)
    assert all(e["name"].startswith("ncclKernel_AllReduce") for e in comm)


def test_hta_temporal_breakdown_and_overlap_match_the_prediction(predicted, tmp_path):
    pred, sched = predicted
    write_kineto_dir(tmp_path / "k", sched, pred)
    analysis = _hta(tmp_path / "k")
    assert analysis.t.get_ranks() == [0, 1, 2, 3]
    tb = analysis.get_temporal_breakdown(visualize=False)
    analysed = STEPS - 1  # HTA leaves out the last profiler step
    compute_us = sum(_us(t.end_ms) - _us(t.start_ms) for t in sched.tasks
                     if t.stream == "compute")
    exposed_us = _us(sched.iter_ms) - compute_us
    assert list(tb["compute_time(us)"]) == [analysed * compute_us] * 4
    assert list(tb["non_compute_time(us)"]) == [analysed * exposed_us] * 4
    assert list(tb["idle_time(us)"]) == [0] * 4
    overlap = analysis.get_comm_comp_overlap(visualize=False)
    b = pred.breakdown
    want = 100 * (1 - b["comm_exposed"] / b["comm_total"])
    assert overlap["comp_comm_overlap_pctg"].tolist() == pytest.approx([want] * 4, abs=0.1)


def test_measured_kineto_trace_runs_the_same_analysis(tmp_path):
    if not MEASURED_KINETO.exists():
        pytest.skip("../shared/reference/gpu/kineto is not present")
    (tmp_path / "m").mkdir()
    shutil.copy(MEASURED_KINETO, tmp_path / "m")
    analysis = _hta(tmp_path / "m")
    tb = analysis.get_temporal_breakdown(visualize=False)
    assert tb["rank"].tolist() == [0] and tb["compute_time(us)"].iloc[0] > 0
    assert tb["kernel_time(us)"].iloc[0] >= tb["compute_time(us)"].iloc[0]


def test_folder_with_other_traces_is_refused_and_own_files_are_replaced(predicted, tmp_path):
    pred, sched = predicted
    folder = tmp_path / "k"
    write_kineto_dir(folder, sched, pred)
    two, sched2 = predict_trace(load_run_trace(REC, RELEASE), Cluster(2), Policy("wfbp"))
    assert len(write_kineto_dir(folder, sched2, two)) == 2
    assert sorted(p.name for p in folder.iterdir()) == [
        "rank0.modelled.pt.trace.json", "rank1.modelled.pt.trace.json"]
    (folder / "worker0.pt.trace.json").write_text("{}")
    with pytest.raises(DgtracesError) as exc:
        write_kineto_dir(folder, sched, pred)
    assert exc.value.code == "BAD_INPUT"


def test_predict_cli_writes_the_folder(monkeypatch, tmp_path):
    monkeypatch.delenv("DGTRACES_DATA", raising=False)
    res = CliRunner().invoke(main, ["predict", "--run-id", REC, "--release", RELEASE,
                                    "--workers", "2", "--kineto-dir", str(tmp_path / "k")])
    assert res.exit_code == 0, res.output
    assert len(list((tmp_path / "k").glob("*.json"))) == 2 and "kineto" in res.output


@pytest.mark.parametrize("io_ms", [0.0, 5.0])
def test_launches_are_stamped_when_the_host_can_issue_them(monkeypatch, tmp_path, io_ms):
    """#28 point 13: a kernel's host launch is stamped when the host can issue it (the start
    of the host's step, which runs ahead of the GPU by the longest time a stream sits drained
    at an iteration's end, or the end of the input read it waits for), not at the kernel's
    start. HTA's idle-time analysis (host wait: the launch came after the previous kernel on
    the stream ended) then files waits on another stream under ``other`` and keeps
    ``host_wait`` for work the host's read held back."""
    from dataclasses import replace

    from dgtraces.predict.kineto import host_lead_us

    monkeypatch.delenv("DGTRACES_DATA", raising=False)
    trace = replace(load_run_trace(REC, RELEASE), io_ms=io_ms, h2d_ms=1.0 if io_ms else 0.0)
    pred, sched = predict_trace(trace, Cluster(4, 4, "pcie3", "10gbe", "ring"),
                                Policy("wfbp"))
    doc = json.loads(write_kineto_dir(tmp_path / "k", sched, pred)[0].read_text())
    events = doc["traceEvents"]
    launch = {e["args"]["correlation"]: e["ts"] for e in events if e.get("cat") == "cuda_runtime"}
    gpu = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy")]
    assert all(launch[e["args"]["correlation"]] <= e["ts"] for e in gpu)
    iter_us, lead = _us(sched.iter_ms), host_lead_us(sched)
    task = {t.id: t for t in sched.tasks}
    msgs = [task[m.task_id] for m in sched.messages]
    assert lead == iter_us - _us(msgs[-1].end_ms) == doc["dgtraces"]["host_lead_us"]
    first = {e["args"]["dgtraces_task"]: launch[e["args"]["correlation"]] for e in gpu[:50]}
    assert first["fwd/conv1"] == (lead + _us(io_ms) if io_ms else 0)  # behind the read
    # HTA's classification, stream by stream, over the analysed steps
    analysis, analysed = _hta(tmp_path / "k"), STEPS - 1
    temporal = analysis.get_temporal_breakdown(visualize=False)["idle_time(us)"].tolist()
    assert temporal == [(analysed - 1) * _us(io_ms)] * 4  # the GPU idles during the read
    idle, _ = analysis.get_idle_time_breakdown(ranks=[0], visualize=False)
    got = {(int(r.stream), r.idle_category): r.idle_time for r in idle.itertuples()}
    # compute stream: the update waits for the last message (another stream); with a read
    # modelled, the next step's copy waits for it on the host
    exposed = _us(task["update"].start_ms) - _us(task[f"bwd/{trace.layers[0]}"].end_ms)
    assert exposed > 30 and got[(COMPUTE_STREAM, "other")] == analysed * exposed
    assert got.get((COMPUTE_STREAM, "host_wait"), 0) == (analysed - 1) * _us(io_ms)
    # communication stream: within a step each message waits for its gradient: other (or
    # kernel_wait under HTA's 30-unit threshold); across the iteration boundary the first
    # message waits for the next backward (other), or, behind a read, for the host
    gaps = [_us(b.start_ms) - _us(a.end_ms) for a, b in pairwise(msgs)]
    boundary = iter_us + _us(msgs[0].start_ms) - _us(msgs[-1].end_ms)
    assert got[(COMM_STREAM, "kernel_wait")] == analysed * sum(g for g in gaps if g < 30)
    within = analysed * sum(g for g in gaps if g >= 30)
    if io_ms:
        assert got[(COMM_STREAM, "other")] == within
        assert got[(COMM_STREAM, "host_wait")] == (analysed - 1) * boundary
    else:
        assert got[(COMM_STREAM, "other")] == within + (analysed - 1) * boundary
        assert not any(cat == "host_wait" for _, cat in got)
