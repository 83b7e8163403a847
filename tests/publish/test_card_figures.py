"""``card --out DIR`` (issue #36, trial): the card links to ``fragments/<figure>`` but only
README.md and croissant.json were written, so a card written anywhere but the checkout's
``cards/`` had broken figure links. Every file the card links to is now in DIR."""

import re

from click.testing import CliRunner

from dgtraces.cli import main
from tests.paths import REPO


def test_every_link_of_a_card_written_elsewhere_resolves(tmp_path):
    out = tmp_path / "card"
    res = CliRunner().invoke(main, ["card", "--out", str(out)])
    assert res.exit_code == 0, res.output
    links = set(re.findall(r"\]\((fragments/[^)\s]+)\)", (out / "README.md").read_text()))
    assert links  # the shipped card has figures
    assert all((out / link).is_file() for link in links), links
    for link in links:  # the same bytes as the checkout's figures
        assert (out / link).read_bytes() == (REPO / "cards" / link).read_bytes()


def test_a_card_written_beside_its_figures_copies_nothing(tmp_path):
    import shutil

    from dgtraces.publish import write_card

    card = tmp_path / "cards"
    shutil.copytree(REPO / "cards" / "fragments", card / "fragments")
    written = write_card(card, fragments_dir=card / "fragments")
    assert [p.name for p in written] == ["README.md", "croissant.json"]
