"""The kernels table from DeepBench (issue #27): rows, keys to layers, refusals, CLI."""

import pandas as pd
import pytest
from click.testing import CliRunner

from dgtraces.cli import main
from dgtraces.importers.deepbench import import_deepbench
from dgtraces.reconstruct.deepbench import SEVEN
from dgtraces.tables import checks
from dgtraces.tables.schema import KEYS, TABLES


@pytest.fixture(scope="module")
def res():
    return import_deepbench(SEVEN)  # release v0.5.0's sheets


@pytest.fixture(scope="module")
def v100():
    return import_deepbench(("V100", "V100-FP16"))  # what release v0.6.0 adds (#33)


def test_every_published_row_is_a_kernel_with_its_citation(res):
    k = res.kernels
    assert (res.convs, res.gemms, len(k)) == (658, 1120, 1778)
    assert set(k["device"]) == {"p100-pcie", "t4", "m40", "titanx-maxwell", "titanx-pascal",
                                "titanxp", "gtx1080ti"}
    assert (k["provenance"] == "published").all() and k["kernel_id"].is_unique
    assert (k["commit"] == "da81ba7820739e2e506dc27f382d15be5479f98f").all()
    row = k.set_index("kernel_id").loc["deepbench-P100-191"]  # VGG-16 conv1_1 at batch 8
    assert (row["op"], row["batch_size"], row["in_c"], row["out_c"]) == ("conv", 8, 3, 64)
    assert row["fwd_ms"] == pytest.approx(0.337) and row["wgrad_ms"] == pytest.approx(0.882)
    assert (row["model"], row["layer"]) == ("vgg16", "features.0")
    assert row["cudnn_version"] == "6.0.21" and row["path"].endswith("DeepBench_NV_P100.xlsx")
    gemm = k[k["op"] == "gemm"]
    assert gemm["in_c"].isna().all() and gemm["model"].isna().all()
    assert gemm["gemm_m"].notna().all() and gemm["dgrad_ms"].isna().all()


def test_v100_rows_have_the_columns_and_provenance_of_the_other_gpus(res, v100):
    k = v100.kernels
    assert (v100.convs, v100.gemms, v100.matched, len(k)) == (188, 320, 104, 508)
    assert list(k.columns) == list(res.kernels.columns) and set(k["device"]) == {"v100"}
    assert k.groupby("precision").size().to_dict() == {"amp": 254, "fp32": 254}
    assert (k["provenance"] == "published").all() and (k["cudnn_version"] == "7.6.2.24").all()
    fp32 = k.set_index("kernel_id").loc["deepbench-V100-175"]  # the sheet's first conv line
    assert (fp32["precision"], fp32["fwd_ms"]) == ("fp32", pytest.approx(0.078))
    assert pd.isna(fp32["dgrad_ms"]) and "sheet Results_FP32" in fp32["source"]
    amp = k.set_index("kernel_id").loc["deepbench-V100-FP16-175"]
    assert (amp["precision"], amp["fwd_ms"]) == ("amp", pytest.approx(0.591))
    assert "Results_FP16_ip_Mixed_math" in amp["source"]
    assert amp["path"] == fp32["path"] == "results/train/DeepBench_NV_V100.xlsx"
    both = pd.concat([res.kernels, k], ignore_index=True)
    assert both["kernel_id"].is_unique and checks.cross_failures({"kernels": both}) == []
    checks.validate_frame("kernels", both)


def test_conv_rows_matching_no_layer_keep_no_key(res):
    conv = res.kernels[res.kernels["op"] == "conv"]
    assert res.matched == conv["model"].notna().sum() == 364
    assert conv["model"].isna().sum() == 658 - 364  # speech and other shapes stay, unkeyed
    assert set(conv["model"].dropna()) == {"vgg16", "resnet50", "googlenet"}
    assert checks.cross_failures({"kernels": res.kernels}) == []


def test_a_key_to_a_layer_that_does_not_exist_fails_the_declared_foreign_key(res):
    bad = res.kernels.head(3).copy()
    bad.loc[bad.index[0], ["model", "layer"]] = ["vgg16", "no-such-layer"]
    fails = checks.cross_failures({"kernels": bad})
    assert [f.code for f in fails] == ["UNKNOWN_LAYER"]
    assert KEYS["kernels"] == ("kernel_id",) and "kernels" in TABLES


def test_schema_refuses_a_kernel_without_a_positive_time(res):
    bad = res.kernels.head(2).copy()
    bad.loc[bad.index[0], "fwd_ms"] = 0.0
    with pytest.raises(Exception) as e:
        checks.validate_frame("kernels", bad)
    assert getattr(e.value, "code", None) == "SCHEMA"


def test_cli_import_deepbench_says_how_many_matched(tmp_path):
    out = tmp_path / "k"
    r = CliRunner().invoke(main, ["import", "deepbench", "--out", str(out)])
    assert r.exit_code == 0, r.output
    df = pd.read_csv(out / "kernels.csv")  # every shipped sheet: the seven, V100 fp32 and amp
    assert len(df) == 1778 + 508 and df["layer"].notna().sum() == 364 + 104
