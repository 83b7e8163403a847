"""Hypothesis: a valid contribution mutated at random is either refused with a registered
reason code and the data tree byte-identical, or staged as schema-valid content."""

import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as s

from dgtraces.contribute import contribute
from dgtraces.contribute.staging import reject
from dgtraces.errors import CODES, DgtracesError
from dgtraces.tables.checks import validate_frame
from tests.contribute.test_contribute import META as BASE_META
from tests.contribute.test_contribute import make_store, tree_digest, variant, write_contrib

TABLE = s.sampled_from(["runs", "layer_timings"])
IDX = s.integers(0, 40)
HOSTILE = s.sampled_from([None, float("nan"), float("inf"), float("-inf"), -1, 0, 1e308,
                          2 ** 63, -2 ** 70, "", "x", "\u00fc\u20ac", "1e999", "NaN", "true",
                          "a\x00b", "a" * 300, "2026-13-45T99:00:00Z", "../../etc", 3.5])
META = s.sampled_from([
    BASE_META.replace("CC-BY-4.0 ", "GPL "),
    BASE_META.replace("kind: gpu", "kind: fpga"),
    BASE_META.replace("software:", "softwares:"),
    BASE_META + "extra: [1, 2]\n",
    BASE_META.replace("device: test-gpu", "device: ../x"),
    "contributor: &a x\nlicense: *a\n",
    "\u00ff\u00fe garbage: [",
    "",
])
OPS = s.one_of(
    s.tuples(s.just("cell"), TABLE, IDX, IDX, HOSTILE),
    s.tuples(s.just("drop_col"), TABLE, IDX),
    s.tuples(s.just("add_col"), TABLE, s.text(min_size=1, max_size=8)),
    s.tuples(s.just("dup_row"), TABLE, IDX),
    s.tuples(s.just("drop_row"), TABLE, IDX),
    s.tuples(s.just("scale"), s.sampled_from(["fwd_ms", "bwd_ms"]), s.floats(0, 4)),
    s.tuples(s.just("layer"), IDX, s.sampled_from(["fc9", "CONV1", "", "conv1",
                                                    "inception_3a/1x1", "res2a"])),
    s.tuples(s.just("grad"), IDX, s.integers(-5, 10 ** 9)),
    s.tuples(s.just("meta"), META),
    s.tuples(s.just("shuffle"), s.randoms(use_true_random=False)),
)


@pytest.fixture(scope="module")
def fuzz_store(tmp_path_factory):
    base = tmp_path_factory.mktemp("fuzz")
    root = make_store(base)
    runs, lt = variant("seed", scale=1.3)  # something staged, so staging/ and .lock exist
    contribute(write_contrib(base / "seed", runs, lt), root=root)
    return root, tree_digest(root)


def _apply(ops, runs, lt):
    frames = {"runs": runs.astype(object), "layer_timings": lt.astype(object)}
    meta = BASE_META
    for op in ops:
        kind = op[0]
        if kind == "cell":
            df = frames[op[1]]
            if len(df) and df.shape[1]:
                df.iat[op[2] % len(df), op[3] % df.shape[1]] = op[4]
        elif kind == "drop_col":
            df = frames[op[1]]
            if df.shape[1]:
                frames[op[1]] = df.drop(columns=df.columns[op[2] % df.shape[1]])
        elif kind == "add_col":
            frames[op[1]][op[2]] = 1
        elif kind in ("dup_row", "drop_row"):
            df = frames[op[1]]
            if len(df):
                i = op[2] % len(df)
                frames[op[1]] = (df.drop(index=df.index[i]) if kind == "drop_row" else
                                 df.iloc[list(range(len(df))) + [i]]).reset_index(drop=True)
        elif kind == "scale":
            frames["layer_timings"][op[1]] = frames["layer_timings"][op[1]] * op[2]
        elif kind in ("layer", "grad"):
            df = frames["layer_timings"]
            if len(df) and kind == "layer":
                df.iat[op[1] % len(df), df.columns.get_loc("layer")] = op[2]
            elif len(df) and "grad_bytes" in df:
                df.iat[op[1] % len(df), df.columns.get_loc("grad_bytes")] = op[2]
        elif kind == "meta":
            meta = op[1]
        elif kind == "shuffle":
            df = frames["layer_timings"]
            order = list(range(len(df)))
            op[1].shuffle(order)
            frames["layer_timings"] = df.iloc[order].reset_index(drop=True)
    return frames["runs"], frames["layer_timings"], meta


@pytest.mark.slow
@settings(deadline=None, derandomize=True,  # max_examples: the profile's (tests/conftest.py)
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(ops=s.lists(OPS, min_size=1, max_size=3), fmt=s.sampled_from(["csv", "parquet"]))
def test_mutated_contributions_refused_cleanly_or_staged_valid(fuzz_store, ops, fmt):
    """Every example starts from (and must leave) the same data tree, hashed once."""
    fuzz_store, before = fuzz_store
    runs, lt = variant("fz")
    runs, lt, meta = _apply(ops, runs, lt)
    work = Path(tempfile.mkdtemp(prefix="dgtraces-fuzz-"))
    try:
        try:
            folder = write_contrib(work / "c", runs, lt, fmt=fmt, meta=meta)
        except Exception:  # pyarrow refuses some mixed-type columns: write CSV instead
            shutil.rmtree(work / "c")
            folder = write_contrib(work / "c", runs, lt, fmt="csv", meta=meta)
        assert tree_digest(fuzz_store) == before
        try:
            entry = contribute(folder, root=fuzz_store, timeout=5)
        except DgtracesError as exc:
            assert exc.code in CODES and all(f.code in CODES for f in exc.failures)
            assert exc.report().startswith(f"error [{exc.code}]")
            assert tree_digest(fuzz_store) == before
            return
        frames = entry.frames()
        for name, df in frames.items():
            validate_frame(name, df)
        assert set(frames["layer_timings"]["run_id"]) <= set(frames["runs"]["run_id"])
        reject(entry.id, root=fuzz_store)
        assert tree_digest(fuzz_store) == before
    finally:
        shutil.rmtree(work, ignore_errors=True)
