"""A link planted at an output name is refused, never followed (issue #36 item 1).

`reconstruct --report --method kernels-2.0 --figure LINK` wrote its PNG through a hard link
given as --figure (and through a symlink in the --fragment folder): the kernels shard
became a PNG, so `verify` and every `sql` failed. Every writer now replaces names (temp file
and rename) and refuses a link; every output option declares the names it writes
(`OutPath(writes=)`) and its guard checks them before any work. The commands are enumerated
from the CLI registry, so a new command or output option cannot be left out.
"""

import ast
import fnmatch
import os

import click
import pytest
from click.testing import CliRunner

from dgtraces.cli import COMMANDS, OutPath, main
from dgtraces.errors import DgtracesError
from dgtraces.io.files import atomic_file, atomic_write_all, atomic_write_bytes, check_targets
from tests.attack_tally import record, refused
from tests.contribute.test_contribute import tree_digest
from tests.paths import REPO
from tests.store.test_output_guard import path_params

KINDS = ("symlink", "hard link")


def plant(kind: str, target, name) -> None:
    name.parent.mkdir(parents=True, exist_ok=True)
    (os.symlink if kind == "symlink" else os.link)(target, name)


def a_shard(store):
    return next(p for p in sorted((store / "shards").rglob("*.parquet")))


def output_options():
    """(command words, parameter) of every OutPath option of every registered command."""
    assert main.list_commands(click.Context(main)) == sorted(COMMANDS)  # the registry
    found = [(cmd.split(), p) for cmd, p in path_params() if isinstance(p.type, OutPath)]
    assert {w[0] for w, _ in found} >= {"export-astra-sim", "export-chakra", "reconstruct",
                                        "predict", "card", "schemas", "demo", "import", "sql"}
    return found


def cases():
    """One case per declared output name: (command words, parameter, pattern)."""
    return [(w, p, pattern) for w, p in output_options() for pattern in p.type.writes]


def _instance(tmp_path, i: int, p, pattern: str):
    """The option's value and one concrete name its pattern selects (``*`` -> ``x0``)."""
    value = tmp_path / f"case{i}" / "out"
    value.parent.mkdir(parents=True)
    if not p.type.file_okay:
        value.mkdir()
    return value, tmp_path.joinpath(pattern.replace("*", "x0").format(value))


def _args(words, p, value):
    if isinstance(p, click.Argument):
        return [*words, str(value)]
    return [*words, p.opts[0], str(value)]  # converted first: before any required option


@pytest.mark.parametrize("kind", KINDS)
def test_a_link_at_every_output_name_of_every_command_is_refused(store, tmp_path, kind):
    shard = a_shard(store)
    before, shard_bytes = tree_digest(store), shard.read_bytes()
    runner = CliRunner()
    for i, (words, p, pattern) in enumerate(cases()):
        value, name = _instance(tmp_path, i, p, pattern)
        plant(kind, shard, name)
        res = runner.invoke(main, _args(words, p, value))
        exc = res.exception
        ok = (res.exit_code != 0 and isinstance(exc, DgtracesError)
              and exc.code == "BAD_INPUT" and exc.failures[0].file == str(name))
        record(f"{kind} at an output name", ok)
        assert ok, (words, p.name, pattern, res.output, exc)
    assert tree_digest(store) == before and shard.read_bytes() == shard_bytes


def test_the_guard_refuses_only_the_link(store, tmp_path):
    """Control: a plain file at the same names passes the option's guard."""
    for i, (words, p, pattern) in enumerate(cases()):
        value, name = _instance(tmp_path, i, p, pattern)
        name.parent.mkdir(parents=True, exist_ok=True)
        name.write_bytes(b"old")
        assert p.type.convert(str(value), p, None) == str(value), (words, pattern)


def test_the_issue_reproduction_refuses_before_the_report_is_built(store, tmp_path):
    shard = a_shard(store)
    before = tree_digest(store)
    fig = tmp_path / "figure.png"
    os.link(shard, fig)
    res = CliRunner().invoke(main, ["reconstruct", "--figure", str(fig), "--report",
                                    "--method", "kernels-2.0"])
    assert getattr(res.exception, "code", None) == "BAD_INPUT"
    frag = tmp_path / "fragment"
    plant("symlink", shard, frag / "reconstruction_kernels.png")
    res = CliRunner().invoke(main, ["reconstruct", "--fragment", str(frag), "--report",
                                    "--method", "kernels-2.0"])
    assert getattr(res.exception, "code", None) == "BAD_INPUT"
    assert tree_digest(store) == before


@pytest.mark.parametrize("kind", KINDS)
def test_the_atomic_writers_never_write_through_a_link(store, tmp_path, kind):
    """Below the CLI: every library writer goes through atomic_file, which refuses a link;
    atomic_write_all checks every name before the first is written."""
    shard = a_shard(store)
    before = tree_digest(store)
    name = tmp_path / "out.png"
    plant(kind, shard, name)
    for write in (lambda: atomic_write_bytes(name, b"png"),
                  lambda: atomic_file(name, "w").__enter__()):
        refused(write, "BAD_INPUT", f"{kind} at an output name")
    first = tmp_path / "a.json"
    with pytest.raises(DgtracesError) as exc:
        atomic_write_all({first: b"{}", name: b"png"})
    assert exc.value.code == "BAD_INPUT" and not first.exists()
    assert tree_digest(store) == before and not list(tmp_path.glob(".tmp-*"))


def test_a_link_to_a_folder_is_refused_too(tmp_path):
    (tmp_path / "d").mkdir()
    os.symlink(tmp_path / "d", tmp_path / "out.json")
    with pytest.raises(DgtracesError) as exc:
        check_targets([tmp_path / "out.json"])
    assert exc.value.code == "BAD_INPUT" and (tmp_path / "d").is_dir()


def test_the_declared_names_are_what_the_commands_write(no_timings_store, tmp_path):
    """The declarations are honest: files the cheap commands write match their patterns."""
    from dgtraces.store import release

    run = release.read_table("runs", "0.9.0")["run_id"].iloc[0]
    by_opt = {(w[0], p.opts[0] if p.opts else p.name): p.type.writes
              for w, p in output_options()}
    runs = {
        ("export-astra-sim", "--out"): ["export-astra-sim", "--run-id", run, "--workers", "4"],
        ("export-chakra", "--out"): ["export-chakra", "--run-id", run, "--workers", "3"],
        ("schemas", "--out"): ["schemas"],
        ("contribute", "--template"): ["contribute"],
        ("predict", "--kineto-dir"): ["predict", "--run-id", run, "--workers", "2"],
    }
    for (cmd, opt), args in runs.items():
        value = tmp_path / cmd / "out"
        value.parent.mkdir()
        res = CliRunner().invoke(main, [*args, opt, str(value)])
        assert res.exit_code == 0, (cmd, res.output, res.exception)
        written = [str(p) for p in value.parent.rglob("*") if p.is_file()]
        patterns = [w.format(value) for w in by_opt[cmd, opt]]
        assert written and all(any(fnmatch.fnmatch(f, pat) for pat in patterns)
                               for f in written), (cmd, written, patterns)


# Calls that write a file, and where they may stay (a temp folder that appears whole, an
# in-memory buffer, or the atomic writer itself); anything else must use dgtraces.io.files.
WRITERS = {"savefig", "to_csv", "to_parquet", "to_json", "write_text", "write_bytes",
           "write_table", "ParquetWriter", "copyfile", "copy2", "copytree",
           "export_chrome_trace", "dump"}
ALLOWED = {
    ("dgtraces/tables/write.py", "write_tables"): "into atomic_folder's temp folder",
    ("dgtraces/contribute/template.py", "write_template"): "into atomic_folder's temp folder",
    ("dgtraces/store/shards.py", "write_shard"): "a temp shard renamed once hashed",
    ("dgtraces/store/shards.py", "commit"): "the manifest, inside the release's temp folder",
    ("dgtraces/store/shards.py", "copy_release"): "into atomic_folder's temp folder",
    ("dgtraces/store/manifest.py", "write_parquet"): "staging's temp entry folder",
    ("dgtraces/store/locate.py", "seed"): "into atomic_folder's temp folder",
    ("dgtraces/contribute/stream.py", "spool"): "the validation's temp folder",
    ("dgtraces/contribute/stream.py", "write"): "staging's temp entry folder",
    ("dgtraces/contribute/intake.py", "_extract"): "a new temp folder, O_EXCL per member",
    ("dgtraces/publish/hf.py", "export"): "into atomic_folder's temp folder",
    ("dgtraces/publish/hf.py", "_copy_fragment_assets"): "into export's temp folder",
    ("dgtraces/collect/procs.py", "finish"): "a TemporaryDirectory of spawn()",
    ("dgtraces/collect/profile.py", "_export"): "a TemporaryDirectory, then atomic_file",
}


HANDLES = {"buf", "fh", "tmp", "out", "dst"}  # buffers and already open files, by convention


def _target(name: str, call: ast.Call):
    """The argument a call writes to (``json.dump``'s second, anything else's first or its
    path keyword); None where it returns what it renders (``df.to_csv(index=False)``)."""
    args = call.args[1:] if name == "dump" else call.args
    keyword = [k.value for k in call.keywords if k.arg in ("path", "path_or_buf", "fname",
                                                           "where", "fp")]
    return args[0] if args else (keyword[0] if keyword else None)


def _writes(path) -> set[tuple[str, str]]:
    """(module, function) of each call in ``path`` that writes a file, not a buffer or an
    already open handle (``buf``, ``fh``, ``tmp``, ``out``, ``dst`` by convention)."""
    found = set()
    rel = path.relative_to(REPO).as_posix()
    for fn in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for call in ast.walk(fn):
            if not isinstance(call, ast.Call):
                continue
            f = call.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            mode = call.args[1] if name == "open" and len(call.args) > 1 else None
            if name in WRITERS or (isinstance(mode, ast.Constant)
                                   and any(c in str(mode.value) for c in "wax+")):
                target = _target(name, call)
                if target is not None and not (isinstance(target, ast.Name)
                                               and target.id in HANDLES):
                    found.add((rel, fn.name))
    return found


def test_no_module_writes_a_file_but_through_the_atomic_writer():
    found = set()
    for path in sorted((REPO / "dgtraces").rglob("*.py")):
        if path.relative_to(REPO).as_posix() != "dgtraces/io/files.py":
            found |= _writes(path)
    assert found - set(ALLOWED) == set(), sorted(found - set(ALLOWED))
    assert set(ALLOWED) - found == set(), "stale entries: " + str(sorted(set(ALLOWED) - found))
