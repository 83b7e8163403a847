import json
import subprocess
import sys

from click.testing import CliRunner

from dgtraces.cli import main
from dgtraces.store import release


def invoke(*args):
    return CliRunner().invoke(main, list(args))


def test_help_lists_commands_without_heavy_imports():
    code = ("import sys; from dgtraces.cli import main\n"
            "try:\n    main.main(['--help'], standalone_mode=False)\nexcept SystemExit: pass\n"
            "heavy = [m for m in ('pandas', 'pandera', 'duckdb', 'torch', 'datasets', 'pyarrow')"
            " if m in sys.modules]\nprint('HEAVY', heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "HEAVY []" in out.stdout and "verify" in out.stdout


def test_info_json(tmp_store):
    res = invoke("info", "--json")
    assert res.exit_code == 0
    data = json.loads(res.output)
    assert data["latest"] == "0.1.0" and data["tables"]["layers"] == 409


def test_verify_ok_and_failure_exit_code(tmp_store):
    assert invoke("verify").exit_code == 0
    (f,) = release.table_files("0.1.0")["layers"]
    f.write_bytes(f.read_bytes() + b"\0")
    out = subprocess.run([sys.executable, "-m", "dgtraces", "verify"], capture_output=True,
                         text=True)
    assert out.returncode == 1 and "[INTEGRITY]" in out.stderr and "Traceback" not in out.stderr


def test_validate_cli_report(tmp_path):
    p = tmp_path / "layers.csv"
    from dgtraces.models import layers_frame

    df = layers_frame("alexnet")
    df.loc[3, "out_c"] = 0
    df.to_csv(p, index=False)
    out = subprocess.run([sys.executable, "-m", "dgtraces", "validate", str(p)],
                         capture_output=True, text=True)
    assert out.returncode == 1
    assert "row 3" in out.stderr and "'out_c'" in out.stderr and "line 5" in out.stderr
    good = tmp_path / "layers.parquet"
    layers_frame("resnet50").to_parquet(good)
    assert invoke("validate", str(good)).exit_code == 0


def test_unwritable_output_paths_are_reported_not_raised(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")  # a file where an output folder would have to be
    for args in (["predict", "--model", "alexnet", "--device", "k80", "--batch-size", "8",
                  "--timeline", str(blocker / "t.json")],
                 ["export-hf", str(blocker / "hub")]):
        out = subprocess.run([sys.executable, "-m", "dgtraces", *args], capture_output=True,
                             text=True)
        assert out.returncode == 1, args
        assert "[IO_ERROR]" in out.stderr and "Traceback" not in out.stderr, out.stderr


def test_output_into_a_closed_pipe_exits_quietly():
    proc = subprocess.Popen([sys.executable, "-m", "dgtraces", "sql",
                             "select * from range(1000000)", "--format", "csv"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.readline()
    proc.stdout.close()  # the reader goes away, as `| head -1` would
    err = proc.stderr.read().decode()
    # click stops quietly on EPIPE (exit 1, nothing on stderr), not with IO_ERROR
    assert proc.wait(timeout=60) == 1 and err == "", err


def test_schemas_check_without_a_schemas_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = invoke("schemas", "--check")
    assert res.exit_code != 0 and res.exception.code == "NOT_FOUND"
