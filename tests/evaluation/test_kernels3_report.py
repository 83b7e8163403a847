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
