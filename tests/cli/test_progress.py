"""Progress of long commands (issue #36, trial): ``reconstruct --report --method
kernels-2.x`` (a minute or more) and ``validate-predictor --markdown`` showed nothing while
they worked. Both now say so on stderr (a spinner or bar in a terminal, plain lines
elsewhere), and stdout keeps only the result."""

import pytest
from click.testing import CliRunner

from dgtraces.cli import main


def test_validate_predictor_markdown_reports_each_variant():
    res = CliRunner().invoke(main, ["validate-predictor", "--markdown"])
    assert res.exit_code == 0, res.output
    assert res.stdout.lstrip().startswith(("|", "#"))  # the table only
    steps = [line for line in res.stderr.splitlines() if "/8" in line]
    assert len(steps) == 8 and steps[-1].endswith("8/8")


@pytest.mark.parametrize("method, builder", [
    ("kernels-2.0", "dgtraces.evaluation.kernel_summary.build"),
    ("kernels-2.1", "dgtraces.evaluation.kernels21.build")])
def test_kernel_reports_say_they_are_working(monkeypatch, method, builder):
    class Done:
        def text(self):
            return "REPORT"

    monkeypatch.setattr(builder, lambda frames, release: Done())
    res = CliRunner().invoke(main, ["reconstruct", "--report", "--method", method])
    assert res.exit_code == 0, res.output
    assert res.stdout.strip() == "REPORT"
    lines = res.stderr.splitlines()
    assert len(lines) == 2 and method in lines[0] and "done" in lines[1]
