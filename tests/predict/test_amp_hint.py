"""The contradictory amp hint (issue #36, trial): ``predict --device k80 --precision amp``
failed with "k80: no calibration for precision 'amp' (have: fp32)" and the hint "k80 has
datasheet peaks but no calibration rows". The hint now says what is missing: a device
calibrated for fp32 only, and why (no tensor-core peak, or no amp/fp32 pair)."""

import pytest

from dgtraces.errors import DgtracesError
from dgtraces.predict import resolve


@pytest.mark.parametrize("device, calibrated", [("k80", True), ("t4", False)])
def test_the_hint_agrees_with_the_error(device, calibrated):
    with pytest.raises(DgtracesError) as exc:
        resolve("resnet50", device, 32, precision="amp")
    assert exc.value.code == "NO_CALIBRATION"
    says_no_rows = "no calibration rows" in exc.value.hint
    assert says_no_rows is not calibrated, exc.value.report()
    if calibrated:
        assert "--precision fp32" in exc.value.hint and "tensor-core" in exc.value.hint
