"""Measuring the method's error where ground truth exists: this machine's CPU.

The same fitting procedure as for the GPUs (:func:`dgtraces.reconstruct.roofline.fit.fit`)
is applied to the CPU, with the CPU's *measured* peak FLOP/s and copy bandwidth, fitted only on the
whole-model forward and backward totals of AlexNet and ResNet-50 from measured ``runs``.
Then the per-layer predictions are compared with the measured ``layer_timings`` of all three
models and GoogLeNet's totals (never fitted) give the held-out-model error.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from dgtraces.errors import Code, DgtracesError
from dgtraces.reconstruct.roofline.calibration import FITTED_MODELS
from dgtraces.reconstruct.roofline.costmodel import Device, layer_arrays, layer_costs, subset
from dgtraces.reconstruct.roofline.fit import FitResult, Observation, fit

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

HELD_OUT = "googlenet"
MIN_MS = 1e-3  # layers measured below 1 us are left out of the percentage errors


def busy_fraction(interval_s: float = 1.0) -> float | None:
    """Share of all CPUs busy over ``interval_s`` (from /proc/stat; None if unreadable)."""
    def sample():
        with open("/proc/stat", encoding="ascii") as fh:
            vals = [int(x) for x in fh.readline().split()[1:]]
        return sum(vals), vals[3] + vals[4]  # total, idle + iowait

    try:
        t0, i0 = sample()
        time.sleep(interval_s)
        t1, i1 = sample()
    except (OSError, ValueError, IndexError):
        return None
    return 1.0 - (i1 - i0) / max(t1 - t0, 1)


def wait_quiet(max_wait_s: float = 600.0, busy_below: float = 0.2) -> float | None:
    """Wait (up to ``max_wait_s``) until other processes leave the CPUs mostly idle;
    returns the last busy fraction seen, so callers can record how quiet it was."""
    deadline = time.monotonic() + max_wait_s
    busy = busy_fraction()
    while busy is not None and busy >= busy_below and time.monotonic() < deadline:
        time.sleep(4.0)
        busy = busy_fraction()
    return busy


def _best(fn, seconds: float) -> tuple[float, float, int]:
    """Run ``fn`` repeatedly for about ``seconds``; (best, median, count) of its times."""
    times: list[float] = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end or len(times) < 3:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times), float(np.median(times)), len(times)


def measure_peaks(threads: int, *, n: int = 2048, copy_mib: int = 256,
                  seconds: float = 3.0, max_wait_s: float = 600.0) -> dict:
    """Best fp32 GEMM rate (torch.mm, n x n) and copy bandwidth (read + write of a
    ``copy_mib`` MiB tensor) with ``threads`` intra-op threads, each repeated for
    ``seconds``, after waiting up to ``max_wait_s`` for the CPUs to be quiet."""
    from dgtraces.errors import require
    from dgtraces.io.host import cpu_model, loadavg

    torch = require("torch", "collect", "measuring CPU peaks")
    busy = wait_quiet(max_wait_s)
    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        a, b = torch.randn(n, n), torch.randn(n, n)
        torch.mm(a, b)
        g_best, g_med, g_n = _best(lambda: torch.mm(a, b), seconds)
        src = torch.ones(copy_mib * 2**18)
        dst = torch.empty_like(src)
        dst.copy_(src)
        c_best, c_med, c_n = _best(lambda: dst.copy_(src), seconds)
    finally:
        torch.set_num_threads(old)
    nbytes = 2 * src.numel() * 4
    return {"peak_fp32_tflops": 2 * n**3 / g_best / 1e12,
            "mem_bandwidth_gb_s": nbytes / c_best / 1e9,
            "gemm_median_tflops": 2 * n**3 / g_med / 1e12,
            "copy_median_gb_s": nbytes / c_med / 1e9, "reps": min(g_n, c_n),
            "threads": threads, "n": n, "copy_mib": copy_mib, "busy_before": busy,
            "cpu": cpu_model(), "torch": torch.__version__, "loadavg": loadavg()}


def _pct(x) -> str:
    return "unknown" if x is None else f"{100 * x:.0f}%"


def peak_key(threads: int, cores: int) -> str:
    """``devices`` key of measured peaks: ``cpu`` (the runs' device) at all cores, else
    ``cpu-<n>t`` for ``n`` threads (the peaks the ``n``-thread runs could reach)."""
    return "cpu" if threads >= cores else f"cpu-{threads}t"


def device_row(peaks: dict, cores: int) -> dict:
    """A ``devices`` row (provenance=measured) from :func:`measure_peaks`."""
    t = peaks["threads"]
    return {
        "device": peak_key(t, cores), "name": f"{peaks['cpu']} ({t} of {cores} cores)",
        "kind": "cpu",
        "peak_fp32_tflops": peaks["peak_fp32_tflops"], "peak_fp16_tensor_tflops": None,
        "mem_bandwidth_gb_s": peaks["mem_bandwidth_gb_s"], "memory_gb": None,
        "provenance": "measured",
        "source": (f"dgtraces.reconstruct.roofline.cpu.measure_peaks: best of {peaks['reps']} "
                   f"torch.mm {peaks['n']}x{peaks['n']} fp32 and {peaks['copy_mib']} MiB copies, "
                   f"{peaks['threads']} thread(s), torch {peaks['torch']}"),
        "notes": (f"medians {peaks['gemm_median_tflops']:.4f} TFLOP/s, "
                  f"{peaks['copy_median_gb_s']:.1f} GB/s; CPUs busy before "
                  f"{_pct(peaks.get('busy_before'))}, loadavg after {peaks['loadavg']}; "
                  "shared machine: best-of times are the peak figures"),
    }


def device_from_row(row) -> Device:
    return Device(str(row["device"]), float(row["peak_fp32_tflops"]),
                  float(row["mem_bandwidth_gb_s"]), None, "cpu", str(row["name"]),
                  str(row["source"]), str(row["provenance"]))


@dataclass
class CpuValidation:
    """The method's measured error on the CPU at one thread count."""

    fit: FitResult
    threads: int | None
    device: dict  # the measured ``devices`` row used
    runs_used: int
    per_layer: "pd.DataFrame"  # run_id, model, batch_size, layer, kind, direction, meas, pred
    held_out: "pd.DataFrame"  # model, batch_size, measured_ms, predicted_ms, error_pct
    notes: list[str] = field(default_factory=list)

    def mape(self, by: str | None = None):
        """Mean absolute percentage error over (layer, direction) pairs measured >= 1 us."""
        df = self.per_layer[self.per_layer["measured_ms"] >= MIN_MS]
        ape = (df["predicted_ms"] / df["measured_ms"] - 1).abs() * 100
        if by is None:
            return float(ape.mean())
        return ape.groupby(df[by]).mean()

    def median_ratio(self, by: str):
        """Median of reconstructed / measured per group (below 1: the model is too fast)."""
        df = self.per_layer[self.per_layer["measured_ms"] >= MIN_MS]
        return (df["predicted_ms"] / df["measured_ms"]).groupby(df[by]).median()

    def weighted_error_pct(self) -> float:
        """sum |pred - meas| / sum meas over all layers (time-weighted)."""
        df = self.per_layer
        return float(100 * (df["predicted_ms"] - df["measured_ms"]).abs().sum()
                     / df["measured_ms"].sum())


def select_runs(runs: "pd.DataFrame", threads: int | None = None
                ) -> tuple["pd.DataFrame", int | None]:
    """Measured, unflagged fp32 CPU runs; one thread count (``threads`` or the most common)."""
    sel = runs[(runs["provenance"] == "measured") & (runs["device_kind"] == "cpu")
               & (runs["precision"] == "fp32") & ~runs["flagged"].astype(bool)]
    if sel.empty:
        raise DgtracesError("no measured, unflagged fp32 CPU runs to validate on",
                            code=Code.NO_CALIBRATION)
    if threads is None and sel["threads"].notna().any():
        threads = int(sel["threads"].mode().iloc[0])
    if threads is not None:
        sel = sel[sel["threads"] == threads]
    return sel, threads


def _tuples(df: "pd.DataFrame") -> list[Any]:
    """The rows as namedtuples (fields named by the columns, so typed Any)."""
    return list(df.itertuples())


def validate_cpu(runs: "pd.DataFrame", timings: "pd.DataFrame", device: dict,
                 threads: int | None = None) -> CpuValidation:
    """Fit on AlexNet/ResNet-50 totals, compare per layer (all models) and GoogLeNet totals."""
    import pandas as pd

    sel, threads = select_runs(runs, threads)
    dev = device_from_row(device)
    measured_layers = {m: set(timings.loc[timings["run_id"].isin(
        sel.loc[sel["model"] == m, "run_id"]), "layer"]) for m in sel["model"].unique()}
    arrays = {m: subset(layer_arrays(m), names) for m, names in measured_layers.items()}
    obs = [Observation(r.model, int(r.batch_size), phase, float(getattr(r, f"{phase}_ms")),
                       r.run_id)
           for r in _tuples(sel) if r.model in FITTED_MODELS
           for phase in ("fwd", "bwd") if pd.notna(getattr(r, f"{phase}_ms"))]
    if not obs:
        raise DgtracesError("no AlexNet/ResNet-50 totals among the measured CPU runs",
                            code=Code.NO_CALIBRATION)
    result = fit(dev, obs, arrays=arrays)
    rows, held = [], []
    for r in _tuples(sel):
        la = arrays[r.model]
        costs = layer_costs(la, result.params, dev, int(r.batch_size))
        pred = {"fwd": dict(zip(la.layer, costs.fwd_ms, strict=True)),
                "bwd": dict(zip(la.layer, costs.bwd_ms, strict=True))}
        kind = dict(zip(la.layer, la.kind, strict=True))
        for t in _tuples(timings[timings["run_id"] == r.run_id]):
            for d in ("fwd", "bwd"):
                meas = getattr(t, f"{d}_ms")
                if pd.notna(meas):
                    rows.append({"run_id": r.run_id, "model": r.model,
                                 "batch_size": int(r.batch_size), "layer": t.layer,
                                 "kind": kind[t.layer], "direction": d,
                                 "measured_ms": float(meas), "predicted_ms": pred[d][t.layer]})
        if r.model not in FITTED_MODELS and pd.notna(r.fwd_ms) and pd.notna(r.bwd_ms):
            meas = float(r.fwd_ms + r.bwd_ms)
            p = float(costs.fwd_ms.sum() + costs.bwd_ms.sum())
            held.append({"model": r.model, "batch_size": int(r.batch_size),
                         "measured_ms": meas, "predicted_ms": p,
                         "error_pct": 100 * (p / meas - 1)})
    notes = []
    if HELD_OUT not in set(sel["model"]):
        notes.append("no measured GoogLeNet run: held-out error not available")
    held_df = pd.DataFrame(held, columns=["model", "batch_size", "measured_ms",
                                          "predicted_ms", "error_pct"])
    return CpuValidation(result, threads, dict(device), len(sel), pd.DataFrame(rows), held_df,
                         notes)


def cpu_validations(frames: dict, missing: list[str]) -> list[CpuValidation]:
    """One validation per thread count of the measured CPU runs that has a measured
    peaks row (:func:`dgtraces.reconstruct.roofline.cpu.peak_key`); gaps go to ``missing``."""
    runs, lt, dev = (frames.get(t) for t in ("runs", "layer_timings", "devices"))
    if runs is None or lt is None:
        missing.append("CPU validation: no runs/layer_timings in the release")
        return []
    cpu = runs[(runs["provenance"] == "measured") & (runs["device_kind"] == "cpu")]
    if cpu.empty or cpu["threads"].isna().all():
        missing.append("CPU validation: no measured CPU runs with a thread count")
        return []
    rows = {} if dev is None else {r["device"]: r for r in dev.to_dict("records")
                                    if r["kind"] == "cpu" and r["provenance"] == "measured"}
    out = []
    cores = int(cpu["cores"].max())
    for t in sorted(int(x) for x in cpu["threads"].dropna().unique()):
        key = peak_key(t, cores)
        if key not in rows:
            missing.append(f"CPU validation at {t} thread(s): no measured devices row "
                           f"{key!r} (peaks); the v0.3.0 recipe's cpu_devices step measures them")
            continue
        try:
            out.append(validate_cpu(runs, lt, rows[key], t))
        except DgtracesError as exc:
            missing.append(f"CPU validation at {t} thread(s): {exc.message}")
    return out
