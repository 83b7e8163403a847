"""Issue #25 item 2: ``auto`` (NCCL's model) as the GPU default of predict and sweep; the
vectorised sweep costs NCCL rows per distinct configuration and equals the DAG; a Cluster
with ``auto`` costs every message with NCCL's model (comm/nccl.py)."""

from __future__ import annotations

import json
import shlex
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from dgtraces.cli import main
from dgtraces.comm import nccl
from dgtraces.comm.links import get_link
from dgtraces.comm.nccl_versions import DEFAULT_VERSION
from dgtraces.errors import DgtracesError
from dgtraces.models import layers_frame
from dgtraces.predict import Cluster, Policy
from dgtraces.predict.dag import predict_trace
from dgtraces.predict.policy_registry import POLICY_NAMES
from dgtraces.predict.sweep import Grid, reference_row, run_sweep
from dgtraces.predict.trace import from_frame


def _trace(model: str = "resnet50", seed: int = 3):
    lf = layers_frame(model)
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"layer": lf["layer"], "fwd_ms": rng.uniform(0.1, 3, len(lf)),
                       "bwd_ms": rng.uniform(0.1, 6, len(lf))})
    return from_frame(df, model, 64, io_ms=20.0, update_ms=3.0)


def test_sweep_auto_rows_equal_the_dag_prediction():
    trace = _trace()
    grid = Grid(workers=(1, 2, 4, 8, 16), gpus_per_node=(2, 8), intra=("nvlink2", "pcie3"),
                inter=("ib-hdr", "10gbe"), algorithms=("auto", "nccl-ring", "nccl-tree"),
                policies=POLICY_NAMES, io_overlap=(False, True), nics_per_node=2,
                traces={("resnet50", 64): trace})
    out = run_sweep(grid)
    assert len(out) == grid.size()
    for row in out.sample(60, random_state=0).to_dict("records"):
        assert row["iter_ms"] == pytest.approx(reference_row(trace, row, grid), rel=1e-9)
    # every mgwfbp auto row, where the sweep runs its own dynamic program
    for row in out[(out.policy == "mgwfbp") & (out.algorithm == "auto")].to_dict("records"):
        assert row["iter_ms"] == pytest.approx(reference_row(trace, row, grid), rel=1e-9)
    staged = replace(grid, staging="pcie3", staging_passes=2, shared_cpu=True)
    for row in run_sweep(staged).sample(30, random_state=1).to_dict("records"):
        assert row["iter_ms"] == pytest.approx(reference_row(trace, row, staged), rel=1e-9)


def test_sweep_auto_cost_equals_a_single_prediction():
    trace = _trace("googlenet", 5)
    cluster = Cluster(16, 8, "nvlink3", "ib-hdr", "auto", nics_per_node=4)
    for name in POLICY_NAMES:
        single, _ = predict_trace(trace, cluster, Policy(name))
        grid = Grid(models=("googlenet",), workers=(16,), gpus_per_node=(8,),
                    intra=("nvlink3",), inter=("ib-hdr",), algorithms=("auto",),
                    policies=(name,), nics_per_node=4, traces={("googlenet", 64): trace})
        row = run_sweep(grid).iloc[0]
        assert row["iter_ms"] == pytest.approx(single.iter_ms, rel=1e-9)
        assert row["comm_exposed_ms"] == pytest.approx(single.breakdown["comm_exposed"],
                                                       rel=1e-9, abs=1e-12)
        ring = run_sweep(replace(grid, algorithms=("ring",))).iloc[0]
        assert ring["iter_ms"] != pytest.approx(row["iter_ms"], rel=1e-6)  # not the ring


def test_sweep_auto_rows_name_nccl_fabrics():
    grid = Grid(workers=(8,), gpus_per_node=(4,), intra=("nvlink2",), inter=("ib-hdr",),
                algorithms=("auto", "ring"), traces={("resnet50", 64): _trace()})
    out = run_sweep(grid).set_index("algorithm")
    assert out.loc["auto", "intra_bandwidth_gb_s"] == pytest.approx(120.0)  # 6 x 20
    assert np.isnan(out.loc["auto", "intra_alpha_us"])
    assert out.loc["auto", "inter_source"].startswith(f"NCCL {DEFAULT_VERSION} model")
    assert not np.isnan(out.loc["ring", "intra_alpha_us"])


def test_sweep_auto_refuses_link_overrides():
    grid = Grid(algorithms=("auto",), alpha_us=5.0, traces={("resnet50", 64): _trace()})
    with pytest.raises(DgtracesError) as err:
        run_sweep(grid)
    assert err.value.code == "BAD_INPUT"


def _predict_json(args):
    res = CliRunner().invoke(main, ["predict", "--model", "resnet50", "--device", "v100",
                                    "--batch-size", "64", "--workers", "8",
                                    "--gpus-per-node", "4", "--intra", "nvlink2", "--json",
                                    *args])
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


def test_cli_predict_defaults_to_auto_on_a_gpu_and_records_why():
    auto = _predict_json([])
    assert auto["cluster"]["algorithm"] == "auto"
    assert "nccl" in auto["cluster"] and auto["cluster"]["algorithm_why"]
    words = shlex.split(auto["reproduce"])  # the resolved default is pinned
    assert words[words.index("--algorithm") + 1] == "auto"
    assert auto["inputs"]["algorithm"] == "auto"
    ring = _predict_json(["--algorithm", "ring"])
    assert ring["cluster"]["algorithm"] == "ring"
    assert ring["iter_ms"] != pytest.approx(auto["iter_ms"], rel=1e-9)
    forced = _predict_json(["--algorithm", "auto"])
    assert forced["iter_ms"] == pytest.approx(auto["iter_ms"], rel=1e-12)
    fitted = _predict_json(["--link-alpha-us", "20"])  # an override: alpha-beta ring
    assert fitted["cluster"]["algorithm"] == "ring"


def test_cli_sweep_default_auto_equals_predict(tmp_path):
    out = tmp_path / "s.csv"
    res = CliRunner().invoke(main, ["sweep", "--device", "v100", "--workers", "8",
                                    "--gpus-per-node", "4", "--intra", "nvlink2",
                                    "--policies", "wfbp", "--out", str(out)])
    assert res.exit_code == 0, res.output
    df = pd.read_csv(out)
    assert list(df["algorithm"]) == ["auto"]
    single = _predict_json(["--policy", "wfbp"])
    assert df["iter_ms"][0] == pytest.approx(single["iter_ms"], rel=1e-9)


def test_predict_uses_nccls_cost_for_every_message():
    c = Cluster(16, 8, "nvlink3", "ib-hdr", "auto", nics_per_node=8)
    cost = c.comm_cost()
    t = nccl.Topology(16, 2, nccl.FABRICS["nvlink3"], nccl.FABRICS["ib-hdr"], 8)
    for n in (4096, 1 << 20, 100 << 20):
        assert cost.time_ms(n) == pytest.approx(
            nccl.choose(nccl.KINDS["allreduce"], t, n)[0] / 1000)
    one_nic = Cluster(16, 8, "nvlink3", "ib-hdr", "auto").comm_cost()
    assert one_nic.time_ms(100 << 20) > 5 * cost.time_ms(100 << 20)
    staged = Cluster(16, 8, "nvlink3", "ib-hdr", "auto", staging="pcie3").comm_cost()
    pcie = get_link("pcie3")
    assert staged.time_ms(1 << 20) == pytest.approx(
        one_nic.time_ms(1 << 20) + 2 * (pcie.alpha_ms + pcie.beta_ms_per_byte * (1 << 20)))
    assert [p.name for p, _ in staged.phase_times(1 << 20)] == ["nccl", "staging"]
    assert Cluster(1, 1, "nvlink3", "ib-hdr", "auto").comm_cost().time_ms(1 << 20) == 0.0
    d = c.describe()
    assert d["nics_per_node"] == 8 and d["nccl"]["intra"]["bandwidth_gb_s"] == 240.0
    with pytest.raises(DgtracesError) as exc:
        Cluster(16, 8, get_link("nvlink3"), "ib-hdr", "auto")
    assert exc.value.code == "BAD_INPUT"
    with pytest.raises(DgtracesError) as exc:
        Cluster(16, 8, "nvlink3", "ib-hdr", "auto", alpha_us=2.0)
    assert exc.value.code == "BAD_INPUT"


def test_predict_cli_auto_with_nics():
    args = ["predict", "--model", "resnet50", "--device", "v100", "--batch-size", "64",
            "--workers", "16", "--gpus-per-node", "8", "--intra", "nvlink2", "--inter",
            "ib-edr", "--json"]
    out = {}
    for nics in ("1", "4"):
        res = CliRunner().invoke(main, args + ["--algorithm", "auto", "--nics-per-node", nics])
        assert res.exit_code == 0, res.output
        out[nics] = json.loads(res.output)
    assert out["4"]["cluster"]["nics_per_node"] == 4
    assert out["4"]["breakdown"]["comm_total"] < out["1"]["breakdown"]["comm_total"] / 2
