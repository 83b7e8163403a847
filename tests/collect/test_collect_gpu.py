"""The CUDA paths of the collectors, on a CPU-only machine: typed NO_CUDA refusals, and every
GPU code path driven through a fake torch.cuda (events read the host clock, tensors stay on
the CPU via gpu.place) and fake NCCL process groups."""

import json
import sys
import time
import types

import pytest

torch = pytest.importorskip("torch")

from click.testing import CliRunner  # noqa: E402

from dgtraces.cli import main  # noqa: E402
from dgtraces.collect import comm, gpu, layers, procs, ssgd  # noqa: E402
from dgtraces.errors import DgtracesError  # noqa: E402
from dgtraces.models import layer_records  # noqa: E402
from dgtraces.tables.checks import validate_tables  # noqa: E402


class FakeEvent:
    """torch.cuda.Event stand-in: record() reads the host clock."""

    made = 0

    def __init__(self, enable_timing=False):
        assert enable_timing
        FakeEvent.made += 1
        self.t = None

    def record(self, stream=None):
        self.t = time.perf_counter()

    def elapsed_time(self, end):  # ms, like CUDA events
        return (end.t - self.t) * 1000.0


class FakeSpin:
    """torch.cuda._sleep stand-in: spins the host for ``cycles`` at 1 GHz (so that the
    calibration of CudaClock reads a positive time) and records each request."""

    def __init__(self):
        self.cycles = []

    def __call__(self, cycles):
        self.cycles.append(cycles)
        end = time.perf_counter() + min(cycles, 20_000_000) / 1e9
        while time.perf_counter() < end:
            pass


class _Device:
    def __init__(self, index):
        self.index = index

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@pytest.fixture
def fake_cuda(monkeypatch):
    """A machine with two 'NVIDIA H200' GPUs as far as torch.cuda and NVML tell."""
    monkeypatch.setattr(torch.version, "cuda", "12.8")
    cuda = torch.cuda
    monkeypatch.setattr(cuda, "is_available", lambda: True)
    monkeypatch.setattr(cuda, "device_count", lambda: 2)
    monkeypatch.setattr(cuda, "get_device_name", lambda i=0: "NVIDIA H200")
    monkeypatch.setattr(cuda, "get_device_properties", lambda i=0: types.SimpleNamespace(
        total_memory=150_000_000_000, multi_processor_count=132, major=9, minor=0))
    monkeypatch.setattr(cuda, "Event", FakeEvent)
    monkeypatch.setattr(cuda, "_sleep", FakeSpin())
    monkeypatch.setattr(cuda, "synchronize", lambda i=None: None)
    monkeypatch.setattr(cuda, "device", _Device)
    monkeypatch.setattr(gpu, "place", lambda target: "cpu")
    import torch.distributed as dist

    monkeypatch.setattr(dist, "is_nccl_available", lambda: True)
    nvml = types.SimpleNamespace(
        NVML_CLOCK_SM=1, NVML_CLOCK_MEM=2, nvmlInit=lambda: None, nvmlShutdown=lambda: None,
        nvmlDeviceGetHandleByIndex=lambda i: ("h", i),
        nvmlSystemGetDriverVersion=lambda: b"570.86.15",
        nvmlDeviceGetClockInfo=lambda h, kind: 1980,
        nvmlDeviceGetMaxClockInfo=lambda h, kind: 1980 if kind == 1 else 3201,
        nvmlDeviceGetPowerManagementLimit=lambda h: 700_000)
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    FakeEvent.made = 0
    return cuda


# --- without CUDA: refusals at once, typed, no traceback --------------------------------

@pytest.mark.parametrize("args", [
    ["collect", "layers", "--model", "alexnet", "--batch-size", "1", "--device", "cuda"],
    ["collect", "comm", "--backend", "nccl", "--workers", "2"],
    ["collect", "ssgd", "--model", "alexnet", "--backend", "nccl", "--policies", "ddp"],
    # eager: NO_CUDA before click reports a missing option
    ["collect", "layers", "--device", "cuda", "--model", "alexnet"],
    ["collect", "comm", "--backend", "nccl"],
    ["collect", "ssgd", "--backend", "nccl"],
])
def test_cuda_requests_fail_at_once_without_cuda(args, tmp_path):
    res = CliRunner().invoke(main, [*args, "--out", str(tmp_path / "o")])
    assert res.exit_code != 0 and res.exception.code == "NO_CUDA", res.output
    assert "━" not in res.output  # refused before any progress bar or measurement
    assert not (tmp_path / "o").exists()


def test_cli_reports_no_cuda_without_traceback(tmp_path):
    import subprocess

    out = subprocess.run([sys.executable, "-m", "dgtraces", "collect", "layers", "--model",
                          "alexnet", "--batch-size", "1", "--device", "cuda:0", "--out",
                          str(tmp_path / "o")], capture_output=True, text=True, timeout=120)
    text = out.stdout + out.stderr
    assert out.returncode != 0 and "[NO_CUDA]" in text and "Traceback" not in text


def test_library_refusals_carry_codes():
    with pytest.raises(DgtracesError) as exc:
        layers.collect_layers("alexnet", 1, device="cuda:1")
    assert exc.value.code == "NO_CUDA"
    for kwargs, code in (({"device": "gpu"}, "BAD_INPUT"), ({"device": "cpu:0"}, "BAD_INPUT"),
                         ({"precision": "amp"}, "BAD_INPUT"), ({"precision": "fp8"},
                                                               "BAD_INPUT")):
        with pytest.raises(DgtracesError) as exc:
            layers.collect_layers("alexnet", 1, **kwargs)
        assert exc.value.code == code, kwargs


def test_what_is_missing_is_named(fake_cuda, monkeypatch):
    with pytest.raises(DgtracesError) as exc:
        gpu.require_cuda("x", index=2)  # two GPUs: cuda:0, cuda:1
    assert exc.value.code == "NO_CUDA"
    with pytest.raises(DgtracesError) as exc:
        gpu.require_nccl("x", workers=3)
    assert exc.value.code == "NO_CUDA"
    import torch.distributed as dist

    monkeypatch.setattr(dist, "is_nccl_available", lambda: False)
    with pytest.raises(DgtracesError) as exc:
        gpu.require_nccl("x", workers=2)
    assert exc.value.code == "NO_CUDA"
    monkeypatch.setattr(fake_cuda, "is_available", lambda: False)
    with pytest.raises(DgtracesError) as exc:
        gpu.require_cuda("x")
    assert exc.value.code == "NO_CUDA"


# --- the GPU code paths with the fake -----------------------------------------------------

@pytest.mark.parametrize("precision", ["fp32", "amp"])
def test_collect_layers_on_fake_cuda(fake_cuda, precision):
    trace = layers.collect_layers("alexnet", 1, repeats=1, warmup=0, device="cuda:1",
                                  precision=precision)
    valid = validate_tables(trace.frames())
    run = valid["runs"].iloc[0]
    assert (run.device, run.device_kind, run.precision) == ("h200", "gpu", precision)
    assert set(valid["layer_timings"]["layer"]) == {r["layer"] for r in
                                                    layer_records("alexnet")}
    info = json.loads(run.params_json)
    assert (info["gpu"], info["gpu_index"], info["sm_count"]) == ("NVIDIA H200", 1, 132)
    assert (info["driver"], info["sm_clock_max_mhz"], info["cuda"]) == ("570.86.15", 1980,
                                                                        "12.8")
    assert {"cudnn_benchmark", "cudnn_allow_tf32", "matmul_allow_tf32"} <= set(info)
    assert info["device_row"]["datasheet"] and trace.device["peak_fp32_tflops"] == 67.0
    n_layers = len(valid["layer_timings"])
    assert FakeEvent.made >= 2 * 2 * n_layers  # start+end per layer forward and backward
    assert len(fake_cuda._sleep.cycles) >= 1 + 2 * n_layers  # calibration + a spin per call
    assert "GPU spin" in info["timing"]
    assert "CUDA" in run.source and "cuda:1" in run.source


def test_cuda_clock_opens_each_call_behind_a_spin_as_long_as_its_last_launch(fake_cuda):
    """The first real-GPU run (H200, batch 32) timed the host's dispatch instead of the GPU:
    each timed call is now opened behind a spin of 1.5x the host's last launch time of the
    same call + 50 us (2 ms the first time), in GPU cycles calibrated once by events."""
    clock = gpu.CudaClock(torch, 0)
    spin = fake_cuda._sleep
    t0 = clock.open("conv1")
    time.sleep(0.004)  # the host 'launching' the call
    t1 = clock.close("conv1")
    per_s = clock.cycles_per_s()
    assert spin.cycles[0] == gpu.CudaClock.CALIBRATION_CYCLES  # calibrated once, first
    assert spin.cycles[1] == pytest.approx(2.05e-3 * per_s, rel=1e-6)
    host = clock.host_s["conv1"]
    assert 0.004 <= host < 1.0 and gpu.CudaClock.seconds(t0, t1) >= 0.004
    clock.open("conv1")
    clock.close("conv1")
    clock.open("other")
    assert spin.cycles[2] == pytest.approx((1.5 * host + 50e-6) * per_s, rel=1e-6)
    assert spin.cycles[3] == pytest.approx(2.05e-3 * per_s, rel=1e-6)  # a new call: 2 ms
    assert len(spin.cycles) == 4  # no second calibration


def test_cpu_clock_needs_no_lead():
    clock = gpu.CpuClock()
    a = clock.open("x")
    b = clock.close("x")
    assert isinstance(a, float) and b >= a


def test_unknown_gpu_gets_name_and_kind_only(fake_cuda, monkeypatch):
    monkeypatch.setattr(fake_cuda, "get_device_name", lambda i=0: "NVIDIA GeForce RTX 5090")
    monkeypatch.delitem(sys.modules, "pynvml")
    monkeypatch.setattr("builtins.__import__", _no_pynvml(__import__))
    trace = layers.collect_layers("alexnet", 1, repeats=1, warmup=0, device="cuda")
    entry = trace.device
    assert (entry["device"], entry["kind"], entry["datasheet"]) == ("rtx-5090", "gpu", False)
    assert entry["peak_fp32_tflops"] is None
    info = json.loads(trace.runs.iloc[0].params_json)
    assert "not installed" in info["nvml"]


def _no_pynvml(real_import):
    def fake(name, *args, **kwargs):
        if name == "pynvml":
            raise ImportError("no pynvml")
        return real_import(name, *args, **kwargs)
    return fake


class FakeDist:
    def __init__(self):
        self.calls = []

    def barrier(self):
        self.calls.append("barrier")

    def all_reduce(self, buf, op=None):
        self.calls.append(("all_reduce", buf.numel()))

    def broadcast(self, buf, src=0):
        self.calls.append(("broadcast", buf.numel()))


class StepClock:
    """Each mark is 1 ms after the previous one; counts syncs."""

    def __init__(self):
        self.now, self.syncs = 0.0, 0

    def mark(self):
        self.now += 0.001
        return self.now

    def sync(self):
        self.syncs += 1

    @staticmethod
    def seconds(a, b):
        return b - a


def test_collective_timing_loop_with_fake_nccl():
    dist, clock = FakeDist(), StepClock()
    got = comm.time_collectives(dist, clock, lambda n: torch.ones(n), [4, 1024],
                                ["allreduce", "broadcast"], repeats=3, warmup=1)
    assert [[len(r) for r in c] for c in got] == [[3, 3], [3, 3]]
    assert all(t == pytest.approx(0.001) for c in got for r in c for t in r)
    assert dist.calls.count("barrier") == 2 * 2 * 4 and clock.syncs == 16
    assert ("all_reduce", 256) in dist.calls and ("broadcast", 1) in dist.calls


def test_collect_comm_nccl_rows(fake_cuda, monkeypatch):
    seen = {}

    def spawn(fn, workers, sizes, colls, repeats, warmup, backend, threads):
        seen.update(workers=workers, backend=backend)
        times = [[[1e-5 + s / 100e9 for _ in range(repeats)] for s in sizes] for _ in colls]
        return {"times_s": times, "loadavg": [0.1, 0.1, 0.1]}

    monkeypatch.setattr(procs, "spawn", spawn)
    frames = comm.collect_comm(workers=2, sizes=[1 << 10, 1 << 20, 1 << 26], repeats=2,
                               warmup=0, backend="nccl", collectives=("allreduce",))
    valid = validate_tables(frames)
    assert seen == {"workers": 2, "backend": "nccl"}
    c, f = valid["comm"], valid["comm_fits"].iloc[0]
    assert set(c["backend"]) == {"nccl"} and set(c["interconnect"]) == {"h200-x2-intra-node"}
    assert f.bandwidth_gb_s == pytest.approx(100.0, rel=1e-3)
    assert f.alpha_us == pytest.approx(10.0, rel=1e-3)


def test_collect_ssgd_nccl_rows(fake_cuda, monkeypatch):
    def spawn(fn, workers, cfg):
        assert cfg["backend"] == "nccl"
        per = [[[0.05, 0.01, 0.03, 0.0, 0.01]] * 2 for _ in range(workers)]
        return {"policies": {p: {"per_rank_s": per, "comm_calls": None}
                             for p in cfg["policies"]}, "loadavg": None}

    monkeypatch.setattr(procs, "spawn", spawn)
    df = ssgd.collect_ssgd("alexnet", workers=2, policies=("wfbp", "ddp"), iters=2,
                           backend="nccl")
    valid = validate_tables({"iterations": df})["iterations"]
    assert list(valid["policy"]) == ["wfbp", "bucketed"]  # ddp is stored as bucketed
    assert set(valid["backend"]) == {"nccl"} and set(valid["device"]) == {"h200"}
    ddp = valid.iloc[1]
    assert json.loads(ddp.phases_json)["implementation"].endswith("DistributedDataParallel")
    assert ddp.iter_ms == pytest.approx(50.0) and ddp.bucket_bytes == 25 * 2 ** 20


def test_ddp_policy_really_runs_in_one_process_group(tmp_path):
    """The DDP branch of run_policies on a real (gloo, world 1) process group."""
    import torch.distributed as dist

    from dgtraces.collect import net as tnet

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'pg'}", rank=0,
                            world_size=1)
    try:
        net = tnet.build("alexnet")
        net.train()
        opt = torch.optim.SGD(net.parameters(), lr=1e-4)
        x, labels = tnet.synthetic_batch(net, 1)
        cfg = {"policies": ["ddp", "naive"], "bucket_bytes": 25 << 20, "warmup": 0,
               "iters": 1}
        out = ssgd.run_policies(dist, net, opt, x, labels, cfg, 1, gpu.Target("cpu"),
                                gpu.CpuClock())
    finally:
        dist.destroy_process_group()
    assert set(out) == {"ddp", "naive"} and out["ddp"]["comm_calls"] is None
    assert out["naive"]["comm_calls"] > 0
    phases = out["ddp"]["per_rank_s"][0][0]
    assert len(phases) == 5 and phases[0] == pytest.approx(sum(phases[1:]))


def test_profile_mode_imports_its_own_trace(tmp_path):
    from dgtraces.collect.profile import profile_layers

    trace = tmp_path / "alexnet.json.gz"
    threads = torch.get_num_threads()
    res = profile_layers("alexnet", 1, trace, iterations=2, warmup=1, threads=threads + 1)
    assert trace.is_file()
    # the process is left as it was: thread count, and subnormals (no FTZ/DAZ)
    assert torch.get_num_threads() == threads and 2.2250738585072014e-308 / 2 != 0.0
    run = res.runs.iloc[0]
    assert run.run_id.startswith("kineto-alexnet-") and run.device == "cpu"
    assert len(res.layer_timings) == len(layer_records("alexnet"))
    assert set(res.layer_timings["n"]) == {2}
