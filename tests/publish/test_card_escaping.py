"""Contributor text is inert in the dataset card and the Hub README (issue #29 M8): a
hostile `runs.source` or contributor name puts no raw HTML, link, image, comment, heading,
table cell or ESC byte into `cards/README.md` or the exported README."""

import json

import pandas as pd
import pytest

from dgtraces.contribute import contribute
from dgtraces.contribute.release import build_release
from dgtraces.io.markdown_text import md_inline
from tests.attack_tally import record
from tests.contribute.test_contribute import CONTRIBUTOR, META, variant, write_contrib

PAYLOADS = {  # payload -> text that must not appear raw in the card
    "<img src=x onerror=alert(1)>": "<img",
    "[click](javascript:alert(1))": "](javascript:",
    "![t](http://evil.invalid/t.png)": "![t](",
    "hide <!-- comment --> this": "<!--",
    "</td><script>alert(1)</script>": "<script>",
    "esc \x1b[2J bytes": "\x1b",
    "cell | injected | here": "| injected |",
    "line\n# Heading": "\n# Heading",
    "entity &lt;b&gt; text": "&lt;",
    "<https://evil.invalid/autolink>": "<https://",
}


def _raw(needle: str, text: str) -> bool:
    """``needle`` occurs in ``text`` with its first character not backslash-escaped."""
    i = text.find(needle)
    while i != -1:
        if i == 0 or text[i - 1] != "\\":
            return True
        i = text.find(needle, i + 1)
    return False


@pytest.fixture(scope="module")
def cards(tmp_path_factory):
    """One release with a run per payload and a hostile contributor: the card and the
    Hub README."""
    import os

    from dgtraces.publish.hf import export
    from tests.conftest import seed_v010

    base = tmp_path_factory.mktemp("card-attack")
    root = seed_v010(base / "data")
    env = {"DGTRACES_DATA": str(root), "DGTRACES_CHANGELOG": str(base / "CHANGELOG.md"),
           "DGTRACES_CARDS": str(base / "cards")}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        parts = [variant(f"r-{i}", scale=1.0 + 0.05 * i) for i in range(len(PAYLOADS))]
        for (runs, _), payload in zip(parts, PAYLOADS, strict=True):
            runs["source"] = f"src {payload}"
        runs = pd.concat([p[0] for p in parts], ignore_index=True)
        lt = pd.concat([p[1] for p in parts], ignore_index=True)
        evil = CONTRIBUTOR.replace("Test Rig", "Rig <img src=x onerror=alert(2)> [a](javascript:b)")
        meta = META.replace(CONTRIBUTOR, json.dumps(evil + " \x1b]0;t\x07"))
        contribute(write_contrib(base / "c", runs, lt, meta=meta), root=root)
        build_release("0.9.0", root=root)
        export(base / "hub", "0.9.0", root)
        hub_readme = base / "hub" / "README.md"
        yield {"card": (base / "cards" / "README.md").read_text(encoding="utf-8"),
               "hub": hub_readme.read_text(encoding="utf-8")}
    finally:
        for k, v in old.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)


@pytest.mark.parametrize("where", ["card", "hub"])
@pytest.mark.parametrize("payload", list(PAYLOADS))
def test_hostile_sources_are_inert(cards, where, payload):
    text = cards[where]
    ok = md_inline(f"src {payload}") in text and not _raw(PAYLOADS[payload], text)
    record("markup injection into the card", ok)
    assert ok, payload


@pytest.mark.parametrize("where", ["card", "hub"])
def test_a_hostile_contributor_in_the_release_notes_is_inert(cards, where):
    text = cards[where]
    notes = next(line for line in text.splitlines() if line.startswith("Release notes:"))
    ok = not _raw("<img", notes) and not _raw("](javascript:", notes) and \
        not _raw("[a]", notes) and "\x1b" not in text
    record("markup injection into the card", ok)
    assert ok, notes
