"""#15: published multi-GPU validation, datasheet devices, --link-fit, reproducible output."""

import pandas as pd
import pytest

from dgtraces import reference
from dgtraces._version import __version__
from dgtraces.comm.linkfit import link_from_fit
from dgtraces.comm.links import ring_link_from_allreduce
from dgtraces.errors import Code, DgtracesError
from dgtraces.evaluation.published import validate_published
from dgtraces.predict import Cluster, Policy, calibrate, predict_trace, resolve
from tests.paths import FIXTURES


@pytest.fixture(scope="module")
def published():
    return validate_published()


def test_every_published_row_is_predicted_and_scored_by_its_metric(published):
    rows = published.rows
    assert len(rows) == len(reference.rows("scaling_published.csv")) + len(
        reference.rows("scaling/published_scaling.csv"))
    assert (rows["role"] != "skipped").all(), rows.loc[rows["role"] == "skipped", "reason"]
    out = rows["role"] == "not representable"
    assert rows.loc[out, "reason"].str.len().min() > 20  # each says why
    assert rows.loc[~out, "file"].isin(("scaling_published.csv",
                                        "scaling/published_scaling.csv")).all()
    speedup_only = rows["published_img_s"].isna()
    assert (rows.loc[speedup_only, "metric"] == "speedup").all()
    assert (rows.loc[~speedup_only, "metric"] == "img_s").all()
    scored = published.scored()
    assert published.headline()["mape_pct"] == pytest.approx(scored["ape_pct"].mean())
    assert set(published.by_source()["source"]) == set(scored["source"])


def test_calibration_uses_only_the_sources_one_gpu_figure(published):
    one_gpu = {(r["source"], r["framework"], r["update"]): float(r["img_s"])
               for r in reference.rows("scaling_published.csv")
               if r["gpus"] == "1" and r["img_s"]}
    for r in reference.rows("scaling/published_scaling.csv"):  # the table's own 1-GPU figure
        if r["img_s_1gpu_same_table"]:
            key = (f"{r['commit'][:7]} {r['table']}", r["framework"], r["comm_library"])
            one_gpu[key] = float(r["img_s_1gpu_same_table"])
    rows = published.rows[published.rows["role"] != "not representable"]
    for r in rows.itertuples():
        key = (r.table, r.framework, r.update)
        if key in one_gpu:
            assert f"--calibrate-img-s {one_gpu[key]:g} " in r.calibration
        else:
            assert "--calibrate-img-s" not in r.calibration
        if r.gpus == 1:
            assert r.role == "calibration"  # never scored against itself
    # a calibrated 1-GPU row reproduces its own figure: calibration went through calibrate()
    cal = rows[rows["role"] == "calibration"]
    assert (cal["predicted"] - cal["published"]).abs().max() < 1e-6 * cal["published"].max()


def test_datasheet_gpu_needs_calibrate_img_s():
    with pytest.raises(DgtracesError) as exc:
        resolve("resnet50", "a100", 64, h2d_link=None)
    assert exc.value.code == "NO_CALIBRATION"
    for device in ("a100", "a100-pcie", "h100", "h100-pcie"):
        trace = resolve("resnet50", device, 64, h2d_link=None, shape_only=True)
        pol = Policy("wfbp")
        pred, _ = predict_trace(calibrate(trace, 2000.0, pol), Cluster(1), pol)
        assert pred.throughput_img_s == pytest.approx(2000.0, rel=1e-9)
        assert pred.trace_device == device


def test_unknown_batch_of_a_stored_device_is_not_an_unknown_device():
    runs = pd.DataFrame({"device": ["cpu-x"] * 2, "model": ["alexnet"] * 2,
                         "batch_size": [4, 8]})
    from dgtraces.predict.devices import no_run_at_batch

    err = no_run_at_batch("alexnet", "cpu-x", 5, runs)
    assert err.code == "NOT_FOUND" and err.failures[0].expected == "4 | 8"
    assert no_run_at_batch("alexnet", "other", 5, runs) is None


def test_link_fit_from_osu_comm_fits_and_points(tmp_path):
    osu = link_from_fit(str(reference.path("bcaffe/allreduce2.log")))
    assert osu.name == "fit:allreduce2.log" and 0.3 < osu.bandwidth_gb_s < 1.25
    fits = tmp_path / "comm_fits.csv"
    pd.DataFrame([{"collective": "allreduce", "backend": "nccl", "interconnect": "x",
                   "workers": 4, "alpha_us": 60.0, "beta_us_per_byte": 0.001, "r2": 0.99,
                   "provenance": "measured", "source": "nccl-tests"}]).to_csv(fits,
                                                                            index=False)
    link = link_from_fit(str(fits))
    alpha, bw = ring_link_from_allreduce(60.0, 0.001, 4)
    assert (link.alpha_us, link.bandwidth_gb_s) == pytest.approx((alpha, bw))
    assert link_from_fit(str(tmp_path)).bandwidth_gb_s == pytest.approx(bw)  # the folder
    points = tmp_path / "pts" / "comm.csv"
    points.parent.mkdir()
    sizes = [2 ** k for k in range(14, 24)]
    pd.DataFrame({"collective": "allreduce", "workers": 2, "message_bytes": sizes,
                  "time_ms": [0.1 + n / 1e6 for n in sizes]}).to_csv(points, index=False)
    fitted = link_from_fit(str(points.parent))
    assert fitted.bandwidth_gb_s == pytest.approx(1.0, rel=1e-6)  # 2 workers: T = 2a + n/bw
    assert fitted.alpha_us == pytest.approx(50.0, rel=1e-6)
    with pytest.raises(DgtracesError) as exc:
        link_from_fit(str(fits) + "@1")
    assert exc.value.code == "BAD_INPUT"


def test_prediction_says_how_to_reproduce_it():
    trace = resolve("alexnet", "k80", 32, h2d_link=None)
    pred, _ = predict_trace(trace, Cluster(4), Policy("bucketed", bucket_bytes=1 << 20))
    assert pred.package_version == __version__
    assert pred.bucket_bytes == 1 << 20 and pred.trace_device == "k80"
    assert {"alpha_us", "bandwidth_gb_s"} <= set(pred.cluster["inter"])
    assert predict_trace(trace, Cluster(4), Policy("wfbp"))[0].bucket_bytes is None


def test_every_sweep_row_says_how_to_reproduce_it():
    from dgtraces.predict.sweep import Grid, run_sweep

    trace = resolve("alexnet", "k80", 32, h2d_link=None)
    df = run_sweep(Grid(models=("alexnet",), batch_sizes=(32,), workers=(1, 4),
                        inter=("10gbe", "ib-edr"), policies=("wfbp", "bucketed"),
                        traces={("alexnet", 32): trace}))
    for col in ("package_version", "dataset_release", "trace_run_id", "trace_device",
                "bucket_bytes", "intra_alpha_us", "inter_bandwidth_gb_s", "trace_io_ms"):
        assert df[col].notna().any(), col
    assert (df["package_version"] == __version__).all()
    assert df.loc[df["policy"] == "wfbp", "bucket_bytes"].isna().all()
    edr = df[df["inter"] == "ib-edr"]["inter_bandwidth_gb_s"]
    assert list(edr) == pytest.approx([10.625] * len(edr))


def test_every_listed_device_works():
    from dgtraces.predict.devices import known_devices
    from dgtraces.store import manifest as store
    from dgtraces.store import release

    runs = release.read_table("runs") if store.latest_or_none() else None
    listed = known_devices(runs)
    assert {"a100", "h100-pcie", "k80", "v100"} <= set(listed)
    for device, how in listed.items():
        if how == "stored runs only":
            mine = runs[runs["device"] == device].iloc[0]
            trace = resolve(mine["model"], device, int(mine["batch_size"]))
        else:
            trace = resolve("alexnet", device, 32, shape_only=True)
        pred, _ = predict_trace(calibrate(trace, 100.0, Policy()), Cluster(2), Policy())
        assert pred.iter_ms > 0 and pred.trace_device == device


def test_link_fit_reads_a_raw_nccl_tests_log(tmp_path):

    from dgtraces.importers.nccl_tests import import_log

    log = FIXTURES / "nccl_tests" / "all_reduce_perf_8xh100.log"
    fit = import_log(log).comm_fits
    row = fit.sort_values("r2", ascending=False).iloc[0]
    link = link_from_fit(str(log))
    alpha, bw = ring_link_from_allreduce(float(row["alpha_us"]),
                                         float(row["beta_us_per_byte"]), 8)
    assert (link.alpha_us, link.bandwidth_gb_s) == pytest.approx((alpha, bw))
    gather = tmp_path / "all_gather_perf.log"  # an all_gather log: no fit made (#34)
    gather.write_text((log.parent / "ag_2nodes.log").read_text())
    with pytest.raises(DgtracesError) as exc:
        link_from_fit(str(gather))
    assert exc.value.code == "BAD_INPUT" and exc.value.failures[0].found == "'allgather'"
    junk = tmp_path / "notes.txt"
    junk.write_text("hello\nworld\n")
    with pytest.raises(DgtracesError) as exc:
        link_from_fit(str(junk))
    assert exc.value.code == "BAD_FILE" and "nccl-tests" in exc.value.failures[0].expected


def test_linear_scaling_baseline_beside_the_predictor(published):
    s = published.scored()
    speed = s[s["metric"] == "speedup"]
    assert list(speed["linear"]) == list(speed["gpus"].astype(float))
    thr = s[(s["metric"] == "img_s") & s["source_1gpu_img_s"].notna()]
    assert len(thr) and list(thr["linear"]) == pytest.approx(
        list(thr["gpus"] * thr["source_1gpu_img_s"]))
    assert s.loc[(s["metric"] == "img_s") & s["source_1gpu_img_s"].isna(), "linear"].isna().all()
    assert list(s["linear_error_pct"].dropna()) == pytest.approx(
        list((s["linear"] / s["published"] - 1).dropna() * 100))
    by = published.by_source().set_index("source")
    for src, part in s.groupby("source"):
        lin = part["linear_ape_pct"].dropna()
        assert by.loc[src, "linear_rows"] == len(lin)
        if len(lin):
            assert by.loc[src, "linear_mape_pct"] == pytest.approx(lin.mean())
    h = published.headline()
    near = (s["pred_speedup"] >= 0.99 * s["gpus"]) & (s["gpus"] > 1)
    assert h["pred_linear_rows"] == int(near.sum())
    assert h["linear_rows"] == int(s["linear_ape_pct"].notna().sum())
    assert "linear-scaling baseline" in published.report()
    assert f"for {h['pred_linear_rows']} of {h['rows']} rows" in published.report()


def test_nccl_rows_take_the_gpu_default_and_others_their_aggregation(published):
    """Issue #25 item 2: NCCL / Horovod rows run predict's GPU default (auto); the host
    parameter server and Caffe-MPI's hierarchical NCCL + MPI keep their algorithm."""
    rows = published.rows[published.rows["role"].isin(("scored", "calibration"))]
    by_update = {u: set(g["algorithm"]) for u, g in rows.groupby("update")}
    for update, algos in by_update.items():
        low = update.lower()
        want = ("ps" if "parameter server" in low else "hierarchical"
                if "hierarchical" in low else "auto")
        assert algos == {want}, update
    nccl = rows[rows["algorithm"] == "auto"]
    assert len(nccl[nccl["file"] == "scaling_published.csv"]) == 13
    assert nccl["algorithm_why"].str.len().min() > 0


def test_each_nccl_row_runs_its_setups_release(published):
    """The NCCL revision (docs/predictor-published.md R1-R5): every `auto` row is costed by its
    setup's modelled release at run time, and the release reaches the prediction: forcing
    another release for every row (--nccl) changes a multi-node row whose releases choose
    different algorithms (DLPerf's NGC PyTorch 20.03 at 16 GPUs: 2.4's trees vs 2.7's ring)."""
    from dgtraces.evaluation.published_mapping import load_mapping, nccl_model

    setups = {s.id: s for s in load_mapping()}
    rows = published.rows[published.rows["role"].isin(("scored", "calibration"))]
    nccl = rows[rows["algorithm"] == "auto"]
    want = nccl["setup"].map(lambda sid: nccl_model(setups[sid])[0].key)
    assert (nccl["nccl"] == want).all()
    assert set(nccl["nccl"]) == {"2.4", "2.7", "2.12"} and set(nccl["nccl_time"]) == {"run"}
    assert (rows.loc[rows["algorithm"] != "auto", "nccl"].isna()).all()
    assert "rules R1-R5" in published.nccl and "run" in published.nccl
    forced = validate_published(nccl="2.7", nccl_time="tuning")
    assert forced.nccl == "--nccl 2.7, --nccl-time tuning"
    key = ["setup", "gpus"]
    a, b = (df[df["algorithm"] == "auto"].set_index(key) for df in (rows, forced.rows))
    assert set(b["nccl"]) == {"2.7"}
    row = ("dlperf-ngc-pytorch-20.03", 16)
    assert a.loc[row, "nccl"] == "2.4"
    assert a.loc[row, "comm_exposed_ms"] > 1.5 * b.loc[row, "comm_exposed_ms"]
    with pytest.raises(DgtracesError) as exc:
        validate_published(nccl="2.9.9.9")
    assert exc.value.code == Code.UNKNOWN_NCCL


def test_the_printed_accounting_covers_every_row(published):
    """Acceptance review #18: '87 scored rows; 95 rows not representable' left out the 36
    1-GPU anchor rows of the 218; the headline counts every role."""
    h = published.headline()
    counted = h["rows"] + h["calibration_rows"] + h["not_representable_rows"] + \
        h["skipped_rows"]
    assert counted == len(published.rows) and h["calibration_rows"] > 0
    assert h["calibration_rows"] == int((published.rows["role"] == "calibration").sum())
