"""One finite check serves ``validate`` and ``contribute`` (issue #36 item 7): an infinite
float, however written (``1e999`` in a CSV, ``inf`` in Parquet), is PLAUSIBILITY in
both, at the same cell; ``validate`` said ok to it in ``kernels.fwd_ms``, ``runs.update_ms``
and ``comm.time_ms``."""

import pandas as pd
import pytest

from dgtraces.contribute import contribute
from dgtraces.contribute.files import validate_files
from dgtraces.errors import DgtracesError
from dgtraces.store import Release
from tests.attack_tally import record
from tests.conftest import _mini_frames
from tests.contribute.test_contribute import variant, write_contrib

CLS = "infinite float accepted by validate"
CELLS = [("kernels", "fwd_ms"), ("runs", "update_ms"), ("comm", "time_ms")]
# (-inf is below every one of these columns' range: SCHEMA already)
WRITTEN = {"csv 1e999": ("csv", "1e999"), "parquet inf": ("parquet", float("inf"))}


def _frame(table: str) -> pd.DataFrame:
    if table == "kernels":
        return Release.open("0.5.0").table("kernels").head(3).reset_index(drop=True)
    return _mini_frames()[table].head(2).reset_index(drop=True)


def _write(df: pd.DataFrame, path, column: str, value) -> None:
    df = df.astype({column: float})
    if path.suffix == ".csv":
        df.loc[1, column] = -12345.5
        path.write_text(df.to_csv(index=False).replace("-12345.5", value))
    else:
        df.loc[1, column] = value
        df.to_parquet(path, index=False)


def _infinite(exc) -> set:
    return {(f.column, f.row) for f in exc.failures
            if f.code == "PLAUSIBILITY" and "finite" in f.message}


@pytest.mark.parametrize("written", sorted(WRITTEN))
@pytest.mark.parametrize("table, column", CELLS)
def test_validate_refuses_an_infinite_float(tmp_path, table, column, written):
    fmt, value = WRITTEN[written]
    path = tmp_path / f"{table}.{fmt}"
    _write(_frame(table), path, column, value)
    with pytest.raises(DgtracesError) as exc:
        validate_files([path], use_store=False)
    record(f"{CLS} ({written})", exc.value.code == "PLAUSIBILITY")
    assert exc.value.code == "PLAUSIBILITY"
    assert _infinite(exc.value) == {(column, 1)}


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
@pytest.mark.parametrize("table, column", CELLS[1:])  # kernels is no contribution table
def test_contribute_and_validate_refuse_the_same_cell(store, tmp_path, fmt, table, column):
    runs, lt = variant("r-inf")
    runs = pd.concat([runs, runs.assign(run_id="r-inf2")], ignore_index=True)
    lt = pd.concat([lt, lt.assign(run_id="r-inf2")], ignore_index=True)
    # no p10/p90: an infinite median would also break p10 <= time <= p90 (SCHEMA)
    comm = _mini_frames()["comm"].tail(1).reset_index(drop=True).assign(p10_ms=None,
                                                                          p90_ms=None)
    comm = pd.concat([comm, comm.assign(workers=4)], ignore_index=True)
    folder = write_contrib(tmp_path / "c", runs, lt, fmt=fmt, extra={"comm": comm})
    df = runs if table == "runs" else comm
    _write(df, folder / f"{table}.{fmt}", column, "1e999" if fmt == "csv" else float("inf"))
    with pytest.raises(DgtracesError) as by_contribute:
        contribute(folder, root=store, dry_run=True)
    with pytest.raises(DgtracesError) as by_validate:
        validate_files([folder / f"{table}.{fmt}"], use_store=False)
    assert by_contribute.value.code == by_validate.value.code == "PLAUSIBILITY"
    assert _infinite(by_contribute.value) == _infinite(by_validate.value) == {(column, 1)}
