"""The torch side of the collector: model-from-spec parity, a tiny layer trace, and real
2-worker gloo runs (comm sweep, S-SGD under every policy)."""

import json

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

from click.testing import CliRunner  # noqa: E402

from dgtraces.cli import main  # noqa: E402
from dgtraces.collect import env  # noqa: E402
from dgtraces.collect.comm import collect_comm  # noqa: E402
from dgtraces.collect.layers import collect_layers  # noqa: E402
from dgtraces.collect.net import CaffeNet, build, synthetic_batch  # noqa: E402
from dgtraces.collect.ssgd import collect_ssgd  # noqa: E402
from dgtraces.contribute.files import validate_files  # noqa: E402
from dgtraces.models import get_spec, layer_records  # noqa: E402
from dgtraces.tables.checks import validate_frame, validate_tables  # noqa: E402


@pytest.mark.parametrize("model, aux", [("alexnet", False), ("googlenet", True),
                                        ("resnet50", False)])
def test_torch_model_matches_layers_table(model, aux):
    net = build(model, aux=aux)
    rows = {r["layer"]: r for r in layer_records(model) if aux or not r["aux"]}
    assert net.order == list(rows)  # same names, same execution order
    x, labels = synthetic_batch(net, 1)
    blobs = {"data": x}
    with torch.no_grad():
        for name in net.order:
            out = net.run_layer(name, [blobs[b] for b in net.bottoms[name]], labels)
            blobs[name] = out
            r = rows[name]
            mod = net.layers[name]
            assert sum(p.numel() for p in mod.parameters()) == r["params"], name
            assert sum(b.numel() for b in mod.buffers()) == r["buffers"], name
            if r["kind"] == "softmax":
                assert out.dim() == 0
            else:
                shape = tuple(out.shape[1:]) + (1,) * (4 - out.dim())
                assert shape == (r["out_c"], r["out_h"], r["out_w"]), name
    total = sum(p.numel() for p in net.parameters())
    expected = {("alexnet", False): 60965224, ("googlenet", False): 6998552,
                ("googlenet", True): 13378280, ("resnet50", False): 25557032}
    assert total == expected[(model, aux)]


def test_caffe_semantics_lrn_pool_groups():
    net = build("alexnet")
    assert net.layers["conv2"].groups == 2 and net.layers["conv3"].groups == 1
    x = torch.rand(1, 7, 3, 3)
    got = net.layers["norm1"](x)
    sq = torch.nn.functional.pad(x * x, (0, 0, 0, 0, 2, 2))  # local_size 5, centred
    window = sum(sq[:, i:i + 7] for i in range(5))
    want = x / (1 + 1e-4 / 5 * window) ** 0.75  # Caffe ACROSS_CHANNELS
    assert torch.allclose(got, want, atol=1e-7)
    # Caffe ceil rounding: 13x13, kernel 3, stride 2 -> 6 (floor) vs Caffe 6; 14 -> 7 (ceil)
    assert net.layers["pool5"](torch.rand(1, 1, 14, 14)).shape[-1] == 7
    g = build("googlenet", aux=True)
    ave = g.layers["loss1/ave_pool"](torch.ones(1, 1, 14, 14))
    assert ave.shape[-1] == 4 and torch.allclose(ave, torch.ones_like(ave))
    assert g.loss_weights == {"loss1/loss": 0.3, "loss2/loss": 0.3, "loss3/loss3": 1.0}


def test_collect_layers_tiny_alexnet_is_schema_valid():
    trace = collect_layers("alexnet", 1, repeats=2, warmup=0, threads=1)
    frames = validate_tables(trace.frames())
    run, lt = frames["runs"].iloc[0], frames["layer_timings"]
    assert run.provenance == "measured" and run.device_kind == "cpu"
    assert (run.batch_size, run.threads, run.precision) == (1, 1, "fp32")
    assert run.framework == "pytorch 2.13.0" and run.collector_version.startswith("dgtraces ")
    assert list(lt["layer"]) == [r["layer"] for r in layer_records("alexnet")]
    assert (lt["n"] == 2).all() and (lt["fwd_ms"] > 0).all() and (lt["bwd_ms"] > 0).all()
    ratio = (lt["fwd_ms"].sum() + lt["bwd_ms"].sum()) / (run.fwd_ms + run.bwd_ms)
    assert run.layer_sum_ratio == pytest.approx(ratio)
    assert bool(run.flagged) == env.consistency_flag(ratio)[0]
    assert run.iter_ms >= run.update_ms > 0
    info = json.loads(run.params_json)
    assert info["repeats"] == 2 and len(info["loadavg_before"]) == 3
    assert info["intra_op_threads"] == 1 and "cpu" in info


def test_collect_layers_cli_writes_valid_tables(tmp_path):
    out = tmp_path / "trace"
    res = CliRunner().invoke(main, ["collect", "layers", "--model", "alexnet",
                                    "--batch-size", "1", "--repeats", "1", "--warmup", "0",
                                    "--out", str(out)])
    assert res.exit_code == 0, res.output
    counts = validate_files([out / "runs.parquet", out / "layer_timings.parquet"],
                            use_store=False)
    assert counts == {"runs": 1, "layer_timings": 23}


def test_comm_two_workers_gloo():
    # 4 KiB .. 4 MiB: the large messages take clearly longer, so the fit resolves bandwidth;
    # a median of 7 outlasts 3 samples slowed by a busy CPU (a parallel run, 2 x 2 procs)
    sizes = [4096, 1 << 20, 4 << 20]
    frames = collect_comm(workers=2, sizes=sizes, repeats=7, warmup=1)
    comm = validate_frame("comm", frames["comm"])
    assert len(comm) == 6 and set(comm["collective"]) == {"allreduce", "broadcast"}
    assert (comm["workers"] == 2).all() and (comm["interconnect"] == "loopback-gloo").all()
    assert ((comm["p10_ms"] <= comm["time_ms"]) & (comm["time_ms"] <= comm["p90_ms"])).all()
    fits = validate_frame("comm_fits", frames["comm_fits"])
    assert sorted(fits["collective"]) == ["allreduce", "broadcast"]  # a fit row per collective
    assert (fits["n_points"] == 3).all() and (fits["max_bytes"] == 4 << 20).all()
    assert (fits["min_bytes"] == 4096).all() and (fits["beta_us_per_byte"] > 0).all()
    assert (fits["bandwidth_gb_s"] == 1e-3 / fits["beta_us_per_byte"]).all()
    one = collect_comm(workers=2, sizes=[4096], repeats=2, warmup=0,
                       collectives=("allreduce",))  # one size: points, no fit table
    assert set(one) == {"comm"} and len(validate_frame("comm", one["comm"])) == 1


@pytest.mark.slow
def test_ssgd_two_workers_every_policy(tmp_path, ci_full):
    iters = 2 if ci_full else 1  # AlexNet's 244 MB of gradients per iteration and policy
    df = collect_ssgd("alexnet", workers=2, threads_per_worker=1,
                      policies=("naive", "wfbp", "bucketed"), bucket_mb=8, iters=iters,
                      warmup=0, batch_size=1, trace_run_id=None)
    it = validate_frame("iterations", df)
    assert list(it["policy"]) == ["naive", "wfbp", "bucketed"]
    assert list(it["bucket_bytes"].isna()) == [True, True, False]
    assert int(it["bucket_bytes"].iloc[2]) == 8 * 1024 * 1024
    assert (it["n"] == iters).all() and (it["workers"] == 2).all() and (it["nodes"] == 1).all()
    assert (it["provenance"] == "measured").all() and (it["backend"] == "gloo").all()
    for row in it.itertuples():
        ph = json.loads(row.phases_json)
        assert {"fwd_ms", "bwd_ms", "comm_wait_ms", "update_ms"} <= set(ph)
        assert len(ph["iter_samples_ms"]) == iters and set(ph["per_rank_median_ms"]) == {
            "rank0", "rank1"}
        assert row.iter_p10_ms <= row.iter_ms <= row.iter_p90_ms
        assert row.throughput_img_s == pytest.approx(2 / (row.iter_ms / 1000))
    calls = {r.policy: json.loads(r.phases_json)["allreduce_calls_per_iter"]
             for r in it.itertuples()}
    learnable = len([r for r in layer_records("alexnet") if r["params"]])
    assert calls["naive"] == calls["wfbp"] == learnable  # one allreduce per layer
    assert 1 <= calls["bucketed"] < learnable


def test_caffenet_without_aux_drops_aux_layers():
    net = CaffeNet(get_spec("googlenet"))
    assert not any(name.startswith(("loss1/", "loss2/")) for name in net.order)
    assert len(net.order) == 142
    assert sum(p.numel() for p in net.parameters()) == 6998552
    rows = {r["layer"]: r["params"] for r in layer_records("googlenet") if not r["aux"]}
    assert {n: sum(p.numel() for p in net.layers[n].parameters()) for n in net.order} == rows
