"""Cross-field checks of ``kernels`` (issue #36, low): each column had its own range, so a
GEMM row with a conv shape, a conv whose output size its geometry cannot give, or a layer
without its model validated. The schema now checks each row as one problem."""

import pytest

from dgtraces.contribute.files import validate_files
from dgtraces.errors import DgtracesError
from dgtraces.store import Release
from tests.attack_tally import record


@pytest.fixture(scope="module")
def kernels():
    return Release.open("0.5.0").table("kernels")


def _conv(k):
    return k.index[k["op"] == "conv"][0]


def _gemm(k):
    return k.index[k["op"] == "gemm"][0]


MUTATIONS = {
    "gemm row with a conv field": lambda k: k.loc.__setitem__((_gemm(k), "in_c"), 3),
    "gemm row with a weight gradient": lambda k: k.loc.__setitem__((_gemm(k), "wgrad_ms"), 1.0),
    "conv row without its stride": lambda k: k.loc.__setitem__((_conv(k), "stride_h"), None),
    "conv row with a gemm field": lambda k: k.loc.__setitem__((_conv(k), "gemm_k"), 64),
    "conv output size off by one": lambda k: k.loc.__setitem__(
        (_conv(k), "out_w"), k.loc[_conv(k), "out_w"] + 1),
    "a layer without its model": lambda k: k.loc.__setitem__(
        (k.index[k["model"].isna()][0], "layer"), "conv1"),
}


def test_the_shipped_kernels_pass(kernels, tmp_path):
    path = tmp_path / "kernels.csv"
    kernels.to_csv(path, index=False)
    assert validate_files([path], use_store=False) == {"kernels": len(kernels)}


@pytest.mark.parametrize("how", sorted(MUTATIONS))
def test_a_row_that_is_no_problem_of_its_op_is_refused(kernels, tmp_path, how):
    bad = kernels.copy()
    MUTATIONS[how](bad)
    path = tmp_path / "kernels.parquet"
    bad.to_parquet(path, index=False)
    with pytest.raises(DgtracesError) as exc:
        validate_files([path], use_store=False)
    rows = {f.row for f in exc.value.failures}
    ok = exc.value.code == "SCHEMA" and len(rows) == 1
    record("kernels row whose fields contradict each other", ok)
    assert ok, exc.value.report()
