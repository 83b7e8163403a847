"""Issue #25 item 2: ``auto`` (NCCL's model) as the GPU default of predict and sweep; the
vectorised sweep costs NCCL rows per distinct configuration and equals the DAG."""

from __future__ import annotations

import json
import shlex
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from dgtraces.cli import main
from dgtraces.models import layers_frame
from dgtraces.predict import Cluster, Policy
from dgtraces.predict.algorithm_default import Basis, default_algorithm
from dgtraces.predict.collective_time import Topology
from dgtraces.predict.dag import predict_trace
from dgtraces.predict.nccl import KINDS, allreduce_ms, choose, fabric
from dgtraces.predict.policy_registry import POLICY_NAMES
from dgtraces.predict.sweep import Grid, reference_row, run_sweep
from dgtraces.predict.trace import from_frame


def _trace(model: str = "resnet50", seed: int = 3):
    lf = layers_frame(model)
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"layer": lf["layer"], "fwd_ms": rng.uniform(0.1, 3, len(lf)),
                       "bwd_ms": rng.uniform(0.1, 6, len(lf))})
    return from_frame(df, model, 64, io_ms=20.0, update_ms=3.0)


@pytest.mark.parametrize("intra,inter,workers,gpn,nics", [
    ("nvlink3", "ib-hdr", 16, 8, 4), ("pcie3", "10gbe-nccl", 8, 2, 1),
    ("nvlink2", "ib-edr", 8, 8, 1), ("nvlink4", "400gbe-roce", 64, 8, 8)])
@pytest.mark.parametrize("forced", ["auto", "ring", "tree"])
def test_vectorised_nccl_cost_equals_the_scalar_choice(intra, inter, workers, gpn, nics,
                                                       forced):
    t = Topology(workers, -(-workers // gpn), fabric(intra, "intra"), fabric(inter, "inter"),
                 nics)
    sizes = np.unique(np.concatenate([2.0 ** np.arange(0, 34), [3, 100, 127, 129, 5e5,
                                                                 3.3e7, 1.7e8, 0]]))
    vec = allreduce_ms(t, sizes, forced)
    for n, v in zip(sizes, vec, strict=True):
        assert v == pytest.approx(choose(KINDS["allreduce"], t, n, forced)[0] / 1000.0,
                                  rel=1e-12, abs=0.0)
    assert vec[sizes == 0][0] == 0.0


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
    assert out.loc["auto", "inter_source"].startswith("NCCL 2.7.5 model")
    assert not np.isnan(out.loc["ring", "intra_alpha_us"])


def test_sweep_auto_refuses_link_overrides():
    from dgtraces.errors import DgtracesError

    grid = Grid(algorithms=("auto",), alpha_us=5.0, traces={("resnet50", 64): _trace()})
    with pytest.raises(DgtracesError) as err:
        run_sweep(grid)
    assert err.value.code == "BAD_INPUT"


@pytest.mark.parametrize("device,intra,inter,shapes,over,given,algo,basis", [
    ("v100", "nvlink2", "10gbe", [(8, 4)], False, None, "auto", Basis.GPU_DEFAULT),
    ("V100", "nvlink2", "nvlink2", [(8, 8)], False, None, "auto", Basis.GPU_DEFAULT),
    ("v100", "nvlink2", "nvlink2", [(16, 8)], False, None, "ring", Basis.GPU_FALLBACK),
    ("v100", "loopback-gloo", "10gbe", [(2, 2)], False, None, "ring", Basis.GPU_FALLBACK),
    ("v100", "pcie3", "10gbe", [(8, 4)], True, None, "ring", Basis.GPU_FALLBACK),
    ("v100", "pcie3", "10gbe", [(6, 4)], False, None, "ring", Basis.GPU_FALLBACK),
    ("cpu-xeon", "pcie3", "10gbe", [(8, 4)], False, None, "ring", Basis.OTHER_DEFAULT),
    (None, "pcie3", "10gbe", [(8, 4)], False, None, "ring", Basis.OTHER_DEFAULT),
    ("v100", "pcie3", "10gbe", [(8, 4)], False, "tree", "tree", Basis.GIVEN),
])
def test_default_algorithm_rule(device, intra, inter, shapes, over, given, algo, basis):
    c = default_algorithm(device, [intra], [inter], shapes, overridden=over, given=given)
    assert (c.algorithm, c.basis) == (algo, basis)
    assert c.why


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
