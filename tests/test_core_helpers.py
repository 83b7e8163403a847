"""The torch-free core helpers: fitting, values, tables_io, and who may import collect."""

import ast
from pathlib import Path

import pytest

import dgtraces
from dgtraces import fitting, values
from dgtraces.errors import DgtracesError
from dgtraces.io import files as fileio
from dgtraces.tables import write as tables_io

PKG = Path(dgtraces.__file__).parent


@pytest.mark.parametrize("area", ["importers", "predict", "reconstruct", "contribute"])
def test_torch_free_areas_do_not_import_the_collector(area):
    bad = []
    for path in (PKG / area).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                mod = ("." * node.level) + (node.module or "")
                if mod.lstrip(".").startswith("collect") and node.level >= 2 or \
                        mod.startswith("dgtraces.collect"):
                    bad.append(f"{path.name}:{node.lineno} {mod}")
    assert bad == []


def test_alpha_beta_weights():
    sizes = [1_000, 10_000, 100_000, 1_000_000]
    times = [10.0 + 0.01 * s for s in sizes]  # exact line: every weighting recovers it
    for w in ("relative", "uniform", [1.0, 2.0, 3.0, 4.0]):
        fit = fitting.fit_alpha_beta(sizes, times, weights=w)
        assert fit.alpha_us == pytest.approx(10.0) and fit.beta_us_per_byte == pytest.approx(0.01)
        assert fit.bandwidth_gb_s == pytest.approx(0.1) and fit.r2 == pytest.approx(1.0)
    noisy = [12.0, 100.0, 1010.0, 10020.0]
    rel = fitting.fit_alpha_beta(sizes, noisy, weights="relative")
    uni = fitting.fit_alpha_beta(sizes, noisy, weights="uniform")
    # relative weights fit the small sizes better, uniform the large ones
    assert abs(rel.alpha_us + rel.beta_us_per_byte * 1e3 - 12.0) < \
        abs(uni.alpha_us + uni.beta_us_per_byte * 1e3 - 12.0)
    flat = fitting.fit_alpha_beta([1, 2, 3], [5.0, 4.0, 3.0], weights="uniform")
    assert (flat.beta_us_per_byte, flat.alpha_us) == (0.0, pytest.approx(4.0))
    for bad in ("heavy", [1.0], [1.0, -1.0, 1.0, 1.0]):
        with pytest.raises(DgtracesError) as exc:
            fitting.fit_alpha_beta(sizes, times, weights=bad)
        assert exc.value.code == "BAD_INPUT"


@pytest.mark.parametrize("value,least,ok", [(8, 1, 8), ("8", 1, None), (0, 0, 0), (0, 1, None),
                                            (True, 1, None), (8.0, 1, None), (2 ** 63, 1, None)])
def test_whole_number(value, least, ok):
    if ok is None:
        with pytest.raises(DgtracesError) as exc:
            values.whole_number("n", value, least=least)
        assert exc.value.code == "BAD_INPUT" and exc.value.failures[0].column == "n"
    else:
        assert values.whole_number("n", value, least=least) == ok
    assert values.positive_int("n", " 12 ", text_ok=True) == 12


def test_atomic_folder_all_or_nothing(tmp_path):
    out = tmp_path / "out"
    with pytest.raises(RuntimeError):
        with fileio.atomic_folder(out) as tmp:
            (tmp / "a.txt").write_text("half")
            raise RuntimeError("interrupted")
    assert not out.exists() and list(tmp_path.iterdir()) == []
    with fileio.atomic_folder(out) as tmp:
        (tmp / "a.txt").write_text("whole")
    assert (out / "a.txt").read_text() == "whole"
    with pytest.raises(DgtracesError) as exc:
        with fileio.atomic_folder(out):
            pass
    assert exc.value.code == "BAD_INPUT"


def test_write_tables_into_an_existing_folder(tmp_path):
    import pandas as pd

    from dgtraces.models import layers_frame

    lay = layers_frame("alexnet")
    (tmp_path / "notes.txt").write_text("keep me")
    paths = tables_io.write_tables(tmp_path, {"layers": lay}, fmt="csv", into_existing=True)
    assert paths == [tmp_path / "layers.csv"] and len(pd.read_csv(paths[0])) == len(lay)
    with pytest.raises(DgtracesError) as exc:
        tables_io.write_tables(tmp_path, {"layers": lay}, fmt="csv", into_existing=True)
    assert exc.value.code == "BAD_INPUT"
    tables_io.write_tables(tmp_path, {"layers": lay}, fmt="csv", into_existing=True,
                           overwrite=True)
    assert (tmp_path / "notes.txt").read_text() == "keep me"
