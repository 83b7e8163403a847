"""The importer registry, the registry of shipped files, the one ``runs`` row builder, and
the import graph of ``dgtraces/importers`` (no cycle)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

import dgtraces
from dgtraces.errors import Code, DgtracesError
from dgtraces.importers.registry import BY_NAME, IMPORTERS, importer
from dgtraces.tables.runrow import MEASURES, runs_columns, runs_row

PACKAGE = Path(dgtraces.__file__).parent


def _modules() -> dict[str, Path]:
    mods = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = path
    return mods


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return skip


def import_graph() -> dict[str, set[str]]:
    """module -> the package modules it imports: top-level and function-level imports,
    relative ones resolved, ``if TYPE_CHECKING`` blocks left out."""
    mods = _modules()

    def known(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        skip = _type_checking_nodes(tree)
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
                # ``from pkg import sub`` imports the submodule, ``from mod import name`` mod
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base
                           for a in node.names]
            for target in targets:
                hit = known(target) if target.startswith("dgtraces") else None
                if hit and hit != mod:
                    graph[mod].add(hit)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    comp.append(top)
                    if top == node:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


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
