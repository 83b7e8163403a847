"""The CUDA side of the collectors: device parsing, availability checks, CUDA-event clocks,
mixed precision, and the GPU metadata stored in ``params_json``.

Nothing imports torch at import time. Every check that needs CUDA or NCCL fails at once,
before any measurement, with :class:`~dgtraces.errors.NoCudaError` (code ``NO_CUDA``) naming
what is missing: a torch build without CUDA, no visible device, too few devices, or a torch
without NCCL. Tests replace ``torch.cuda`` (and :func:`place`) with fakes; CI has no GPU.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from ..errors import Code, DgtracesError, NoCudaError
from . import env

DEVICE_RE = re.compile(r"^(cpu|cuda)(?::(\d{1,3}))?$")
PRECISIONS = ("fp32", "amp")


@dataclass(frozen=True)
class Target:
    """Where a collector runs: ``cpu`` or ``cuda`` (device ``index``)."""

    kind: str
    index: int = 0

    @property
    def cuda(self) -> bool:
        return self.kind == "cuda"

    @property
    def label(self) -> str:
        return f"cuda:{self.index}" if self.cuda else "cpu"


def parse_device(text: str) -> Target:
    """``cpu``, ``cuda`` or ``cuda:N`` -> :class:`Target` (BAD_INPUT otherwise)."""
    m = DEVICE_RE.match(str(text).strip().lower())
    if not m or (m[1] == "cpu" and m[2] is not None):
        raise DgtracesError(f"device must be cpu, cuda or cuda:N, got {text!r}",
                            code=Code.BAD_INPUT)
    return Target(m[1], int(m[2] or 0))


def check_precision(precision: str, target: Target) -> str:
    if precision not in PRECISIONS:
        raise DgtracesError(f"precision must be one of {', '.join(PRECISIONS)}, got "
                            f"{precision!r}", code=Code.BAD_INPUT)
    if precision == "amp" and not target.cuda:
        raise DgtracesError("--precision amp (autocast fp16 on tensor cores) needs "
                            "--device cuda", code=Code.BAD_INPUT)
    return precision


def require_cuda(purpose: str, index: int = 0, count: int = 1):
    """torch, after checking that it has CUDA and ``index + count`` visible devices."""
    torch = env.require_torch(purpose)
    if getattr(torch.version, "cuda", None) is None:
        raise NoCudaError(f"{purpose} needs CUDA, but torch {torch.__version__} is a CPU-only "
                          f"build", hint="install a CUDA build of torch==2.13.0 (see "
                          "CONTRIBUTING.md: the PyTorch index for your CUDA version)")
    if not torch.cuda.is_available():
        raise NoCudaError(f"{purpose} needs a CUDA device, but none is visible (driver not "
                          f"loaded, no GPU, or CUDA_VISIBLE_DEVICES hides them)",
                          hint="check `nvidia-smi`; on a CPU-only machine use --device cpu")
    have = torch.cuda.device_count()
    if index + count > have:
        raise NoCudaError(f"{purpose} needs {index + count} CUDA device(s) (cuda:{index}"
                          f"{'' if count == 1 else f'..{index + count - 1}'}), this machine "
                          f"shows {have}")
    return torch


def require_nccl(purpose: str, workers: int):
    """torch, after checking CUDA with one device per worker and NCCL in torch.distributed."""
    torch = require_cuda(purpose, 0, workers)
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_nccl_available()):
        raise NoCudaError(f"{purpose} needs the NCCL backend, which this torch build lacks")
    return torch


def place(target: Target) -> str:
    """The torch device tensors go to (tests replace this to keep tensors on the CPU)."""
    return target.label


class CpuClock:
    """Host wall clock: marks are ``time.perf_counter()`` values."""

    def mark(self) -> float:
        return time.perf_counter()

    def open(self, key: object) -> float:
        """The mark before one timed call (``key`` names it): the host clock needs no lead."""
        return self.mark()

    def close(self, key: object) -> float:
        return self.mark()

    def sync(self) -> None:
        return None

    @staticmethod
    def seconds(start: float, end: float) -> float:
        return end - start


class CudaClock:
    """CUDA events recorded on the current stream; read after :meth:`sync`.

    :meth:`open`/:meth:`close` time one call's GPU work, not the host's launches: on a fast
    GPU a layer's kernels finish sooner than the host enqueues the next ones, so an event pair
    recorded on an idle stream would time the host's dispatch (the first real-GPU run, an
    H200 at batch 32, gave per-layer sums 1.5-1.9x the fused pass). :meth:`open` therefore
    first enqueues a spin (``torch.cuda._sleep``) about as long as the host took to enqueue
    the same call the last time (x1.5 + 50 us; 2 ms the first time, a warm-up repeat), so
    the opening event fires only once the call's kernels are queued behind it and they run
    back to back."""

    FIRST_HOLD_S = 2e-3
    CALIBRATION_CYCLES = 20_000_000

    def __init__(self, torch: Any, index: int) -> None:
        self.torch, self.index = torch, index
        self.host_s: dict[object, float] = {}
        self._opened: dict[object, float] = {}
        self._cycles_per_s: float | None = None

    def cycles_per_s(self) -> float:
        """GPU clock cycles per second of ``torch.cuda._sleep``, timed once by events."""
        if self._cycles_per_s is None:
            start = self.mark()
            self.torch.cuda._sleep(self.CALIBRATION_CYCLES)
            end = self.mark()
            self.sync()
            self._cycles_per_s = self.CALIBRATION_CYCLES / max(self.seconds(start, end), 1e-6)
        return self._cycles_per_s

    def open(self, key: object) -> Any:
        hold_s = 1.5 * self.host_s.get(key, self.FIRST_HOLD_S / 1.5) + 50e-6
        self.torch.cuda._sleep(max(1, int(hold_s * self.cycles_per_s())))
        self._opened[key] = time.perf_counter()
        return self.mark()

    def close(self, key: object) -> Any:
        ev = self.mark()
        self.host_s[key] = time.perf_counter() - self._opened.pop(key)
        return ev

    def mark(self) -> Any:
        ev = self.torch.cuda.Event(enable_timing=True)
        ev.record()
        return ev

    def sync(self) -> None:
        self.torch.cuda.synchronize(self.index)

    @staticmethod
    def seconds(start: Any, end: Any) -> float:
        return start.elapsed_time(end) / 1000.0  # elapsed_time is in ms


def clock_for(target: Target, torch: Any = None) -> CpuClock | CudaClock:
    if not target.cuda:
        return CpuClock()
    if torch is None:
        import torch
    return CudaClock(torch, target.index)


@dataclass(frozen=True)
class Precision:
    """fp32, or amp: autocast to fp16 (bf16 where tensors sit on the CPU, i.e. only under the
    test fake) for forward passes, and a GradScaler for the fused iteration."""

    name: str
    device_type: str  # "cuda" | "cpu", where the tensors are

    def autocast(self) -> contextlib.AbstractContextManager:
        if self.name != "amp":
            return contextlib.nullcontext()
        import torch

        dtype = torch.float16 if self.device_type == "cuda" else torch.bfloat16
        return torch.autocast(device_type=self.device_type, dtype=dtype)

    def scaler(self) -> Any:
        if self.name != "amp":
            return None
        import torch

        return torch.amp.GradScaler(self.device_type)


def cudnn_settings(torch: Any) -> dict:
    """The cuDNN / TF32 switches that change GPU timings."""
    cudnn = torch.backends.cudnn
    return {"cudnn_enabled": bool(cudnn.enabled), "cudnn_benchmark": bool(cudnn.benchmark),
            "cudnn_deterministic": bool(cudnn.deterministic),
            "cudnn_allow_tf32": bool(cudnn.allow_tf32),
            "matmul_allow_tf32": bool(torch.backends.cuda.matmul.allow_tf32),
            "cudnn_version": cudnn.version() if cudnn.is_available() else None}


def _nvml(index: int) -> dict:
    """Driver, clocks and power limit from nvidia-ml-py (``pynvml``) where installed."""
    try:
        import pynvml
    except ImportError:
        return {"nvml": "nvidia-ml-py not installed (pip install 'dgtraces[gpu]')"}
    try:
        pynvml.nvmlInit()
        try:
            h = pynvml.nvmlDeviceGetHandleByIndex(index)
            driver = pynvml.nvmlSystemGetDriverVersion()
            return {
                "driver": driver.decode() if isinstance(driver, bytes) else driver,
                "sm_clock_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
                "sm_clock_max_mhz": pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM),
                "mem_clock_max_mhz": pynvml.nvmlDeviceGetMaxClockInfo(h,
                                                                      pynvml.NVML_CLOCK_MEM),
                "power_limit_w": pynvml.nvmlDeviceGetPowerManagementLimit(h) / 1000.0,
            }
        finally:
            pynvml.nvmlShutdown()
    except Exception as exc:  # NVML errors vary (no permission, old driver)
        return {"nvml": f"unavailable ({type(exc).__name__}: {str(exc)[:120]})"}


def gpu_metadata(torch: Any, index: int) -> dict:
    """GPU name, memory, SMs, compute capability, CUDA/cuDNN/torch versions, cuDNN
    settings, and NVML's driver/clocks where installed (for ``params_json``)."""
    props = torch.cuda.get_device_properties(index)
    return {
        "gpu": torch.cuda.get_device_name(index),
        "gpu_index": index,
        "gpu_memory_gb": round(props.total_memory / 1e9, 2),
        "sm_count": props.multi_processor_count,
        "compute_capability": f"{props.major}.{props.minor}",
        "cuda": torch.version.cuda,
        "torch": torch.__version__,
        "gpus_visible": torch.cuda.device_count(),
        **cudnn_settings(torch),
        **_nvml(index),
    }


def synchronizer(target: Target, torch: Any = None) -> Callable[[], None]:
    """A no-argument call that waits for the device (a no-op on the CPU)."""
    if not target.cuda:
        return lambda: None
    if torch is None:
        import torch
    return lambda: torch.cuda.synchronize(target.index)


@contextlib.contextmanager
def on_device(target: Target, torch: Any) -> Iterator[None]:
    """Make ``target`` the current CUDA device for the block (nothing on the CPU)."""
    if target.cuda:
        with torch.cuda.device(target.index):
            yield
    else:
        yield
