"""release: refusals, contents, CHANGELOG, crash safety under SIGKILL, concurrent contribute."""

import json
import os
import random
import shutil
import signal
import time
from pathlib import Path

import pytest

from dgtraces.contribute import contribute
from dgtraces.contribute.release import CHECKPOINTS, JOURNAL, build_release
from dgtraces.contribute.staging import list_staged
from dgtraces.errors import DgtracesError
from dgtraces.store import manifest as st
from dgtraces.store import release, verify
from tests.cli_forks import CliForks
from tests.contribute.test_contribute import (
    TEST_DEVICE,
    fill_template,
    make_store,
    tree_digest,
    variant,
    write_contrib,
)

CHANGELOG = """# Changelog

## [Unreleased]

## Dataset releases

### [v0.1.0] - 2026-12-02
#### Added
- layers
"""


def _stage(root, tmp_path, run_id, **kw):
    runs, lt = variant(run_id, **kw)
    return contribute(write_contrib(tmp_path / f"c-{run_id}", runs, lt), root=root)


def test_release_contents_changelog_and_refusals(store, tmp_path):
    with pytest.raises(DgtracesError) as exc:
        build_release("0.2.0", root=store)
    assert exc.value.code == "EMPTY"
    (tmp_path / "CHANGELOG.md").write_text(CHANGELOG)
    _stage(store, tmp_path, "a1")
    _stage(store, tmp_path, "g1", model="googlenet", batch=8)
    for bad in ("0.1.0", "0.0.9", "x.y"):
        with pytest.raises(DgtracesError) as exc:
            build_release(bad, root=store)
        assert exc.value.code == "VERSION"
    res = build_release("0.2.0", root=store)
    assert res.parent == "0.1.0" and res.rows_added == {"runs": 2, "layer_timings": 23 + 158,
                                                        "devices": 1}  # contributed device
    frames = release.read_all("0.2.0", store)
    assert sorted(frames["runs"]["run_id"]) == ["a1", "g1"]
    assert len(frames["layers"]) == len(release.read_table("layers", "0.1.0", store)) == 409
    assert verify.verify(store).ok and st.list_releases(store) == ["0.1.0", "0.2.0"]
    assert list_staged(store) == [] and not (store / JOURNAL).exists()
    log = (tmp_path / "CHANGELOG.md").read_text()
    assert log.index("### [v0.2.0]") < log.index("### [v0.1.0]")
    assert log.index("## Dataset releases") < log.index("### [v0.2.0]")
    assert log.count("### [v0.2.0]") == 1 and "(CC-BY-4.0): 23 layer_timings" in log
    # a released run cannot come back
    runs, lt = variant("a1")
    with pytest.raises(DgtracesError) as exc:
        contribute(write_contrib(tmp_path / "again", runs, lt), root=store)
    assert exc.value.code == "DUPLICATE"


def test_release_refuses_dirty_store(store, tmp_path):
    _stage(store, tmp_path, "a1")

    (f,) = release.table_files("0.1.0", store)["layers"]
    f.write_bytes(f.read_bytes() + b"\0")  # a size change: found without hashing
    before = tree_digest(store)
    with pytest.raises(DgtracesError) as exc:
        build_release("0.2.0", root=store)
    assert exc.value.code == "INTEGRITY" and tree_digest(store) == before


# ---- crash safety ------------------------------------------------------------------------

def _start(forks: CliForks, root: Path, **env) -> tuple[int, Path]:
    """``dgtraces release 0.2.0`` on the store ``root`` in a forked child (tests/cli_forks.py:
    a real process, its imports paid once per test); (pid, its output file)."""
    full = dict(os.environ, DGTRACES_DATA=str(root),
                DGTRACES_CHANGELOG=str(root.parent / "CHANGELOG.md"),
                DGTRACES_CARDS=str(root.parent / "cards"), **env)
    log = root.parent / "release.log"
    return forks.start(["release", "0.2.0"], full, log), log


def _check_state(root: Path, base_rows: dict) -> str:
    """Old state or complete new release; verify green either way."""
    assert verify.verify(root).ok
    rels = st.list_releases(root)
    if rels == ["0.1.0"]:
        assert len(list_staged(root)) == 1  # staging untouched before the commit point
        return "old"
    assert rels == ["0.1.0", "0.2.0"]
    frames = release.read_all("0.2.0", root)
    assert {k: len(v) for k, v in frames.items()} == base_rows
    return "new"


@pytest.fixture(scope="module")
def forks():
    """One fork server for this module's process tests (its imports paid once)."""
    with CliForks() as server:
        yield server


@pytest.mark.slow
def test_release_survives_sigkill_anywhere(tmp_path, ci_full, forks):
    seed = tmp_path / "seed"
    root = make_store(seed)
    _stage(root, tmp_path, "k1")
    (root / ".lock").unlink()
    expected = {"layers": 409, "runs": 1, "layer_timings": 23, "devices": 1}
    rng = random.Random(8)
    # every checkpoint always; random-time kills: 14 in CI, 3 locally (same checks per trial)
    modes = [("crash", c) for c in CHECKPOINTS] + [("kill", None)] * (14 if ci_full else 3)
    outcomes = []
    for i, (mode, point) in enumerate(modes):
        trial = tmp_path / f"t{i}"
        shutil.copytree(seed, trial)
        outcomes.append(_kill_one_release(forks, trial, mode, point, rng, expected))
    assert {"old", "new"} <= set(outcomes), outcomes


def _kill_one_release(forks, trial: Path, mode: str, point: str | None, rng,
                      expected: dict) -> str:
    """One trial of test_release_survives_sigkill_anywhere: the release killed at a
    checkpoint (``crash``) or at a random time (``kill``), then the store checked, the rerun
    completing it and a second rerun a no-op; the state the kill left (old or new)."""
    troot = trial / "data"
    if mode == "crash":
        pid, log = _start(forks, troot, DGTRACES_TEST_RELEASE_CRASH=point)
        rc = forks.wait(pid, timeout=60)
        assert rc == -signal.SIGKILL, log.read_text()
    else:
        pid, log = _start(forks, troot, DGTRACES_TEST_RELEASE_DELAY="0.04")
        deadline = time.monotonic() + 60
        while not (troot / ".lock").exists() and forks.poll(pid) is None:
            assert time.monotonic() < deadline
            time.sleep(0.005)
        time.sleep(rng.uniform(0.0, 0.9))
        if forks.poll(pid) is None:  # running, or a zombie the server has not reaped
            os.kill(pid, signal.SIGKILL)
        forks.wait(pid, timeout=60)
    outcome = _check_state(troot, expected)
    if (troot / JOURNAL).exists() or outcome == "old":
        assert build_release("0.2.0", root=troot).version == "0.2.0"  # rerun completes
    assert _check_state(troot, expected) == "new"
    assert list_staged(troot) == [] and not (troot / JOURNAL).exists()
    assert (trial / "CHANGELOG.md").read_text().count("### [v0.2.0]") == 1
    assert not list((troot / "releases").glob(".tmp-*"))
    # no journal/CHANGELOG temp of the killed run is left (issue #14 item 8)
    assert not list(troot.glob(".tmp-*")) and not list(trial.glob(".tmp-*"))
    again = build_release("0.2.0", root=troot)  # once complete, a rerun is a no-op
    assert again.resumed and again.ids == []
    shutil.rmtree(trial)
    return outcome


def test_concurrent_contribute(tmp_path, forks):
    root = make_store(tmp_path)
    folders = []
    for run_id in ("p1", "p2"):
        runs, lt = variant(run_id, scale=1.1 if run_id == "p2" else 1.0)
        folders.append(write_contrib(tmp_path / run_id, runs, lt))
    env = dict(os.environ, DGTRACES_DATA=str(root))
    # two real processes racing for the store's lock
    started = [(forks.start(["contribute", str(f), "--lock-timeout", "30"], env,
                            tmp_path / f"{f.name}.log"), tmp_path / f"{f.name}.log")
               for f in folders]
    results = [(forks.wait(pid), log.read_text()) for pid, log in started]
    staged = list_staged(root)
    for rc, err in results:
        assert rc == 0 or (rc == 1 and "[LOCKED]" in err), err
    assert len(staged) == sum(rc == 0 for rc, _ in results) >= 1
    for entry in staged:
        assert set(entry.frames()) == {"runs", "layer_timings"}
        assert json.loads((entry.path / "entry.json").read_text())["id"] == entry.id
    assert not [p for p in (root / "staging").iterdir() if p.name.startswith(".tmp-")]


def test_cli_template_stage_show_release(store, tmp_path):
    from click.testing import CliRunner

    from dgtraces.cli import main

    def invoke(*args, code=0):
        res = CliRunner().invoke(main, list(args), catch_exceptions=False)
        assert res.exit_code == code, res.output
        return res.output

    from dgtraces.contribute.template import EXAMPLE_RUN_PREFIX, PLACEHOLDER_CONTRIBUTOR

    told = invoke("contribute", "--template", str(tmp_path / "tpl"))
    assert PLACEHOLDER_CONTRIBUTOR in told and repr(EXAMPLE_RUN_PREFIX) in told  # what to replace
    with pytest.raises(DgtracesError) as exc:  # the unedited template is refused
        invoke("contribute", str(tmp_path / "tpl"), "--dry-run")
    assert exc.value.code == "METADATA"
    run_id = fill_template(tmp_path / "tpl")
    assert "passes every check" in invoke("contribute", str(tmp_path / "tpl"), "--dry-run")
    invoke("contribute", str(tmp_path / "tpl"))
    (entry,) = json.loads(invoke("staging", "list", "--json"))
    assert entry["rows"] == {"runs": 1, "layer_timings": 23}
    shown = json.loads(invoke("staging", "show", entry["id"]))
    assert shown["runs"] == [run_id] and shown["meta"]["license"] == "CC-BY-4.0"
    invoke("release", "0.1.1")
    assert st.list_releases(store) == ["0.1.0", "0.1.1"]
    assert "staging is empty" in invoke("staging", "list")
    assert (tmp_path / "cards" / "README.md").is_file()  # card regenerated into the temp dir


def _extras(run_id):
    import pandas as pd

    it = pd.DataFrame([{
        "iter_id": f"{run_id}-it", "model": "alexnet", "device": TEST_DEVICE,
        "framework": "pytorch 2.13.0", "precision": "fp32", "phase": "train", "batch_size": 32,
        "workers": 2, "nodes": 1, "interconnect": "unknown", "backend": "gloo",
        "policy": "wfbp", "bucket_bytes": None, "io_overlap": None, "threads_per_worker": 1,
        "iter_ms": 250.0, "iter_p10_ms": 240.0, "iter_p90_ms": 260.0, "n": 10,
        "throughput_img_s": 256.0, "provenance": "measured", "source": "test rig",
        "trace_run_id": run_id, "timestamp_utc": "2026-01-01T00:00:00Z", "phases_json": None,
        "notes": None}])
    comm = pd.DataFrame([{
        "collective": "allreduce", "backend": "gloo", "interconnect": "loopback", "workers": 2,
        "message_bytes": size, "time_ms": 0.05 + size / 1e6, "p10_ms": None, "p90_ms": None,
        "n": 20, "provenance": "measured", "source": f"test rig {run_id}",
        "timestamp_utc": "2026-01-01T00:00:00Z"} for size in (1024, 1 << 20)])
    return {"iterations": it, "comm": comm}


def test_optional_tables_are_released_and_deduplicated(store, tmp_path):
    runs, lt = variant("x1")
    folder = write_contrib(tmp_path / "x1", runs, lt, extra=_extras("x1"))
    assert contribute(folder, root=store).rows == {"runs": 1, "layer_timings": 23,
                                                   "iterations": 1, "comm": 2}
    res = build_release("0.2.0", root=store)
    assert res.rows_added == {"runs": 1, "layer_timings": 23, "iterations": 1, "comm": 2,
                              "devices": 1}
    frames = release.read_all("0.2.0", store)
    assert frames["iterations"]["trace_run_id"].tolist() == ["x1"]
    assert sorted(frames["comm"]["message_bytes"]) == [1024, 1 << 20]
    runs, lt = variant("x2", scale=1.2)  # new run, but the same comm rows and iteration id
    extras = _extras("x1")
    extras["iterations"]["trace_run_id"] = "x2"
    with pytest.raises(DgtracesError) as exc:
        contribute(write_contrib(tmp_path / "x2", runs, lt, extra=extras), root=store)
    assert exc.value.code == "DUPLICATE"
    assert {f.column for f in exc.value.failures} == {"iter_id", "message_bytes"}


@pytest.mark.parametrize("text", ["not json", "[]", '{"version": "0.9.9"}',
                                  '{"version": "x", "entries": [], "created_utc": "2026"}'])
def test_corrupt_journal_is_an_integrity_error(store, tmp_path, text):
    _stage(store, tmp_path, "journal-run")
    (store / JOURNAL).write_text(text)
    with pytest.raises(DgtracesError) as exc:
        build_release("0.2.0", root=store)
    assert exc.value.code == "INTEGRITY"
    assert len(list_staged(store)) == 1  # nothing touched


def test_content_released_while_a_contribution_waited_is_a_duplicate(store, tmp_path):
    """Validation saw v0.1.0; before it took the lock, the same content was staged and
    released as v0.2.0 (which clears staging). Staging must still refuse it."""
    from dgtraces.contribute.staging import stage
    from dgtraces.contribute.validate import validate_contribution

    runs, lt = variant("raced-run")
    folder = write_contrib(tmp_path / "c", runs, lt)
    checked = validate_contribution(folder, root=store)
    assert checked.base_release == "0.1.0"
    contribute(folder, root=store)
    build_release("0.2.0", root=store)
    assert list_staged(store) == []
    with pytest.raises(DgtracesError) as exc:
        stage(checked, str(folder), root=store)
    assert exc.value.code == "DUPLICATE" and list_staged(store) == []
