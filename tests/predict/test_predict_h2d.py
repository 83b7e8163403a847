import pandas as pd
import pytest

from dgtraces.comm.links import get_link
from dgtraces.models import layers_frame
from dgtraces.predict.trace import from_frame, with_default_h2d


def _trace(device, h2d_ms=0.0):
    lf = layers_frame("alexnet")
    df = pd.DataFrame({"layer": lf["layer"], "fwd_ms": 1.0, "bwd_ms": 2.0})
    return from_frame(df, "alexnet", 32, h2d_ms=h2d_ms, device=device)


def test_gpu_trace_gets_modelled_input_copy(empty_store):
    t = with_default_h2d(_trace("k80"), "pcie3")
    link = get_link("pcie3", use_store=False)
    nbytes = 32 * 3 * 227 * 227 * 4
    want_ms = link.alpha_us / 1e3 + nbytes / (link.bandwidth_gb_s * 1e9) * 1e3
    assert abs(t.h2d_ms - want_ms) < 1e-12
    assert "h2d modelled" in t.source


def test_cpu_or_given_h2d_is_left_alone(empty_store):
    assert with_default_h2d(_trace("cpu")).h2d_ms == 0.0
    assert with_default_h2d(_trace("k80", h2d_ms=1.5)).h2d_ms == 1.5
    from dgtraces.errors import DgtracesError

    with pytest.raises(DgtracesError) as exc:  # a bad --h2d-link is refused for any trace
        with_default_h2d(_trace("cpu"), "carrier-pigeon")
    assert exc.value.code == "UNKNOWN_LINK" and exc.value.failures[0].column == "h2d link"


def test_predict_and_sweep_agree_for_a_gpu_config(empty_store, tmp_path):
    import json

    from click.testing import CliRunner

    from dgtraces.cli import main
    from dgtraces.predict import resolve

    cfg = ["--device", "k80", "--workers", "8", "--gpus-per-node", "4"]
    runner = CliRunner()
    p = runner.invoke(main, ["predict", "--model", "resnet50", "--batch-size", "64",
                             "--policy", "wfbp", "--json", *cfg])
    assert p.exit_code == 0, p.output
    pred = json.loads(p.output)
    out = tmp_path / "s.csv"
    s = runner.invoke(main, ["sweep", "--models", "resnet50", "--batch-sizes", "64",
                             "--policies", "wfbp", "--out", str(out), *cfg])
    assert s.exit_code == 0, s.output
    row = pd.read_csv(out).iloc[0]
    assert row["iter_ms"] == pytest.approx(pred["iter_ms"], rel=1e-9)
    h2d = with_default_h2d(resolve("resnet50", "k80", 64, h2d_link=None)).h2d_ms
    assert h2d > 0 and pred["breakdown"]["h2d"] == pytest.approx(h2d)
    # an explicit --h2d-ms replaces the modelled copy; the host link is --h2d-link
    zero = json.loads(runner.invoke(main, ["predict", "--model", "resnet50", "--batch-size",
                                           "64", "--h2d-ms", "0", "--json", *cfg]).output)
    assert zero["breakdown"]["h2d"] == 0.0
    dag = pred["iter_ms"] - pred["breakdown"]["sync_ms"]  # the DAG, before the sync term
    assert zero["iter_ms"] - zero["breakdown"]["sync_ms"] == pytest.approx(dag - h2d)
    nv = resolve("resnet50", "k80", 64, h2d_link="nvlink2")
    assert nv.h2d_ms == pytest.approx(with_default_h2d(resolve(
        "resnet50", "k80", 64, h2d_link=None), "nvlink2").h2d_ms) and nv.h2d_ms < h2d


def test_every_gpu_has_a_declared_host_link_and_unknown_is_pcie3():
    """Acceptance review #2: the default input-copy link is the GPU's own host interface
    (reference/host_links.csv), not pcie3 for every GPU; pcie3 only for a GPU without a row."""
    from dgtraces.comm.links import get_link
    from dgtraces.reference import gpu_devices, rows
    from dgtraces.reference.devices import host_link

    declared = {r["device"]: r for r in rows("host_links.csv")}
    assert set(gpu_devices()) <= set(declared)
    for row in declared.values():
        get_link(row["h2d_link"], use_store=False)  # a known preset
        assert row["source"] and row["stated"] in ("stated", "inferred")
    assert [host_link(d)[0] for d in ("k80", "v100", "a100", "h100", "h200")] == [
        "pcie3", "pcie3", "pcie4", "pcie5", "pcie5"]
    assert host_link("no-such-gpu")[0] == "pcie3"


def test_the_default_copy_of_an_h200_trace_runs_over_pcie5(empty_store):
    link = get_link("pcie5", use_store=False)
    nbytes = 32 * 3 * 227 * 227 * 4
    want_ms = link.alpha_us / 1e3 + nbytes / (link.bandwidth_gb_s * 1e9) * 1e3
    assert abs(with_default_h2d(_trace("h200")).h2d_ms - want_ms) < 1e-12
    given = get_link("pcie3", use_store=False)
    assert abs(with_default_h2d(_trace("h200"), "pcie3").h2d_ms - (
        given.alpha_us / 1e3 + nbytes / (given.bandwidth_gb_s * 1e9) * 1e3)) < 1e-12


def test_predict_h200_defaults_to_its_host_link():
    import json

    from click.testing import CliRunner

    from dgtraces.cli import main

    args = ["predict", "--model", "alexnet", "--device", "h200", "--batch-size", "512",
            "--json"]
    default = json.loads(CliRunner().invoke(main, args).output)
    pcie5 = json.loads(CliRunner().invoke(main, args + ["--h2d-link", "pcie5"]).output)
    pcie3 = json.loads(CliRunner().invoke(main, args + ["--h2d-link", "pcie3"]).output)
    assert default["breakdown"]["h2d"] == pcie5["breakdown"]["h2d"]
    assert default["breakdown"]["h2d"] < pcie3["breakdown"]["h2d"] / 3.9
