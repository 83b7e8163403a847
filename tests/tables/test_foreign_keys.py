"""Every foreign key declared in schema.FOREIGN_KEYS is enforced by checks, generically."""

import pandas as pd

from dgtraces.tables import checks, schema


def test_declared_keys_are_enforced():
    runs = pd.DataFrame({"run_id": ["r1"], "model": ["alexnet"]})
    lt = pd.DataFrame({"run_id": ["r1", "r2", "r1"], "layer": ["conv1", "conv1", "nope"]})
    it = pd.DataFrame({"trace_run_id": [None, "r1", "gone"]})
    fails = checks.cross_failures({"runs": runs, "layer_timings": lt, "iterations": it})
    got = [(f.code, f.file, f.row, f.column) for f in fails]
    assert got == [("CROSS_TABLE", None, 1, "run_id"), ("UNKNOWN_LAYER", None, 2, "layer"),
                   ("CROSS_TABLE", None, 2, "trace_run_id")]


def test_store_rows_count_as_parents():
    lt = pd.DataFrame({"run_id": ["r9"], "layer": ["fc8"]})
    known = {"runs": pd.DataFrame({"run_id": ["r9"], "model": ["alexnet"]})}
    assert checks.cross_failures({"layer_timings": lt}, known=known) == []
    assert checks.needed_parents(["layer_timings", "iterations"]) == {"runs"}


def test_a_new_declaration_is_enforced_without_new_code(monkeypatch):
    fk = schema.ForeignKey("comm_fits", ("interconnect",), "links", ("link",))
    monkeypatch.setattr(schema, "FOREIGN_KEYS", (*schema.FOREIGN_KEYS, fk))
    links = pd.DataFrame({"link": ["ib-edr"]})
    fits = pd.DataFrame({"interconnect": ["ib-edr", "warp-drive", None]})
    fails = checks.cross_failures({"links": links, "comm_fits": fits})
    assert [(f.code, f.row, f.column, f.found) for f in fails] == [
        ("CROSS_TABLE", 1, "interconnect", "'warp-drive'")]


def test_layers_rows_must_be_catalog_layers():
    lay = pd.DataFrame({"model": ["alexnet", "alexnet", "not-a-model"],
                        "layer": ["conv1", "conv99", "x"]})
    fails = checks.cross_failures({"layers": lay})
    assert [(f.code, f.row) for f in fails] == [("UNKNOWN_LAYER", 1)]
