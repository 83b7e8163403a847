"""docs/tutorial.ipynb: stored without outputs, and it runs top to bottom (nbclient, the
``python3`` kernel that ipykernel installs)."""

import os
from pathlib import Path

import pytest

# nbformat is imported inside the tests: its jsonschema import takes ~3 s, which every
# pytest-xdist worker would otherwise pay while collecting

NB = Path(__file__).resolve().parent.parent / "docs" / "tutorial.ipynb"


def test_tutorial_outputs_are_stripped():
    import nbformat

    nb = nbformat.read(NB, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code
    for cell in code:
        assert cell.outputs == [] and cell.execution_count is None, cell.source[:60]
    assert "widgets" not in nb.metadata


def test_tutorial_runs(tmp_path, monkeypatch):
    pytest.importorskip("ipykernel")
    import nbformat
    from nbclient import NotebookClient

    repo = str(NB.parent.parent)
    # the kernel imports this tree's dgtraces (an editable install does so anyway)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        p for p in (repo, os.environ.get("PYTHONPATH")) if p))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(NB, as_version=4)
    NotebookClient(nb, kernel_name="python3", timeout=300,
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    text = "".join(str(o.get("text", "")) + str(o.get("data", {}).get("text/plain", ""))
                   for o in outputs)
    assert "reconstructed" in text and "published" in text and "measured" in text
    assert "56gb-ib" in text and "croissant.json" in text
