import json
import os
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from dgtraces import publish
from dgtraces.cli import main
from dgtraces.publish import card as cards
from dgtraces.publish import croissant
from dgtraces.store import duck, release
from dgtraces.store import manifest as store
from tests.paths import REPO


def test_provenance_stats(mini_release_root):
    st = cards.provenance_stats(release.Release.open(root=mini_release_root))
    assert st["comm"]["provenance"] == {"measured": 1, "published": 2}
    assert st["comm"]["bcaffe"] == 2
    assert st["comm_fits"]["provenance"] == {"reconstructed": 1}
    assert st["comm_fits"]["bcaffe"] == 1  # a fit of B-Caffe logs is derived from them
    # layer_timings has no provenance column: rows take their run's
    assert st["layer_timings"]["provenance"] == {"measured": 3, "published": 3}
    assert st["layer_timings"]["via"] == "runs" and st["layer_timings"]["bcaffe"] == 3
    assert st["layers"] == {"rows": 23, "provenance": {}, "sources": [], "bcaffe": 0,
                            "via": None, "third_party": {}}
    assert ("published", "shyhuai/B-Caffe logdata/allreduce4.log", 2) in st["comm"]["sources"]
    assert sum(s["rows"] for s in st.values()) == 23 + 2 + 6 + 2 + 3 + 1 + 1 + 1


def test_provenance_stats_scan_each_shard_once(mini_release_root, monkeypatch):
    """Per-shard groups are cached by sha256: a second process (memo cleared) scans
    nothing, and a damaged cache file only costs a rescan."""
    from dgtraces.publish import card_stats
    from dgtraces.store import integrity

    monkeypatch.setattr(card_stats, "_MEMO", {})  # as in a fresh process
    first = cards.provenance_stats(release.Release.open(root=mini_release_root))
    cached = card_stats._load()
    wanted = {f"v{card_stats.CACHE_VERSION}:{t}:{s['sha256']}"
              for t, e in release.tables(root=mini_release_root).items()
              for s in e["shards"] if t != "layers"}
    assert {k.rsplit(":", 1)[0] for k in cached} == wanted
    monkeypatch.setattr(card_stats, "_MEMO", {})

    def no_scan():
        raise AssertionError("a cached shard was scanned again")

    monkeypatch.setattr(duck, "connect", no_scan)
    assert cards.provenance_stats(release.Release.open(root=mini_release_root)) == first
    monkeypatch.undo()
    monkeypatch.setattr(card_stats, "_MEMO", {})
    (integrity.cache_dir() / card_stats.CACHE_NAME).write_text("{not json")
    assert cards.provenance_stats(release.Release.open(root=mini_release_root)) == first


def test_card_content_fragments_sorted_and_deterministic(mini_release_root, tmp_path):
    frag = tmp_path / "fragments"
    frag.mkdir()
    (frag / "b_method.md").write_text("## Reconstruction method\n\nFRAGMENT-B\n")
    (frag / "a_published.md").write_text("## Published data\n\nFRAGMENT-A\n")
    (frag / "notes.txt").write_text("NOT-A-FRAGMENT")
    rel = release.Release.open(root=mini_release_root)
    text = cards.render_card(rel, fragments_dir=frag)
    assert text == cards.render_card(rel, fragments_dir=frag)
    assert text.index("FRAGMENT-A") < text.index("FRAGMENT-B") and "NOT-A-FRAGMENT" not in text
    meta = yaml.safe_load(text.split("---\n")[1])
    assert meta["license"] == ["cc-by-4.0", "bsd-2-clause"] and len(meta["configs"]) == 8
    assert "| `layer_timings` (provenance of its `runs` row) | 6 | 3 | 0 | 3 | 3 |" in text
    assert "| `comm` | 3 | 1 | 0 | 2 | 2 |" in text
    assert "arXiv:1805.03812" in text and "ICPADS" in text and "BSD 2-Clause" in text
    manifest = store.read_manifest(root=mini_release_root)
    for e in manifest["tables"].values():
        assert all(s["sha256"] in text for s in e["shards"])
    for col in ("fwd_ms", "grad_bytes", "alpha_us"):
        assert f"| `{col}` |" in text


def test_card_without_fragments(mini_release_root, tmp_path):
    text = cards.render_card(release.Release.open("0.1.0", mini_release_root),
                             fragments_dir=tmp_path / "none")
    assert "from cards/fragments" not in text
    assert "computed from the architecture specs" in text
    assert yaml.safe_load(text.split("---\n")[1])["configs"][0]["config_name"] == "layers"


def test_write_card_and_cli(mini_store, tmp_path):
    paths = publish.write_card(tmp_path / "c1", fragments_dir=tmp_path / "none")
    assert [p.name for p in paths] == ["README.md", "croissant.json"]
    assert paths[1].read_text() == croissant.render(release.Release.open())
    res = CliRunner().invoke(main, ["card", "--out", str(tmp_path / "c2"), "--release", "0.1.0"])
    assert res.exit_code == 0, res.output
    assert "Release **0.1.0**" in (tmp_path / "c2" / "README.md").read_text()


def test_committed_card_is_current(monkeypatch):
    """cards/ must match the real latest release; regenerate with `dgtraces card`."""
    monkeypatch.delenv("DGTRACES_DATA", raising=False)
    if not store.list_releases():
        pytest.skip("no release in data/")
    readme = (REPO / "cards" / "README.md").read_text(encoding="utf-8")
    meta = (REPO / "cards" / "croissant.json").read_text(encoding="utf-8")
    latest = release.Release.open()
    assert readme == cards.render_card(latest), "stale cards/README.md: run `dgtraces card`"
    assert meta == croissant.render(latest), "stale cards/croissant.json: run `dgtraces card`"


def test_licence_metadata_follows_the_rows(tmp_store, tmp_path):
    """Only CC-BY-4.0 when no row derives from the B-Caffe logs (v0.1.0: layers only)."""
    from dgtraces.publish import croissant

    text = cards.render_card(release.Release.open(root=tmp_store), fragments_dir=tmp_path)
    assert yaml.safe_load(text.split("---\n")[1])["license"] == "cc-by-4.0"
    assert croissant.build(release.Release.open(root=tmp_store))["license"] == [cards.LICENSE_URL]


def test_fragments_only_for_releases_with_their_rows(tmp_store, tmp_path):
    """v0.1.0 holds only `layers`: no section on published or reconstructed rows, and no
    figure of theirs in its Hub folder."""
    from dgtraces.publish.hf import export

    text = cards.render_card(release.Release.open(root=tmp_store))
    assert "## Published rows" not in text and "## Reconstructed traces" not in text
    assert "requires provenance" not in text
    files = export(tmp_path / "hf", root=tmp_store)
    assert not any("fragments" in p.parts for p in files)
    frag = tmp_path / "frags"
    frag.mkdir()
    (frag / "a.md").write_text("<!-- requires provenance: measured, published -->\n## A\n")
    (frag / "b.md").write_text("## B (always)\n")
    stats = cards.provenance_stats(release.Release.open(root=tmp_store))
    names = [n for n, _ in cards.fragments(frag, stats)]
    assert names == ["b.md"]
    assert [t for _, t in cards.fragments(frag)] == ["## A", "## B (always)"]


def test_third_party_licences_listed_per_source(mini_release_root):
    from dgtraces.publish import card as cards

    st = cards.provenance_stats(release.Release.open(root=mini_release_root))
    assert cards.third_party_lines(st) == []  # no MIT/BSD-3 source in the mini release
    st["runs"]["third_party"] = {"pytorch/kineto": 2}
    assert ("bsd-3-clause", "https://opensource.org/license/bsd-3-clause") in cards.licenses(st)
    assert any("`pytorch/kineto`" in line and "2 `runs`" in line
               for line in cards.third_party_lines(st))


def test_built_package_ships_the_card_fragments(tmp_path):
    """Issue #28 point 3: installed from a wheel, ``card`` and ``export-hf`` dropped the
    Published-rows and reconstruction sections and their figure (the code looked for
    ``cards/fragments`` next to the package). The package is built (``setup.py build_py``,
    the wheel's build step) and imported from outside the checkout."""
    import shutil
    import subprocess
    import sys

    src, lib = tmp_path / "src", tmp_path / "lib"  # a copy: no build files in the checkout
    src.mkdir()
    for name in ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md"):
        shutil.copy2(REPO / name, src / name)
    for folder in ("dgtraces", "data/releases", "data/shards", "cards/fragments"):
        shutil.copytree(REPO / folder, src / folder,
                        ignore=shutil.ignore_patterns("__pycache__", "_data", ".tmp-*"))
    subprocess.run([sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(lib)],
                   cwd=src, check=True, capture_output=True)
    shipped = lib / "dgtraces" / "_data" / "fragments"
    assert sorted(p.name for p in shipped.iterdir()) == sorted(
        p.name for p in (REPO / "cards" / "fragments").iterdir())
    probe = ("import json; from dgtraces.publish import card as cards; "
             "from dgtraces.publish.hf import export; "
             "from dgtraces.store.release import Release; "
             "f = cards.fragments_folder(); t = cards.render_card(Release.open()); "
             "files = export('hub'); "
             "print(json.dumps([str(f), t.count('<!-- from cards/fragments/'), "
             "sorted(p.name for p in files if p.parent.name == 'fragments')]))")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DGTRACES_DATA")}
    env.update(PYTHONPATH=str(lib), DGTRACES_DATA=str(tmp_path / "store"),
               HOME=str(tmp_path / "home"))
    out = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=env, check=True,
                         capture_output=True, text=True).stdout
    folder, n, figures = json.loads(out.strip().splitlines()[-1])
    assert Path(folder) == shipped
    frags = REPO / "cards" / "fragments"
    assert n == len(list(frags.glob("*.md"))) == 4  # published, reconstruction, kernels, 3
    assert figures == sorted(p.name for p in frags.glob("*.png"))


def test_the_published_fragment_names_every_table_with_published_rows_and_counts_none():
    """Acceptance review #8: the fragment typed '4 (k80, v100, p100, h200)' devices (the
    release has 12 published) and left out the kernels table; the counts are the card's
    generated "Provenance of rows" table, the fragment names each table's sources."""
    import re

    rel = release.Release.open(None)
    stats = cards.provenance_stats(rel)
    published = {t for t, s in stats.items() if s["provenance"].get("published")}
    text = dict(cards.fragments(REPO / "cards" / "fragments", stats))["published.md"]
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    named = {re.match(r"\| `(\w+)`", line)[1] for line in rows}
    assert published <= named | {"layer_timings"}  # named with its runs
    assert "kernels" in named and all(line.count("|") == 4 for line in rows)  # no rows column


def test_the_collectives_not_done_list_names_no_option_the_commands_have():
    """Acceptance review #8: 'Not done (issue #34)' listed --link-fit in collective and
    sweep after both had it."""
    doc = (REPO / "docs" / "collectives.md").read_text()
    section = doc.split("## Not done (issue #34)")[1].split("\n## ")[0]
    for command in ("collective", "sweep"):
        options = {o for p in main.get_command(None, command).params for o in p.opts}
        assert not [o for o in options if f"`{o}` in `{command}`" in section
                    or f"`{o}` in `collective` and `{command}`" in section]
