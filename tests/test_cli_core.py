import json
import subprocess
import sys

from click.testing import CliRunner

from dgtraces.cli import main


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
    f = tmp_store / "releases" / "v0.1.0" / "layers.parquet"
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
