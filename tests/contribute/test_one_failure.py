"""One bad value gives one failure line (issue #14 item 11), through the whole contribution
path: a bad cell is not echoed by frame-wide checks or by other columns of its row."""

import pytest

from dgtraces.contribute import contribute
from dgtraces.errors import DgtracesError
from tests.contribute.test_contribute import variant, write_contrib

BAD = [("bwd_ms", -1.0), ("fwd_ms", -0.5), ("fwd_ms", "abc"), ("n", -3), ("n", 2.5),
       ("bwd_p10_ms", -1.0), ("layer", "")]


@pytest.mark.parametrize("column,value", BAD)
def test_single_bad_value_single_line(store, tmp_path, column, value):
    runs, lt = variant("one1")
    lt = lt.astype({column: object})
    lt.loc[3, column] = value
    with pytest.raises(DgtracesError) as exc:
        contribute(write_contrib(tmp_path / "c", runs, lt), root=store)
    lines = [f.line() for f in exc.value.failures]
    assert len(lines) == 1, "\n".join(lines)
    (f,) = exc.value.failures
    assert (f.row, f.column) == (3, column) and f.file == "layer_timings.csv"


def test_frame_wide_failure_is_one_line_per_row(store, tmp_path):
    runs, lt = variant("one2")
    lt.loc[5, "fwd_p10_ms"] = lt.loc[5, "fwd_p90_ms"] + 1.0  # p10 > p90: a row-level check
    with pytest.raises(DgtracesError) as exc:
        contribute(write_contrib(tmp_path / "c", runs, lt), root=store)
    assert [(f.code, f.row, f.column) for f in exc.value.failures] == [("SCHEMA", 5, None)]
