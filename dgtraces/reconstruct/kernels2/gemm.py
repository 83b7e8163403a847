"""Cost model ``kernels-2.0``: GEMM kernels priced by waves of thread-block tiles on the
device's SMs (pre-registered in docs/reconstruction-kernels.md).

This module holds the GEMM engine and the implicit-GEMM shapes of each convolution
direction; :mod:`.network` applies it to a network, :mod:`.stage1` fits it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from dgtraces.errors import Code, DgtracesError

# (a along M, b along N); amendment A2 added the transposed and thin tiles
TILES = ((128, 128), (128, 64), (64, 128), (64, 64), (64, 32), (32, 64), (128, 16), (16, 128))
SPLITS = (1, 2, 4, 8, 16, 32, 64)
MIN_SPLIT_K = 256  # a split-K chunk keeps at least this much reduction
E_MEM_STAGE1 = 0.8  # fixed in stage 1 (BabelStream-class fraction of datasheet bandwidth)
# efficiency classes of a GEMM: which fitted efficiency it runs at
CLASSES = ("fwd", "dgrad", "wgrad", "wino", "gemm")
SM_SOURCE = "dgtraces/reference/gpu_sms.csv"


@dataclass(frozen=True)
class Gpu:
    """Datasheet constants of one GPU."""

    device: str
    peak_tflops: float
    bandwidth_gb_s: float
    sm_count: int
    name: str = ""
    source: str = ""


@dataclass(frozen=True)
class KernelParams:
    """Global kernel constants (stage 1) and a device's stage-2 constants."""

    e_fwd: float
    e_dgrad: float
    e_wgrad: float
    e_wino: float
    e_gemm: float
    gamma: float
    t0_us: float
    e_mem: float = E_MEM_STAGE1
    kappa: float = 1.0
    h_us: float = 0.0

    def eff(self) -> np.ndarray:
        """Efficiency per class of :data:`CLASSES`, times the device scale ``kappa``."""
        return self.kappa * np.array([self.e_fwd, self.e_dgrad, self.e_wgrad, self.e_wino,
                                      self.e_gemm])

    def mem_floor_us(self) -> float:
        """Per-kernel floor of memory-bound kernels (2.0: the GEMM floor ``t0``)."""
        return self.t0_us

    def as_dict(self) -> dict:
        return asdict(self)

    def describe(self) -> str:
        return ", ".join(f"{k}={v:.4g}" for k, v in self.as_dict().items())


def gpus() -> dict[str, Gpu]:
    """Every device with datasheet peaks (devices tables) and an SM row (``gpu_sms.csv``)."""
    from dgtraces import reference

    sms = {r["device"]: r for r in reference.rows("gpu_sms.csv")}
    out = {}
    for r in reference.device_rows():
        if r["device"] in sms:
            out[r["device"]] = Gpu(r["device"], float(r["peak_fp32_tflops"]),
                                   float(r["mem_bandwidth_gb_s"]),
                                   int(sms[r["device"]]["sm_count"]), r["name"],
                                   f"{r['source']}; SMs: {sms[r['device']]['source']}")
    return out


def get_gpu(device: str) -> Gpu:
    """The GPU's constants; UNKNOWN_DEVICE lists the devices that can be modelled;
    NO_CALIBRATION for a device with datasheet peaks but no SM count."""
    import difflib

    from dgtraces import reference

    known = gpus()
    if device not in known and device in {r["device"] for r in reference.device_rows()}:
        raise DgtracesError(f"{device!r} has datasheet peaks but no SM count in {SM_SOURCE}: "
                            "nothing constrains its kernels; an SM count (datasheet) would, "
                            "and so would its DeepBench kernels or calibration.csv throughputs",
                            code=Code.NO_CALIBRATION)
    if device not in known:
        near = difflib.get_close_matches(device, list(known), n=3)
        hint = f" (did you mean {', '.join(near)}?)" if near else ""
        raise DgtracesError(f"no datasheet peaks and SM count for device {device!r}{hint}; "
                            f"known: {', '.join(sorted(known))}", code=Code.UNKNOWN_DEVICE)
    return known[device]


@dataclass
class Gemms:
    """A batch of GEMM kernels as arrays (one entry per kernel)."""

    m: np.ndarray
    n: np.ndarray
    k: np.ndarray
    g: np.ndarray  # independent GEMMs in the kernel (conv groups; 16 for Winograd)
    cls: np.ndarray  # index into CLASSES
    split: np.ndarray  # bool: split-K allowed (every GEMM since amendment A1)
    extra_bytes: np.ndarray  # bytes moved besides the operands (Winograd transforms)
    peak: np.ndarray  # FLOP/s of the kernel's GPU
    bw: np.ndarray  # bytes/s of the kernel's GPU
    sm: np.ndarray
    tags: list = field(default_factory=list)


def gemm_list(rows: list[tuple], gpu_of) -> Gemms:
    """``rows`` of (m, n, k, g, class, split, extra_bytes, device) -> :class:`Gemms`."""
    cols = list(zip(*rows, strict=True)) if rows else [()] * 8
    g = [gpu_of(d) for d in cols[7]]
    f = np.asarray
    return Gemms(f(cols[0], float), f(cols[1], float), f(cols[2], float), f(cols[3], float),
                 f([CLASSES.index(c) for c in cols[4]], int), f(cols[5], bool),
                 f(cols[6], float), f([x.peak_tflops * 1e12 for x in g], float),
                 f([x.bandwidth_gb_s * 1e9 for x in g], float),
                 f([x.sm_count for x in g], float))


def gemm_seconds(G: Gemms, p: KernelParams) -> np.ndarray:
    """Time of each kernel (s): the fastest tile / split-K candidate, plus ``t0``."""
    eff = p.eff()[G.cls]
    mem_rate = p.e_mem * G.bw
    best = np.full(G.m.shape, np.inf)
    for a, b in TILES:
        rho = ((a * b / (a + b)) / 64.0) ** p.gamma
        tiles = np.ceil(G.m / a) * np.ceil(G.n / b) * G.g
        for s in SPLITS:
            ok = (s == 1) | (G.split & (G.k / s >= MIN_SPLIT_K))
            waves = np.ceil(tiles * s / G.sm)  # tiles on the busiest SM (amendment A3)
            t_c = waves * 2.0 * a * b * np.ceil(G.k / s) / (eff * rho * G.peak / G.sm)
            moved = 4.0 * (G.m * G.k + G.k * G.n + G.m * G.n) * G.g
            if s > 1:
                moved = moved + 2.0 * s * G.m * G.n * G.g * 4.0
            t = np.maximum(t_c, moved / mem_rate)
            best = np.where(ok, np.minimum(best, t), best)
    return best + G.extra_bytes / mem_rate + p.t0_us * 1e-6


@dataclass(frozen=True)
class ConvShape:
    """A convolution as cuDNN sees it (per-group channels are derived)."""

    n: int
    c: int
    h: int
    w: int
    k: int
    r: int
    s: int
    stride_h: int
    stride_w: int
    p: int
    q: int
    group: int = 1
    pad_h: int = 0
    pad_w: int = 0

    def winograd(self, direction: str) -> bool:
        """cuDNN's choice as DeepBench's algorithm column shows it: 3x3 stride 1 with at
        least 64 input channels of the direction's convolution (weight gradients never)."""
        if (self.r, self.s, self.stride_h, self.stride_w) != (3, 3, 1, 1):
            return False
        cin = {"fwd": self.c, "dgrad": self.k}.get(direction, 0) // self.group
        return cin >= 64


def conv_gemm(cs: ConvShape, direction: str, device: str) -> tuple:
    """The GEMM row (for :func:`gemm_list`) of one direction of a convolution."""
    g, c, k = cs.group, cs.c // cs.group, cs.k // cs.group
    if cs.winograd(direction):
        tiles = cs.n * -(-cs.p // 2) * -(-cs.q // 2)
        cin, cout = (c, k) if direction == "fwd" else (k, c)
        extra = 2.0 * 4 * 16 * tiles * (cin + cout) * g
        return (tiles, cout, cin, 16 * g, "wino", True, extra, device)
    if direction == "fwd":
        return (cs.n * cs.p * cs.q, k, c * cs.r * cs.s, g, "fwd", True, 0.0, device)
    if direction == "dgrad":
        taps = -(-cs.r // cs.stride_h) * -(-cs.s // cs.stride_w)
        return (cs.n * cs.h * cs.w, c, k * taps, g, "dgrad", True, 0.0, device)
    if direction == "wgrad":
        return (k, c * cs.r * cs.s, cs.n * cs.p * cs.q, g, "wgrad", True, 0.0, device)
    raise DgtracesError(f"direction must be fwd, dgrad or wgrad, got {direction!r}",
                        code=Code.BAD_INPUT)


def fc_gemm(batch: int, n_in: int, n_out: int, direction: str, device: str) -> tuple:
    """cuBLAS GEMM of one direction of a fully connected layer."""
    mnk = {"fwd": (batch, n_out, n_in), "dgrad": (batch, n_in, n_out),
           "wgrad": (n_out, n_in, batch)}[direction]
    return (*mnk, 1, "gemm", True, 0.0, device)
