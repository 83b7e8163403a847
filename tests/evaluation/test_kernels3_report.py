"""The kernels-3 report from method_params rows (issue #33 item 6): each clause figure against
its target (met / not met) and against roofline-1.1 (beats yes / no), and the adoption rule."""

import pandas as pd
import pytest

from dgtraces.errors import Code, DgtracesError
from dgtraces.evaluation.kernels3 import Clause, metric
from dgtraces.evaluation.kernels3_report import adoption, differences, figures, text
from dgtraces.tables.schema import TABLES


def _rows(beats_all: bool) -> pd.DataFrame:
    rows = []
    rows += metric(Clause("1a", "deepbench.layers.fwd", "fwd", 15.0), 12.0, 400, 10.0, 30.0,
                   50)
    rows += metric(Clause("3", "calibration.v100.mean", "mean", 10.0), 11.0, 10, 11.0,
                   9.2 if not beats_all else 12.0, 10)
    rows.append({"scope": "metric", "param_id": "kernels-3:metric:habitat.m40.t4",
                 "name": "habitat.m40.t4", "value_pct": 40.0, "count": 90,
                 "basis": "reported: transfer"})
    return pd.DataFrame(rows, columns=list(TABLES["method_params"].to_schema().columns))


def test_each_clause_is_met_or_not_and_beats_or_not():
    figs = {f.name: f for f in figures(_rows(False))}
    assert set(figs) == {"deepbench.layers.fwd", "calibration.v100.mean"}
    f = figs["deepbench.layers.fwd"]
    assert (f.met, f.beats, f.clause, f.compared_count) == (True, True, "1a", 50)
    g = figs["calibration.v100.mean"]
    assert (g.met, g.beats) == (False, False)  # 11.0 > 10 target; 11.0 >= 9.2 roofline
    adopted, failed = adoption(list(figs.values()))
    assert not adopted and len(failed) == 1 and "calibration.v100.mean" in failed[0]
    assert adoption(figures(_rows(True)))[0]
    out = text(_rows(False), "0.6.0")
    assert "NOT met" in out and "not adopted" in out and "habitat.m40.t4" in out


def test_no_clause_figures_is_typed_and_differences_name_the_rows():
    with pytest.raises(DgtracesError) as e:
        adoption([])
    assert e.value.code == Code.NOT_FOUND
    a = _rows(False)
    b = a.copy()
    b.loc[0, "value_pct"] = 12.5
    assert differences(a, a) == []
    assert differences(a, b) == ["differs: kernels-3:metric:deepbench.layers.fwd"]


def _stored():
    from dgtraces.store.release import Release
    from tests.paths import REPO

    return Release.open("0.6.0", REPO / "data")


def test_docs_and_card_quote_the_stored_figures():
    """docs/reconstruction-kernels3.md's results table and the card fragment are the figures
    release v0.6.0 stores (no hand-copied number drifts)."""
    import re

    from dgtraces.evaluation.kernels3_report import markdown
    from tests.paths import REPO

    rel = _stored()
    rows = rel.table("method_params")
    figs = {f.name: f for f in figures(rows)}
    runs = sorted({n[len("kineto."):].rsplit(".", 1)[0] for n in figs if n.startswith("kineto.")})
    order = ["deepbench.layers.fwd", "deepbench.layers.dgrad", "deepbench.layers.wgrad",
             "deepbench.all_conv"]
    for run in runs:
        order += [f"kineto.{run}.all_kinds", f"kineto.{run}.conv_fwd", f"kineto.{run}.conv_bwd"]
    order += ["calibration.k80.mean", "calibration.k80.max", "calibration.v100.mean",
              "calibration.v100.max"]
    assert set(order) == set(figs)
    want = []
    for name in order:
        f = figs[name]
        want += [round(f.value_pct, 1), round(f.compared_pct, 1), round(f.baseline_pct, 1)]
    doc = (REPO / "docs" / "reconstruction-kernels3.md").read_text()
    results = doc[doc.index("## Results"):]
    table = [line for line in results.splitlines() if re.match(r"\| (1a|1b|2|3) \|", line)]
    got = []
    for line in table:
        cells = [c.strip() for c in line.strip("|").split("|")]
        k3, rl = cells[2].split(" / "), cells[7].split(" / ")
        cmp_ = cells[6].split(" / ")
        for i in range(len(k3)):
            got += [float(k3[i].rstrip("%")), float(cmp_[i].rstrip("%")),
                    float(rl[i].rstrip("%"))]
    # the calibration rows of the docs give mean / max in one line: reorder like `order`
    assert sorted(got) == sorted(want)
    assert "**Adoption: not adopted.**" in results and not adoption(list(figs.values()))[0]
    card = (REPO / "cards" / "fragments" / "reconstruction_kernels3.md").read_text()
    assert card == "\n".join(markdown(rows, "0.6.0")) + "\n"


def test_a_constant_at_its_bound_prints_as_the_bound():
    """Acceptance review #17: the report printed 'framework caffe overhead=9.358e-11 us'
    (the fit at its lower bound 0, as the docs say)."""
    import re

    from click.testing import CliRunner

    from dgtraces.cli import main

    res = CliRunner().invoke(main, ["reconstruct", "--report", "--method", "kernels-3"])
    assert res.exit_code == 0, res.output
    shown = [float(x) for x in re.findall(r"^  framework \S+ overhead\S*=(\S+) us", res.output,
                                          re.M)]
    assert shown and 0.0 in shown and all(x == 0.0 or x >= 1e-3 for x in shown)


@pytest.mark.parametrize("name", ["FRAGMENT", "FIGURE"])
def test_the_fragment_writer_refuses_a_link_at_either_name(tmp_path, name):
    """kernels3_report.write shares kernel_summary's writer, so a link at either output name
    is refused before either file is written (a library caller, not only the CLI)."""
    import os

    from dgtraces.evaluation import kernels3_report

    target = tmp_path / "target"
    target.write_bytes(b"keep")
    folder = tmp_path / "frag"
    folder.mkdir()
    os.symlink(target, folder / getattr(kernels3_report, name))
    with pytest.raises(DgtracesError) as err:
        kernels3_report.write(_stored(), folder)
    assert err.value.code is Code.BAD_INPUT
    assert target.read_bytes() == b"keep"
    assert sorted(p.name for p in folder.iterdir()) == [getattr(kernels3_report, name)]
