"""kernels-3's pieces on small inline data (issue #33; docs/reconstruction-kernels3.md): the
engine equals kernels-2.0's, Habitat's wave scaling, the device rules, the published kernel
rows, the pricing order, the K1-K4 fit and its leave-one-GPU-out, stage F, the parameter table
round trip and its refusals."""

import dataclasses

import numpy as np
import pytest

from dgtraces.errors import Code, DgtracesError
from dgtraces.importers.deepbench import import_deepbench
from dgtraces.reconstruct.kernels2.gemm import (
    ConvShape,
    KernelParams,
    conv_gemm,
    gemm_list,
    gemm_seconds,
)
from dgtraces.reconstruct.kernels3 import engine, habitat, stagef
from dgtraces.reconstruct.kernels3.devices import Device, closest, distance, get_device
from dgtraces.reconstruct.kernels3.fit import (
    KernelFit,
    fit_kernels,
    leave_one_gpu_out,
    modelled_seconds,
)
from dgtraces.reconstruct.kernels3.kernelrows import (
    KernelRows,
    conv_key,
    digest,
    kernel_rows,
)
from dgtraces.reconstruct.kernels3.model import Model
from dgtraces.reconstruct.kernels3.params import from_frame, to_frame
from dgtraces.reconstruct.kernels3.price import NetKernel, Pricer, Transfer, measured_index

A = get_device("m40").gpu("fp32")
B = get_device("t4").gpu("fp32")
THETA = np.array([0.8, 0.7, 0.6, 1.2, 0.75, 8.0])  # e_fwd..e_gemm, t0_us
SHAPES = [ConvShape(1, c, h, h, k, r, r, s, s, (h + 2 * (r // 2) - r) // s + 1,
                    (h + 2 * (r // 2) - r) // s + 1, 1, r // 2, r // 2)
          for c, h, k, r, s in ((64, 56, 64, 3, 1), (64, 56, 256, 1, 1), (128, 28, 128, 3, 1),
                                (256, 56, 512, 1, 2), (512, 7, 2048, 1, 1), (3, 224, 64, 7, 2),
                                (96, 28, 128, 3, 1), (32, 28, 96, 5, 1))]


@pytest.fixture(scope="module")
def deepbench():
    return import_deepbench()


def test_engine_prices_every_kernel_as_kernels20_gemm_seconds(deepbench):
    rows = kernel_rows(deepbench.kernels.head(400))
    gpus = [get_device(d).gpu("fp32") for d in rows.device]
    p = KernelParams(0.81, 0.83, 0.66, 0.99, 0.69, 0.7, 19.8)
    b = engine.batch(list(rows.gemm), gpus)
    t, _ = engine.seconds(b, p.eff()[b.cls], p.gamma, np.full(len(b), p.t0_us))
    ref = gemm_seconds(gemm_list(list(rows.gemm), lambda d: get_device(d).gpu("fp32")), p)
    np.testing.assert_allclose(t, ref, rtol=1e-12)


def _device(name, sm, mhz, bw, peak):
    return Device(name, name, peak, None, bw, sm, mhz, "test")


def test_habitat_wave_scaling_follows_the_roofline_share():
    o, d = _device("o", 24, 1114.0, 288.0, 7.0), _device("d", 13, 875.0, 240.0, 4.37)
    # no FLOPs: fully memory bound, the bandwidth ratio
    t = habitat.scale(np.array([1.0]), np.array([0.0]), np.array([1e6]), np.array([1000.0]),
                      o, d)
    assert t[0] == pytest.approx(288.0 / 240.0)
    # far above the ridge point with many blocks: gamma = 0.5 R / I
    ridge = 4.37e12 / 240e9
    flops, bytes_ = 1e12, 1e12 / (50 * ridge)
    g = 0.5 * ridge / 50 / ridge
    want = (288 / 240) ** g * (1114 / 875 * 24 / 13) ** (1 - g)
    t = habitat.scale(np.array([2.0]), np.array([flops]), np.array([bytes_]),
                      np.array([1000.0]), o, d)
    assert t[0] == pytest.approx(2.0 * want)
    # fewer blocks than SMs on both: only the clock (the blocks' wave count is one on both)
    t = habitat.scale(np.array([2.0]), np.array([flops]), np.array([bytes_]), np.array([8.0]),
                      o, d)
    assert t[0] == pytest.approx(2.0 * (1114 / 875) ** (1 - g))
    assert habitat.memory_share(np.array([ridge]), np.array([1.0]), d)[0] == pytest.approx(0.5)


def test_k80_transfers_from_the_m40_by_the_preregistered_distance():
    eight = ("p100-pcie", "t4", "m40", "titanx-maxwell", "titanx-pascal", "titanxp",
             "gtx1080ti", "v100")
    assert closest("k80", eight) == "m40"
    k80 = get_device("k80")
    assert distance(k80, get_device("m40")) == pytest.approx(1.04, abs=0.01)
    assert distance(k80, get_device("titanx-maxwell")) == pytest.approx(1.16, abs=0.01)
    assert min(distance(k80, get_device(g)) for g in eight if g not in ("m40",
                                                                         "titanx-maxwell")) > 1.9


def test_unknown_device_or_one_without_an_sm_count_lists_the_known_ones(monkeypatch):
    with pytest.raises(DgtracesError) as e:
        get_device("h300")
    assert e.value.code == Code.UNKNOWN_DEVICE and "h200" in str(e.value)
    from dgtraces import reference
    from dgtraces.reconstruct.kernels3 import devices

    rows = reference.rows
    monkeypatch.setattr(reference, "rows", lambda name: [r for r in rows(name)
                                                         if r.get("device") != "t4"])
    devices.devices.cache_clear()
    try:
        with pytest.raises(DgtracesError) as e:
            get_device("t4")  # datasheet peaks, no SM row
        assert e.value.code == Code.UNKNOWN_DEVICE and "v100" in str(e.value)
    finally:
        devices.devices.cache_clear()


def test_kernel_rows_keep_every_published_direction_and_the_digest_follows_the_times(
        deepbench):
    k = deepbench.kernels
    rows = kernel_rows(k)
    conv = k[k["op"] == "conv"]
    n_conv = int(conv[["fwd_ms", "dgrad_ms", "wgrad_ms"]].notna().sum().sum())
    assert len(rows) == n_conv + int((k["op"] == "gemm").sum())
    assert set(rows.precision) == {"fp32", "amp"} and rows.layer.sum() > 0
    assert str(rows.key[0]).startswith("conv:c1h161w700k32r5s20")
    d = digest(k)
    assert digest(k.sample(frac=1.0, random_state=1)) == d  # row order does not matter
    bumped = k.copy()
    bumped.loc[bumped.index[5], "fwd_ms"] *= 1.0001
    assert digest(bumped) != d


def _synthetic(gpus, theta_of, effect=0.0):
    """KernelRows of every SHAPES conv direction at batches 8 and 16 on each GPU, timed by
    the engine under ``theta_of(gpu)`` (and a shape effect on the first shape)."""
    cols = {f: [] for f in ("kernel_id", "device", "precision", "direction", "key", "batch",
                            "layer", "time_ms")}
    gemms = []
    for g in gpus:
        for j, cs in enumerate(SHAPES):
            for n in (8, 16):
                for d in ("fwd", "dgrad", "wgrad"):
                    row = conv_gemm(dataclasses.replace(cs, n=n), d, g.device)
                    b = engine.batch([row], [g])
                    th = theta_of(g)
                    t, _ = engine.seconds(b, th[b.cls], 0.7, np.array([th[-1]]))
                    for f, v in (("kernel_id", f"{g.device}-{j}-{n}-{d}"), ("device", g.device),
                                 ("precision", "fp32"), ("direction", d), ("key", conv_key(cs)),
                                 ("batch", n), ("layer", True),
                                 ("time_ms", t[0] * 1e3 * np.exp(effect if j == 0 else 0))):
                        cols[f].append(v)
                    gemms.append(row)
    return KernelRows(**{f: np.array(v) for f, v in cols.items()}, gemm=tuple(gemms))


def test_fit_recovers_per_gpu_constants_and_the_held_out_gpu_uses_the_prior():
    slow = THETA * np.array([0.8, 0.8, 0.8, 0.8, 0.8, 1.0])
    rows = _synthetic([A, B], lambda g: THETA if g is A else slow)
    gpus = {"m40": A, "t4": B}
    fit = fit_kernels(rows, gpus, "fp32")
    assert fit.kernels == {"m40": 48, "t4": 48} and max(fit.rms_log.values()) < 0.05
    ratio = fit.theta["t4"][:3] / fit.theta["m40"][:3]
    np.testing.assert_allclose(ratio, 0.8, rtol=0.1)  # t4's own, slower efficiencies
    assert set(k for k, _ in fit.effects) == {conv_key(cs) for cs in SHAPES}
    pred = leave_one_gpu_out(rows, gpus, "fp32")
    held = rows.device == "t4"  # t4 from m40's fit: its constants, too fast by about 1/0.8
    assert np.median(pred[held] / rows.time_ms[held]) < 0.95
    assert np.all(np.isfinite(pred)) and np.all(pred > 0)


def test_pricing_order_measured_batch_scaled_shape_effect_model():
    rows = _synthetic([A], lambda g: THETA, effect=0.3)
    fit = KernelFit("fp32", 0.7, THETA, {"m40": THETA},
                    {(conv_key(SHAPES[1]), "fwd"): (0.2, 3)}, {}, {"m40": 0.0}, {"m40": 48})
    measured = measured_index(rows.select(rows.key == conv_key(SHAPES[0])))[("m40", "fp32")]
    p = Pricer(fit, A, THETA, measured)
    ks = [NetKernel(0, "fwd", SHAPES[0]), NetKernel(1, "fwd", SHAPES[1]),
          NetKernel(2, "fwd", SHAPES[2])]
    out16 = p.price(ks, 16)
    assert out16.tags == ("a", "b2", "b3")
    model = modelled_seconds(fit, engine.batch([k.row(16, "m40") for k in ks], [A] * 3),
                             THETA)[0]
    assert out16.ms[0] == pytest.approx(model[0] * 1e3 * np.exp(0.3))  # as published
    assert out16.ms[1] == pytest.approx(model[1] * 1e3 * np.exp(0.2))
    assert out16.ms[2] == pytest.approx(model[2] * 1e3)
    assert out16.extrapolated[2]  # (b3) and no fitted range: flagged
    out32 = p.price(ks[:1], 32)  # measured at 8 and 16: scaled from 16 by the model
    m32 = modelled_seconds(fit, engine.batch([ks[0].row(32, "m40")], [A]), THETA)[0][0]
    m16 = model[0]
    assert out32.tags == ("b1",)
    assert out32.ms[0] == pytest.approx(out16.ms[0] * m32 / m16)
    far = Transfer(p, get_device("m40"), get_device("k80"))
    t = far.price(ks[:1], 16)
    assert t.tags == ("a@m40",) and t.ms[0] > out16.ms[0]  # the K80 is the slower GPU


def _frows(e_mem, floor, o):
    """Observations of two blocks generated from known stage-F constants (v100; mxnet)."""
    rng = np.random.default_rng(3)
    n = 40
    gemm = rng.uniform(0, 2, n) * (rng.uniform(size=n) < 0.5)
    bytes_ = rng.uniform(1e6, 1e8, n)
    kernels = rng.integers(1, 3, n).astype(float)
    meas = gemm + bytes_ / (e_mem * 900e9) * 1e3 + kernels * floor * 1e-3 + o * 1e-3
    a = stagef.frows("trace", "v100", "pytorch", gemm, bytes_, 900.0, kernels, 1.0, meas,
                     ["f1"] * 20 + ["f2"] * 20, [f"r{i}" for i in range(n)], gemm == 0)
    w = stagef.frows("calibration.csv v100 mxnet", "v100", "mxnet", [5.0, 9.0],
                     [2e9, 3e9], 900.0, [300.0, 400.0], [320.0, 320.0],
                     [5.0 + 2e9 / (e_mem * 900e9) * 1e3 + 300 * floor * 1e-3 + 0.32 * 20,
                      9.0 + 3e9 / (e_mem * 900e9) * 1e3 + 400 * floor * 1e-3 + 0.32 * 20])
    return stagef.FRows.concat([a, w])


def test_stage_f_recovers_memory_constants_and_overheads():
    obs = _frows(0.85, 4.0, 12.0)
    f = stagef.fit(obs)
    assert f.e_mem["v100"] == pytest.approx(0.85, rel=1e-3)
    assert f.floor_us["v100"] == pytest.approx(4.0, rel=1e-2)
    assert f.overhead_us["pytorch"] == pytest.approx(12.0, rel=1e-2)
    assert f.overhead_us["mxnet"] == pytest.approx(20.0, rel=1e-2)
    assert f.memory("k80") == (f.e_mem["v100"], f.floor_us["v100"])  # pooled: one fitted GPU
    assert f.overhead("paddle") == pytest.approx((12.0 + 20.0) / 2, rel=1e-2)
    assert f.overhead("none") == 0.0
    np.testing.assert_allclose(stagef.predict(obs, f), obs.measured_ms, rtol=1e-3)
    held = obs.fold == "f2"
    g = stagef.fit(obs, ~held)  # a fold out: the rest still determines everything
    assert g.e_mem["v100"] == pytest.approx(0.85, rel=1e-3)
    with pytest.raises(DgtracesError) as e:
        stagef.fit(obs, np.zeros(len(obs), bool))
    assert e.value.code == Code.NO_CALIBRATION


def test_stage_f_predict_is_each_rows_constants():
    """predict looks each GPU's and family's constants up once: every row still gets its own
    (a fitted GPU, a pooled one; a fitted family, an unknown one, none)."""
    f = stagef.StageF({"v100": 0.8, "titanx-maxwell": 0.6}, {"v100": 4.0, "titanx-maxwell": 2.0},
                      {"pytorch": 12.0, "mxnet": 20.0})
    memory = ["v100", "k80", "titanx-maxwell", "k80", "v100"]
    family = ["pytorch", "mxnet", "paddle", "none", "mxnet"]
    obs = stagef.FRows.concat([stagef.frows("b", m, fam, 1.5, 4e8, 900.0, 3.0, 2.0, [1.0])
                               for m, fam in zip(memory, family, strict=True)])
    want = [1.5 + obs.bytes_ms[i] / f.memory(m)[0] + 3.0 * f.memory(m)[1] * 1e-3
            + 2.0 * f.overhead(fam) * 1e-3 for i, (m, fam) in enumerate(zip(memory, family,
                                                                             strict=True))]
    assert stagef.predict(obs, f).tolist() == want


def _model(deepbench):
    rows = _synthetic([A], lambda g: THETA)
    fit = fit_kernels(rows, {"m40": A}, "fp32")
    f = stagef.fit(_frows(0.85, 4.0, 12.0))
    return Model({"fp32": fit}, measured_index(rows), f, (1e5, 1e9), digest(deepbench.kernels))


def test_parameter_table_round_trip_and_refusals(deepbench):
    m = _model(deepbench)
    extra = [{"scope": "metric", "param_id": "kernels-3:metric:x", "name": "x",
              "value_pct": 3.0, "target_pct": 15.0, "count": 4, "basis": "clause 1a: x"}]
    df = to_frame(m, extra)
    assert df["param_id"].is_unique and (df["fit_digest"] == m.digest).all()
    assert set(df["scope"]) == {"kernel", "shape", "range", "memory", "framework", "metric"}
    back = from_frame(df, deepbench.kernels)
    a, b = m.fits["fp32"], back.fits["fp32"]
    np.testing.assert_allclose(b.theta["m40"], a.theta["m40"])
    assert b.effects == a.effects and b.gamma == a.gamma and back.stage == m.stage
    other = deepbench.kernels.copy()
    other.loc[other.index[0], "fwd_ms"] *= 2  # another release's kernels
    with pytest.raises(DgtracesError) as e:
        from_frame(df, other)
    assert e.value.code == Code.INTEGRITY
    with pytest.raises(DgtracesError) as e:
        from_frame(df[df["scope"] != "memory"].reset_index(drop=True), deepbench.kernels)
    assert e.value.code == Code.INTEGRITY
    bad = df.copy()
    bad.loc[0, "fit_digest"] = "0" * 63  # not a sha256: the schema refuses it
    from dgtraces.tables.checks import validate_frame

    with pytest.raises(DgtracesError) as e:
        validate_frame("method_params", bad)
    assert e.value.code == Code.SCHEMA


def test_amp_is_refused_without_the_devices_own_amp_kernels(deepbench):
    m = _model(deepbench)
    with pytest.raises(DgtracesError) as e:
        m.pricer("k80", "amp")
    assert e.value.code == Code.NO_CALIBRATION
    assert isinstance(m.pricer("k80"), Transfer) and m.basis("k80") == "transfer:m40"
    assert m.basis("a100") == "prior" and m.basis("m40") == "kernels"
    with pytest.raises(DgtracesError) as e:
        m.pricer("no-such-gpu")
    assert e.value.code == Code.UNKNOWN_DEVICE


def test_layer_parts_and_their_composition(deepbench):
    from dgtraces.reconstruct.kernels3.layers import compose

    m = _model(deepbench)
    p = m.parts("alexnet", "m40", "fp32", 16)
    kinds = dict(zip(p.layer, p.kind, strict=True))
    tags = dict(zip(p.layer, p.tags, strict=True))
    assert tags["relu1"] == ("c", "c") and kinds["conv1"] == "conv"
    assert tags["conv1"] == ("b3", "b3")  # fed by the data: weight gradient only, one tag
    assert tags["conv2"][1] == "b3+b3"  # data and weight gradient
    assert (p.gemm_ms[:, p.kind == "relu"] == 0).all() and (p.bytes_[:, p.kind == "relu"] > 0).all()
    t = compose(p, 0.5, 10.0, 288.0, 100.0)
    i = list(p.layer).index("relu1")
    want = p.bytes_[0, i] / (0.5 * 288e9) * 1e3 + p.kernels[0, i] * 10e-3 + 0.1
    assert t.fwd_ms[i] == pytest.approx(want)
    assert t.update_ms == pytest.approx(p.update_bytes / (0.5 * 288e9) * 1e3
                                        + p.update_kernels * 10e-3)
    inf = m.parts("alexnet", "m40", "fp32", 16, training=False)
    assert (inf.gemm_ms[1] == 0).all() and inf.update_bytes == 0
    assert m.times(inf, "m40", "none").bwd_ms.sum() == 0
    assert m.memory_extrapolated(p) == [] or all(kinds[x] != "conv" for x in
                                                 m.memory_extrapolated(p))


def test_the_docs_table_names_the_default_framework_of_each_device():
    import re

    from dgtraces.reconstruct.kernels3.trace import DEFAULT_FRAMEWORK, DEVICE_FRAMEWORK
    from dgtraces.reference.frameworks import get_framework
    from tests.paths import REPO

    doc = (REPO / "docs" / "reconstruction-kernels3.md").read_text()
    table = {}
    for devices, fw in re.findall(r"^\| (`[^|]+`|every other GPU) \| `([^`]+)` \|", doc,
                                  flags=re.M):
        for d in re.findall(r"`([^`]+)`", devices) or ["*"]:
            table[d] = fw
    assert table == {**DEVICE_FRAMEWORK, "*": DEFAULT_FRAMEWORK}
    assert all(get_framework(f) is not None for f in table.values())
