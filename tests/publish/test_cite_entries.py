"""``cite`` (issue #36, trial): the package entry hard-coded "e.g. dataset release 0.4.0"
(stale once 0.5.0 shipped) and no entry had a url. The package entry now names no release
(the release read has its own entry), the paper's entry has its arXiv url, and the package's
has the project's url when the package metadata declares one (none is made up)."""

import re

from click.testing import CliRunner

from dgtraces.cli import main
from dgtraces.publish import card


def test_cite_names_only_the_release_it_cites():
    from dgtraces._version import __version__

    out = CliRunner().invoke(main, ["cite", "--release", "0.5.0"]).output
    named = set(re.findall(r"\b[0-9]+\.[0-9]+\.[0-9]+\b", out.replace(__version__, "")))
    assert named == {"0.5.0"}, named
    assert "url       = {https://arxiv.org/abs/1805.03812}" in out


def test_the_package_url_comes_from_its_metadata(monkeypatch):
    class Meta:
        def get_all(self, name):
            return ["Homepage, https://example.org/dgtraces"] if name == "Project-URL" else []

    monkeypatch.setattr("importlib.metadata.metadata", lambda name: Meta())
    assert card.project_url() == "https://example.org/dgtraces"
    assert "url     = {https://example.org/dgtraces}" in card.package_bibtex()
    monkeypatch.setattr("importlib.metadata.metadata", lambda name: type(
        "M", (), {"get_all": lambda self, n: None})())
    assert card.project_url() is None and "url" not in card.package_bibtex()
