"""``validate-comm``'s folders (issue #36, trial): its --help named
``dgtraces/reference/nccl_tests`` (the folder is ``nccl-tests``), and beside an installed
wheel it looked for ``../shared`` three levels above the module (inside the virtual
environment) and printed that path in its note."""

import re

from click.testing import CliRunner

from dgtraces.cli import main
from dgtraces.evaluation import comm, comm_logs
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
    assert comm_logs.shared_folder(site) is None
    assert comm_logs.shared_folder(REPO) == REPO.parent / "shared" / "reference" / "nccl-tests"
    monkeypatch.setattr(comm_logs, "SHARED", None)
    logs, notes = comm_logs.reference_points()
    assert len(logs) == 4 and len(notes) == len(comm_logs.POINT_FILES)
    assert not any(re.search(r"(^|\s)/", n) for n in notes)  # no path of this machine
