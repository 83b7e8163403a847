"""The package's architecture holds (issue #24): no import circle, no import running up a
layer, few modules flat in ``dgtraces/``, no private name used outside its module, error
codes raised as ``Code`` members, and light imports where commands start."""

import ast
import functools
import importlib.util
import subprocess
import sys
from pathlib import Path

from tests.paths import REPO


@functools.cache
def graph_module():
    """scripts/import_graph.py, loaded once per test process (its parsed trees are shared by
    the tests that read the package's sources: tests/importers/test_importers_registry.py)."""
    spec = importlib.util.spec_from_file_location("import_graph",
                                                  REPO / "scripts" / "import_graph.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


_graph = graph_module


@functools.cache
def _shipped_report() -> dict:
    """The report of the shipped package, computed once per test process (the four checks
    below read it, none changes it)."""
    return _graph().report()


def test_no_import_circles():
    assert _shipped_report()["cycles"] == []


def test_no_import_runs_up_a_layer():
    assert _shipped_report()["upward"] == []


def test_every_module_has_a_layer_and_few_are_flat():
    graph = _graph()
    rep = _shipped_report()
    for mod in graph.modules():
        graph.layer_of(mod)  # KeyError: a module outside every layer
    assert len(rep["flat"]) <= 8, rep["flat"]


def test_no_private_name_is_used_outside_its_module():
    assert _shipped_report()["private"] == []


def test_the_graph_finds_what_it_should(tmp_path):
    """The checker itself: a circle, an upward import and a private name in a toy package."""
    graph = _graph()
    pkg = tmp_path / "dgtraces"
    (pkg / "tables").mkdir(parents=True)
    (pkg / "cli").mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "errors.py").write_text("from dgtraces.cli import main\n")
    (pkg / "tables" / "__init__.py").write_text("from dgtraces.tables import a\n")
    (pkg / "tables" / "a.py").write_text("def f():\n    from dgtraces.tables import b\n")
    (pkg / "tables" / "b.py").write_text("from dgtraces.tables.a import f, _hidden\n")
    (pkg / "cli" / "__init__.py").write_text("main = 1\n")
    rep = graph.report(pkg)
    assert rep["cycles"] == [["dgtraces.tables.a", "dgtraces.tables.b"]]
    assert rep["upward"] == [("dgtraces.errors", "dgtraces.cli")]
    assert rep["private"] == [("dgtraces.tables.b", "dgtraces.tables.a._hidden")]


# Signatures taking ``root=None`` / ``release=None`` (issue #24: pass a ``Release`` or one
# resolved root instead); `python scripts/import_graph.py --signatures -v` lists them. The
# limits only go down. 37 after the Release handle (before: 62, 13), plus the three public
# query entry points (query.connect, Query, query.sql) that keep ``root`` for their callers.
MAX_NONE_DEFAULTS = {"root": 40, "release": 13}


def test_root_and_release_none_defaults_do_not_grow(tmp_path):
    graph = _graph()
    pkg = tmp_path / "dgtraces"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        "def f(a, root=None, *, release=None):\n    pass\n"
        "class C:\n    def m(self, root='x', release=None):\n        pass\n")
    assert graph.signatures(pkg) == {"root": ["dgtraces:1:f"],
                                     "release": ["dgtraces:1:f", "dgtraces:4:m"]}
    counts = {k: len(v) for k, v in graph.signatures().items()}
    assert all(counts[k] <= MAX_NONE_DEFAULTS[k] for k in counts), counts


def _string_codes(path: Path) -> list[int]:
    """Lines raising or recording a reason code as a string, not a ``Code`` member."""
    tree = _graph().parse(path)
    bad = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            for kw in node.keywords:
                if kw.arg == "code" and isinstance(kw.value, ast.Constant) \
                        and isinstance(kw.value.value, str):
                    bad.append(node.lineno)
            name = node.func.id if isinstance(node.func, ast.Name) else getattr(
                node.func, "attr", "")
            if name == "Failure" and node.args and isinstance(node.args[0], ast.Constant):
                bad.append(node.lineno)
        # a code held in a variable or field first (code = "SCHEMA" if ... else "X"), or
        # compared as text (exc.code == "NO_CALIBRATION")
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, ast.AnnAssign) and node.value else []
        if any(getattr(t, "id", getattr(t, "attr", None)) == "code" for t in targets) \
                and _has_code_text(node.value):
            bad.append(node.lineno)
        if isinstance(node, ast.Compare) and any(
                getattr(side, "attr", None) == "code" for side in [node.left, *node.comparators]) \
                and any(_has_code_text(side) for side in [node.left, *node.comparators]):
            bad.append(node.lineno)
    return bad


def _has_code_text(node: ast.AST) -> bool:
    """A reason code written as a string constant somewhere in ``node``."""
    from dgtraces.errors import Code

    return any(isinstance(n, ast.Constant) and isinstance(n.value, str)
               and n.value in Code.__members__ for n in ast.walk(node))


def test_errors_carry_code_members_not_strings():
    found = {str(p.relative_to(REPO)): lines
             for p in sorted((REPO / "dgtraces").rglob("*.py"))
             if (lines := _string_codes(p))}
    assert found == {}


def _loaded_after(statement: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", f"{statement}\nimport sys\n"
                          "print('\\n'.join(sorted(sys.modules)))"],
                         capture_output=True, text=True, check=True, cwd=REPO).stdout
    return set(out.split())


def test_schema_loads_no_predictor_module():
    loaded = _loaded_after("import dgtraces.tables.schema")
    assert not {m for m in loaded if m.startswith("dgtraces.predict")}


def test_developing_layers_table_is_the_checked_layers():
    """docs/DEVELOPING.md "Layers" draws the layers scripts/import_graph.py checks."""
    import re

    text = (REPO / "docs" / "DEVELOPING.md").read_text(encoding="utf-8")
    table = text.split("| layer (bottom up) |", 1)[1].split("\n\n", 1)[0]
    drawn = []
    for line in table.splitlines()[2:]:
        name, where = (cell.strip() for cell in line.strip("|").split("|")[:2])
        where = re.sub(r"\([^)]*\)", "", where)  # "(with reference.devices)", "(load, ...)"
        mods = set()
        for word in re.findall(r"`([^`]+)`", where):
            word = word.rstrip("/").removeprefix("dgtraces/").removesuffix("/__init__")
            mods.add("dgtraces" if word in ("dgtraces", "__init__") else f"dgtraces.{word}")
        drawn.append((name, mods))
    assert drawn == [(name, set(prefixes)) for name, prefixes in _graph().LAYERS]


# tests/ mirrors the packages (docs/DEVELOPING.md, "Tests"): a test of dgtraces/<pkg>/ lives in
# tests/<pkg>/; only tests of the flat modules and cross-cutting ones stay at the top.
TOP_LEVEL_TESTS = {
    "test_cold_start.py",       # what every command's cold path imports
    "test_core_helpers.py",     # flat modules fitting, values; who may import collect
    "test_demo.py",             # flat module demo
    "test_docs_match_code.py",  # docs against code
    "test_errors.py",           # flat module errors
    "test_layers.py",           # the architecture (this file)
    "test_names.py",            # flat module names
    "test_readme.py",           # the README's commands
    "test_tutorial.py",         # docs/tutorial.ipynb
    "test_typed_errors.py",     # typed errors across every reader and command
    "test_wheel.py",            # the built wheel
    "test_workers.py",          # the suite's own worker plan (tests/workers.py)
}
TEST_HELPER_FOLDERS = {"fixtures"}


def test_tests_mirror_the_packages():
    tests = REPO / "tests"
    top = {p.name for p in tests.glob("test_*.py")}
    assert top <= TOP_LEVEL_TESTS, (
        f"move {sorted(top - TOP_LEVEL_TESTS)} into tests/<package>/ (docs/DEVELOPING.md)")
    packages = {p.parent.name for p in (REPO / "dgtraces").glob("*/__init__.py")}
    folders = {p.name for p in tests.iterdir()
               if p.is_dir() and p.name not in TEST_HELPER_FOLDERS
               and not p.name.startswith((".", "__"))}
    assert folders <= packages, f"tests/ folders without a package: {sorted(folders - packages)}"
    for folder in folders:
        assert (tests / folder / "__init__.py").is_file(), folder  # import mode: packages
        nested = [p for p in (tests / folder).rglob("test_*.py") if p.parent.name != folder]
        assert not nested, nested
    assert (tests / "__init__.py").is_file()
