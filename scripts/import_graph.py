"""The package's import graph against its layers (issue #24): import circles, imports that
run up a layer, modules flat in ``dgtraces/``, private names used outside their module.

    python scripts/import_graph.py [--json] [--signatures [-v]]

``--signatures`` counts the function signatures that take ``root=None`` or ``release=None``
(a store location or a release re-resolved at that level; pass a ``Release`` or one resolved
root instead); ``-v`` lists them.

Every ``import``/``from`` counts, including those inside functions (a lazy import is still
a dependency); imports under ``if TYPE_CHECKING:`` do not. ``tests/test_layers.py`` holds
the figures to their limits; docs/DEVELOPING.md draws the layers.
"""

from __future__ import annotations

import ast
import json
import sys
from collections import defaultdict
from functools import cache
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "dgtraces"

# Layers, bottom up: a module may import its own layer or below. The first prefix that
# matches a module's dotted name gives its layer.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("base", ("dgtraces._version", "dgtraces.errors", "dgtraces.values", "dgtraces.names",
              "dgtraces.fitting", "dgtraces.io")),
    ("declarations", ("dgtraces.models", "dgtraces.reference")),
    ("tables", ("dgtraces.tables",)),
    ("store", ("dgtraces.store",)),
    # what users run, in two layers: collective modelling (comm) sits beside the importers
    # and cost models, below the predictor that imports it (issue #34)
    ("runtime", ("dgtraces.query", "dgtraces.publish", "dgtraces.importers",
                 "dgtraces.collect", "dgtraces.comm", "dgtraces.reconstruct")),
    ("predictor", ("dgtraces.predict", "dgtraces.export", "dgtraces.contribute")),
    # recipes assemble releases from every producer, the card fragments of evaluation too
    ("evaluation", ("dgtraces.evaluation", "dgtraces.recipes", "dgtraces.demo")),
    ("cli", ("dgtraces.cli", "dgtraces.__main__", "dgtraces")),
)


def layer_of(module: str) -> int:
    for rank, (_, prefixes) in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return rank
    raise KeyError(module)


def modules(package: Path = PACKAGE) -> dict[str, Path]:
    out = {}
    for path in package.rglob("*.py"):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def parse(path: Path) -> ast.Module:
    """The syntax tree of ``path``, parsed once per process while the file is unchanged (its
    size and modification time): the checks walk every module several times. Read it only."""
    st = path.stat()
    return _parsed(path, st.st_mtime_ns, st.st_size)


@cache
def _parsed(path: Path, mtime_ns: int, size: int) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for n in ast.walk(node))
    return skip


def edges(mods: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the package modules it imports (the deepest module a name resolves to)."""

    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = defaultdict(set)
    for mod, path in mods.items():
        tree = parse(path)
        pkg = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
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
                    parts = pkg.split(".")
                    base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base
                           for a in node.names]
            for t in targets:
                if t.startswith("dgtraces"):
                    r = resolve(t)
                    if r and r != mod:
                        graph[mod].add(r)
    return graph


def cycles(graph: dict[str, set[str]], nodes) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return sorted(out)


def upward(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """(importer, imported) pairs where the imported module sits in a higher layer."""
    return sorted((a, b) for a, bs in graph.items() for b in bs if layer_of(b) > layer_of(a))


def private_uses(mods: dict[str, Path]) -> list[tuple[str, str]]:
    """(module, name) for every ``_name`` of another package module that a module imports
    or reads as ``module._name`` (dunders excluded)."""
    found = []
    for mod, path in mods.items():
        tree = parse(path)
        aliases = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("dgtraces") \
                    or isinstance(node, ast.ImportFrom) and node.level:
                for a in node.names:
                    if a.name.startswith("_") and not a.name.startswith("__"):
                        found.append((mod, f"{node.module}.{a.name}"))
                    aliases[a.asname or a.name] = a.name
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.startswith("dgtraces"):
                        aliases[a.asname or a.name.split(".")[0]] = a.name
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                    and node.value.id in aliases and node.attr.startswith("_") \
                    and not node.attr.startswith("__"):
                found.append((mod, f"{node.value.id}.{node.attr}"))
    return sorted(set(found))


SIGNATURE_PARAMS = ("root", "release")


def signatures(package: Path = PACKAGE) -> dict[str, list[str]]:
    """Parameter name -> ``module:line:function`` of every signature (methods included)
    whose parameter of that name defaults to ``None`` (positional or keyword-only)."""
    found: dict[str, list[str]] = {name: [] for name in SIGNATURE_PARAMS}
    for mod, path in sorted(modules(package).items()):
        tree = parse(path)
        for node in ast.walk(tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            a = node.args
            pos = a.posonlyargs + a.args
            pairs = list(zip(pos[len(pos) - len(a.defaults):], a.defaults, strict=True))
            pairs += [(k, d) for k, d in zip(a.kwonlyargs, a.kw_defaults, strict=True)
                      if d is not None]
            for arg, default in pairs:
                if arg.arg in found and isinstance(default, ast.Constant) \
                        and default.value is None:
                    found[arg.arg].append(f"{mod}:{node.lineno}:{node.name}")
    return found


def report(package: Path = PACKAGE) -> dict:
    mods = modules(package)
    graph = edges(mods)
    flat = sorted(m for m, p in mods.items() if p.parent == package)
    return {"modules": len(mods), "flat": flat, "cycles": cycles(graph, mods),
            "upward": upward(graph), "private": private_uses(mods)}


def main() -> int:
    if "--signatures" in sys.argv:
        sigs = signatures()
        if "--json" in sys.argv:
            print(json.dumps(sigs, indent=1))
            return 0
        for name, where in sigs.items():
            print(f"signatures with {name}=None: {len(where)}")
            if "-v" in sys.argv:
                for w in where:
                    print(f"  {w}")
        return 0
    rep = report()
    if "--json" in sys.argv:
        print(json.dumps(rep, indent=1))
        return 0
    print(f"modules: {rep['modules']}; flat in dgtraces/: {len(rep['flat'])} "
          f"({', '.join(m.rpartition('.')[2] for m in rep['flat'])})")
    print(f"import circles: {len(rep['cycles'])}")
    for c in rep["cycles"]:
        print(f"  {len(c)}: {' '.join(c)}")
    print(f"imports running up a layer: {len(rep['upward'])}")
    for a, b in rep["upward"]:
        print(f"  {a} ({LAYERS[layer_of(a)][0]}) -> {b} ({LAYERS[layer_of(b)][0]})")
    print(f"private names used outside their module: {len(rep['private'])}")
    for m, n in rep["private"]:
        print(f"  {m}: {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
