"""The importer registry, the registry of shipped files, the one ``runs`` row builder, and
the import graph of ``dgtraces/importers`` (no cycle)."""

from __future__ import annotations

import functools
import json

import pytest

from dgtraces.errors import Code, DgtracesError
from dgtraces.importers.registry import BY_NAME, IMPORTERS, importer
from dgtraces.tables.runrow import MEASURES, runs_columns, runs_row


def _graph_module():
    """scripts/import_graph.py: the one import-graph reader, loaded once per process
    (tests/test_layers.py), its parsed trees shared."""
    from tests.test_layers import graph_module

    return graph_module()


@functools.cache
def import_graph() -> dict[str, set[str]]:
    """The package's import graph, computed once per test process (the tests read it)."""
    g = _graph_module()
    return g.edges(g.modules())


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    nodes = set(graph) | {t for ts in graph.values() for t in ts}
    return _graph_module().cycles(graph, nodes)


def test_cycle_finder_finds_a_planted_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_graph_sees_function_level_imports_and_skips_type_checking():
    graph = import_graph()
    # kineto.rows imports autorows inside import_trace (function level)
    assert "dgtraces.importers.kineto.autorows" in graph["dgtraces.importers.kineto.rows"]
    # base names GpuSource only under TYPE_CHECKING; gpu_run_row imports shipped lazily
    assert "dgtraces.importers.shipped" in graph["dgtraces.importers.base"]
    assert "dgtraces.importers.caffe_time" not in graph["dgtraces.importers.gpu_sources"]


def test_importers_form_no_import_cycle():
    graph = import_graph()
    assert [c for c in cycles(graph) if any(m.startswith("dgtraces.importers") for m in c)] \
        == []


def test_no_importer_imports_the_catalog():
    graph = import_graph()
    users = {m for m, targets in graph.items() if "dgtraces.importers.gpu_sources" in targets}
    assert not {m for m in users if m.startswith("dgtraces.importers")}
    assert "dgtraces.recipes.producers" in users


def test_every_registered_importer_has_its_subcommand_and_back():
    from dgtraces.cli.importers import import_group

    assert set(import_group.commands) == set(BY_NAME)
    assert len(BY_NAME) == len(IMPORTERS)  # names unique
    for entry in IMPORTERS:
        assert import_group.commands[entry.name].help == entry.help
        assert entry.reads in import_group.help


def test_every_registered_importer_loads_and_writes_known_tables():
    from dgtraces.tables.schema import TABLES

    for entry in IMPORTERS:
        fn = entry.load()
        assert callable(fn) and fn.__module__.startswith(entry.module)
        assert set(entry.writes) <= set(TABLES)


def test_every_shipped_source_names_a_registered_importer():
    from dgtraces.importers.gpu_sources import import_source
    from dgtraces.importers.shipped import SOURCES

    assert {s.importer for s in SOURCES} == {"caffe-time", "pipedream", "kineto"}
    pd_source = next(s for s in SOURCES if s.importer == "pipedream")
    res = import_source(pd_source)
    assert res.runs["model"].iloc[0] == pd_source.model
    assert res.runs["provenance"].iloc[0] == "published"
    assert list(res.frames()) == list(BY_NAME["pipedream"].writes)
    assert res.frames()["layer_timings"] is res.layer_timings


def test_comm_importers_return_their_registered_tables():
    from dgtraces import reference

    res = importer("osu").load()(reference.path("bcaffe/allreduce2.log"))
    assert list(res.frames()) == list(BY_NAME["osu"].writes) == ["comm", "comm_fits"]
    assert len(res.frames()["comm"]) == len(res.comm) > 0


def test_unknown_importer_is_typed_with_a_suggestion():
    with pytest.raises(DgtracesError) as err:
        importer("kinetto")
    assert err.value.code == Code.BAD_INPUT
    assert importer("Kineto").name == "kineto"


ROW = dict(run_id="r1", model="alexnet", device="cpu", device_kind="cpu",
           framework="pytorch 2.3.0", batch_size=4, provenance="measured",
           source="test rows", collector_version="test 1",
           timestamp_utc="2026-01-01T00:00:00Z")


def test_runs_row_has_every_column_in_schema_order():
    row = runs_row(**ROW, params={"b": 2, "a": 1}, fwd_ms=1.5, threads=2)
    assert list(row) == runs_columns()
    assert row["fwd_ms"] == pytest.approx(1.5) and row["threads"] == 2
    assert row["precision"] == "fp32" and row["flagged"] is False
    assert row["bwd_ms"] is None and row["notes"] is None and row["host"] is None
    assert row["params_json"] == '{"a": 1, "b": 2}'  # sorted: rebuilds are byte-identical
    assert runs_row(**ROW)["params_json"] is None


def test_runs_row_frames_validate_and_unknown_columns_are_typed():
    from dgtraces.importers.base import frame

    df = frame("runs", [runs_row(**ROW, fwd_ms=1.0, bwd_ms=2.0, iter_ms=3.0)])
    assert df["iter_ms"].iloc[0] == pytest.approx(3.0)
    with pytest.raises(DgtracesError) as err:
        runs_row(**ROW, fwd_time=1.0)
    assert err.value.code == Code.SCHEMA
    assert "flag_reason" in MEASURES and "run_id" not in MEASURES


def test_gpu_run_row_published_for_shipped_measured_otherwise():
    from dgtraces.importers.base import gpu_run_row
    from dgtraces.importers.shipped import COPIED_UTC, SOURCES

    args = dict(run_id="x", model="vgg16", device="gpu-unstated", framework="given",
                batch_size=8, source="s", importer="pipedream", params={"k": 1}, notes="n",
                fwd_ms=1.0)
    known = next(s for s in SOURCES if s.importer == "pipedream")
    row = gpu_run_row(known=known, **args)
    assert (row["provenance"], row["framework"]) == ("published", known.framework)
    assert row["timestamp_utc"] == COPIED_UTC  # PipeDream states no date
    assert json.loads(row["params_json"]) == {"k": 1, "stated": known.stated,
                                              "licence": known.licence}
    assert row["collector_version"] == "dgtraces.importers.pipedream 1"
    other = gpu_run_row(known=None, **args)
    assert (other["provenance"], other["framework"]) == ("measured", "given")
    assert json.loads(other["params_json"]) == {"k": 1}
    caffe = next(s for s in SOURCES if s.importer == "caffe-time")
    assert gpu_run_row(known=caffe, **args)["timestamp_utc"] == caffe.date_utc


def test_the_import_one_liner_names_all_importers_or_none():
    """Acceptance review #24: `dgtraces --help` said 'Import kineto / B-Caffe / OSU traces
    and the published tables', leaving out nccl-tests, caffe-time, PipeDream and DeepBench."""
    from dgtraces.cli import COMMANDS

    line = COMMANDS["import"][1].lower()
    named = [i.name for i in IMPORTERS if i.reads.lower() in line]  # "B-Caffe", "OSU", ...
    assert named in ([], [i.name for i in IMPORTERS])
