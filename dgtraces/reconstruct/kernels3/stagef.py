"""Stage F of kernels-3: the memory constants of the GPUs with per-layer traces and the
per-layer overhead of each framework family, fitted jointly on the framework-level sources
(docs/reconstruction-kernels3.md, "Stage F"). Every observation is reduced to what it costs
before those constants are chosen (GEMM-class ms, bytes over datasheet bandwidth, memory-bound
kernels, layer-directions), so that a fit, a fold or a leave-one-out is a few milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dgtraces.errors import Code, DgtracesError
from dgtraces.reconstruct.kernels2.stage2_traces import Box
from dgtraces.reconstruct.roofline.fit import levenberg_marquardt

MEM_DEVICES = ("v100", "titanx-maxwell")  # GPUs whose per-layer traces fit e_mem and floor
POOLED = "pooled"  # every other GPU: the means of the fitted ones
E_MEM, FLOOR_US, OVERHEAD_US = (0.05, 1.0), (0.5, 50.0), (0.0, 1000.0)
STARTS = ((0.8, 5.0, 10.0), (0.5, 2.0, 30.0), (0.9, 15.0, 3.0))  # (e_mem, floor, overhead)
MAX_ITER, TOL = 100, 1e-8


@dataclass(frozen=True)
class FRows:
    """Stage-F observations (arrays of equal length). ``memory``: the row's GPU for the memory
    constants (a fitted GPU or :data:`POOLED`); ``dirs``: layer-directions it runs (each
    carries the family's overhead once); ``block``: its weight block; ``fold``: its
    pre-registered fold (traces) or ''; ``label``: what it is (for the report)."""

    block: np.ndarray
    memory: np.ndarray
    family: np.ndarray
    gemm_ms: np.ndarray
    bytes_ms: np.ndarray  # bytes / datasheet bandwidth, in ms (at e_mem = 1)
    kernels: np.ndarray
    dirs: np.ndarray
    measured_ms: np.ndarray
    fold: np.ndarray
    label: np.ndarray
    mem_only: np.ndarray  # bool: a memory-bound layer row (its bytes set the fitted range)
    bytes_: np.ndarray

    def __len__(self) -> int:
        return len(self.measured_ms)

    def select(self, keep: np.ndarray) -> "FRows":
        return FRows(**{f: getattr(self, f)[keep] for f in self.__dataclass_fields__})

    @staticmethod
    def concat(parts: list["FRows"]) -> "FRows":
        return FRows(**{f: np.concatenate([getattr(p, f) for p in parts])
                        for f in FRows.__dataclass_fields__})


def frows(block: str, memory: str, family: str, gemm_ms, bytes_, bandwidth_gb_s: float,
          kernels, dirs, measured_ms, fold=None, label=None, mem_only=None) -> FRows:
    """Observations of one block (broadcast scalars)."""
    m = np.asarray(measured_ms, float)
    n = len(m)
    b = np.broadcast_to(np.asarray(bytes_, float), (n,)).copy()

    def arr(v, dtype, default):
        return np.broadcast_to(np.asarray(default if v is None else v, dtype), (n,)).copy()

    return FRows(arr(block, object, block), arr(memory, object, memory),
                 arr(family, object, family), arr(gemm_ms, float, 0.0),
                 b / (bandwidth_gb_s * 1e9) * 1e3, arr(kernels, float, 0.0),
                 arr(dirs, float, 0.0), m, arr(fold, object, ""), arr(label, object, ""),
                 arr(mem_only, bool, False), b)


@dataclass(frozen=True)
class StageF:
    """Fitted memory constants per GPU and overhead per family (the means stand in for the
    rest)."""

    e_mem: dict[str, float]
    floor_us: dict[str, float]
    overhead_us: dict[str, float]  # family -> us; absent families: :meth:`overhead`

    def memory(self, device: str) -> tuple[float, float]:
        """(e_mem, floor_us) of ``device``: its own where fitted, else the pooled means."""
        if device in self.e_mem:
            return self.e_mem[device], self.floor_us[device]
        return (float(np.mean(list(self.e_mem.values()))),
                float(np.mean(list(self.floor_us.values()))))

    def overhead(self, family: str | None) -> float:
        """``family``'s overhead; the mean of the fitted families for one without data (or
        None, a profile that runs on any family); 0 for ``none``."""
        if family == "none":
            return 0.0
        if family in self.overhead_us:
            return self.overhead_us[family]
        return float(np.mean(list(self.overhead_us.values())))


def predict(rows: FRows, f: StageF) -> np.ndarray:
    """Each observation's time (ms) under ``f`` (each GPU's and family's constants looked up
    once, not once per row: the fit calls this at every step)."""
    mem = {d: f.memory(d) for d in set(rows.memory)}
    over = {x: f.overhead(x) for x in set(rows.family)}
    e = np.array([mem[d][0] for d in rows.memory])
    floor = np.array([mem[d][1] for d in rows.memory])
    o = np.array([over[x] for x in rows.family])
    return rows.gemm_ms + rows.bytes_ms / e + rows.kernels * floor * 1e-3 + rows.dirs * o * 1e-3


def _box(devices: list[str], families: list[str]) -> Box:
    names = ([f"e_mem:{d}" for d in devices] + [f"floor:{d}" for d in devices]
             + [f"o:{f}" for f in families])
    lo = [E_MEM[0]] * len(devices) + [FLOOR_US[0]] * len(devices) + [OVERHEAD_US[0]] * len(
        families)
    hi = [E_MEM[1]] * len(devices) + [FLOOR_US[1]] * len(devices) + [OVERHEAD_US[1]] * len(
        families)
    return Box(tuple(names), np.array(lo, float), np.array(hi, float))


def _stage(v: dict[str, float], devices: list[str], families: list[str]) -> StageF:
    return StageF({d: v[f"e_mem:{d}"] for d in devices}, {d: v[f"floor:{d}"] for d in devices},
                  {f: v[f"o:{f}"] for f in families})


def fit(rows: FRows, keep: np.ndarray | None = None) -> StageF:
    """Stage F on ``rows`` (``keep``: a mask of the rows in the fit): block weights 1 / n,
    Levenberg-Marquardt on sigmoid-mapped parameters, best of the three starts."""
    r = rows if keep is None else rows.select(keep)
    if not len(r):
        raise DgtracesError("stage F has no observations to fit", code=Code.NO_CALIBRATION)
    devices = [d for d in MEM_DEVICES if (r.memory == d).any()]
    families = sorted({str(f) for f in r.family})
    if not devices:
        raise DgtracesError("stage F needs per-layer traces of v100 or titanx-maxwell",
                            code=Code.NO_CALIBRATION)
    box = _box(devices, families)
    counts = {b: int((r.block == b).sum()) for b in set(r.block)}
    weight = np.sqrt(1.0 / np.array([counts[b] for b in r.block]))
    log_m = np.log(r.measured_ms)

    def fun(x):
        return (np.log(predict(r, _stage(box.values(x), devices, families))) - log_m) * weight

    best = None
    for e, fl, o in STARTS:
        start = {n: (e if n.startswith("e_mem") else fl if n.startswith("floor") else o)
                 for n in box.names}
        x, cost, _ = levenberg_marquardt(fun, box.theta(start), max_iter=MAX_ITER, tol=TOL)
        if best is None or cost < best[1]:
            best = (x, cost)
    assert best is not None
    return _stage(box.values(best[0]), devices, families)
