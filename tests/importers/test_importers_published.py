"""OSU importer, alpha-beta fits and the published reference tables."""

import pytest

from dgtraces import reference
from dgtraces.errors import DgtracesError
from dgtraces.importers import osu
from dgtraces.importers.published import (
    calibration_iterations,
    comm_csv_disagreements,
    devices_frame,
    exclude_variants,
    is_variant,
    published_tables,
)
from dgtraces.tables.checks import validate_tables


@pytest.fixture(scope="module")
def tables():
    return published_tables()


def test_osu_logs_real_values():
    two = osu.import_log(reference.path("bcaffe/allreduce2.log"))
    four = osu.import_log(reference.path("bcaffe/allreduce4.log"))
    assert (two.workers, two.workers_from_name) == (2, False)
    assert (four.workers, four.workers_from_name) == (4, True)  # no process-count column
    pts = two.comm.set_index("message_bytes")["time_ms"]
    assert len(pts) == 266 and pts[4] == pytest.approx(0.03192)
    assert pts[1048576] == pytest.approx(1.83914)
    assert four.comm.set_index("message_bytes")["time_ms"][1048576] == pytest.approx(2.25196)
    row = two.comm.iloc[0]
    assert row["backend"] == "mpi (osu-micro-benchmarks 5.4.0)"
    assert row["provenance"] == "published"
    assert row["source"] == "shyhuai/B-Caffe logdata/allreduce2.log (commit 2ef1db1f3fcc)"
    for res in (two, four):  # the protocol jump between 8 KiB and 12 KiB splits the fit
        assert res.split_bytes == 8192
        fits = res.comm_fits.sort_values("min_bytes")
        assert fits["max_bytes"].tolist() == [8192, 1048576]
        assert fits["n_points"].tolist() == [12, 254]
        assert fits.iloc[1]["r2"] > 0.98
        assert (fits["alpha_us"] >= 0).all() and (fits["beta_us_per_byte"] > 0).all()


def test_fit_recovers_known_parameters():
    pts = [(b, 30.0 + 0.002 * b) for b in (4, 64, 1024, 4096, 8192)]
    f = osu.fit(pts)
    assert f.alpha_us == pytest.approx(30.0) and f.beta_us_per_byte == pytest.approx(0.002)
    assert f.r2 == pytest.approx(1.0)
    step = [(b, 10.0 + 0.001 * b) for b in range(1024, 9000, 1024)] + \
           [(b, 100.0 + 0.001 * b) for b in range(12288, 40000, 4096)]
    fits, split = osu.best_fits(step)
    assert split == 8192 and [x.alpha_us for x in fits] == pytest.approx([10.0, 100.0])
    line = [(b, 5.0 + 0.01 * b + (0.3 if b % 2048 else -0.3)) for b in range(1024, 40000, 1024)]
    fits, split = osu.best_fits(line)
    assert split is None and len(fits) == 1
    flat = osu.fit([(4, 5.0), (8, 4.0), (16, 3.0)])  # negative slope -> beta 0, alpha mean
    assert (flat.alpha_us, flat.beta_us_per_byte) == (pytest.approx(4.0), 0.0)


def test_osu_malformed(tmp_path):
    bad = tmp_path / "allreduce2.log"
    bad.write_text("# OSU MPI Allreduce Latency Test v5.4.0\n2,4   31.9\n2,eight 32\n")
    with pytest.raises(DgtracesError) as exc:
        osu.import_log(bad, source="test")
    assert exc.value.code == "BAD_FILE" and exc.value.failures[0].row == 3
    noname = tmp_path / "latency.log"
    noname.write_text("# OSU MPI Allreduce Latency Test v5.4.0\n4   31.9\n8 32.0\n")
    with pytest.raises(DgtracesError) as exc:
        osu.import_log(noname, source="test")
    assert exc.value.code == "BAD_INPUT"
    assert osu.import_log(noname, source="test", workers=3).workers == 3
    flat = tmp_path / "allreduce2-flat.log"  # latency that does not grow: no bandwidth
    flat.write_text("# OSU MPI Allreduce Latency Test v5.4.0\n4 30.0\n8 30.0\n16 29.0\n")
    res = osu.import_log(flat, source="test", workers=2)
    assert len(res.comm) == 3 and len(res.comm_fits) == 0 and res.notes
    with pytest.raises(DgtracesError) as exc:
        osu.import_log(reference.path("bcaffe/allreduce2.log"), workers=4)
    assert exc.value.code == "BAD_INPUT"
    shipped_copy = tmp_path / "allreduce8.log"
    shipped_copy.write_bytes(reference.path("bcaffe/allreduce8.log").read_bytes() + b"\n")
    with pytest.raises(DgtracesError) as exc:
        osu.import_log(shipped_copy)  # changed bytes: no known citation
    assert exc.value.code == "BAD_INPUT"


def test_comm_csv_agrees_with_logs(tables):
    comm = tables["comm"]
    assert comm_csv_disagreements(comm) == []
    tampered = comm.copy()
    hit = (tampered["workers"] == 8) & (tampered["message_bytes"] == 1048576)
    tampered.loc[hit, "time_ms"] = 4.8
    bad = comm_csv_disagreements(tampered)
    assert [(f.code, f.row) for f in bad] == [("PLAUSIBILITY", 2)]


def test_published_tables_valid_together(tables):
    counts = {k: len(v) for k, v in tables.items()}
    assert counts == {"devices": 4, "iterations": 25, "comm": 798, "comm_fits": 6,
                      "runs": 6, "layer_timings": 384}
    validate_tables(tables)
    assert set(tables["runs"]["provenance"]) == {"published"}
    assert tables["runs"]["run_id"].str.startswith("bcaffe-googlenet-").all()
    assert set(tables["comm_fits"]["provenance"]) == {"reconstructed"}  # our fit, not theirs


def test_calibration_and_devices():
    it = calibration_iterations().set_index("iter_id")
    row = it.loc["published:calibration:k80:resnet50:tensorflow-1.1:train:fp32:b64"]
    assert row["iter_ms"] == pytest.approx(64 / 51.9 * 1000)
    assert row["throughput_img_s"] == 51.9 and row["policy"] == "framework-default"
    assert (row["workers"], row["nodes"]) == (1, 1)
    assert row["source"].startswith("tensorflow/tensorflow tensorflow/docs_src/performance")
    assert "10 warmup + 100 steps" in row["notes"]
    variants = it[is_variant(it.reset_index()).values]
    assert len(variants) == 2 and set(variants["model"]) == {"resnet50"}
    assert variants["iter_ms"].isna().all() and variants["batch_size"].isna().all()
    assert variants["notes"].str.startswith("VARIANT resnet50v1.5").all()
    kept = exclude_variants(it.reset_index())
    assert len(kept) == 23 and not kept["iter_id"].str.contains("v1.5").any()
    dev = devices_frame().set_index("device")
    assert dev.loc["k80", "peak_fp32_tflops"] == 4.37 and dev.loc["h200", "memory_gb"] == 141
    assert set(dev["kind"]) == {"gpu"} and set(dev["provenance"]) == {"published"}


def test_datasheet_devices_frame_is_schema_valid():
    from dgtraces import reference
    from dgtraces.importers.published import devices_frame

    df = devices_frame(reference.DEVICE_FILES)
    assert {"a100", "h100-pcie", "k80"} <= set(df["device"]) and (df["kind"] == "gpu").all()
