"""export-astra-sim: the ASTRA-sim 1.0 text workload, parsed back as ASTRA-sim documents it."""

import json

import pytest
from click.testing import CliRunner

from dgtraces.cli import main
from dgtraces.errors import DgtracesError
from dgtraces.export import load_run_trace, split_backward
from dgtraces.export.astra import astra_workload, meta_path, write_astra
from dgtraces.models import layers_frame

RELEASE = "0.3.0"
REC = "rec-v100-resnet50-b32-fp32-v1.1"
MEASURED = "pytorch-alexnet-b4-t1-20261202T144242Z-7c77"
COMM = ("NONE", "ALLREDUCE", "ALLGATHER", "ALLTOALL", "REDUCESCATTER")


def parse_workload(text):
    """The documented format (astra-sim inputs/workload/ASTRA-sim-1.0/README.md; read with
    ``>>`` token by token in Workload::initialize_workload): parallelism, layer count, then
    per layer name, reserved int, then (compute cycles, comm type, comm bytes) for forward,
    input gradient and weight gradient, then the update delay."""
    tokens = text.split()
    parallelism, count, rest = tokens[0], int(tokens[1]), tokens[2:]
    assert len(rest) == 12 * count, "12 tokens per layer"
    layers = []
    for i in range(count):
        t = rest[12 * i:12 * i + 12]
        row = {"name": t[0], "reserved": int(t[1])}
        for k, phase in enumerate(("fwd", "ig", "wg")):
            row[f"{phase}_cycles"] = int(t[2 + 3 * k])
            row[f"{phase}_comm"] = t[3 + 3 * k]
            row[f"{phase}_bytes"] = int(t[4 + 3 * k])
            assert row[f"{phase}_comm"] in COMM
        row["update_cycles"] = int(t[11])
        layers.append(row)
    return parallelism, layers


@pytest.fixture
def shipped(monkeypatch):
    monkeypatch.delenv("DGTRACES_DATA", raising=False)


def test_reconstructed_run_round_trips_counts_units_and_sums(shipped, tmp_path):
    trace = load_run_trace(REC, RELEASE)
    out, side = write_astra(tmp_path / "r50.txt", astra_workload(trace, workers=8))
    parallelism, rows = parse_workload(out.read_text())
    assert parallelism == "DATA" and len(rows) == len(trace.layers) == 228
    assert [r["name"] for r in rows] == list(trace.layers)
    assert all(r["reserved"] == -1 and r["fwd_comm"] == r["ig_comm"] == "NONE" for r in rows)
    # 1 GHz: 1e6 cycles per ms; each value rounded to a whole cycle
    n = len(rows)
    assert abs(sum(r["fwd_cycles"] for r in rows) - sum(trace.fwd_ms) * 1e6) <= n
    for r, b in zip(rows, trace.bwd_ms, strict=True):
        assert abs(r["ig_cycles"] + r["wg_cycles"] - b * 1e6) <= 1
    assert abs(sum(r["update_cycles"] for r in rows) - trace.update_ms * 1e6) <= n
    # gradient bytes: the layers table's, all-reduced exactly where there is a gradient
    grads = layers_frame("resnet50").set_index("layer")["grad_bytes"]
    assert sum(r["wg_bytes"] for r in rows) == int(grads.sum()) == 102228128
    assert all((r["wg_comm"] == "ALLREDUCE") == (grads[r["name"]] > 0) for r in rows)
    meta = json.loads(side.read_text())
    assert side == meta_path(out) and meta["trace_run_id"] == REC
    assert meta["trace_provenance"] == "reconstructed" and meta["workers"] == 8
    assert "fwd_flops" in meta["backward_split"] and meta["clock_ghz"] == 1.0
    assert len(meta["layer_rows"]) == 228


def test_backward_split_follows_the_flops(shipped):
    trace = load_run_trace(MEASURED, RELEASE)
    split = split_backward(trace)
    flops = layers_frame("alexnet").set_index("layer")
    i = {name: k for k, name in enumerate(trace.layers)}
    # conv1 reads the data: no input gradient, the whole backward is weight gradient
    assert split.ig_ms[i["conv1"]] == 0 and split.wg_ms[i["conv1"]] == trace.bwd_ms[i["conv1"]]
    fc6 = i["fc6"]
    share = flops.loc["fc6", "fwd_flops"] / flops.loc["fc6", "bwd_flops"]
    assert split.wg_ms[fc6] == pytest.approx(trace.bwd_ms[fc6] * share)
    assert 0.49 < share < 0.51  # fc: weight and input gradients have the same MACs
    # layers without parameters only propagate the input gradient
    assert split.wg_ms[i["relu1"]] == 0 and split.ig_ms[i["relu1"]] == trace.bwd_ms[i["relu1"]]


def test_clock_scales_cycles_and_measured_runs_export(shipped):
    trace = load_run_trace(MEASURED, RELEASE)
    one = astra_workload(trace).layers
    two = astra_workload(trace, clock_ghz=2.0).layers
    assert all(abs(b.fwd_cycles - 2 * a.fwd_cycles) <= 1 for a, b in zip(one, two, strict=True))
    assert astra_workload(trace).meta["trace_provenance"] == "measured"


@pytest.mark.parametrize("kw", [{"workers": 0}, {"workers": 5000}, {"workers": True},
                                {"parallelism": "MODEL"}, {"clock_ghz": 0.0}])
def test_bad_options_are_typed(shipped, kw):
    trace = load_run_trace(MEASURED, RELEASE)
    with pytest.raises(DgtracesError) as exc:
        astra_workload(trace, **kw)
    assert exc.value.code == "BAD_INPUT"


def test_unknown_run_and_run_without_layer_timings(no_timings_store):
    with pytest.raises(DgtracesError) as exc:
        load_run_trace("no-such-run", "0.9.0")
    assert exc.value.code == "NOT_FOUND" and exc.value.failures[0].column == "run_id"
    with pytest.raises(DgtracesError) as exc:
        load_run_trace("whole-only", "0.9.0")
    assert exc.value.code == "NO_LAYER_TIMINGS"


def test_cli_writes_workload_and_sidecar(shipped, tmp_path):
    out = tmp_path / "alexnet.txt"
    res = CliRunner().invoke(main, ["export-astra-sim", "--run-id", MEASURED, "--release",
                                    RELEASE, "--workers", "4", "--out", str(out)])
    assert res.exit_code == 0, res.output
    parallelism, rows = parse_workload(out.read_text())
    assert parallelism == "DATA" and len(rows) == 23
    assert json.loads(meta_path(out).read_text())["workers"] == 4
    assert "backward split" in res.output
    res = CliRunner().invoke(main, ["export-astra-sim", "--run-id", MEASURED, "--release",
                                    RELEASE, "--update-placement", "by-grad-bytes", "--out",
                                    str(out)])
    assert res.exit_code == 0, res.output
    assert json.loads(meta_path(out).read_text())["update_placement"] == "by-grad-bytes"


class EventAtCurrentTime(AssertionError):
    """ASTRA-sim 1.0's abort: ``assert(compare_time_stamp(current_time, time_stamp) < 0)`` in
    ``Analytical::EventQueue::add_event`` (src/event-queue/EventQueue.cc:20 of
    astra-network-analytical at d27635bc, the ASTRA-sim-1.0 branch's backend)."""


def schedule(now: int, delay: int) -> int:
    """An event registered ``delay`` cycles from ``now`` (``Sys::register_event`` ->
    ``sim_schedule``): the analytical event queue takes only events strictly later."""
    if delay <= 0:
        raise EventAtCurrentTime(f"event at the current time {now} (delay {delay})")
    return now + delay


def replay_data_parallel(rows, comm_cycles):
    """One pass of ASTRA-sim 1.0's DATA training loop as its code runs it (branch
    ASTRA-sim-1.0: ``Workload::iterate_data_parallel``, ``Layer::call``), times in cycles:
    every forward, then from the last layer to the first the weight-gradient compute, its
    collective issued (one FIFO channel here, ``comm_cycles[name]`` each), then the
    input-gradient compute (none for layer 0). A layer's update delay is registered as an
    event when its own collective ends (``Layer::call`` on ``Wight_Grad_Comm_Finished``,
    whatever the delay; no collective: no event), and a delay of 0 aborts as ASTRA-sim does
    (:func:`schedule`). The pass ends when all of it is done."""
    t = sum(r["fwd_cycles"] for r in rows)
    channel, ends = 0, []
    for i in reversed(range(len(rows))):
        r = rows[i]
        t += r["wg_cycles"]
        if r["wg_comm"] == "ALLREDUCE":
            channel = max(t, channel) + comm_cycles[r["name"]]
            ends.append(schedule(channel, r["update_cycles"]))
        if i > 0:
            t += r["ig_cycles"]
    return max([t, *ends])


@pytest.fixture
def wfbp_prediction(shipped):
    from dgtraces.predict import Cluster, Policy, predict_trace

    trace = load_run_trace(REC, RELEASE)
    pred, sched = predict_trace(trace, Cluster(4, 4, "pcie3", "10gbe", "ring"), Policy("wfbp"))
    ends = {t.id: t.end_ms - t.start_ms for t in sched.tasks}
    comm = {m.layers[0]: round(ends[m.task_id] * 1e6) for m in sched.messages}
    return trace, pred, comm


def test_update_follows_the_last_collective_as_in_predict(wfbp_prediction, tmp_path):
    """#28 point 11: ASTRA-sim 1.0 starts a layer's update after that layer's collective, so
    the update goes on the first layer with a gradient (its collective is issued last); the
    replayed iteration then matches ``predict`` instead of hiding the update under backward."""
    trace, pred, comm = wfbp_prediction
    out, side = write_astra(tmp_path / "r50.txt", astra_workload(trace, workers=4))
    _, rows = parse_workload(out.read_text())
    assert rows[0]["name"] == "conv1" and rows[0]["wg_comm"] == "ALLREDUCE"
    assert rows[0]["update_cycles"] == round(trace.update_ms * 1e6)
    assert all(r["update_cycles"] == 1 for r in rows[1:])  # never 0 (#36 item 9)
    iter_ms = replay_data_parallel(rows, comm) / 1e6
    assert iter_ms == pytest.approx(pred.iter_ms, abs=0.01)
    meta = json.loads(side.read_text())
    assert meta["update_placement"] == "first-layer"
    # the other placement, by gradient bytes, hides most of the update under backward
    shared = astra_workload(trace, workers=4, update="by-grad-bytes").layers
    rows2 = [dict(r, name=x.name, update_cycles=x.update_cycles)
             for r, x in zip(rows, shared, strict=True)]
    assert sum(r["update_cycles"] for r in rows2) == pytest.approx(trace.update_ms * 1e6,
                                                                   abs=len(rows))
    short = replay_data_parallel(rows2, comm) / 1e6
    assert pred.iter_ms - short > 0.9 * trace.update_ms


@pytest.mark.parametrize("update", ["first-layer", "by-grad-bytes"])
def test_no_update_delay_is_an_event_at_the_current_time(wfbp_prediction, tmp_path, update):
    """#36 item 9: the default export wrote update 0 after 106 of 107 all-reduces, and
    ASTRA-sim 1.0 aborted at the first (EventQueue.cc:20). Every update is >= 1 cycle, and
    the replay, which aborts as ASTRA-sim does, runs the pass to its end."""
    trace, pred, comm = wfbp_prediction
    out, side = write_astra(tmp_path / "r50.txt", astra_workload(trace, workers=4,
                                                                 update=update))
    _, rows = parse_workload(out.read_text())
    assert sum(r["wg_comm"] == "ALLREDUCE" for r in rows) == 107
    assert min(r["update_cycles"] for r in rows) == 1
    assert replay_data_parallel(rows, comm) / 1e6 <= pred.iter_ms + 0.01
    assert json.loads(side.read_text())["update_min_cycles"] == 1
    zero = [dict(r, update_cycles=0) if r["wg_comm"] == "ALLREDUCE" else r for r in rows]
    with pytest.raises(EventAtCurrentTime):  # the replay encodes the abort
        replay_data_parallel(zero, comm)


def test_unknown_update_placement_is_typed(shipped):
    trace = load_run_trace(MEASURED, RELEASE)
    with pytest.raises(DgtracesError) as exc:
        astra_workload(trace, update="last-layer")
    assert exc.value.code == "BAD_INPUT" and exc.value.failures[0].column == "update"


PREDICT_OPTS = ["--release", RELEASE, "--workers", "4"]
CLUSTER_OPTS = ["--gpus-per-node", "4", "--intra", "pcie3", "--inter", "10gbe", "--algorithm",
                "ring"]


def predicted_ms(*extra):
    res = CliRunner().invoke(main, ["predict", "--run-id", REC, *PREDICT_OPTS, *CLUSTER_OPTS,
                                    "--json", *extra])
    assert res.exit_code == 0, res.output
    pred = json.loads(res.output)
    # the DAG's iteration: predict adds the per-iteration overhead terms (#35) after the DAG;
    # the export records them in its sidecar instead (checked beside)
    return pred["iter_ms"] - pred["breakdown"]["sync_ms"] - pred["breakdown"]["input_ms"]


@pytest.mark.parametrize("extra", [[], ["--h2d-ms", "0"], ["--h2d-ms", "3.5", "--io-ms", "2"],
                                   ["--h2d-link", "pcie4"]])
def test_the_export_runs_what_predict_predicts_input_copy_included(shipped, tmp_path, extra):
    """#36 item 12: predict adds a GPU trace's modelled input copy (91.33 ms without, 92.56
    with); the export left it out. It now goes on the first layer's forward compute, and
    ASTRA-sim 1.0's DATA loop (replayed) runs what predict predicts, for the same options."""
    from dgtraces.predict import Cluster, Policy, predict_trace

    out = tmp_path / "r50.txt"
    res = CliRunner().invoke(main, ["export-astra-sim", "--run-id", REC, *PREDICT_OPTS,
                                    "--out", str(out), *extra])
    assert res.exit_code == 0, res.output
    _, rows = parse_workload(out.read_text())
    meta = json.loads(meta_path(out).read_text())
    h2d = dict(zip(extra[::2], extra[1::2], strict=True))
    link = h2d.get("--h2d-link", "pcie3")
    trace = load_run_trace(REC, RELEASE, h2d_link=None if "--h2d-ms" in h2d else link)
    if "--h2d-ms" in h2d:
        from dataclasses import replace

        trace = replace(trace, h2d_ms=float(h2d["--h2d-ms"]),
                        io_ms=float(h2d.get("--io-ms", 0)))
    assert meta["input_phases_ms"] == {"io": trace.io_ms, "h2d": trace.h2d_ms}
    assert rows[0]["fwd_cycles"] == round((trace.fwd_ms[0] + trace.io_ms + trace.h2d_ms) * 1e6)
    pred, sched = predict_trace(trace, Cluster(4, 4, "pcie3", "10gbe", "ring"), Policy("wfbp"))
    ends = {t.id: t.end_ms - t.start_ms for t in sched.tasks}
    comm = {m.layers[0]: round(ends[m.task_id] * 1e6) for m in sched.messages}
    assert pred.iter_ms == pytest.approx(predicted_ms(*extra), abs=1e-9)
    assert replay_data_parallel(rows, comm) / 1e6 == pytest.approx(pred.iter_ms, abs=0.01)

def test_sidecar_holds_nccls_time_per_gradient_when_a_cluster_is_given(shipped, tmp_path):
    # issue #34: --intra/--inter/--nics-per-node/--nccl give the sidecar NCCL's modelled
    # all-reduce of each layer's gradient; the workload file itself does not change
    plain, ref = tmp_path / "plain.txt", tmp_path / "ref.txt"
    base = ["export-astra-sim", "--run-id", MEASURED, "--release", RELEASE, "--workers", "16"]
    assert CliRunner().invoke(main, base + ["--out", str(plain)]).exit_code == 0
    res = CliRunner().invoke(main, base + ["--gpus-per-node", "8", "--intra", "nvlink4",
                                           "--inter", "ib-ndr", "--nics-per-node", "8",
                                           "--nccl", "2.18", "--out", str(ref)])
    assert res.exit_code == 0, res.output
    assert plain.read_text() == ref.read_text()
    meta = json.loads(meta_path(ref).read_text())
    assert "nccl_reference" not in json.loads(meta_path(plain).read_text())
    nr = meta["nccl_reference"]
    assert (nr["nccl"], nr["time"], nr["nics_per_node"]) == ("2.18", "run", 8)
    grads = [r for r in nr["layers"] if r["grad_bytes"]]
    assert grads and all(r["allreduce_us"] > 0 for r in grads)
    assert all(r["allreduce_us"] == 0 for r in nr["layers"] if not r["grad_bytes"])
    assert "nccl_reference: NCCL 2.18 (run)" in res.output


@pytest.mark.parametrize("terms", [[], ["--overheads", "input", "--host-decode-img-s", "300"]])
def test_sidecar_terms_are_predicts_on_the_same_cluster(shipped, tmp_path, terms):
    """The sidecar's overhead terms are those predict adds for the same options: the input
    term's g is --gpus-per-node and its T_dag the DAG on predict's cluster (it was computed on
    Cluster(workers), one GPU per node: input_ms 0 where predict's is 117 ms)."""
    opts = ["--run-id", REC, "--release", RELEASE, "--workers", "8", "--gpus-per-node", "4",
            *terms]
    res = CliRunner().invoke(main, ["predict", *opts, "--json"])
    assert res.exit_code == 0, res.output
    b = json.loads(res.output)["breakdown"]
    out = tmp_path / "r50.txt"
    res = CliRunner().invoke(main, ["export-astra-sim", *opts, "--out", str(out)])
    assert res.exit_code == 0, res.output
    meta = json.loads(meta_path(out).read_text())
    assert meta["sync_ms"] == pytest.approx(b["sync_ms"], abs=1e-9)
    assert meta["input_ms"] == pytest.approx(b["input_ms"], abs=1e-9)
    if terms:
        assert b["input_ms"] > 0
