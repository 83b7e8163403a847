"""Issue #26: framework profiles (one declaration), fusion cycles and first buckets (the DAG and
the vectorised path agree), the sync and input overhead terms, typed errors."""

import math

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from dgtraces.cli import main
from dgtraces.errors import Code, DgtracesError
from dgtraces.models import layers_frame
from dgtraces.predict import Cluster, Policy, from_frame, predict_trace, simulate
from dgtraces.predict.fast import iter_times, prepare
from dgtraces.predict.overheads import (
    Overheads,
    apply_overheads,
    expected_max_normal,
    kineto_step_cv,
    validation_spec,
)
from dgtraces.predict.policies import bucket_groups, fusion_groups
from dgtraces.predict.sweep import Grid, comm_grid
from dgtraces.reference.frameworks import (
    FRAMEWORKS,
    MIB,
    NAMES,
    apply_framework,
    get_framework,
)
from tests.paths import REPO


def trace(model="resnet50", batch=32, **kw):
    lf = layers_frame(model)
    rng = np.random.default_rng(3)
    df = pd.DataFrame({"layer": lf["layer"], "fwd_ms": rng.uniform(0.1, 2, len(lf)),
                       "bwd_ms": rng.uniform(0.1, 4, len(lf))})
    return from_frame(df, model, batch, **kw)


def test_bare_name_is_the_newest_row_and_versions_are_separate_rows():
    assert get_framework("none") is None and get_framework(None) is None
    new, old = get_framework("horovod"), get_framework("horovod@0.16-0.20")
    assert (new.bucket_bytes, new.cycle_ms) == (128 * MIB, 1.0)
    assert (old.bucket_bytes, old.cycle_ms) == (64 * MIB, 5.0)
    ddp = get_framework("pytorch-ddp")
    assert (ddp.bucket_bytes, ddp.first_bucket_bytes) == (25 * MIB, 1 * MIB)
    assert get_framework("paddle").blocking is True
    assert set(NAMES) == {"none"} | {p.name for p in FRAMEWORKS}
    assert all(p.citation for p in FRAMEWORKS)


@pytest.mark.parametrize("bad", ["pytorch", "horovod@9.9", "tensorflow", ""])
def test_unknown_framework_is_typed_with_the_known_names(bad):
    if bad == "":
        assert get_framework(bad) is None  # empty = none
        return
    with pytest.raises(DgtracesError) as exc:
        get_framework(bad)
    assert exc.value.code == Code.UNKNOWN_FRAMEWORK
    failure = exc.value.failures[0]
    assert failure.column == "framework" and "pytorch-ddp" in failure.expected


def test_apply_framework_explicit_options_win():
    prof = get_framework("paddle")
    cluster, policy = apply_framework(prof, Cluster(4), Policy("wfbp"))
    assert policy.name == "bucketed" and policy.bucket_bytes == 32 * MIB
    assert cluster.shared_cpu is True
    cluster, policy = apply_framework(prof, Cluster(4), Policy("mgwfbp", bucket_bytes=5),
                                      frozenset({"policy", "bucket_bytes"}))
    assert (policy.name, policy.bucket_bytes) == ("mgwfbp", 5)
    ps, _ = apply_framework(get_framework("tf-ps"), Cluster(4), Policy())
    assert ps.algorithm == "ps"
    kept, _ = apply_framework(get_framework("tf-ps"), Cluster(4, algorithm="tree"), Policy(),
                              frozenset({"algorithm"}))
    assert kept.algorithm == "tree"  # an explicit --algorithm wins over the PS placement
    same = apply_framework(None, Cluster(4), Policy())
    assert same == (Cluster(4), Policy())


def test_first_bucket_and_cycle_grouping():
    assert bucket_groups([0.6, 0.6, 3, 3, 3], 5, 1) == [[0, 1], [2, 3], [4]]
    assert bucket_groups([0.6, 0.6, 3, 3, 3], 5) == [[0, 1, 2, 3], [4]]
    groups, starts = fusion_groups([1, 1, 1, 9, 1], [0.5, 1.5, 1.9, 4.2, 4.3],
                                   Policy("bucketed", bucket_bytes=8, cycle_ms=2.0))
    # ticks 2, 2, 2, 6, 6; the 6 ms tick splits at the threshold
    assert groups == [[0, 1, 2], [3], [4]]
    assert starts == pytest.approx([2.0, 6.0, 6.0])


@pytest.mark.parametrize("profile", [p.key for p in FRAMEWORKS])
@pytest.mark.parametrize("workers,gpn,inter", [(8, 8, "nvlink2"), (16, 4, "10gbe")])
def test_dag_and_vectorised_agree_for_every_profile(profile, workers, gpn, inter):
    t = trace()
    cluster, policy = apply_framework(get_framework(profile),
                                      Cluster(workers, gpn, "pcie3", inter, "ring"), Policy())
    ref = simulate(t, cluster, policy)
    cg = comm_grid(Grid(workers=(workers,), gpus_per_node=(gpn,), intra=("pcie3",),
                        inter=(inter,), algorithms=(cluster.algorithm,)))
    fast, _ = iter_times(prepare(t), policy, cg["a_ms"][:1], cg["b_ms_per_byte"][:1],
                         cluster.shared_cpu)
    assert fast[0] == pytest.approx(ref.iter_ms, rel=1e-9)


def test_cycle_delays_messages_to_cycle_ends():
    t = trace()
    c = Cluster(8, 8, "nvlink2", "nvlink2")
    fused = simulate(t, c, Policy("bucketed", bucket_bytes=64 * MIB, cycle_ms=5.0))
    bwd_start = next(x.start_ms for x in fused.tasks if x.id.startswith("bwd/"))
    for m in fused.messages:
        task = next(x for x in fused.tasks if x.id == m.task_id)
        assert (task.start_ms - bwd_start) / 5.0 >= math.floor(
            (m.ready_ms - bwd_start) / 5.0 + 1e-9) - 1e-9
        assert (m.ready_ms - bwd_start) / 5.0 == pytest.approx(
            round((m.ready_ms - bwd_start) / 5.0), abs=1e-9)


def test_expected_max_of_normals():
    assert expected_max_normal(1) == 0.0
    assert expected_max_normal(2) == pytest.approx(1 / math.sqrt(math.pi), rel=1e-6)
    assert expected_max_normal(3) == pytest.approx(1.5 / math.sqrt(math.pi), rel=1e-6)
    assert expected_max_normal(8) == pytest.approx(1.4236, abs=1e-4)


def test_kineto_step_cv_from_the_shipped_trace():
    cv, steps, source = kineto_step_cv()
    assert steps == 6 and cv == pytest.approx(0.03259, abs=1e-4)
    assert "num_workers_0" in source


def test_sync_term_adds_cv_t1_emax():
    t = trace()
    pred, _ = predict_trace(t, Cluster(8, 8, "nvlink2", "nvlink2"), Policy())
    out = apply_overheads(pred, t, Overheads.parse("sync", iteration_cv=0.05))
    t1 = pred.speedup_vs_1 * pred.iter_ms / 8
    assert out.breakdown["sync_ms"] == pytest.approx(0.05 * t1 * expected_max_normal(8))
    assert out.iter_ms == pytest.approx(pred.iter_ms + out.breakdown["sync_ms"])
    assert out.speedup_vs_1 == pytest.approx(8 * t1 / out.iter_ms)
    assert out.overheads["sync"]["cv"] == 0.05
    one, _ = predict_trace(t, Cluster(1), Policy())
    assert apply_overheads(one, t, Overheads.parse("sync")).iter_ms == pytest.approx(
        one.iter_ms)
    assert apply_overheads(pred, t, Overheads.parse("none")) is pred


def test_input_term_needs_its_measurement():
    t = trace(batch=64)
    pred, _ = predict_trace(t, Cluster(8, 4, "nvlink2", "10gbe"), Policy())
    with pytest.raises(DgtracesError) as exc:
        apply_overheads(pred, t, Overheads.parse("input"))
    assert exc.value.code == Code.MISSING_MEASUREMENT
    assert exc.value.failures[0].column == "host_decode_img_s"
    # 4 GPUs x 64 images at 1000 img/s = 256 ms per iteration from the node's pipeline
    out = apply_overheads(pred, t, Overheads.parse("input", host_decode_img_s=1000.0))
    assert out.breakdown["input_ms"] == pytest.approx(max(0.0, 256.0 - pred.iter_ms))
    fast = apply_overheads(pred, t, Overheads.parse("input", host_decode_img_s=1e9))
    assert fast.iter_ms == pytest.approx(pred.iter_ms)
    for loader in ("synthetic", "dali-gpu"):  # no decode work on the host (I2): 0
        free = apply_overheads(pred, t, Overheads.parse("input"), loader=loader)
        assert free.breakdown["input_ms"] == 0.0
        assert validation_spec(Overheads.parse("input"), t, loader)[0].terms == {"input"}
    for loader in (None, "pytorch-dataloader", "dali-cpu", "tf-data"):  # no sourced rate
        with pytest.raises(DgtracesError) as exc:
            apply_overheads(pred, t, Overheads.parse("input"), loader=loader)
        assert exc.value.code == Code.MISSING_MEASUREMENT
        spec, how = validation_spec(Overheads.parse("sync,input"), t, loader)
        assert spec.terms == frozenset({"sync"}) and how.startswith("no measurement")
    with pytest.raises(DgtracesError) as exc:
        apply_overheads(pred, t, Overheads.parse("input"), loader="magic")
    assert exc.value.code == Code.BAD_INPUT


@pytest.mark.parametrize("text,terms", [("none", set()), ("measured", {"sync"}),
                                        ("measured,input", {"sync", "input"}),
                                        ("sync", {"sync"}), ("sync,input", {"sync", "input"})])
def test_overheads_parse(text, terms):
    assert Overheads.parse(text).terms == frozenset(terms)


@pytest.mark.parametrize("kw", [{"iteration_cv": -0.1}, {"host_decode_img_s": 0.0},
                                {"iteration_cv": float("nan")}])
def test_overheads_bad_values(kw):
    with pytest.raises(DgtracesError) as exc:
        Overheads.parse("sync", **kw)
    assert exc.value.code == Code.BAD_INPUT
    with pytest.raises(DgtracesError) as exc:
        Overheads.parse("straggler")
    assert exc.value.code == Code.BAD_INPUT


BASE = ["predict", "--model", "alexnet", "--device", "k80", "--batch-size", "32",
        "--workers", "8", "--gpus-per-node", "4"]


def test_cli_framework_and_overheads():
    import json

    res = CliRunner().invoke(main, BASE + ["--framework", "horovod@0.16-0.20", "--overheads",
                                           "sync", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert doc["framework"]["framework"] == "horovod@0.16-0.20"
    assert doc["policy"] == "bucketed" and doc["bucket_bytes"] == 64 * MIB
    assert doc["breakdown"]["sync_ms"] > 0
    explicit = json.loads(CliRunner().invoke(main, BASE + ["--framework", "horovod",
                                                           "--policy", "wfbp",
                                                           "--json"]).output)
    assert explicit["policy"] == "wfbp"
    bad = CliRunner().invoke(main, BASE + ["--framework", "horovd"])
    assert bad.exit_code == 1 and bad.exception.code == Code.UNKNOWN_FRAMEWORK
    missing = CliRunner().invoke(main, BASE + ["--overheads", "input"])
    assert missing.exit_code == 1 and missing.exception.code == Code.MISSING_MEASUREMENT


def test_published_rows_get_their_declared_profile():
    from dgtraces.evaluation.published import validate_published

    val = validate_published(None, "auto", Overheads.parse("sync"))
    rows = val.scored()
    profiles = dict(zip(rows["update"], rows["framework_profile"], strict=False))
    # per source too: the profiles its rows ran under, beside the linear baseline
    by = val.by_source().set_index("source")
    for src, part in rows.groupby("source"):
        assert by.loc[src, "framework_profiles"] == ", ".join(
            sorted(set(part["framework_profile"])))
    assert "horovod@0.16-0.20" in " ".join(by["framework_profiles"])
    assert "per framework profile:" in val.report()
    assert profiles["parameter server on the host CPU"] == "tf-ps@1.x"
    assert profiles["horovod (NCCL all-reduce with tensor fusion)"] == "horovod@0.16-0.20"
    assert (rows["sync_ms"] > 0).all()
    none = validate_published(None, "none").scored()
    assert (none["framework_profile"] == "none").all() and (none["sync_ms"] == 0).all()


def test_adopted_terms_still_meet_the_preregistered_rule():
    """``measured`` means the adopted terms: each meets the rule against today's predictor,
    every other term does not (re-runs the published and measured CPU validation)."""
    from dgtraces.evaluation.overheads import evaluate_terms
    from dgtraces.predict.overheads import ADOPTED, TERMS

    ev = evaluate_terms()
    for v in ev.variants:
        if v.framework == "none" and v.overheads in TERMS:
            assert ev.verdict(v)[0] is (v.overheads in ADOPTED), (v.label, ev.verdict(v))
    auto = next(v for v in ev.variants if v.framework == "auto" and v.overheads == "none")
    assert ev.verdict(auto)[0] is True
    # the docs' tables are this evaluation's output (scripts/overheads_tables.py)
    from dgtraces.evaluation.overheads import docs_tables

    blocks = docs_tables(None, ev=ev)
    for name, key in (("predictor-overheads.md", "terms"),
                      ("predictor-published.md", "results")):
        doc = (REPO / "docs" / name).read_text()
        block = doc.split(f"<!-- {key}:begin -->\n", 1)[1].split(f"\n<!-- {key}:end -->",
                                                                 1)[0]
        assert block == blocks[key], name
    assert "I2 of the input term: it changes 0 of" in blocks["terms"]  # not adopted


def test_sweep_overheads_equal_the_single_prediction():
    from dgtraces.predict.overheads import apply_overheads_frame
    from dgtraces.predict.sweep import run_sweep

    t = trace(batch=64)
    grid = Grid(workers=(1, 4, 8), gpus_per_node=(4,), intra=("nvlink2",), inter=("10gbe",),
                policies=("wfbp",), traces={("resnet50", 64): t})
    spec = Overheads.parse("sync,input", iteration_cv=0.04, host_decode_img_s=900.0)
    rows = apply_overheads_frame(run_sweep(grid), spec)
    for row in rows.to_dict("records"):
        pred, _ = predict_trace(t, Cluster(row["workers"], 4, "nvlink2", "10gbe"), Policy())
        one = apply_overheads(pred, t, spec)
        assert row["iter_ms"] == pytest.approx(one.iter_ms, rel=1e-9)
        assert row["speedup_vs_1"] == pytest.approx(one.speedup_vs_1, rel=1e-9)
        assert row["sync_ms"] == pytest.approx(one.breakdown["sync_ms"], rel=1e-9, abs=1e-12)
    with pytest.raises(DgtracesError) as exc:
        apply_overheads_frame(rows, Overheads.parse("input"))
    assert exc.value.code == Code.MISSING_MEASUREMENT


def test_cli_validate_predictor_with_profiles_and_terms():
    import json

    res = CliRunner().invoke(main, ["validate-predictor", "--published", "--framework", "auto",
                                    "--overheads", "measured", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    head = doc["published"]["headline"]
    assert (head["framework"], head["overheads"]) == ("auto", "sync")
    assert head["predictor_mape_on_linear_rows_pct"] < head["linear_mape_pct"]
    assert {r["framework_profile"] for r in doc["published"]["rows"]
            if r["role"] == "scored"} >= {"tf-ps@1.x", "caffe-mpi@1.0-2.0"}
    bad = CliRunner().invoke(main, ["validate-predictor", "--published", "--framework", "autp"])
    assert bad.exit_code == 1 and bad.exception.code == Code.UNKNOWN_FRAMEWORK
    assert "auto" in bad.exception.failures[0].expected.split(" | ")  # known and close here


@pytest.mark.parametrize("name", list(NAMES))
def test_cli_sweep_and_predict_agree_for_every_framework_name(name, tmp_path):
    """Every --framework name works in sweep (tf-mirrored's one pack of 2^62 bytes is not a
    --bucket-mib) and gives predict's iteration time; none is the command without it."""
    import json

    out = tmp_path / "rows.csv"
    sw = CliRunner().invoke(main, ["sweep", "--models", "alexnet", "--device", "k80",
                                   "--batch-sizes", "32", "--workers", "8", "--gpus-per-node",
                                   "4", "--framework", name, "--out", str(out)])
    assert sw.exit_code == 0, sw.output
    rows = pd.read_csv(out)
    pred = json.loads(CliRunner().invoke(main, BASE + ["--framework", name, "--json"]).output)
    if name == "none":  # the trace (reconstructed k80) implies no profile: auto is none
        plain = json.loads(CliRunner().invoke(main, BASE + ["--json"]).output)
        assert plain["framework"]["framework"] == "none"
        assert plain["framework"]["how"].startswith("not inferable")
        assert pred["framework"] == {"framework": "none", "how": "given"}
        assert {k: v for k, v in pred.items() if k not in ("framework", "inputs",
                                                           "reproduce")} == \
            {k: v for k, v in plain.items() if k not in ("framework", "inputs", "reproduce")}
        rows = rows[rows["policy"] == "wfbp"]
    assert rows["iter_ms"].tolist() == pytest.approx([pred["iter_ms"]], rel=1e-9)


def test_none_with_other_terms_is_refused_and_a_dropped_adopted_term_is_noted():
    """Acceptance review #21: --overheads measured,none was accepted, and --overheads input
    dropped the adopted sync term without a word."""
    from dgtraces.predict.overheads import ADOPTED

    for text in ("measured,none", "none,sync", "input, none"):
        with pytest.raises(DgtracesError) as exc:
            Overheads.parse(text)
        assert exc.value.code == Code.BAD_INPUT and exc.value.failures[0].column == "overheads"
    assert Overheads.parse("none,none").terms == frozenset()
    t = trace(batch=64)
    pred, _ = predict_trace(t, Cluster(8, 4, "nvlink2", "10gbe"), Policy())
    spec = Overheads.parse("input", host_decode_img_s=1000.0)
    extra = set(apply_overheads(pred, t, spec).notes) - set(pred.notes)
    (dropped,) = [n for n in extra if all(term in n for term in ADOPTED)]  # named
    full = apply_overheads(pred, t, Overheads.parse("measured,input", host_decode_img_s=1e3))
    assert dropped not in full.notes
