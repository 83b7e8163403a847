"""Predictor against a synthetic release: store traces, comm_fits, validation, CLI, timelines."""

import json
import shutil
from itertools import pairwise

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from dgtraces.cli import main
from dgtraces.comm.links import known_links, ring_link_from_allreduce
from dgtraces.errors import DgtracesError
from dgtraces.models import layers_frame
from dgtraces.predict import Cluster, Policy, from_run, predict, predict_trace
from dgtraces.store import release as release_mod
from dgtraces.store import shards
from tests.conftest import seed_v010

TS = "2026-12-02T15:00:00Z"
RUN = "cpu-alexnet-b8-t1"


def _run_row(run_id, model="alexnet", device="cpu-test", provenance="measured", batch=8,
             fwd=None, bwd=None, params_json=None):
    return {"run_id": run_id, "model": model, "device": device, "device_kind": "cpu",
            "host": "test cpu", "framework": "torch-2.13.0", "precision": "fp32",
            "batch_size": batch, "threads": 1, "cores": 2, "provenance": provenance,
            "source": "synthetic test run", "collector_version": "test-1",
            "timestamp_utc": TS, "fwd_ms": fwd, "bwd_ms": bwd, "update_ms": 3.0,
            "iter_ms": None, "layer_sum_ratio": None, "flagged": False, "flag_reason": None,
            "params_json": params_json, "notes": None}


def _iter_row(iter_id, policy, iter_ms, workers=2, provenance="measured", phase="train",
              trace=RUN, device="cpu-test", batch=8, bucket=None):
    return {"iter_id": iter_id, "model": "alexnet", "device": device,
            "framework": "torch-2.13.0", "precision": "fp32", "phase": phase,
            "batch_size": batch, "workers": workers, "nodes": 1,
            "interconnect": "loopback-gloo" if workers > 1 else "unknown", "backend": "gloo",
            "policy": policy, "bucket_bytes": bucket, "io_overlap": None,
            "threads_per_worker": 1, "iter_ms": iter_ms, "iter_p10_ms": None,
            "iter_p90_ms": None, "n": 10, "throughput_img_s": None,
            "provenance": provenance, "source": "synthetic test row", "trace_run_id": trace,
            "timestamp_utc": TS, "phases_json": None, "notes": None}


@pytest.fixture(scope="module")
def _release_9(tmp_path_factory):
    """A store holding v0.1.0 and the synthetic v9.0.0, written once per module; each test
    gets its own copy (``release``)."""
    root = seed_v010(tmp_path_factory.mktemp("release9") / "data")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DGTRACES_DATA", str(root))
        return root, _write_release_9()


@pytest.fixture
def release(_release_9, tmp_path, monkeypatch):
    built, info = _release_9
    root = tmp_path / "data"
    shutil.copytree(built, root, symlinks=True)
    monkeypatch.setenv("DGTRACES_DATA", str(root))
    return info


def _write_release_9() -> dict:
    lf = layers_frame("alexnet")
    rng = np.random.default_rng(1)
    timings = pd.DataFrame({"run_id": RUN, "layer": lf["layer"],
                            "fwd_ms": rng.uniform(1, 20, len(lf)),
                            "bwd_ms": rng.uniform(2, 40, len(lf)), "fwd_p10_ms": None,
                            "fwd_p90_ms": None, "bwd_p10_ms": None, "bwd_p90_ms": None,
                            "comm_ms": None, "n": 5})
    fwd, bwd = timings["fwd_ms"].sum() * 0.9, timings["bwd_ms"].sum() * 0.95
    runs = pd.DataFrame([_run_row(RUN, fwd=fwd, bwd=bwd, params_json='{"io_ms": 2.5}')])
    fits = pd.DataFrame([{"collective": "allreduce", "backend": "gloo",
                          "interconnect": "loopback-gloo", "workers": 2, "alpha_us": 1800.0,
                          "beta_us_per_byte": 1 / 1400.0, "bandwidth_gb_s": 1.4, "r2": 0.99,
                          "n_points": 12, "min_bytes": 4, "max_bytes": 64 << 20,
                          "provenance": "measured", "source": "synthetic comm sweep"}])
    iters = pd.DataFrame([
        _iter_row("it-naive", "naive", 900.0), _iter_row("it-wfbp", "wfbp", 700.0),
        _iter_row("it-bucket", "bucketed", 720.0, bucket=25 << 20),
        _iter_row("it-infer", "naive", 50.0, workers=1, phase="inference"),
        _iter_row("it-fd2", "framework-default", 500.0),
        _iter_row("it-pub", "framework-default", 100.0, workers=1, provenance="published",
                  trace=None, device="k80", batch=64),
        _iter_row("it-pub-wfbp", "wfbp", 1000.0, workers=1, provenance="published",
                  trace=None, device="k80", batch=64)])
    shards.extend_release("9.0.0", {"runs": runs, "layer_timings": timings, "comm_fits": fits,
                                   "iterations": iters}, base="0.1.0")
    return {"timings": timings, "fwd": fwd, "bwd": bwd}


def test_trace_from_run_scales_to_whole_model_and_reads_io(release):
    t = from_run(RUN)
    assert sum(t.fwd_ms) == pytest.approx(release["fwd"]) and sum(t.bwd_ms) == pytest.approx(
        release["bwd"])
    assert t.io_ms == 2.5 and t.update_ms == 3.0 and t.provenance == "measured"
    raw = from_run(RUN, whole=False)
    assert sum(raw.fwd_ms) == pytest.approx(release["timings"]["fwd_ms"].sum())
    with pytest.raises(DgtracesError) as exc:
        from_run("no-such-run")
    assert exc.value.code == "NOT_FOUND"


def test_loopback_link_comes_from_the_release_comm_fits(release):
    link = known_links()["loopback-gloo"]
    alpha, bw = ring_link_from_allreduce(1800.0, 1 / 1400.0, 2)
    assert (link.alpha_us, link.bandwidth_gb_s) == pytest.approx((alpha, bw))
    assert alpha == pytest.approx(900.0) and bw == pytest.approx(1.4)
    assert link.provenance == "measured" and "comm_fits" in link.source
    # the 2-worker ring on that link reproduces the fitted allreduce exactly
    cost = Cluster(2, 2, "loopback-gloo", "loopback-gloo").comm_cost()
    assert cost.time_ms(1e6) == pytest.approx((1800.0 + 1e6 / 1400.0) / 1000.0)


def test_validate_predictor_rows_and_mape(release, tmp_path):
    from dgtraces.evaluation.validation import parity_plot, validate

    res = validate()
    rows = res.rows.set_index("iter_id")
    t = from_run(RUN)
    plain = Cluster(2, 2, "loopback-gloo", "loopback-gloo")
    # 2 workers x 1 thread on the run's 2 cores: shared cores, collector's 3 staging copies
    cpu = Cluster(2, 2, "loopback-gloo", "loopback-gloo", staging="cpu-memcpy",
                  staging_passes=3, shared_cpu=True)
    for iid, pol, measured in (("it-naive", "naive", 900.0), ("it-wfbp", "wfbp", 700.0)):
        expect = predict(t, cpu, Policy(pol)).iter_ms
        assert rows.loc[iid, "predicted_ms"] == pytest.approx(expect)
        assert rows.loc[iid, "plain_ms"] == pytest.approx(predict(t, plain, Policy(pol)).iter_ms)
        assert rows.loc[iid, "ape_pct"] == pytest.approx(abs(expect - measured) / measured * 100)
    assert rows.loc["it-naive", "cpu_effects"] == ("staging=cpu-memcpy, staging_passes=3, "
                                                   "shared_cpu=True")
    assert rows.loc["it-infer", "reason"].startswith("[BAD_INPUT]")
    assert rows.loc["it-fd2", "reason"].startswith("[BAD_INPUT]")  # framework-default, 2 w
    assert bool(rows.loc["it-pub", "circular"])  # 1 worker: any policy is pure compute
    assert bool(rows.loc["it-pub-wfbp", "circular"])  # reconstructed on the fly, k80
    assert rows.loc["it-pub-wfbp", "trace_provenance"] == "reconstructed"
    head = res.headline()
    measured = rows.loc[["it-naive", "it-wfbp", "it-bucket"], "ape_pct"]
    assert head["measured"]["rows"] == 3
    assert head["measured"]["mape_pct"] == pytest.approx(measured.mean())
    assert "published" not in head  # its only predicted row is circular
    assert set(res.by_policy["policy"]) == {"naive", "wfbp", "bucketed", "framework-default"}
    parity_plot(res, tmp_path / "parity.png")
    assert (tmp_path / "parity.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_predict_json_timeline_and_gantt(release, tmp_path):
    tl, png = tmp_path / "t.json", tmp_path / "g.png"
    res = CliRunner().invoke(main, ["predict", "--run-id", RUN, "--workers", "3",
                                    "--gpus-per-node", "3", "--intra", "loopback-gloo",
                                    "--policy", "mgwfbp", "--timeline", str(tl),
                                    "--gantt", str(png), "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["trace_provenance"] == "measured" and out["trace_run_id"] == RUN
    assert out["provenance"] == "modelled" and out["workers"] == 3
    assert out["breakdown"]["io"] == 2.5 and out["cluster"]["intra"]["provenance"] == "measured"
    events = json.loads(tl.read_text())["traceEvents"]
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert names == {"worker 0", "worker 1", "worker 2", "link loopback-gloo"}
    slices = [e for e in events if e["ph"] == "X"]
    assert all(e["dur"] > 0 and e["ts"] >= 0 for e in slices)
    assert max(e["ts"] + e["dur"] for e in slices) == pytest.approx(out["iter_ms"] * 1000)
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_cli_predict_reconstructs_when_no_trace_matches(empty_store):
    res = CliRunner().invoke(main, ["predict", "--model", "resnet50", "--device", "k80",
                                    "--batch-size", "64", "--workers", "8", "--gpus-per-node",
                                    "4", "--intra", "pcie3", "--inter", "10gbe", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["trace_provenance"] == "reconstructed"
    assert any("reconstructed on the fly" in n for n in out["notes"])


def test_missing_reconstruction_is_a_typed_error(empty_store, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "dgtraces.reconstruct", None)
    from dgtraces.predict import resolve

    with pytest.raises(DgtracesError) as exc:
        resolve("resnet50", "k80", 64)
    assert exc.value.code == "NOT_FOUND"


def test_cli_errors_exit_1_with_code(release):
    runner = CliRunner()
    res = runner.invoke(main, ["predict", "--run-id", RUN, "--workers", "2", "--inter",
                               "carrier-pigeon"])
    assert isinstance(res.exception, DgtracesError) and res.exception.code == "UNKNOWN_LINK"
    res = runner.invoke(main, ["predict", "--workers", "2"])  # CLI errors name the option
    assert res.exception.code == "BAD_INPUT" and res.exception.failures[0].column == "--model"
    base = ["predict", "--model", "alexnet", "--device", "cpu-test", "--batch-size", "8"]
    for extra, code, column in (
            (["--bucket-mib", "nan"], "BAD_INPUT", "--bucket-mib"),
            (["--bucket-mib", "inf"], "BAD_INPUT", "--bucket-mib"),
            (["--io-ms", "nan"], "PLAUSIBILITY", "--io-ms"),
            (["--gantt", "g.txt"], "BAD_INPUT", "--gantt"),
            (["--timeline", "t.png"], "BAD_INPUT", "--timeline"),
            (["--servers", "3"], "BAD_INPUT", "--servers")):
        res = runner.invoke(main, base + extra)
        assert res.exception.code == code and res.exception.failures[0].column == column, extra
    res = runner.invoke(main, ["predict", "--run-id", RUN, "--model", "resnet50"])
    assert res.exception.code == "BAD_INPUT" and res.exception.failures[0].column == "--model"
    for args in (["sweep", "--models", "alexnet", "--device", "cpu-test", "--out", "x.txt"],
                 ["sweep", "--models", "alexnet", "--device", "cpu-test", "--workers",
                  "1-100000", "--batch-sizes", "1-200"],
                 ["validate-predictor", "--out", "vp.xlsx"],
                 ["sweep", "--models", "alexnet", "--device", "cpu-test", "--workers", "1,,2"]):
        res = runner.invoke(main, args)
        assert res.exception.code == "BAD_INPUT", args
    from dgtraces.cli.predict import split_option
    from dgtraces.cli.sweep import _ints

    assert _ints("1-4,2", "--workers") == (1, 2, 3, 4)
    assert split_option("alexnet,resnet50,alexnet") == ("alexnet", "resnet50")


def test_cli_sweep_and_validate(release, tmp_path):
    out = tmp_path / "s.parquet"
    res = CliRunner().invoke(main, ["sweep", "--models", "alexnet", "--device", "cpu-test",
                                    "--batch-sizes", "8", "--workers", "1-4",
                                    "--intra", "loopback-gloo", "--inter", "10gbe,100gb-ib",
                                    "--io-overlap", "both", "--out", str(out)])
    assert res.exit_code == 0, res.output
    df = pd.read_parquet(out)
    assert len(df) == 4 * 2 * 4 * 2 and set(df["trace_run_id"]) == {RUN}
    # each row says where its trace and links come from, as predict does
    assert df["trace_source"].str.len().gt(0).all()
    assert set(df["inter_source"].str.split(":").str[0]) <= {"published", "measured"}
    assert df.groupby("inter")["inter_source"].nunique().eq(1).all()
    res = CliRunner().invoke(main, ["validate-predictor", "--plot", str(tmp_path / "p.png"),
                                    "--json"])
    assert res.exit_code == 0, res.output
    def strict(token):  # NaN / Infinity are not JSON
        raise ValueError(token)

    doc = json.loads(res.output, parse_constant=strict)
    assert doc["headline"]["measured"]["rows"] == 3
    assert any(r["reason"] is None for r in doc["rows"])  # missing values are null
    assert all(r["trace_source"] for r in doc["rows"] if r["predicted_ms"] is not None)


def test_predict_trace_schedule_is_consistent(release):
    pred, sched = predict_trace(from_run(RUN), Cluster(2, 2, "loopback-gloo", "loopback-gloo"),
                                Policy("wfbp"))
    compute = [t for t in sched.tasks if t.stream == "compute"]
    assert all(a.end_ms <= b.start_ms + 1e-9 for a, b in pairwise(compute))
    comm = [t for t in sched.tasks if t.stream == "comm"]
    assert all(a.end_ms <= b.start_ms + 1e-9 for a, b in pairwise(comm))
    assert pred.breakdown["messages"] == len(comm) == 8


def test_validation_models_the_gpu_input_copy_like_predict(release):
    from dgtraces.evaluation.validation import validate
    from dgtraces.predict import resolve

    row = validate().rows.set_index("iter_id").loc["it-pub-wfbp"]  # k80 alexnet b64, 1 worker
    trace = resolve("alexnet", "k80", 64)
    assert trace.h2d_ms > 0 and trace.provenance == "reconstructed"
    assert row["predicted_ms"] == pytest.approx(predict(trace, Cluster(1), Policy()).iter_ms)
    assert row["pred_fwd_ms"] == pytest.approx(trace.h2d_ms + sum(trace.fwd_ms))


def test_sweep_uses_the_comm_fits_of_the_given_release(release, tmp_path):
    from dataclasses import replace

    from dgtraces.predict.sweep import Grid, comm_grid

    fits = release_mod.read_table("comm_fits", "9.0.0").assign(alpha_us=600.0)
    shards.extend_release("9.1.0", {"comm_fits": fits}, base="9.0.0", replace=["comm_fits"])
    grid = Grid(workers=(2,), gpus_per_node=(2,), intra=("loopback-gloo",),
                inter=("loopback-gloo",))
    assert comm_grid(grid)["a_ms"][0] == pytest.approx(0.6)  # latest: 9.1.0, 2 x 300 us
    assert comm_grid(replace(grid, release="9.0.0"))["a_ms"][0] == pytest.approx(1.8)
    cfg = ["--workers", "2", "--gpus-per-node", "2", "--intra", "loopback-gloo", "--inter",
           "loopback-gloo", "--release", "9.0.0"]
    runner = CliRunner()
    p = json.loads(runner.invoke(main, ["predict", "--run-id", RUN, "--policy", "wfbp",
                                        "--json", *cfg]).output)
    out = tmp_path / "s.csv"
    res = runner.invoke(main, ["sweep", "--models", "alexnet", "--device", "cpu-test",
                               "--batch-sizes", "8", "--policies", "wfbp", "--out", str(out),
                               *cfg])
    assert res.exit_code == 0, res.output
    assert pd.read_csv(out)["iter_ms"].iloc[0] == pytest.approx(p["iter_ms"], rel=1e-9)


@pytest.mark.parametrize("option, value", [("--workers", "1-"), ("--workers", "1-8:0"),
                                           ("--workers", "2-8:-2"), ("--workers", "8-2"),
                                           ("--gpus-per-node", "x"),
                                           ("--batch-sizes", "16.5"), ("--batch-sizes", ",")])
def test_sweep_bad_integer_lists_are_typed_errors(empty_store, option, value):
    res = CliRunner().invoke(main, ["sweep", "--device", "k80", option, value])
    assert isinstance(res.exception, DgtracesError), res.exception
    assert res.exception.code == "BAD_INPUT" and res.exception.failures[0].column == option


def test_validate_predictor_writes_no_plot_unless_asked(release, tmp_path, monkeypatch):
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    res = CliRunner().invoke(main, ["validate-predictor", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["headline"]["measured"]["rows"] == 3
    assert list(cwd.iterdir()) == []


def test_resolve_with_an_open_release_reads_each_table_once(release, monkeypatch):
    from dgtraces.predict.trace import resolve

    plain = resolve("alexnet", "cpu-test", 8, release="9.0.0")
    rel = release_mod.Release.open("9.0.0")
    first = resolve("alexnet", "cpu-test", 8, release=rel)

    def no_read(*args, **kwargs):
        raise AssertionError("a table of the open release was read again")

    monkeypatch.setattr(release_mod.Release, "table", no_read)
    monkeypatch.setattr(release_mod, "read_table", no_read)
    again = resolve("alexnet", "cpu-test", 8, release=rel)
    assert again == first == plain and again.run_id == RUN


def test_sweep_guard_is_sized_by_measured_memory(empty_store):
    """3M configurations (750 x 5 x 200 x 4 default policies, under the old 10M limit)
    exceed the 2 GiB budget at the measured bytes per configuration
    (benchmarks/sweep_memory.py): refused before running."""
    from dgtraces.cli.sweep import SWEEP_BYTES_PER_CONFIG, SWEEP_MEMORY_MIB, max_sweep

    assert max_sweep() * SWEEP_BYTES_PER_CONFIG <= SWEEP_MEMORY_MIB * 2**20 < 10_000_000 * 700
    res = CliRunner().invoke(main, ["sweep", "--device", "k80", "--workers", "1-750",
                                    "--gpus-per-node", "1,2,4,8,16", "--batch-sizes",
                                    ",".join(str(b) for b in range(1, 201))])
    assert isinstance(res.exception, DgtracesError), res.output
    assert res.exception.code == "BAD_INPUT"
    assert int(res.exception.failures[0].found) > max_sweep()
