# Write bytecode for the suite even where PYTHONDONTWRITEBYTECODE is set: every xdist worker
# and every CLI subprocess a test starts otherwise compiles the package and its tests again
# (issue #36; ~2 s of CPU for collection alone). Set before anything else is imported; the
# subprocesses read the __pycache__ folders this writes. The wheel leaves them out
# (pyproject.toml's exclude-package-data, MANIFEST.in).
import sys

sys.dont_write_bytecode = False

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck
from hypothesis import settings as _hyp_settings

from dgtraces.store import shards
from tests.paths import REPO
from tests.workers import suite_workers

CI_FULL = os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


# --- parallel whole-suite runs (pytest-xdist, the [test] extra) -----------------------------
@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
    """``python -m pytest`` without paths (the whole suite) runs on min(CPUs, 4) xdist
    workers. An explicit ``-n N`` (``-n 0``: serial), ``--dist``, ``-p no:xdist``, ``--pdb``,
    ``--collect-only`` or a path argument (a targeted run) keeps pytest's own behaviour.
    Runs before xdist's own hook of the same name (a conftest registers later)."""
    if not config.pluginmanager.hasplugin("xdist") or hasattr(config, "workerinput"):
        return
    opt = config.option
    if (opt.numprocesses is not None or opt.dist != "no" or opt.tx or opt.collectonly
            or opt.usepdb or config.args_source is not pytest.Config.ArgsSource.TESTPATHS):
        return
    workers = suite_workers()
    if workers:
        opt.numprocesses = workers
        opt.dist = "loadscope"  # a module's tests on one worker: module fixtures built once


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadscope`` with the module groups of ``tests/workers.py`` (SHARED) as one
    unit each (hook of pytest-xdist, run in the controller)."""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    from tests.workers import scope

    class SharedScopes(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scope(nodeid)

    return SharedScopes(config, log)


def pytest_collection_finish(session):
    """Move everything alive after collection (imported modules, test items) out of the
    garbage collector's reach: a full collection then costs ~0 s instead of ~0.2-0.5 s, and
    the layer collector runs one per timed pass (``collect/layers.py``)."""
    import gc

    gc.freeze()


@pytest.fixture
def tmp_store(tmp_path, monkeypatch):
    """A private store holding a copy of release v0.1.0 only (later releases come and go),
    with DGTRACES_DATA pointing at it."""
    root = seed_v010(tmp_path / "data")
    monkeypatch.setenv("DGTRACES_DATA", str(root))
    return root


def seed_v010(root: Path) -> Path:
    """A new data root ``root`` holding a copy of the shipped release v0.1.0."""
    from dgtraces.store.migrate import migrate
    from dgtraces.store.shards import copy_release

    copy_release("0.1.0", root, REPO / "data")
    migrate(root)  # a no-op once the shipped releases are shards
    return root


@pytest.fixture
def empty_store(tmp_path, monkeypatch):
    root = tmp_path / "data"
    root.mkdir()
    monkeypatch.setenv("DGTRACES_DATA", str(root))
    return root


# --- query / hf / card tests (issue #7): a small release with every table -------------------
def _mini_frames():
    """A few valid rows per table, with nulls, two provenances and a B-Caffe source."""
    import pandas as pd

    from dgtraces.models import layers_frame

    ts = "2026-12-02T10:00:00Z"
    run = dict(model="alexnet", host=None, framework="pytorch 2.13.0", precision="fp32",
               threads=None, cores=None, collector_version="fixture 0", timestamp_utc=ts,
               fwd_ms=None, bwd_ms=None, update_ms=None, iter_ms=None, layer_sum_ratio=None,
               flagged=False, flag_reason=None, params_json=None, notes=None)
    runs = pd.DataFrame([
        dict(run, run_id="m1", device="cpu-x", device_kind="cpu", batch_size=8, threads=2,
             cores=2, provenance="measured", source="fixture measurement", fwd_ms=30.0),
        dict(run, run_id="p1", device="k80", device_kind="gpu", batch_size=64,
             provenance="published", source="shyhuai/B-Caffe logdata/tmp4comm.log"),
    ])
    lt = []
    for rid, scale, comm in (("m1", 1.0, None), ("p1", 0.25, 2.0)):
        for layer, f in (("conv1", 4.0), ("fc6", 2.0), ("fc7", 1.0)):
            lt.append(dict(run_id=rid, layer=layer, fwd_ms=f * scale, bwd_ms=2 * f * scale,
                           fwd_p10_ms=None, fwd_p90_ms=None, bwd_p10_ms=None, bwd_p90_ms=None,
                           comm_ms=None if comm is None else comm * f, n=5))
    it = dict(model="alexnet", framework="pytorch 2.13.0", precision="fp32", phase="train",
              interconnect="loopback", backend="gloo", policy="wfbp", bucket_bytes=None,
              io_overlap=None, threads_per_worker=None, iter_p10_ms=None, iter_p90_ms=None,
              timestamp_utc=ts, phases_json=None, notes=None)
    iterations = pd.DataFrame([
        dict(it, iter_id="i1", device="cpu-x", batch_size=8, workers=2, nodes=1, iter_ms=80.0,
             n=10, throughput_img_s=None, provenance="measured", source="fixture s-sgd",
             trace_run_id="m1"),
        dict(it, iter_id="i2", device="k80", batch_size=None, workers=1, nodes=1, iter_ms=None,
             n=None, throughput_img_s=51.9, provenance="published",
             source="tensorflow benchmarks.md", trace_run_id=None, backend=None,
             timestamp_utc=None),
    ])
    comm = pd.DataFrame([
        dict(collective="allreduce", backend="mpi/osu", interconnect="10GbE", workers=4,
             message_bytes=b, time_ms=t, p10_ms=None, p90_ms=None, n=None,
             provenance="published", source="shyhuai/B-Caffe logdata/allreduce4.log",
             timestamp_utc=None) for b, t in ((4, 0.0545), (1048576, 2.252))
    ] + [dict(collective="allreduce", backend="gloo", interconnect="loopback", workers=2,
              message_bytes=1024, time_ms=0.1, p10_ms=0.09, p90_ms=0.12, n=20,
              provenance="measured", source="fixture comm sweep", timestamp_utc=ts)])
    fits = pd.DataFrame([dict(collective="allreduce", backend="mpi/osu", interconnect="10GbE",
                              workers=4, alpha_us=54.0, beta_us_per_byte=0.002,
                              bandwidth_gb_s=0.5, r2=0.99, n_points=2, min_bytes=4,
                              max_bytes=1048576, provenance="reconstructed",
                              source="fit of B-Caffe allreduce4.log")])
    devices = pd.DataFrame([dict(device="k80", name="NVIDIA Tesla K80 (one GK210 die)",
                                 kind="gpu", peak_fp32_tflops=4.37,
                                 peak_fp16_tensor_tflops=None, mem_bandwidth_gb_s=240.0,
                                 memory_gb=12.0, provenance="published",
                                 source="NVIDIA Tesla K80 datasheet", notes=None)])
    links = pd.DataFrame([dict(link="loopback", alpha_us=5.0, bandwidth_gb_s=10.0,
                               scope="intra", provenance="measured", source="fixture link",
                               notes=None)])
    return {"layers": layers_frame("alexnet"), "runs": runs,
            "layer_timings": pd.DataFrame(lt), "iterations": iterations, "comm": comm,
            "comm_fits": fits, "devices": devices, "links": links}


@pytest.fixture(scope="session")
def mini_release_root(tmp_path_factory):
    """A data root with v0.1.0 (layers only) and v0.2.0 (every table); build once, read only."""

    frames = _mini_frames()
    root = tmp_path_factory.mktemp("mini") / "data"
    shards.write_release("0.1.0", {"layers": frames["layers"]}, root=root, notes="layers")
    shards.write_release("0.2.0", frames, root=root, parent="0.1.0", notes="all tables")
    return root


@pytest.fixture
def mini_store(mini_release_root, monkeypatch):
    monkeypatch.setenv("DGTRACES_DATA", str(mini_release_root))
    return mini_release_root


# Hypothesis profiles: "ci" (the full example counts: >= 500 mutated contributions) when
# CI=true, else the quick "dev" one; HYPOTHESIS_PROFILE=ci|dev picks one explicitly.
# Tests that set their own max_examples keep it in both.
_hyp_settings.register_profile("ci", max_examples=500, deadline=None, derandomize=True,
                               suppress_health_check=[HealthCheck.too_slow])
_hyp_settings.register_profile("dev", max_examples=40, deadline=None, derandomize=True,
                               suppress_health_check=[HealthCheck.too_slow])
_hyp_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if CI_FULL else "dev"))


@pytest.fixture(scope="session")
def ci_full() -> bool:
    """True under CI=true: tests that repeat a check over many trials run all of them;
    a local run takes a smaller (still varied) share."""
    return CI_FULL


# --- contribute tests: a v0.1.0-only store whose `release` CHANGELOG and card stay in tmp ----
@pytest.fixture
def store(tmp_store, tmp_path, monkeypatch):
    """``tmp_store`` with DGTRACES_CHANGELOG and DGTRACES_CARDS pointing into tmp_path."""
    monkeypatch.setenv("DGTRACES_CHANGELOG", str(tmp_path / "CHANGELOG.md"))
    monkeypatch.setenv("DGTRACES_CARDS", str(tmp_path / "cards"))
    return tmp_store


# --- simulator exports (issue #19): a release whose run has whole-model figures only -------
@pytest.fixture
def no_timings_store(tmp_path, monkeypatch):
    """A data root with v0.9.0: the layers, one shipped measured run with its layer timings,
    and run ``whole-only`` without any; DGTRACES_DATA points at it."""
    import pandas as pd

    from dgtraces.store import release

    monkeypatch.delenv("DGTRACES_DATA", raising=False)
    runs = release.read_table("runs", "0.3.0").iloc[[0]]
    timings = release.read_table("layer_timings", "0.3.0")
    frames = {"layers": release.read_table("layers", "0.3.0"),
              "runs": pd.concat([runs, runs.assign(run_id="whole-only")], ignore_index=True),
              "layer_timings": timings[timings["run_id"] == runs["run_id"].iloc[0]]}
    root = tmp_path / "data"
    shards.write_release("0.9.0", frames, root=root, notes="run without layer timings")
    monkeypatch.setenv("DGTRACES_DATA", str(root))
    return root


# --- hardening (issue #14): a private integrity cache per test, and the attack tally --------
@pytest.fixture(autouse=True)
def _private_integrity_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("DGTRACES_CACHE", str(tmp_path_factory.mktemp("cache")))


def pytest_sessionfinish(session):
    """An xdist worker hands its attack tally to the controller (``workeroutput``)."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        from tests.attack_tally import TALLY

        workeroutput["attack_tally"] = TALLY


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """The controller adds up each finished worker's tally (hook of pytest-xdist)."""
    from tests.attack_tally import merge

    merge(getattr(node, "workeroutput", {}).get("attack_tally", {}))


def pytest_terminal_summary(terminalreporter):
    from tests.attack_tally import lines

    if lines():
        terminalreporter.write_sep("-", "attack classes (tried, refused)")
        for line in lines():
            terminalreporter.write_line(line)
