"""Property tests of the predictor (hypothesis) and reference-vs-vectorised agreement."""

import itertools
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dgtraces.comm.collectives import ALGORITHMS, collective, collective_ab
from dgtraces.models import layers_frame
from dgtraces.predict import Cluster, Link, Policy, from_frame, simulate
from dgtraces.predict.fast import iter_times, prepare
from dgtraces.predict.policy_registry import POLICY_NAMES
from dgtraces.predict.sweep import Grid, comm_grid, reference_row, run_sweep

SETTINGS = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
MODELS = ("alexnet", "googlenet")
ALGOS = ALGORITHMS  # the registry: a new collective is covered without editing this file
POLICIES = POLICY_NAMES


@st.composite
def traces(draw, models=MODELS):
    model = draw(st.sampled_from(models))
    seed = draw(st.integers(0, 2**16))
    lf = layers_frame(model)
    rng = np.random.default_rng(seed)
    scale = draw(st.floats(0.01, 50.0))
    df = pd.DataFrame({"layer": lf["layer"], "fwd_ms": rng.exponential(scale, len(lf)),
                       "bwd_ms": rng.exponential(2 * scale, len(lf))})
    return from_frame(df, model, draw(st.integers(1, 256)),
                      io_ms=draw(st.floats(0, 500)), h2d_ms=draw(st.floats(0, 20)),
                      update_ms=draw(st.floats(0, 50)))


def links(name):
    return st.builds(Link, st.just(name), st.floats(0, 2000), st.floats(0.01, 100))


clusters = st.builds(Cluster, st.integers(1, 64), st.sampled_from([1, 2, 4, 8]),
                     links("intra"), links("inter"), st.sampled_from(ALGOS), st.integers(1, 8),
                     staging=st.none() | links("staging"), staging_passes=st.integers(1, 3),
                     shared_cpu=st.booleans())
policies = st.builds(Policy, st.sampled_from(POLICIES), st.booleans(),
                     st.sampled_from([1, 1 << 20, 25 << 20, 1 << 40]))


def it(trace, cluster, policy):
    return simulate(trace, cluster, policy).iter_ms


@SETTINGS
@given(traces(), clusters, policies)
def test_one_worker_is_pure_compute(trace, cluster, policy):
    one = simulate(trace, cluster.with_workers(1), policy)
    compute = trace.h2d_ms + sum(trace.fwd_ms) + sum(trace.bwd_ms) + trace.update_ms
    expected = max(compute, trace.io_ms) if policy.io_overlap else compute + trace.io_ms
    assert one.iter_ms == pytest.approx(expected, rel=1e-9)
    assert one.breakdown["comm_total"] == 0


@SETTINGS
@given(traces(), clusters, policies, st.floats(1.0, 1000.0))
def test_more_bandwidth_never_slower(trace, cluster, policy, factor):
    intra, inter = cluster.intra, cluster.inter
    faster = replace(cluster, intra=replace(intra, bandwidth_gb_s=intra.bandwidth_gb_s * factor),
                     inter=replace(inter, bandwidth_gb_s=inter.bandwidth_gb_s * factor))
    assert it(trace, faster, policy) <= it(trace, cluster, policy) * (1 + 1e-12)


@SETTINGS
@given(traces(), clusters, st.booleans())
def test_policy_ordering(trace, cluster, overlap):
    naive = it(trace, cluster, Policy("naive", overlap))
    wfbp = it(trace, cluster, Policy("wfbp", overlap))
    single = it(trace, cluster, Policy("bucketed", overlap, 1 << 50))
    ddp = it(trace, cluster, Policy("bucketed", overlap, 25 << 20))
    mg = it(trace, cluster, Policy("mgwfbp", overlap))
    tol = 1 + 1e-12
    assert wfbp <= naive * tol
    assert mg <= min(wfbp, single, ddp) * tol


@SETTINGS
@given(traces(), clusters, st.sampled_from(POLICIES))
def test_io_overlap_never_slower(trace, cluster, name):
    assert it(trace, cluster, Policy(name, True)) <= it(trace, cluster, Policy(name, False))


@SETTINGS
@given(traces(), st.sampled_from(ALGOS), st.sampled_from(POLICIES), st.booleans())
def test_throughput_monotone_in_workers_when_comm_is_free(trace, algo, name, overlap):
    free = Link("free", 0.0, 1e15)
    thr = []
    for w in (1, 2, 3, 4, 8, 16, 64):
        t = it(trace, Cluster(w, 4, free, free, algo, 4), Policy(name, overlap))
        thr.append(w * trace.batch_size / t)
    assert all(b >= a for a, b in itertools.pairwise(thr))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(traces(models=("alexnet", "googlenet", "resnet50")),
       st.lists(st.tuples(clusters, policies), min_size=1, max_size=4))
def test_vectorised_equals_reference(trace, configs):
    prep = prepare(trace)
    for cluster, policy in configs:
        cost = cluster.comm_cost()
        # the sweep's own vectorised cost (collective_ab + staging), not the scalar one
        grid = Grid(workers=(cluster.workers,), gpus_per_node=(cluster.gpus_per_node,),
                    intra=(cluster.intra,), inter=(cluster.inter,),
                    algorithms=(cluster.algorithm,), servers=cluster.servers,
                    staging=cluster.staging, staging_passes=cluster.staging_passes)
        cg = comm_grid(grid)
        assert cg["a_ms"][0] == pytest.approx(cost.a_ms, rel=1e-12, abs=1e-15)
        assert cg["b_ms_per_byte"][0] == pytest.approx(cost.b_ms_per_byte, rel=1e-12, abs=1e-18)
        ref = simulate(trace, cluster, policy)
        fast, exposed = iter_times(prep, policy, [cg["a_ms"][0], 0.0],
                                   [cg["b_ms_per_byte"][0], 0.0], cluster.shared_cpu)
        assert fast[0] == pytest.approx(ref.iter_ms, rel=1e-9)
        assert exposed[0] == pytest.approx(ref.breakdown["comm_exposed"], rel=1e-9, abs=1e-9)


def test_sweep_grid_matches_reference_rows():
    lf = layers_frame("resnet50")
    rng = np.random.default_rng(7)
    df = pd.DataFrame({"layer": lf["layer"], "fwd_ms": rng.uniform(0.1, 3, len(lf)),
                       "bwd_ms": rng.uniform(0.1, 6, len(lf))})
    trace = from_frame(df, "resnet50", 64, io_ms=40.0, update_ms=4.0)
    grid = Grid(workers=(1, 2, 5, 16), gpus_per_node=(1, 4), intra=("pcie3", "nvlink2"),
                inter=("10gbe", "100gb-ib"), algorithms=("ring", "hierarchical", "ps"),
                policies=POLICIES, io_overlap=(False, True), traces={("resnet50", 64): trace})
    out = run_sweep(grid)
    assert len(out) == grid.size() == 4 * 2 * 2 * 2 * 3 * 4 * 2
    assert (out["provenance"] == "modelled").all()
    for row in out.sample(40, random_state=0).to_dict("records"):
        assert row["iter_ms"] == pytest.approx(reference_row(trace, row, grid), rel=1e-9)
    cpu = replace(grid, staging="cpu-memcpy", staging_passes=3, shared_cpu=True)
    for row in run_sweep(cpu).sample(40, random_state=1).to_dict("records"):
        assert row["iter_ms"] == pytest.approx(reference_row(trace, row, cpu), rel=1e-9)
    one = out[out["workers"] == 1]
    assert np.allclose(one["speedup_vs_1"], 1.0) and np.allclose(one["efficiency"], 1.0)


def test_mgwfbp_shares_work_between_equal_costs_without_changing_results():
    from dgtraces.predict.fast import _optimal, comm_end

    lf = layers_frame("googlenet")
    rng = np.random.default_rng(11)
    df = pd.DataFrame({"layer": lf["layer"], "fwd_ms": rng.uniform(0.1, 2, len(lf)),
                       "bwd_ms": rng.uniform(0.1, 4, len(lf))})
    prep = prepare(from_frame(df, "googlenet", 16))
    a = np.repeat(rng.uniform(0.01, 2, 50), 200)  # 10,000 configs, 50 distinct costs
    b = np.repeat(10 ** rng.uniform(-8, -5, 50), 200)
    shared = comm_end(prep, Policy("mgwfbp"), a, b)
    assert np.array_equal(shared, _optimal(prep.ready, prep.nbytes, a, b))


@pytest.mark.parametrize("algo", ["ring", "tree", "dbtree"])
def test_flat_collective_takes_the_worse_link_by_value_even_with_equal_names(algo):
    fast, slow = Link("l", 1.0, 100.0), Link("l", 50.0, 1.0)  # same name, different values
    cost = collective(algo, 8, 4, fast, slow)  # 2 nodes: a flat collective crosses both
    a, b = collective_ab([algo], [8], [4], [fast.alpha_ms], [fast.beta_ms_per_byte],
                         [slow.alpha_ms], [slow.beta_ms_per_byte], 1)
    assert (cost.a_ms, cost.b_ms_per_byte) == pytest.approx((a[0], b[0]), rel=1e-12)
    phase = cost.phases[0]
    per_alpha = {"ring": 14, "tree": 3, "dbtree": 3}[algo]  # 2(P-1) steps; ceil(log2 8) levels
    assert phase.a_ms == pytest.approx(per_alpha * slow.alpha_ms)
    one_node = collective(algo, 4, 4, fast, slow)  # inside one node: the intra link only
    assert one_node.phases[0].a_ms < phase.a_ms
