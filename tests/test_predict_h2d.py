import pandas as pd

from dgtraces.models import layers_frame
from dgtraces.predict.links import get_link
from dgtraces.predict.trace import from_frame, with_default_h2d


def _trace(device, h2d_ms=0.0):
    lf = layers_frame("alexnet")
    df = pd.DataFrame({"layer": lf["layer"], "fwd_ms": 1.0, "bwd_ms": 2.0})
    return from_frame(df, "alexnet", 32, h2d_ms=h2d_ms, device=device)


def test_gpu_trace_gets_modelled_input_copy(empty_store):
    t = with_default_h2d(_trace("k80"), "pcie3")
    link = get_link("pcie3", use_store=False)
    nbytes = 32 * 3 * 227 * 227 * 4
    assert abs(t.h2d_ms - (link.alpha_us / 1e3 + nbytes / (link.bandwidth_gb_s * 1e9) * 1e3)) < 1e-12
    assert "h2d modelled" in t.source


def test_cpu_or_given_h2d_is_left_alone(empty_store):
    assert with_default_h2d(_trace("cpu")).h2d_ms == 0.0
    assert with_default_h2d(_trace("k80", h2d_ms=1.5)).h2d_ms == 1.5
