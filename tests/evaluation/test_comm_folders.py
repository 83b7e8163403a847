"""``validate-comm``'s folders (issue #36, trial): its --help named
``dgtraces/reference/nccl_tests`` (the folder is ``nccl-tests``), and beside an installed
wheel it looked for ``../shared`` three levels above the module (inside the virtual
environment) and printed that path in its note."""

import re

from click.testing import CliRunner

from dgtraces.cli import main
from dgtraces.evaluation import comm
from tests.paths import REPO


def test_the_help_names_the_shipped_folder():
    text = " ".join(CliRunner().invoke(main, ["validate-comm", "--help"]).output.split())
    named = set(re.findall(r"dgtraces/reference/[\w-]+", text.replace("- ", "-")))
    assert named == {"dgtraces/reference/nccl-tests"}
    assert comm.SHIPPED == REPO / "dgtraces" / "reference" / "nccl-tests"
    assert comm.SHIPPED.is_dir()


def test_shared_is_read_beside_a_checkout_only(tmp_path, monkeypatch):
    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    assert comm.shared_folder(site) is None
    assert comm.shared_folder(REPO) == REPO.parent / "shared" / "reference" / "nccl-tests"
    monkeypatch.setattr(comm, "SHARED", None)
    logs, notes = comm.reference_logs()
    assert len(logs) == 4 and len(notes) == 1
    assert not re.search(r"(^|\s)/", notes[0])  # no path of this machine
