"""Declarative release recipes: the generic builder, the shipped recipes against the shipped
releases (deterministic parts only), and `release --add-models`."""

import json

import pandas as pd
import pytest
from click.testing import CliRunner

from dgtraces.cli import main
from dgtraces.contribute.release import build_release
from dgtraces.errors import DgtracesError
from dgtraces.models import layers_frame
from dgtraces.recipes import Recipe, Step, get_recipe, recipes
from dgtraces.recipes.build import build_recipe, context, produce
from dgtraces.store import manifest as st
from dgtraces.store import release, shards
from tests.frames_close import assert_frames_close, json_differences

P = "dgtraces.recipes.producers:"


def _added(version: str, table: str) -> pd.DataFrame:
    """The rows ``version`` added to ``table`` on top of its parent (appended last)."""
    m = st.read_manifest(version)
    df = release.read_table(table, version)
    parent = release.read_table(table, m["parent"]) if table in st.read_manifest(
        m["parent"])["tables"] else df.iloc[:0]
    return df.iloc[len(parent):].reset_index(drop=True)


def test_shipped_recipes_cover_every_release_with_its_base():
    assert list(recipes()) == st.list_releases() == ["0.1.0", "0.2.0", "0.3.0", "0.4.0",
                                                     "0.5.0", "0.6.0", "0.7.0"]
    for version, r in recipes().items():
        assert r.base == st.read_manifest(version)["parent"]
    assert get_recipe("v0.3.0") is recipes()["0.3.0"]
    with pytest.raises(DgtracesError) as exc:
        get_recipe("0.9.0")
    assert exc.value.code == "NOT_FOUND"


def test_v010_recipe_reproduces_the_layers_table():
    r = get_recipe("0.1.0")
    frames = produce(r, context(r))
    for version in st.list_releases():  # later releases carry it unchanged (first rows)
        stored = release.read_table("layers", version).iloc[:len(frames["layers"])]
        pd.testing.assert_frame_equal(frames["layers"], stored)


def test_v020_recipe_declares_what_v020_measured():
    r = get_recipe("0.2.0")
    (step,) = r.steps
    assert step.measures and r.deterministic_steps() == ()
    added = set(st.read_manifest("0.2.0")["tables"]) - set(st.read_manifest("0.1.0")["tables"])
    assert set(step.tables) == added
    runs = release.read_table("runs", "0.2.0")
    got = {(m, int(b), int(t)) for m, b, t in runs[["model", "batch_size", "threads"]]
           .itertuples(index=False)}
    want = {(m, b, t) for m, (t1, t2) in step.kwargs["layer_batches"].items()
            for t, sizes in ((1, t1), (2, t2)) for b in sizes}
    assert got == want and len(runs) == 14
    its = release.read_table("iterations", "0.2.0")
    assert set(its["policy"]) == set(step.kwargs["policies"])
    assert set(its["batch_size"]) == {step.kwargs["ssgd_batch"]}


def test_v030_recipe_deterministic_steps_reproduce_the_stored_rows():
    r = get_recipe("0.3.0")
    assert [s.label() for s in r.deterministic_steps()] == ["reconstructions", "published"]
    stored_runs = _added("0.3.0", "runs")
    stamps = stored_runs.loc[stored_runs["provenance"] == "reconstructed", "timestamp_utc"]
    assert stamps.nunique() == 1  # one stamp per build: an input, given back here
    ctx = context(r, stamp=stamps.iloc[0])
    frames = produce(r, ctx, r.deterministic_steps())
    assert ctx.facts == {"reconstructed": 42, "method": "dgtraces.reconstruct/roofline-1.1"}
    for table in ("runs", "layer_timings", "iterations", "comm", "comm_fits"):
        stored = _added("0.3.0", table)
        assert_frames_close(frames[table][list(stored.columns)], stored)
    devices = _added("0.3.0", "devices")  # + the measured CPU rows (cpu_devices step)
    assert len(frames["devices"]) == 4 and len(devices) == 6
    assert_frames_close(frames["devices"], devices.iloc[:4])
    assert r.notes.format_map({**ctx.facts}) == st.read_manifest("0.3.0")["notes"]


def test_fitted_floats_compare_with_tolerance_not_as_text():
    """Issue #28 point 1: another numpy/pandas gives eff_gemm 0.8288134523303327 for
    0.8288134523483847; text comparison failed (and printed ~100 KB)."""
    runs = _added("0.3.0", "runs")
    runs = runs[runs["provenance"] == "reconstructed"].head(3).reset_index(drop=True)
    nudged = runs.copy()
    nudged["params_json"] = [json.dumps(_nudge(json.loads(t), 1 + 2e-11))
                             for t in runs["params_json"]]
    assert nudged["params_json"].iloc[0] != runs["params_json"].iloc[0]
    with pytest.raises(AssertionError):  # the text comparison this replaces
        pd.testing.assert_frame_equal(nudged, runs)
    assert_frames_close(nudged, runs)  # last digits differ: equal
    far = runs.copy()
    far["params_json"] = [json.dumps(_nudge(json.loads(t), 1.01)) for t in runs["params_json"]]
    with pytest.raises(AssertionError) as exc:
        assert_frames_close(far, runs)
    assert len(str(exc.value)) < 2000  # a few differing values, never the frame
    assert json_differences('{"a": [1.0, 2]}', '{"a": [1.0000000000001, 2]}') == []


def _nudge(value, factor):
    if isinstance(value, dict):
        return {k: _nudge(v, factor) for k, v in value.items()}
    if isinstance(value, list):
        return [_nudge(v, factor) for v in value]
    return value * factor if isinstance(value, float) else value


def test_v040_recipe_reproduces_the_stored_rows():
    r = get_recipe("0.4.0")
    assert [s.label() for s in r.deterministic_steps()] == ["layers", "gpu_traces",
                                                            "datasheet_devices"]
    ctx = context(r)
    frames = produce(r, ctx, r.steps)
    for table in ("layers", "runs", "layer_timings", "devices"):
        stored = _added("0.4.0", table)
        assert_frames_close(frames[table][list(stored.columns)], stored)
    assert r.notes.format_map({**ctx.facts, "rows": "+2 devices, +1054 layer_timings, "
                               "+554 layers, +8 runs"}) == st.read_manifest("0.4.0")["notes"]


def test_v050_recipe_reproduces_the_stored_rows():
    r = get_recipe("0.5.0")
    assert [s.label() for s in r.deterministic_steps()] == ["deepbench_kernels",
                                                            "datasheet_devices"]
    ctx = context(r)
    frames = produce(r, ctx, r.steps)
    for table in ("kernels", "devices"):
        stored = _added("0.5.0", table)
        pd.testing.assert_frame_equal(frames[table][list(stored.columns)], stored)
    assert ctx.facts == {"kernel_convs": 658, "kernel_gemms": 1120, "kernels_keyed": 364}
    assert r.notes.format_map({**ctx.facts, "rows": "+6 devices, +1778 kernels"}) == \
        st.read_manifest("0.5.0")["notes"]
    # the reconstructed rows are v0.3.0's, unchanged (kernels-2.0 not adopted)
    runs = release.read_table("runs", "0.5.0")
    assert set(runs.loc[runs["provenance"] == "reconstructed", "collector_version"]) == {
        "dgtraces.reconstruct/roofline-1.1"}


@pytest.mark.slow
def test_v060_recipe_reproduces_the_stored_rows():
    """Issue #33: the V100 kernels and the kernels-3 fit and evaluation (half a minute)."""
    r = get_recipe("0.6.0")
    assert [s.label() for s in r.deterministic_steps()] == ["deepbench_kernels",
                                                            "kernels3_params"]
    ctx = context(r)
    frames = produce(r, ctx, r.steps)
    stored = _added("0.6.0", "kernels")
    pd.testing.assert_frame_equal(frames["kernels"][list(stored.columns)], stored)
    params = release.read_table("method_params", "0.6.0")
    assert_frames_close(frames["method_params"][list(params.columns)], params)
    assert ctx.facts == {"kernel_convs": 188, "kernel_gemms": 320, "kernels_keyed": 104,
                         "method_params": len(params)}
    assert r.notes.format_map({**ctx.facts, "rows": f"+508 kernels, +{len(params)} "
                               "method_params"}) == st.read_manifest("0.6.0")["notes"]
    # the reconstructed rows are v0.3.0's, unchanged (kernels-3 not adopted)
    runs = release.read_table("runs", "0.6.0")
    assert set(runs.loc[runs["provenance"] == "reconstructed", "collector_version"]) == {
        "dgtraces.reconstruct/roofline-1.1"}


def test_v070_recipe_reproduces_the_stored_rows():
    """The H200 collection: the shipped CSV copies of the staged contribution are the rows
    release 0.7.0 added (exactly: the shards are the ones `dgtraces release` wrote)."""
    r = get_recipe("0.7.0")
    assert [s.label() for s in r.deterministic_steps()] == ["contribution"]
    ctx = context(r)
    frames = produce(r, ctx, r.steps)
    for table in ("runs", "layer_timings", "comm"):
        stored = _added("0.7.0", table)
        pd.testing.assert_frame_equal(frames[table][list(stored.columns)], stored)
    runs = frames["runs"]
    assert set(runs["device"]) == {"h200"} and set(runs["provenance"]) == {"measured"}
    assert runs["layer_sum_ratio"].between(0.9, 1.1).all()  # none flagged (#36: spin hold)
    assert r.notes.format_map({**ctx.facts, "rows": "+14 comm, +981 layer_timings, +7 runs"}
                              ) == st.read_manifest("0.7.0")["notes"]


def _recipe(version, base, *steps, notes="built: {rows}"):
    return Recipe(version, base, notes, tuple(steps))


def test_generic_builder_writes_validates_and_refuses(empty_store):
    v1 = _recipe("0.1.0", None, Step(P + "layers", ("layers",), {"models": ("alexnet",)}))
    res = build_recipe(v1, root=empty_store)
    assert res.rows_added == {"layers": 23} and res.notes == "built: +23 layers"
    m = json.loads((res.path / "manifest.json").read_text())
    assert m["notes"] == "built: +23 layers" and m["tables"]["layers"]["rows"] == 23
    v2 = _recipe("0.2.0", "0.1.0",
                 Step(P + "layers", ("layers",), {"models": ("resnet50",)}))
    dry = build_recipe(v2, root=empty_store, dry_run=True)
    assert dry.path is None and st.list_releases(empty_store) == ["0.1.0"]
    build_recipe(v2, root=empty_store)
    layers = release.read_table("layers", "0.2.0", empty_store)
    assert list(layers["model"].unique()) == ["alexnet", "resnet50"] and len(layers) == 23 + 228
    assert st.read_manifest("0.2.0", empty_store)["parent"] == "0.1.0"
    cases = [(v2, "VERSION"),  # exists
             (_recipe("0.4.0", "0.3.0"), "NOT_FOUND"),  # no base
             (_recipe("0.3.0", "0.2.0", Step(P + "layers", ("runs",), {"models": ("alexnet",)})),
              "BAD_INPUT"),  # returns a table it did not declare
             (_recipe("0.3.0", "0.2.0", Step(P + "nothing", ("layers",))), "BAD_INPUT"),
             (_recipe("0.3.0", "0.2.0", Step(P + "layers", ("layers",), {"models": ("vgg",)})),
              "UNKNOWN_MODEL"),
             (_recipe("0.3.0", "0.2.0", Step(P + "layers", ("layers",),
                                            {"models": ("alexnet",)})), "SCHEMA")]  # dup keys
    for recipe, code in cases:
        with pytest.raises(DgtracesError) as exc:
            build_recipe(recipe, root=empty_store)
        assert exc.value.code == code, recipe
    assert st.list_releases(empty_store) == ["0.1.0", "0.2.0"]


def test_cli_recipe_plan_and_dry_run(empty_store):
    runner = CliRunner()
    plan = runner.invoke(main, ["recipe", "0.3.0", "--plan"])
    assert plan.exit_code == 0
    assert "producers:cpu_devices (measures)" in plan.output
    assert "producers:published (deterministic)" in plan.output
    res = runner.invoke(main, ["recipe", "0.1.0", "--dry-run", "--root", str(empty_store)])
    assert res.exit_code == 0 and "409 rows" in res.output
    assert st.list_releases(empty_store) == []


@pytest.fixture
def alexnet_store(empty_store, tmp_path, monkeypatch):
    monkeypatch.setenv("DGTRACES_CHANGELOG", str(tmp_path / "CHANGELOG.md"))
    monkeypatch.setenv("DGTRACES_CARDS", str(tmp_path / "cards"))
    shards.write_release("0.1.0", {"layers": layers_frame("alexnet")}, root=empty_store)
    return empty_store


def test_release_adds_registry_models_to_layers(alexnet_store, tmp_path):
    for models, code in ((["alexnet"], "DUPLICATE"), (["alexnet-mxnet"], "UNKNOWN_MODEL")):
        with pytest.raises(DgtracesError) as exc:
            build_release("0.2.0", root=alexnet_store, models=models)
        assert exc.value.code == code
    res = build_release("0.2.0", root=alexnet_store, models=["resnet50", "googlenet"])
    assert res.models == ["resnet50", "googlenet"] and res.ids == []
    assert res.rows_added == {"layers": 228 + 158}
    layers = release.read_table("layers", "0.2.0", alexnet_store)
    pd.testing.assert_frame_equal(layers, layers_frame(["alexnet", "resnet50", "googlenet"]))
    assert st.read_manifest("0.2.0", alexnet_store)["notes"] == "models: resnet50, googlenet"
    log = (tmp_path / "CHANGELOG.md").read_text()
    assert "- Model `resnet50` (ResNet-50 (He et al. 2016);" in log and ": 228 layers rows" in log


def test_cli_release_add_models(alexnet_store):
    runner = CliRunner()
    bad = runner.invoke(main, ["release", "0.2.0", "--add-models", "resnet50,vgg19"])
    assert bad.exit_code == 2  # not a registry model: a usage error, nothing built
    ok = runner.invoke(main, ["release", "0.2.0", "--add-models", "resnet50"])
    assert ok.exit_code == 0 and "model(s) resnet50: +228 layers" in ok.output
    assert st.list_releases(alexnet_store) == ["0.1.0", "0.2.0"]
