"""Which GPUs kernels-3 prices, from the shipped datasheet rows and SM counts, and how: own
kernels, the K80 transfer from the closest measured GPU, or the shared prior alone
(docs/reconstruction-kernels3.md, "Devices").
"""

from __future__ import annotations

import dataclasses
import math
from functools import cache

from dgtraces.errors import Code, DgtracesError
from dgtraces.reconstruct.kernels2.gemm import SM_SOURCE, Gpu
from dgtraces.reconstruct.kernels3.kernelrows import SAME_PART

# GPUs priced by transfer from the closest GPU with kernels (item 4 of issue #33: no Kepler
# kernels exist; Habitat's wave scaling, Yu et al., USENIX ATC 2021)
TRANSFERRED = ("k80",)


@dataclasses.dataclass(frozen=True)
class Device:
    """Datasheet constants of one GPU: fp32 and tensor peaks, bandwidth, SMs, boost clock."""

    device: str
    name: str
    peak_fp32_tflops: float
    peak_tensor_tflops: float | None
    bandwidth_gb_s: float
    sm_count: int
    boost_mhz: float
    source: str

    def gpu(self, precision: str) -> Gpu:
        """The engine's constants at ``precision`` (amp: the fp16 tensor peak)."""
        peak = self.peak_fp32_tflops if precision == "fp32" else self.peak_tensor_tflops
        if peak is None:
            raise DgtracesError(f"{self.device} has no fp16 tensor peak: kernels-3 prices it "
                                "in fp32 only", code=Code.NO_CALIBRATION)
        return Gpu(self.device, peak, self.bandwidth_gb_s, self.sm_count, self.name,
                   self.source)


@cache
def devices() -> dict[str, Device]:
    """Every device with datasheet peaks (devices files) and an SM row (``gpu_sms.csv``)."""
    from dgtraces import reference

    sms = {r["device"]: r for r in reference.rows("gpu_sms.csv")}
    out = {}
    for r in reference.device_rows():
        s = sms.get(r["device"])
        if s is None or not r["peak_fp32_tflops"] or not r["mem_bandwidth_gb_s"]:
            continue
        tensor = float(r["peak_fp16_tensor_tflops"]) if r["peak_fp16_tensor_tflops"] else None
        out[r["device"]] = Device(r["device"], r["name"], float(r["peak_fp32_tflops"]), tensor,
                                  float(r["mem_bandwidth_gb_s"]), int(s["sm_count"]),
                                  float(s["boost_mhz"]),
                                  f"{r['source']}; SMs and clock: {s['source']}")
    return out


def get_device(device: str) -> Device:
    """The device's constants; UNKNOWN_DEVICE (with the known ones and a did-you-mean) for a
    device without datasheet peaks or without an SM count in ``gpu_sms.csv``."""
    import difflib

    known = devices()
    if device not in known:
        near = difflib.get_close_matches(device, list(known), n=3)
        hint = f" (did you mean {', '.join(near)}?)" if near else ""
        raise DgtracesError(f"kernels-3 needs datasheet peaks and an SM count ({SM_SOURCE}) "
                            f"for device {device!r}{hint}; known: {', '.join(sorted(known))}",
                            code=Code.UNKNOWN_DEVICE)
    return known[device]


def data_device(device: str) -> str:
    """The device whose kernels and constants price ``device`` (the same part)."""
    return SAME_PART.get(device, device)


def distance(a: Device, b: Device) -> float:
    """|log SM ratio| + |log clock ratio| + |log bandwidth ratio| (closest measured GPU)."""
    return (abs(math.log(a.sm_count / b.sm_count)) + abs(math.log(a.boost_mhz / b.boost_mhz))
            + abs(math.log(a.bandwidth_gb_s / b.bandwidth_gb_s)))


def closest(device: str, measured: tuple[str, ...]) -> str:
    """The measured GPU closest to ``device`` by :func:`distance` (ties: sorted order)."""
    me = get_device(device)
    return min(sorted(measured), key=lambda d: distance(me, get_device(d)))
