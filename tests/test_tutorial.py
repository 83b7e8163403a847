"""docs/tutorial.ipynb: stored without outputs, and it runs top to bottom (nbclient, the
``python3`` kernel that ipykernel installs)."""

import os
import re

import pytest

from tests.paths import REPO

# nbformat is imported inside the tests: its jsonschema import takes ~3 s, which every
# pytest-xdist worker would otherwise pay while collecting

NB = REPO / "docs" / "tutorial.ipynb"


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


def _cells() -> list[str]:
    import json

    return ["".join(c["source"]) for c in json.loads(NB.read_text())["cells"]
            if c["cell_type"] == "code"]


def test_tutorial_compares_the_same_device_and_batch(capsys):
    """Issue #28 point 2: the layer-by-layer comparison (reconstructed K80 batch 64 against
    published) mixed the Titan X batch-128 run into the published side (144 layers)."""
    cells = _cells()
    ns: dict = {}
    for src in (cells[0], next(c for c in cells if "con = dgtraces.connect" in c),
                next(c for c in cells if "pub = con.sql" in c)):
        exec(compile(src, str(NB), "exec"), ns)  # noqa: S102 (the notebook's own cells)
    both = ns["both"]
    assert len(both) == 64
    assert both.reconstructed_ms.sum() == pytest.approx(126.9, abs=0.05)
    assert both.published_ms.sum() == pytest.approx(200.6, abs=0.05)


def test_tutorial_does_not_force_a_backend():
    """Issue #28 point 2: ``matplotlib.use("Agg")`` hid the scaling figure in Jupyter (the
    test run sets ``MPLBACKEND=Agg`` itself)."""
    assert not [c for c in _cells() if "matplotlib.use(" in c]


def test_the_tutorial_says_which_all_reduce_it_models():
    """Issue #36 trial: the scaling section passed "ring" to Cluster without saying so,
    while ``predict`` on a GPU defaults to ``auto`` (NCCL's model): each algorithm a code
    cell names is named in the text before it, with the default it departs from."""
    import json

    from dgtraces.comm.algorithm_default import default_algorithm

    cells = json.loads(NB.read_text())["cells"]
    for i, cell in enumerate(cells):
        src = "".join(cell["source"])
        for algorithm in re.findall(r'Cluster\([^)]*"(ring|tree|auto|ps|hierarchical)"', src):
            text = "".join(cells[i - 1]["source"])
            assert cells[i - 1]["cell_type"] == "markdown"
            assert f'`"{algorithm}"`' in text, text
            default = default_algorithm("v100", ["pcie3"], ["10gbe"], [(8, 4)]).algorithm
            assert algorithm == default or f"`{default}`" in text, text
