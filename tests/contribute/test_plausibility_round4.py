"""Contribution plausibility (issue #36 item 8): the unit-error bound of the run's precision,
every template placeholder refused, an unquoted comma in a first data row as one error, and
a CPU trace from another host not filed under the store's ``cpu`` device."""

from pathlib import Path

import pandas as pd
import pytest

from dgtraces.contribute import contribute
from dgtraces.contribute.files import validate_files
from dgtraces.contribute.template import (
    EXAMPLE_SOURCE,
    PLACEHOLDER_CONTRIBUTOR,
    PLACEHOLDERS,
    template_frames,
    write_template,
)
from dgtraces.errors import DgtracesError
from dgtraces.tables import coverage
from tests.attack_tally import record
from tests.contribute.test_contribute import (
    CONTRIBUTOR,
    META,
    refused,
    variant,
    write_contrib,
)

V100 = "  - {device: v100, kind: gpu, name: NVIDIA Tesla V100 SXM2 16GB}\n"


def _implied(runs: pd.DataFrame, lt: pd.DataFrame) -> float:
    from dgtraces.models import layers_frame

    lf = layers_frame(runs["model"].iloc[0])
    flops = (lf["fwd_flops"] + lf["bwd_flops"]).sum() * int(runs["batch_size"].iloc[0])
    return flops / ((lt["fwd_ms"] + lt["bwd_ms"]).sum() / 1e3)


# ---- the unit-error bound of the run's precision ----------------------------------------

def test_a_x1000_error_on_a_v100_fp32_run_is_refused(store, tmp_path):
    """The template's times imply ~0.1 TFLOP/s; x1000 faster is ~100 TFLOP/s: above 2.5x the
    V100's fp32 peak (15.7 TFLOP/s), under 2.5x its fp16 tensor peak (125), which bounded
    every precision before."""
    peaks = coverage.reference_peaks()["v100"]
    runs, lt = variant("v100-fast", scale=0.001)
    runs["device"] = "v100"
    implied = _implied(runs, lt)
    assert peaks["fp32"] * coverage.ABOVE_PEAK < implied < peaks["amp"] * coverage.ABOVE_PEAK
    meta = META + V100
    err = refused(write_contrib(tmp_path / "fp32", runs, lt, meta=meta), store, "PLAUSIBILITY",
                  dry_run=True)
    hits = [f for f in err.failures if "FLOP/s" in f.message]
    record("consistent unit error (x1000 / x0.001)", len(hits) == 1)
    assert len(hits) == 1 and hits[0].column == "run_id"
    # the same times on tensor cores (amp) are within the fp16 tensor bound
    assert coverage.throughput_failures(runs.assign(precision="amp"), lt,
                                        {"v100": peaks}, "runs.csv") == []


def test_every_precision_has_a_peak_rule():
    from dgtraces.tables.schema import PRECISIONS, TABLES

    columns = set(TABLES["devices"].to_schema().columns)
    assert set(coverage.PEAK_COLUMNS) == set(PRECISIONS)
    assert all(set(c) <= columns for c in coverage.PEAK_COLUMNS.values())
    peaks = coverage.device_peaks(pd.DataFrame([{"device": "v100", "peak_fp32_tflops": 15.7,
                                                 "peak_fp16_tensor_tflops": 125.0}]))
    assert peaks == {"v100": {"fp32": 15.7e12, "amp": 125e12, "fp16": 125e12, "bf16": 125e12}}


# ---- every template placeholder -------------------------------------------------------

def test_renaming_the_three_markers_leaves_the_other_placeholders_refused(store, tmp_path):
    """Before, contributor, source and run_id were the only placeholders checked."""
    folder = tmp_path / "tpl"
    write_template(folder)
    (folder / "contribution.yaml").write_text(
        (folder / "contribution.yaml").read_text().replace(PLACEHOLDER_CONTRIBUTOR,
                                                           CONTRIBUTOR))
    old_id = template_frames()[0]["run_id"].iloc[0]
    for name in ("runs.csv", "layer_timings.csv"):
        text = (folder / name).read_text().replace(old_id, "renamed-run")
        (folder / name).write_text(text.replace(f"{EXAMPLE_SOURCE} - replace", "Replaced"))
    err = refused(folder, store, "METADATA", dry_run=True)
    left = {ph.field for ph in PLACEHOLDERS} - {"contributor", "source", "run_id"}
    found = {f.column for f in err.failures}
    record("template placeholder left in place", found == left)
    assert found == left, err.report()


# ---- an unquoted comma in the first data row --------------------------------------------

def _comma_in_first_row(folder: Path) -> Path:
    path = folder / "runs.csv"
    lines = path.read_text().split("\n")
    lines[1] = lines[1].replace("Test host CPU", "Test host, CPU")
    path.write_text("\n".join(lines))
    return path


def test_an_unquoted_comma_in_the_first_data_row_is_one_error(store, tmp_path):
    folder = write_contrib(tmp_path / "c", *variant("comma"))
    path = _comma_in_first_row(folder)
    with pytest.raises(DgtracesError) as by_validate:
        validate_files([path], use_store=False)
    by_contribute = refused(folder, store, "BAD_FILE", dry_run=True)
    header = len(path.read_text().split("\n")[0].split(","))
    for err in (by_validate.value, by_contribute):
        ok = err.code == "BAD_FILE" and len(err.failures) == 1
        record("unquoted comma in a first data row", ok)
        assert ok, err.report()
        (f,) = err.failures
        assert (f.row, f.expected, f.found) == (0, f"{header} fields (the header's)",
                                                f"{header + 1} fields")


# ---- a CPU trace from another host ------------------------------------------------------

@pytest.fixture
def shipped_store(tmp_path, monkeypatch):
    """Every shipped release (the store's ``cpu`` device: the Xeon that built them)."""
    from dgtraces.store import manifest as st
    from dgtraces.store.shards import copy_release

    root = tmp_path / "data"
    shipped = Path(st.__file__).resolve().parents[2] / "data"
    for version in st.list_releases(shipped):
        copy_release(version, root, shipped)
    monkeypatch.setenv("DGTRACES_DATA", str(root))
    return root


def _cpu_run(run_id: str, host: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    runs, lt = variant(run_id)
    runs["device"], runs["device_kind"], runs["host"] = "cpu", "cpu", host
    runs["threads"], runs["cores"] = 2, 2
    return runs, lt


def test_a_cpu_trace_from_another_host_is_not_filed_under_the_stores_cpu(shipped_store,
                                                                        tmp_path):
    from dgtraces.store import Release

    cpu = Release.open(None, shipped_store).table("devices").set_index("device").loc["cpu"]
    host = str(cpu["name"]).rsplit(" (", 1)[0]  # "<cpu model> (2 of 2 cores)"
    meta = META[:META.index("devices:")]
    same = write_contrib(tmp_path / "same", *_cpu_run("same-host", host), meta=meta)
    assert contribute(same, root=shipped_store, dry_run=True).rows["runs"] == 1
    other = write_contrib(tmp_path / "other", *_cpu_run("other-host", "AMD EPYC 7763 "
                                                       "64-Core Processor"), meta=meta)
    err = refused(other, shipped_store, "DEVICE_MISMATCH", dry_run=True)
    ok = [(f.code, f.column) for f in err.failures] == [("DEVICE_MISMATCH", "host")]
    record("CPU trace filed under another host's device", ok)
    assert ok, err.report()
    # declared as its own device, named as its host: accepted
    own = meta + ("devices:\n  - {device: cpu-epyc-7763, kind: cpu, "
                  "name: AMD EPYC 7763 64-Core Processor}\n")
    runs, lt = _cpu_run("own-device", "AMD EPYC 7763 64-Core Processor")
    runs["device"] = "cpu-epyc-7763"
    assert contribute(write_contrib(tmp_path / "own", runs, lt, meta=own),
                      root=shipped_store, dry_run=True).rows["runs"] == 1
