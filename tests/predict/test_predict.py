"""The DAG predictor: API, comm models, links, policies, typed errors."""

from dataclasses import replace
from itertools import product

import numpy as np
import pandas as pd
import pytest

from dgtraces import fitting
from dgtraces.comm.collectives import ALGORITHMS, collective_ab
from dgtraces.errors import DgtracesError
from dgtraces.models import layers_frame
from dgtraces.predict import (
    Cluster,
    Link,
    Policy,
    collective,
    from_frame,
    get_link,
    predict,
    simulate,
)
from dgtraces.predict.policies import optimal_groups

FREE = Link("free", 0.0, 1e12)


def frame(model="alexnet", seed=0, fwd=1.0, bwd=2.0):
    lf = layers_frame(model)
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"layer": lf["layer"], "fwd_ms": rng.uniform(0.1, fwd, len(lf)),
                         "bwd_ms": rng.uniform(0.1, bwd, len(lf))})


def trace(model="alexnet", **kw):
    return from_frame(frame(model), model, 32, **kw)


def test_single_worker_is_pure_compute():
    t = trace(io_ms=3.0, h2d_ms=1.5, update_ms=2.0)
    p = predict(t, Cluster(1, 1, "pcie3", "10gbe"), Policy("mgwfbp"))
    expected = 3.0 + 1.5 + sum(t.fwd_ms) + sum(t.bwd_ms) + 2.0
    assert p.iter_ms == pytest.approx(expected, rel=1e-12)
    assert p.breakdown["comm_total"] == 0 and p.speedup_vs_1 == 1.0
    assert p.throughput_img_s == pytest.approx(32 * 1000 / expected)
    assert p.critical_path[0] == "io" and p.critical_path[-1] == "update"
    assert p.provenance == "modelled" and p.trace_provenance == "user"


def test_breakdown_adds_up_and_critical_path_names_tasks():
    t = trace(io_ms=2.0, update_ms=1.0)
    for name in ("naive", "wfbp", "bucketed", "mgwfbp"):
        p = predict(t, Cluster(4, 1, "pcie3", "10gbe"), Policy(name))
        b = p.breakdown
        total = b["io_exposed"] + b["h2d"] + b["fwd"] + b["bwd"] + b["comm_exposed"] + b["update"]
        assert p.iter_ms == pytest.approx(total, rel=1e-12)
        assert all(x.split("/")[0] in ("io", "h2d", "fwd", "bwd", "comm", "update")
                   for x in p.critical_path)
    naive = predict(t, Cluster(4, 1, "pcie3", "10gbe"), Policy("naive"))
    assert naive.breakdown["comm_exposed"] == pytest.approx(naive.breakdown["comm_total"])
    assert naive.breakdown["messages"] == 8  # alexnet: 5 conv + 3 fc carry gradients


def test_naive_is_sum_of_layerwise_allreduces():
    t = trace()
    cl = Cluster(2, 1, "10gbe", "10gbe")
    link = get_link("10gbe")
    grads = [b for b in t.grad_bytes if b]
    comm = sum(2 * link.alpha_ms + n * link.beta_ms_per_byte for n in grads)
    p = predict(t, cl, Policy("naive"))
    assert p.iter_ms == pytest.approx(sum(t.fwd_ms) + sum(t.bwd_ms) + comm, rel=1e-12)


def test_ring_and_tree_costs():
    link = Link("x", 10.0, 1.0)  # 10 us, 1 GB/s -> beta 1e-6 ms/byte
    ring = collective("ring", 4, 4, link, link)
    assert ring.a_ms == pytest.approx(6 * 0.01) and ring.b_ms_per_byte == pytest.approx(1.5e-6)
    tree = collective("tree", 5, 8, link, link)  # ceil(log2 5) = 3 levels, reduce + bcast
    assert tree.a_ms == pytest.approx(6 * 0.01) and tree.b_ms_per_byte == pytest.approx(6e-6)
    db = collective("dbtree", 8, 8, link, link)
    assert db.a_ms == pytest.approx(6 * 0.01) and db.b_ms_per_byte == pytest.approx(2e-6)
    ps = collective("ps", 8, 1, link, Link("y", 20.0, 0.5), servers=2)
    assert ps.a_ms == pytest.approx(2 * 0.02) and ps.b_ms_per_byte == pytest.approx(2 * 2e-6 * 4)
    assert collective("ring", 1, 1, link, link).time_ms(1e9) == 0.0


def test_hierarchical_and_flat_multi_node():
    fast, slow = Link("nv", 5.0, 25.0), Link("eth", 50.0, 1.0)
    h = collective("hierarchical", 8, 4, fast, slow)
    assert [p.link for p in h.phases] == ["nv", "eth", "nv"]
    # intra RS+AG: 2*3/4 beta_nv; inter ring over 2 nodes of n/4: 2*1/2 * beta_eth / 4
    assert h.b_ms_per_byte == pytest.approx(1.5 / 25e6 + 0.25 / 1e6)
    flat = collective("ring", 8, 4, fast, slow)
    assert flat.a_ms == pytest.approx(14 * 0.05) and flat.b_ms_per_byte == pytest.approx(1.75e-6)
    assert h.time_ms(100e6) < flat.time_ms(100e6)


def test_vector_costs_equal_scalar_costs():
    links = [Link("a", 3.0, 12.0), Link("b", 57.0, 0.6)]
    for algo, p, g, (li, le), s in product(ALGORITHMS,
                                           (1, 2, 3, 8, 17), (1, 2, 4), product(links, links),
                                           (1, 3)):
        ref = collective(algo, p, g, li, le, s)
        a, b = collective_ab([algo], [p], [g], [li.alpha_ms], [li.beta_ms_per_byte],
                             [le.alpha_ms], [le.beta_ms_per_byte], s)
        assert a[0] == pytest.approx(ref.a_ms, rel=1e-12, abs=1e-15)
        assert b[0] == pytest.approx(ref.b_ms_per_byte, rel=1e-12, abs=1e-18)


def _check_optimal_groups(cost, rng, trials: int, sizes: tuple[float, float],
                          gaps: tuple[float, float]) -> None:
    """optimal_groups against every way of cutting 7 gradients into consecutive groups."""
    for _ in range(trials):
        n = 7
        nbytes = list(rng.uniform(*sizes, n))
        ready = list(np.cumsum(rng.uniform(*gaps, n)))
        groups, best = optimal_groups(nbytes, ready, cost)
        brute = float("inf")
        for mask in range(1 << (n - 1)):  # cut after unit i when bit i is set
            end, start = 0.0, 0
            for i in range(n):
                if i == n - 1 or mask >> i & 1:
                    end = max(end, ready[i]) + cost.time_ms(sum(nbytes[start:i + 1]))
                    start = i + 1
            brute = min(brute, end)
        assert best == pytest.approx(brute, rel=1e-12)
        assert sorted(i for g in groups for i in g) == list(range(n))


def test_optimal_groups_match_brute_force():
    cost = collective("ring", 4, 4, Link("x", 300.0, 0.5), Link("x", 300.0, 0.5))
    _check_optimal_groups(cost, np.random.default_rng(3), 20, (1e4, 2e6), (0.1, 5.0))


def test_optimal_groups_under_nccl_match_brute_force():
    """The dynamic program with NCCL's cost (its merges costed in one vectorised call)."""
    cost = Cluster(16, 8, "nvlink3", "ib-hdr", "auto", nics_per_node=4).comm_cost()
    _check_optimal_groups(cost, np.random.default_rng(5), 5, (1e3, 8e6), (0.01, 1.0))


@pytest.mark.parametrize("cluster", [
    Cluster(16, 8, "nvlink3", "ib-hdr", "auto", nics_per_node=4),
    Cluster(8, 2, "pcie3", "10gbe", "nccl-ring", staging="pcie3", staging_passes=2),
    Cluster(1, 1, "nvlink2", "10gbe", "auto"),
    Cluster(4, 4, "nvlink2", "10gbe", "ring")], ids=["auto", "ring-staged", "one", "affine"])
def test_times_ms_is_time_ms_of_each_size(cluster):
    """The dynamic program's batch of costs (one vectorised NCCL call) equals the scalar
    cost of each size, staging phase, one worker and sizes <= 0 included."""
    cost = cluster.comm_cost()
    sizes = [0.0, -5.0, 1.0, 3.0, 4096.0, 1e5 + 0.5, 2.5e6, 6.4e7, 1.7e8]
    batch = cost.times_ms(sizes)
    assert len(batch) == len(sizes) and cost.times_ms([]) == []
    for n, v in zip(sizes, batch, strict=True):
        assert v == pytest.approx(cost.time_ms(n), rel=1e-12, abs=0.0)


def test_bucketed_fuses_in_backward_order():
    t = trace()
    sched = simulate(t, Cluster(2, 1, "10gbe", "10gbe"), Policy("bucketed", bucket_bytes=1))
    assert len(sched.messages) == 8  # 1-byte buckets = one message per gradient
    big = simulate(t, Cluster(2, 1, "10gbe", "10gbe"), Policy("bucketed", bucket_bytes=1 << 40))
    assert len(big.messages) == 1 and big.messages[0].layers[0] == "fc8"
    assert big.messages[0].nbytes == sum(t.grad_bytes)


def test_link_overrides_and_unknown_link():
    link = get_link("10gbe", alpha_us=1.0, gbps=80.0)
    assert link.alpha_us == 1.0 and link.bandwidth_gb_s == 10.0
    assert link.provenance == "user-override"
    with pytest.raises(DgtracesError) as exc:
        Cluster(2, 1, "pcie3", "carrier-pigeon").comm_cost()
    assert exc.value.code == "UNKNOWN_LINK" and exc.value.failures[0].column == "inter"
    with pytest.raises(DgtracesError) as exc:
        get_link("10gbe", gbps=0.0)
    assert exc.value.failures[0].column == "link_gbps"


@pytest.mark.parametrize("kwargs, column", [
    ({"workers": 0}, "workers"), ({"workers": 2, "gpus_per_node": 0}, "gpus_per_node"),
    ({"workers": 2, "algorithm": "butterfly"}, "algorithm"),
    ({"workers": 2, "servers": -1}, "servers")])
def test_bad_cluster_names_the_field(kwargs, column):
    with pytest.raises(DgtracesError) as exc:
        Cluster(**kwargs)
    assert exc.value.code == "BAD_INPUT" and exc.value.failures[0].column == column


def test_bad_policy_and_trace_errors_name_the_field():
    with pytest.raises(DgtracesError) as exc:
        Policy("allgather-everything")
    assert exc.value.failures[0].column == "policy"
    df = frame()
    with pytest.raises(DgtracesError) as exc:
        from_frame(df.iloc[1:], "alexnet", 32)
    assert exc.value.code == "INCOMPLETE_TRACE" and exc.value.failures[0].found == "'conv1'"
    neg = df.copy()
    neg.loc[4, "bwd_ms"] = -1.0
    with pytest.raises(DgtracesError) as exc:
        from_frame(neg, "alexnet", 32)
    assert exc.value.code == "PLAUSIBILITY" and exc.value.failures[0].column == "bwd_ms"
    extra = pd.concat([df, pd.DataFrame({"layer": ["conv99"], "fwd_ms": [1.0],
                                         "bwd_ms": [1.0]})])
    with pytest.raises(DgtracesError) as exc:
        from_frame(extra, "alexnet", 32)
    assert exc.value.code == "UNKNOWN_LAYER"
    with pytest.raises(DgtracesError) as exc:
        from_frame(df, "vgg19", 32)
    assert exc.value.code == "UNKNOWN_MODEL"
    with pytest.raises(DgtracesError) as exc:
        from_frame(df, "alexnet", 0)
    assert exc.value.failures[0].column == "batch_size"
    with pytest.raises(DgtracesError) as exc:
        from_frame(df, "alexnet", 8, io_ms=-2)
    assert exc.value.failures[0].column == "io_ms"
    with pytest.raises(DgtracesError) as exc:
        predict(df, Cluster(2), Policy())
    assert exc.value.failures[0].column == "model"


def test_googlenet_without_aux_layers_is_accepted():
    lf = layers_frame("googlenet")
    df = frame("googlenet")[~lf["aux"].to_numpy()]
    t = from_frame(df, "googlenet", 32)
    assert len(t.layers) == int((~lf["aux"]).sum()) == 142
    assert sum(t.grad_bytes) == int(lf.loc[~lf["aux"], "grad_bytes"].sum())


def test_calibration_scales_to_single_worker_throughput():
    from dgtraces.predict import calibrate

    t = calibrate(trace(h2d_ms=1.0), 400.0)
    p = predict(t, Cluster(1), Policy("wfbp"))
    assert p.throughput_img_s == pytest.approx(400.0, rel=1e-12)
    assert "scaled" in t.source
    with pytest.raises(DgtracesError) as exc:
        calibrate(trace(h2d_ms=1000.0), 400.0)
    assert exc.value.failures[0].column == "calibrate_img_s"


def test_shared_cpu_serialises_comm_and_staging_adds_copies():
    t = trace(update_ms=1.0)
    link, copy = Link("net", 100.0, 1.0), Link("mem", 10.0, 5.0)
    base = Cluster(2, 2, link, link)
    staged = Cluster(2, 2, link, link, staging=copy, staging_passes=3)
    cost = staged.comm_cost()
    assert [p.name for p in cost.phases] == ["ring", "staging"]
    assert cost.b_ms_per_byte == pytest.approx(base.comm_cost().b_ms_per_byte + 3 / 5e6)
    shared = Cluster(2, 2, link, link, staging=copy, staging_passes=3, shared_cpu=True)
    grads = [b for b in t.grad_bytes if b]
    compute = sum(t.fwd_ms) + sum(t.bwd_ms) + 1.0
    for name in ("naive", "wfbp"):
        p = predict(t, shared, Policy(name))
        assert p.iter_ms == pytest.approx(compute + sum(cost.time_ms(n) for n in grads))
        assert p.breakdown["comm_exposed"] == pytest.approx(p.breakdown["comm_total"])
    mg = simulate(t, shared, Policy("mgwfbp"))
    assert len(mg.messages) == 1  # nothing overlaps, so one message is optimal
    assert mg.iter_ms == pytest.approx(compute + cost.time_ms(sum(grads)))
    assert predict(t, staged, Policy("wfbp")).iter_ms < predict(t, shared, Policy("wfbp")).iter_ms
    assert simulate(t, Cluster(1, staging=copy, shared_cpu=True), Policy()).iter_ms == \
        pytest.approx(compute)


def test_staging_copy_fit_is_the_collectors_fit():
    torch = pytest.importorskip("torch")
    from dgtraces.collect import comm
    from dgtraces.predict import staging

    assert staging.fit_alpha_beta is fitting.fit_alpha_beta  # one fit, not two copies
    threads = torch.get_num_threads()
    try:
        fit = staging.measure_copy(sizes=(1 << 16, 1 << 18, 1 << 20), reps=3)
    finally:
        torch.set_num_threads(threads)
    ref = comm.fit_alpha_beta([n for n, _ in fit.points], [ms for _, ms in fit.points])
    assert (fit.alpha_us, fit.bandwidth_gb_s, fit.r2) == (ref["alpha_us"],
                                                          ref["bandwidth_gb_s"], ref["r2"])
    assert [n for n, _ in fit.points] == [1 << 16, 1 << 18, 1 << 20]


def _tr(**kw):
    from dgtraces.predict import Trace

    base = dict(model="alexnet", batch_size=16, layers=("conv1", "fc8"), fwd_ms=(1.0, 1.0),
                bwd_ms=(1.0, 1.0), grad_bytes=(100, 100))
    return Trace(**{**base, **kw})


@pytest.mark.parametrize("kw,code", [
    (dict(layers=("a", "a")), "DUPLICATE"),  # would make the DAG cyclic
    (dict(fwd_ms=(-100.0, 1.0)), "PLAUSIBILITY"),
    (dict(fwd_ms=(float("nan"), 1.0)), "PLAUSIBILITY"),
    (dict(bwd_ms=(float("inf"), 1.0)), "PLAUSIBILITY"),
    (dict(fwd_ms=(0.0, 0.0), bwd_ms=(0.0, 0.0)), "PLAUSIBILITY"),
    (dict(fwd_ms=(1e308, 1e308), bwd_ms=(1e308, 1e308)), "PLAUSIBILITY"),
    (dict(layers=(), fwd_ms=(), bwd_ms=(), grad_bytes=()), "BAD_INPUT"),
    (dict(fwd_ms=(1.0,)), "BAD_INPUT"),
    (dict(batch_size=0), "BAD_INPUT"),
    (dict(model=["alexnet"]), "BAD_INPUT"),
    (dict(io_ms=-1.0), "PLAUSIBILITY"),
])
def test_trace_refuses_what_the_dag_cannot_schedule(kw, code):
    with pytest.raises(DgtracesError) as exc:
        _tr(**kw)
    assert exc.value.code == code


def test_trace_accepts_numpy_numbers():
    t = _tr(batch_size=np.int64(16), fwd_ms=(np.float32(1.0), 1.0),
            grad_bytes=(np.int64(100), 100))
    assert type(t.batch_size) is int and predict(t, Cluster(2), Policy("wfbp")).iter_ms > 0


def test_phase_times_apply_to_any_trace_and_unknown_ones_are_refused():
    t = _tr()
    base = predict(t, Cluster(2), Policy("wfbp")).iter_ms
    assert predict(t, Cluster(2), Policy("wfbp"), io_ms=5.0).iter_ms == pytest.approx(base + 5)
    for kw in (dict(foo_ms=1.0), dict(io_ms="x"), dict(model="alexnet"), dict(batch_size=8)):
        with pytest.raises(DgtracesError) as exc:
            predict(t, Cluster(2), Policy("wfbp"), **kw)
        assert exc.value.code == "BAD_INPUT", kw
    with pytest.raises(DgtracesError) as exc:  # a model name, not a list of them
        predict(frame(), Cluster(2), Policy("wfbp"), model=["alexnet"], batch_size=16)
    assert exc.value.code == "BAD_INPUT"
    bad_cell = frame().astype({"fwd_ms": object})
    bad_cell.loc[3, "fwd_ms"] = "abc"
    with pytest.raises(DgtracesError):
        predict(bad_cell, Cluster(2), Policy("wfbp"), model="alexnet", batch_size=16)


def test_link_overrides_must_be_finite_and_a_named_release_must_exist(tmp_store):
    t = trace()
    for kw, code in ((dict(alpha_us=float("inf")), "BAD_INPUT"),
                     (dict(gbps=float("inf")), "BAD_INPUT"), (dict(alpha_us="5"), "BAD_INPUT"),
                     (dict(release="9.9.9"), "NOT_FOUND"), (dict(release="bogus"), "VERSION")):
        with pytest.raises(DgtracesError) as exc:
            predict(t, Cluster(4, 2, intra="loopback-gloo", **kw), Policy("wfbp"))
        assert exc.value.code == code, kw
    # a release without comm_fits keeps the shipped preliminary loopback values
    assert predict(t, Cluster(4, 2, intra="loopback-gloo", release="0.1.0"),
                   Policy("wfbp")).iter_ms > 0


def test_api_argument_types_are_typed_errors():
    t = trace()
    cases = [
        (lambda: predict(t, None, Policy("wfbp")), "BAD_INPUT"),
        (lambda: predict(t, Cluster(2), "wfbp"), "BAD_INPUT"),
        (lambda: predict(t, Cluster(2), Policy("wfbp"), calibrate_img_s="100"), "BAD_INPUT"),
        (lambda: Cluster(2, intra=["pcie3"]), "UNKNOWN_LINK"),
        (lambda: Cluster(10 ** 400), "BAD_INPUT"),
    ]
    for call, code in cases:
        with pytest.raises(DgtracesError) as exc:
            call()
        assert exc.value.code == code


def test_sweep_grid_fields_are_lists():
    from dgtraces.predict.sweep import Grid, run_sweep

    for kw in (dict(workers=4), dict(workers=None), dict(models="alexnet")):
        with pytest.raises(DgtracesError) as exc:
            run_sweep(Grid(**kw))
        assert exc.value.code == "BAD_INPUT", kw


def test_a_release_of_another_store_supplies_its_links_and_digest(tmp_path, monkeypatch):
    """A Release handle of a store other than the default one is read whole: its comm_fits
    for the link presets, its runs for the trace, its digest for the citation."""
    import shutil

    from dgtraces.comm.links import known_links
    from dgtraces.predict import Cluster, Policy, predict, resolve
    from dgtraces.store import manifest as store
    from dgtraces.store.release import Release

    src = store.data_root()
    version = store.latest()
    want = known_links(version)
    trace_want = resolve("resnet50", "v100", 64, release=version)
    other = tmp_path / "other"
    for name in ("releases", "shards"):
        shutil.copytree(src / name, other / name)
    monkeypatch.setenv("DGTRACES_DATA", str(tmp_path / "empty"))  # the default: no store
    rel = Release.open(version, other)
    assert known_links(rel) == want
    tr = resolve("resnet50", "v100", 64, release=rel)
    assert tr.run_id == trace_want.run_id and tr.h2d_ms == trace_want.h2d_ms
    pred = predict(tr, Cluster(8, 4, release=rel), Policy("wfbp"))
    assert (pred.dataset_release, pred.dataset_digest) == (version, rel.digest)


def test_repeated_simulations_are_kept_and_handed_out_fresh(monkeypatch):
    """simulate() keeps what it scheduled (issue #36): the same inputs are scheduled once and
    each caller gets its own breakdown; any input that changes gives a new schedule; the
    number kept is bounded; an unhashable trace is scheduled each time, never kept."""
    from dgtraces.predict import dag

    monkeypatch.setattr(dag, "_SCHEDULES", type(dag._SCHEDULES)())
    monkeypatch.setattr(dag, "SCHEDULES_KEPT", 3)
    calls = []
    real = dag._simulate
    monkeypatch.setattr(dag, "_simulate", lambda *a: calls.append(a) or real(*a))
    t, c, pol = trace(update_ms=1.0), Cluster(4, 1, "pcie3", "10gbe"), Policy("wfbp")
    first = simulate(t, c, pol)
    first.breakdown["comm_total"] = -1.0
    again = simulate(t, c, pol)
    assert len(calls) == 1 and again.breakdown["comm_total"] > 0
    assert again.tasks == first.tasks and again.iter_ms == first.iter_ms
    fresh = real(t, c, pol, c.comm_cost(), c.shared_cpu and bool(c.comm_cost().phases))
    assert again.iter_ms == fresh.iter_ms and again.breakdown == fresh.breakdown
    others = [(replace(t, update_ms=2.0), c, pol), (t, Cluster(8, 1, "pcie3", "10gbe"), pol),
              (t, c, Policy("naive")), (t, Cluster(4, 1, "nvlink", "10gbe"), pol)]
    for args in others:
        simulate(*args)
    assert len(calls) == 5 and len(dag._SCHEDULES) == 3
    assert simulate(*others[1]).iter_ms != simulate(*others[2]).iter_ms
    simulate(t, c, pol)  # pushed out by the bound: scheduled again
    assert len(calls) == 6
    odd = replace(t)
    object.__setattr__(odd, "fwd_ms", list(t.fwd_ms))
    assert simulate(odd, c, pol).iter_ms == first.iter_ms and len(calls) == 7
    assert simulate(odd, c, pol).iter_ms == first.iter_ms and len(calls) == 8
