"""Frame comparison with float tolerances, JSON text cells included.

Fitted numbers (``runs.params_json``: ``eff_gemm``, ...) differ in the last digits between
numpy/pandas builds; comparing them as text fails on another machine. ``assert_frames_close``
parses ``*_json`` columns and compares their numbers with ``pytest.approx``, every other
column with ``pandas.testing.assert_frame_equal`` (relative tolerance), and reports at most
``MAX_SHOWN`` differing cells (never the whole frame)."""

import json
import math

import pandas as pd

RTOL = 1e-9
MAX_SHOWN = 5


def _flat(value, path=""):
    """Leaves of a parsed JSON value as (path, value) pairs."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _flat(v, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _flat(v, f"{path}[{i}]")
    else:
        yield path, value


def _close(a, b, rtol: float) -> bool:
    if isinstance(a, bool) or isinstance(b, bool) or not (
            isinstance(a, int | float) and isinstance(b, int | float)):
        return a == b
    if math.isnan(a) and math.isnan(b):
        return True
    return math.isclose(a, b, rel_tol=rtol, abs_tol=1e-12)


def json_differences(got: str | None, want: str | None, rtol: float = RTOL) -> list[str]:
    """Paths where two JSON texts differ (numbers within ``rtol`` are equal)."""
    if got is None or want is None or (isinstance(got, float) and isinstance(want, float)):
        return [] if pd.isna(got) and pd.isna(want) else ["<null vs value>"]
    a, b = dict(_flat(json.loads(got))), dict(_flat(json.loads(want)))
    if a.keys() != b.keys():
        return [f"keys {sorted(a.keys() ^ b.keys())[:MAX_SHOWN]}"]
    return [f"{k}: {a[k]!r} vs {b[k]!r}" for k in a if not _close(a[k], b[k], rtol)]


def assert_frames_close(got: pd.DataFrame, want: pd.DataFrame, rtol: float = RTOL) -> None:
    """``got`` equals ``want`` up to float tolerance, JSON columns parsed."""
    assert list(got.columns) == list(want.columns) and len(got) == len(want), (
        f"shape {got.shape} vs {want.shape}")
    json_cols = [c for c in want.columns if c.endswith("_json")]
    rest = [c for c in want.columns if c not in json_cols]
    pd.testing.assert_frame_equal(got[rest].reset_index(drop=True),
                                  want[rest].reset_index(drop=True), rtol=rtol)
    diffs = [f"row {i} {c}{d}" for c in json_cols
             for i, (g, w) in enumerate(zip(got[c], want[c], strict=True))
             for d in json_differences(g, w, rtol)]
    assert not diffs, f"{len(diffs)} differing JSON values, first: {diffs[:MAX_SHOWN]}"
