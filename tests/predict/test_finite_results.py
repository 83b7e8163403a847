"""Inf results from absurd finite rates (issue #36, low): a bandwidth of 1e-320 GB/s or times
of 1e308 ms overflowed to ``inf`` (and ``inf - inf`` to NaN), printed as ``inf ms`` and as
JSON ``Infinity``. Every prediction (predict, sweep, the overhead terms) is now refused
with PLAUSIBILITY when a modelled number is not finite (``values.finite_results``)."""

import pytest
from click.testing import CliRunner

from dgtraces.cli import main
from tests.attack_tally import record

CLS = "non-finite result from finite inputs"
PREDICT = ["predict", "--model", "alexnet", "--device", "v100", "--batch-size", "32",
           "--workers", "8", "--gpus-per-node", "4", "--algorithm", "ring"]
SWEEP = ["sweep", "--models", "alexnet", "--device", "v100", "--batch-sizes", "32",
         "--workers", "1,8", "--algorithms", "ring"]


@pytest.mark.parametrize("args", [
    PREDICT + ["--link-bandwidth-gb-s", "1e-320"],
    PREDICT + ["--link-bandwidth-gb-s", "1e-320", "--json"],
    PREDICT + ["--io-ms", "1e308", "--h2d-ms", "1e308"],
    SWEEP + ["--link-bandwidth-gb-s", "1e-320"],
], ids=["predict-bandwidth", "predict-json", "predict-times", "sweep"])
def test_a_non_finite_result_is_refused(args):
    res = CliRunner().invoke(main, args)
    code = getattr(res.exception, "code", None)
    record(CLS, code == "PLAUSIBILITY")
    assert code == "PLAUSIBILITY", res.output
    assert "Infinity" not in res.output and "inf ms" not in res.output


def test_finite_results_names_every_bad_number():
    import numpy as np

    from dgtraces.errors import DgtracesError
    from dgtraces.values import finite_results

    finite_results("x", {"a": 1.0, "b": np.array([1.0, 2.0])})
    with pytest.raises(DgtracesError) as exc:
        finite_results("x", {"a": float("inf"), "b": np.array([1.0, np.nan]), "c": 3.0})
    assert exc.value.code == "PLAUSIBILITY"
    assert [f.column for f in exc.value.failures] == ["a", "b"]
