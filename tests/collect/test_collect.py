"""Collector logic that needs no torch: flagging, statistics, sizes, alpha-beta fit, errors."""

import subprocess
import sys
from itertools import pairwise

import pandas as pd
import pytest

from dgtraces.collect import env
from dgtraces.collect.comm import collect_comm, fit_alpha_beta, parse_size, parse_sizes
from dgtraces.collect.layers import collect_layers
from dgtraces.collect.ssgd import collect_ssgd
from dgtraces.errors import DgtracesError
from dgtraces.io.files import check_out
from dgtraces.tables.write import write_tables


@pytest.mark.parametrize("ratio, flagged", [(1.0, False), (1.09, False), (0.91, False),
                                            (1.11, True), (0.85, True), (2.0, True),
                                            (None, True), (float("nan"), True)])
def test_consistency_flag(ratio, flagged):
    got, reason = env.consistency_flag(ratio)
    assert got is flagged
    assert (reason is not None) is flagged


def test_stats_median_and_percentiles():
    med, p10, p90, n = env.stats([5.0, 1.0, 3.0, 2.0, 4.0])
    assert (med, n) == (3.0, 5)
    assert p10 == pytest.approx(1.4) and p90 == pytest.approx(4.6)
    with pytest.raises(DgtracesError) as exc:
        env.stats([])
    assert exc.value.code == "COLLECT"


def test_sizes_parse():
    sizes = parse_sizes("4B..64MiB")
    assert sizes[0] == 4 and sizes[-1] == 64 * 1024 ** 2 and len(sizes) == 13
    assert all(b == 4 * a for a, b in pairwise(sizes))
    assert parse_sizes("4B..1KiB", factor=2) == [4, 8, 16, 32, 64, 128, 256, 512, 1024]
    assert parse_sizes("1MiB,4B") == [4, 1024 ** 2]
    assert parse_size("16K") == 16384
    for bad in ("3B", "4X", "", "MiB", "0B"):
        with pytest.raises(DgtracesError) as exc:
            parse_size(bad)
        assert exc.value.code == "BAD_INPUT"
    with pytest.raises(DgtracesError) as exc:
        parse_sizes("1MiB..4B")
    assert exc.value.code == "BAD_INPUT"


def test_alpha_beta_fit_recovers_a_line():
    sizes = [4, 1024, 65536, 1 << 20, 16 << 20]
    times_ms = [(50.0 + 0.001 * s) / 1000.0 for s in sizes]  # 50 us + 1 GB/s
    fit = fit_alpha_beta(sizes, times_ms)
    assert fit["alpha_us"] == pytest.approx(50.0, rel=1e-6)
    assert fit["beta_us_per_byte"] == pytest.approx(0.001, rel=1e-6)
    assert fit["bandwidth_gb_s"] == pytest.approx(1.0, rel=1e-6)
    assert fit["r2"] == pytest.approx(1.0) and fit["n_points"] == 5
    assert (fit["min_bytes"], fit["max_bytes"], fit["through_origin"]) == (4, 16 << 20, False)


def test_alpha_beta_fit_negative_intercept_goes_through_origin():
    sizes = [1000, 2000, 4000]
    fit = fit_alpha_beta(sizes, [0.0005, 0.0015, 0.0035])  # 1 us/KB - 0.5 us
    assert fit["through_origin"] and fit["alpha_us"] == 0.0
    assert 0 < fit["beta_us_per_byte"] < 0.001 and fit["r2"] < 1.0


def test_bad_inputs_before_any_measurement():
    for call, code in ((lambda: collect_layers("vgg19", 1), "UNKNOWN_MODEL"),
                       (lambda: collect_layers("alexnet", 0), "BAD_INPUT"),
                       (lambda: collect_layers("alexnet", 1, threads=0), "BAD_INPUT"),
                       (lambda: collect_layers("alexnet", 1, warmup=-1), "BAD_INPUT"),
                       (lambda: collect_ssgd("vgg19"), "UNKNOWN_MODEL"),
                       (lambda: collect_ssgd("alexnet", policies=("mgwfbp",)), "BAD_INPUT"),
                       (lambda: collect_ssgd("alexnet", batch_size=0), "BAD_INPUT"),
                       (lambda: collect_ssgd("alexnet", bucket_mb=float("nan")), "BAD_INPUT"),
                       (lambda: collect_ssgd("alexnet", bucket_mb=float("inf")), "BAD_INPUT"),
                       (lambda: collect_comm(backend="mpi"), "BAD_INPUT"),
                       (lambda: collect_comm(warmup=-1), "BAD_INPUT"),
                       (lambda: collect_comm(repeats=0), "BAD_INPUT")):
        with pytest.raises(DgtracesError) as exc:
            call()
        assert exc.value.code == code


def test_missing_torch_gives_install_hint(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch -> ImportError
    for call in (lambda: collect_layers("alexnet", 1), lambda: collect_comm(),
                 lambda: collect_ssgd("alexnet")):
        with pytest.raises(DgtracesError) as exc:
            call()
        assert exc.value.code == "MISSING_DEPENDENCY" and exc.value.package == "torch"
        assert "dgtraces[collect]" in exc.value.hint and "torch==2.13.0" in exc.value.hint


def test_missing_torch_cli_exit_code(tmp_path):
    code = ("import sys; sys.modules['torch'] = None\n"
            "sys.argv = ['dgtraces', 'collect', 'layers', '--model', 'alexnet', "
            f"'--batch-size', '1', '--out', {str(tmp_path / 'o')!r}]\n"
            "from dgtraces.cli import run; run()")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 1 and "[MISSING_DEPENDENCY]" in out.stderr
    assert "Traceback" not in out.stderr and not (tmp_path / "o").exists()


def test_collect_help_imports_nothing_heavy():
    code = ("import sys; from dgtraces.cli import main\n"
            "for args in (['collect', '--help'], ['collect', 'layers', '--help']):\n"
            "    try:\n        main.main(args, standalone_mode=False)\n"
            "    except SystemExit: pass\n"
            "print('HEAVY', [m for m in ('pandas', 'pandera', 'torch', 'pyarrow', 'duckdb')"
            " if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "HEAVY []" in out.stdout and "--batch-size" in out.stdout


def _run_frames(run_id="r1", ratio=1.0):
    run = {"run_id": run_id, "model": "alexnet", "device": "cpu", "device_kind": "cpu",
           "host": "x", "framework": "pytorch 2.13.0", "precision": "fp32", "batch_size": 1,
           "threads": 1, "cores": 2, "provenance": "measured", "source": "unit test",
           "collector_version": "test", "timestamp_utc": "2026-12-02T00:00:00Z",
           "fwd_ms": 1.0, "bwd_ms": 2.0, "update_ms": 0.5, "iter_ms": 3.5,
           "layer_sum_ratio": ratio, "flagged": False, "flag_reason": None,
           "params_json": "{}", "notes": None}
    lt = {"run_id": run_id, "layer": "conv1", "fwd_ms": 1.0, "bwd_ms": 2.0, "fwd_p10_ms": 0.9,
          "fwd_p90_ms": 1.1, "bwd_p10_ms": 1.8, "bwd_p90_ms": 2.2, "comm_ms": None, "n": 3}
    return {"runs": pd.DataFrame([run]), "layer_timings": pd.DataFrame([lt])}


def test_write_tables_csv_instead_of_parquet(tmp_path):
    paths = write_tables(tmp_path / "as_csv", _run_frames(), fmt="csv")
    assert sorted(p.name for p in paths) == ["layer_timings.csv", "runs.csv"]
    assert pd.read_csv(tmp_path / "as_csv" / "runs.csv")["run_id"].tolist() == ["r1"]


def test_write_tables_all_or_nothing(tmp_path):
    out = tmp_path / "trace"
    paths = write_tables(out, _run_frames())
    assert sorted(p.name for p in paths) == ["layer_timings.parquet", "runs.parquet"]
    assert pd.read_parquet(out / "runs.parquet")["run_id"].tolist() == ["r1"]
    with pytest.raises(DgtracesError) as exc:  # refuses a non-empty folder
        write_tables(out, _run_frames())
    assert exc.value.code == "BAD_INPUT"
    bad = _run_frames(ratio=-1.0)  # schema: layer_sum_ratio > 0
    with pytest.raises(DgtracesError) as exc:
        write_tables(tmp_path / "bad", bad)
    assert exc.value.code == "SCHEMA"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["trace"]  # no partial output


def test_measure_lock_is_exclusive_and_always_released(tmp_path):
    lock = tmp_path / "measure.lock"
    with pytest.raises(RuntimeError):
        with env.measure_lock("test", path=lock) as held:
            assert held.read_text().startswith("test pid ")
            raise RuntimeError("boom")
    assert not lock.exists()
    lock.write_text("someone else")
    import threading

    threading.Timer(0.2, lock.unlink).start()  # the other holder finishes
    with env.measure_lock("test", poll_s=0.05, path=lock):
        assert lock.read_text().startswith("test pid ")
    assert not lock.exists()


@pytest.mark.parametrize("command, target", [
    (["layers", "--model", "alexnet", "--batch-size", "1"],
     "dgtraces.collect.layers.collect_layers"),
    (["comm", "--sizes", "4B,64B"], "dgtraces.collect.comm.collect_comm"),
    (["ssgd", "--model", "alexnet"], "dgtraces.collect.ssgd.collect_ssgd")])
def test_used_out_folder_is_refused_before_measuring(tmp_path, monkeypatch, command, target):
    from click.testing import CliRunner

    from dgtraces.cli import main

    def measure(*args, **kwargs):
        raise AssertionError("measured although --out is unusable")

    monkeypatch.setattr(target, measure)
    out = tmp_path / "used"
    out.mkdir()
    (out / "runs.parquet").write_bytes(b"old")
    res = CliRunner().invoke(main, ["collect", *command, "--out", str(out)])
    assert isinstance(res.exception, DgtracesError) and res.exception.code == "BAD_INPUT"
    assert [p.name for p in out.iterdir()] == ["runs.parquet"]
    with pytest.raises(DgtracesError) as exc:
        check_out(out / "runs.parquet")  # a file is no folder either
    assert exc.value.code == "BAD_INPUT"
    assert check_out(tmp_path / "new") == tmp_path / "new"


def test_measure_lock_breaks_stale_locks_and_times_out_on_live_ones(tmp_path):
    import os
    import platform

    lock = tmp_path / "measure.lock"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # its pid names no running process now
    for text in (f"crashed pid {dead.pid} host {platform.node()} since 2026-12-02T00:00:00Z",
                 f"old-format pid {dead.pid} since 2026-12-02T00:00:00Z"):
        lock.write_text(text + "\n")
        with env.measure_lock("test", poll_s=0.01, path=lock, timeout_s=5) as held:
            assert f"test pid {os.getpid()} host {platform.node()} " in held.read_text()
        assert not lock.exists()
    for text in (f"alive pid {os.getpid()} host {platform.node()} since x",  # live holder
                 f"elsewhere pid {dead.pid} host not-{platform.node()} since x",  # unknowable
                 "no pid written yet"):
        lock.write_text(text)
        with pytest.raises(DgtracesError) as exc:
            with env.measure_lock("test", poll_s=0.01, path=lock, timeout_s=0.05):
                pass
        assert exc.value.code == "LOCKED" and lock.read_text() == text
    assert not (tmp_path / "measure.lock.break").exists()


def test_ssgd_trace_folder_may_hold_csv(tmp_path):
    import pandas as pd

    from dgtraces.collect.ssgd import find_trace

    pd.DataFrame({"run_id": ["r-1"], "model": ["alexnet"], "batch_size": [8],
                  "threads": [1]}).to_csv(tmp_path / "runs.csv", index=False)
    runs, rid = find_trace(tmp_path, "alexnet", 8)  # `collect layers --csv` output
    assert rid == "r-1" and len(runs) == 1


@pytest.mark.parametrize("command", [["layers", "--batch-size", "1"], ["ssgd"]])
def test_aux_is_for_googlenet_only(tmp_path, command):
    from click.testing import CliRunner

    from dgtraces.cli import main

    res = CliRunner().invoke(main, ["collect", command[0], "--model", "alexnet", "--aux",
                                    *command[1:], "--out", str(tmp_path / "o")])
    assert isinstance(res.exception, DgtracesError) and res.exception.code == "BAD_INPUT"
    assert not (tmp_path / "o").exists()
