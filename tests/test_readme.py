"""Every fenced code block of README.md runs here (issue #17).

- ``python`` blocks are executed in order in one namespace (as a reader pastes them);
- ``bash`` blocks: each command (``\\`` continuations and multi-line quotes joined) must be a
  ``dgtraces`` command, run through the click entry point in a temp folder (exit 0), or one
  of the two Quick-start lines that ``.ci/run`` runs (checked to be exactly those);
- the ``bibtex`` block equals the citation the card renders (``cards.citation_bibtex``).
Any other block fails the test, so a new example cannot go untested.
"""

import contextlib
import io
import re
import shlex

import pytest
from click.testing import CliRunner

from dgtraces.cli import main
from dgtraces.publish import card as cards
from dgtraces.store.release import Release
from tests.paths import REPO

README = (REPO / "README.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"^```(\w*)\n(.*?)^```", README, flags=re.M | re.S)


def _commands(text: str) -> list[tuple[str, list[str]]]:
    """(line as written, argv) per shell command; comments dropped."""
    out, buf = [], ""
    for line in text.splitlines():
        buf = f"{buf}\n{line}" if buf else line
        if buf.rstrip().endswith("\\"):
            buf = buf.rstrip()[:-1]
            continue
        try:
            argv = shlex.split(buf, comments=True)
        except ValueError:  # an open quote: the command goes on
            continue
        if argv:
            out.append((buf, argv))
        buf = ""
    assert not buf, f"unterminated command: {buf!r}"
    return out


def _ci_line(marker: str) -> str:
    line = next(x for x in README.splitlines() if x.rstrip().endswith(f"# {marker}"))
    return re.sub(rf"\s+# {marker}$", "", line)


def test_readme_has_only_tested_block_kinds():
    kinds = [k for k, _ in BLOCKS]
    assert kinds.count("python") >= 2 and kinds.count("bash") >= 2
    assert set(kinds) <= {"python", "bash", "bibtex"}, kinds


def _quick_start() -> str:
    return README.split("## Quick start", 1)[1].split("\n## ", 1)[0]


def test_quick_start_leads_with_the_light_install():
    """Issue #28 point 5: a user who loads, queries and predicts needs the core package, not
    ``[all]`` (torch, linters, jupyterlab through HTA: ~2 GB)."""
    (lang, body), *_ = re.findall(r"^```(\w*)\n(.*?)^```", _quick_start(), flags=re.M | re.S)
    (first, argv), = _commands(body)
    assert argv[:4] == ["pip", "install", "-e", "."] and "[" not in first
    assert "dgtraces demo" in first and "# install" not in first


def test_contributor_block_is_the_ci_install_and_test_lines():
    blocks = re.findall(r"^```(\w*)\n(.*?)^```", _quick_start(), flags=re.M | re.S)
    (body,) = [b for _, b in blocks if "# install" in b]
    cmds = [c for c, _ in _commands(body)]
    assert len(cmds) == 2  # exactly two commands for a fresh machine
    assert re.sub(r"\s+#.*", "", cmds[0]) == _ci_line("install")
    assert re.sub(r"\s+#.*", "", cmds[1]) == _ci_line("test")
    assert "'.[all]'" in cmds[0]  # CI installs what every test needs
    assert "dgtraces demo" in cmds[0]  # the demo itself runs in tests/test_demo.py


def test_readme_python_blocks_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ns: dict = {}
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        for lang, body in BLOCKS:
            if lang == "python":
                exec(compile(body, "README.md", "exec"), ns)  # noqa: S102
    assert ns["big"].grad_bytes.min() > 10_000_000
    ratio = ns["ratio"]
    assert len(ratio) > 0 and ratio.comm_per_bwd.is_monotonic_increasing
    assert ratio.comm_ms.notna().all() and ratio.bwd_ms.notna().all()
    assert "alexnet" in printed.getvalue()


SHELL = [(line, argv) for lang, body in BLOCKS if lang == "bash" and "# install" not in body
         for line, argv in _commands(body) if argv[0] != "pip"]  # installs: tested above


@pytest.mark.parametrize("line,argv", SHELL, ids=[a[1] if len(a) > 1 else a[0]
                                                  for _, a in SHELL])
def test_readme_commands_run(line, argv, tmp_path, monkeypatch):
    assert argv[0] == "dgtraces", f"README command not runnable in tests: {line}"
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(main, argv[1:], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    for arg in argv[1:]:  # files an example writes are written
        if arg.endswith((".png", ".json", ".parquet")) and "/" not in arg:
            assert (tmp_path / arg).stat().st_size > 0


def test_readme_citation_is_the_cards():
    (bib,) = [body for lang, body in BLOCKS if lang == "bibtex"]
    assert bib.strip() == cards.citation_bibtex().strip()
    cff = (REPO / "CITATION.cff").read_text(encoding="utf-8")
    from dgtraces._version import __version__

    assert re.search(rf"^version: {re.escape(__version__)}$", cff, flags=re.M)
    for needle in ("A DAG Model of Synchronous Stochastic Gradient Descent", "arXiv:1805.03812",
                   "Shaohuai", "ICPADS"):
        assert needle in cff and needle in cards.PAPER_BIBTEX
    assert "arXiv:1805.03812" in cards.render_card(Release.open())
