import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def tmp_store(tmp_path, monkeypatch):
    """A private copy of data/ (releases only) with DGTRACES_DATA pointing at it."""
    root = tmp_path / "data"
    shutil.copytree(REPO / "data" / "releases", root / "releases")
    monkeypatch.setenv("DGTRACES_DATA", str(root))
    return root


@pytest.fixture
def empty_store(tmp_path, monkeypatch):
    root = tmp_path / "data"
    root.mkdir()
    monkeypatch.setenv("DGTRACES_DATA", str(root))
    return root
