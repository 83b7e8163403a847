"""What one worker's DAG does not see (``--overheads``), each a separate switchable term added
after the DAG, pre-registered in docs/predictor-overheads.md:

* ``sync``: every step waits for the slowest of P workers,
  ``sync_ms = cv x T1 x e(P)`` with ``e(P)`` the expected maximum of P standard normals,
  ``T1`` the one-worker iteration and ``cv`` a measured per-iteration spread (default: the
  ProfilerStep durations of the shipped Kineto trace, :func:`kineto_step_cv`);
* ``input``: a node's decode pipeline shared by its GPUs,
  ``input_ms = max(0, g x b x 1000 / R - T_dag)`` with ``R`` the node's measured decode rate
  (``--host-decode-img-s``), or ``g x io_ms`` of a measured trace in place of the first term;
  a loader that decodes nowhere on the host (:data:`LOADERS`: synthetic input, DALI on the
  GPU) gives 0 (revision I2, issue #35 item 3).

A term asked for without its measurement is MISSING_MEASUREMENT naming what to supply.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import TYPE_CHECKING

from ..errors import Code, DgtracesError, Failure
from ..values import finite_results
from .captions import kind_of, requote
from .dag import Prediction
from .trace import Trace

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

TERMS = ("sync", "input")
# Terms that met the pre-registered adoption rule (docs/predictor-overheads.md, Results;
# tests/predict/test_frameworks_overheads.py re-runs the evaluation): ``measured`` means these.
# ``input`` has no measured published or CPU row to be judged on, so it stays off.
ADOPTED = ("sync",)
CHOICES = ("none", "measured") + TERMS  # measured = the adopted terms
KINETO_FILE = "gpu/kineto/resnet50_v100_b32_num_workers_0.pt.trace.json.gz"
DEFAULT = "measured"  # the commands' --overheads default (issue #35 item 1)


@dataclass(frozen=True)
class Loader:
    """An input pipeline: where it decodes (``none``: synthetic input, ``gpu``, ``cpu``,
    ``unknown``) and the source of what the input term knows of it. No loader has a published
    or measured decode rate (docs/predictor-overheads.md, I2), so none is held: a host
    decoder's rate comes only from ``--host-decode-img-s`` or a trace's measured io."""

    name: str
    decodes_on: str
    source: str


_NO_RATE = "no published or measured decode rate for this loader (I2)"
LOADERS: dict[str, Loader] = {x.name: x for x in (
    Loader("synthetic", "none", "synthetic input: no input pipeline"),
    Loader("dali-gpu", "gpu", "DALI's mixed decoder: nvJPEG on the GPU, inside each "
           "GPU's own (calibrated) work; nothing shared on the host"),
    Loader("dali-cpu", "cpu", _NO_RATE),
    Loader("dali", "unknown", "DALI, CPU or GPU decoding not stated; " + _NO_RATE),
    Loader("pytorch-dataloader", "cpu", _NO_RATE),
    Loader("tf-data", "cpu", _NO_RATE),
    Loader("mxnet-recordio", "cpu", _NO_RATE),
    Loader("unknown", "unknown", "loader not known; " + _NO_RATE),
)}


def host_free(loader: str | None) -> Loader | None:
    """The loader when it puts no decode work on the host (synthetic, GPU decode), else
    None; an unknown name is BAD_INPUT listing the loaders."""
    if loader is None:
        return None
    if loader not in LOADERS:
        raise _bad("loader", "unknown input loader", " | ".join(LOADERS), loader)
    x = LOADERS[loader]
    return x if x.decodes_on in ("none", "gpu") else None


@dataclass(frozen=True)
class Overheads:
    """Which terms are on and their measurements (None = not given)."""

    terms: frozenset[str] = frozenset()
    iteration_cv: float | None = None  # per-iteration spread; None = the Kineto figure
    host_decode_img_s: float | None = None  # decode rate of one node's input pipeline

    def __post_init__(self) -> None:
        unknown = sorted(set(self.terms) - set(TERMS))
        if unknown:
            raise _bad("overheads", "unknown overhead term", " | ".join(CHOICES), unknown[0])
        for name in ("iteration_cv", "host_decode_img_s"):
            v = getattr(self, name)
            if v is not None and not (isinstance(v, (int, float)) and 0 <= v < math.inf
                                      and (v > 0 or name == "iteration_cv")):
                rate = name != "iteration_cv"
                raise _bad(name, f"must be a finite number {'> 0' if rate else '>= 0'}",
                           "> 0" if rate else ">= 0", v)

    @classmethod
    def parse(cls, text: str | None, **measurements) -> Overheads:
        """``none`` | ``measured`` (the adopted terms) | a comma list of terms."""
        words = [w.strip() for w in (text or "none").split(",") if w.strip()]
        bad_words = [w for w in words if w not in CHOICES]
        if bad_words:
            raise _bad("overheads", "unknown overhead term", " | ".join(CHOICES), bad_words[0])
        if "none" in words and len(set(words)) > 1:  # "measured,none" contradicts itself
            raise _bad("overheads", "none cannot be combined with other terms",
                       "none alone, or a comma list of " + " | ".join(CHOICES[1:]), text)
        terms = (set(words) - {"none", "measured"}) | (set(ADOPTED) if "measured" in words
                                                        else set())
        return cls(frozenset(terms), **measurements)

    @property
    def label(self) -> str:
        return ",".join(t for t in TERMS if t in self.terms) or "none"


def _bad(field: str, message: str, expected: str, found, code: Code = Code.BAD_INPUT):
    return DgtracesError(f"{field}: {message}", code=code,
                         failures=[Failure(code, message, column=field, expected=expected,
                                           found=repr(found))])


@lru_cache(maxsize=1024)
def expected_max_normal(p: int) -> float:
    """E[max of ``p`` independent standard normals] (0 for p <= 1), by the trapezoid rule
    over [-10, 10] of x p phi(x) Phi(x)^(p-1); kept per ``p`` (8,001 points take ~4 ms, and
    the published evaluation asks the same few worker counts row after row)."""
    if p <= 1:
        return 0.0
    n, lo, hi = 8000, -10.0, 10.0
    h = (hi - lo) / n
    total = 0.0
    for k in range(n + 1):
        x = lo + k * h
        f = x * p * math.exp(-x * x / 2) / math.sqrt(2 * math.pi) \
            * (0.5 * (1 + math.erf(x / math.sqrt(2)))) ** (p - 1)
        total += f * (0.5 if k in (0, n) else 1.0)
    return total * h


@lru_cache(maxsize=1)
def kineto_step_cv() -> tuple[float, int, str]:
    """(cv, steps, source): sample standard deviation / mean of every ``ProfilerStep#``
    duration of the shipped Kineto trace (independent of any scaling table)."""
    import gzip
    import json
    import statistics

    from ..reference import path as ref_path

    try:
        file = ref_path(KINETO_FILE)
    except DgtracesError:
        raise _bad("iteration_cv", f"the Kineto trace {KINETO_FILE} is not shipped here",
                   "--iteration-cv X (a measured per-iteration spread)", KINETO_FILE,
                   code=Code.MISSING_MEASUREMENT) from None
    with gzip.open(file, "rt") as fh:
        events = json.load(fh)["traceEvents"]
    steps = [float(e["dur"]) for e in events
             if str(e.get("name", "")).startswith("ProfilerStep#") and e.get("ph") == "X"]
    if len(steps) < 2:
        raise _bad("iteration_cv", "the Kineto trace has fewer than 2 steps", ">= 2 steps",
                   len(steps), code=Code.MISSING_MEASUREMENT)
    cv = statistics.stdev(steps) / statistics.mean(steps)
    return cv, len(steps), (f"ProfilerStep durations of dgtraces/reference/{KINETO_FILE} "
                            f"({len(steps)} steps; pytorch/kineto sample, measured)")


def sync_term(spec: Overheads, workers: int, t1_ms: float) -> dict:
    if spec.iteration_cv is not None:
        cv, source = float(spec.iteration_cv), "--iteration-cv (given)"
    else:
        cv, _, source = kineto_step_cv()
    e = expected_max_normal(workers)
    return {"ms": cv * t1_ms * e, "cv": cv, "e_max": e, "t1_ms": t1_ms,
            "formula": "cv x T1 x E[max of P standard normals]", "source": source}


def input_ms_needed(spec: Overheads, trace: Trace, per_node: int,
                    loader: str | None = None) -> tuple:
    """(ms the node's pipeline needs per iteration, how); None ms when the loader puts no
    decode work on the host (synthetic input, GPU decoding)."""
    free = host_free(loader)
    if free is not None:
        return None, f"{free.name}: {free.source}"
    if spec.host_decode_img_s is not None:
        return (per_node * trace.batch_size * 1000.0 / spec.host_decode_img_s,
                f"{per_node} GPUs x {trace.batch_size} img / {spec.host_decode_img_s:g} img/s "
                "(--host-decode-img-s)")
    if trace.io_ms > 0 and trace.provenance == "measured":
        return per_node * trace.io_ms, f"{per_node} x the trace's measured io_ms"
    raise _no_decode_rate()


def _no_decode_rate() -> DgtracesError:
    return _bad("host_decode_img_s", "the input term needs the node's measured decode rate "
                "(give --host-decode-img-s, or a trace with measured io)",
                "--host-decode-img-s R", None, code=Code.MISSING_MEASUREMENT)


def validation_spec(spec: Overheads, trace: Trace,
                    loader: str | None = None) -> tuple[Overheads, str]:
    """For validation rows: ``spec`` without the input term where the row has no input
    measurement (no decode rate, no measured io, a host decoder), and how the term was
    treated; ``predict`` instead raises MISSING_MEASUREMENT."""
    if "input" not in spec.terms:
        return spec, ""
    free = host_free(loader)
    if free is not None:
        return spec, f"{free.name}: 0"
    if spec.host_decode_img_s is not None or (trace.io_ms > 0 and trace.provenance ==
                                              "measured"):
        return spec, "applied"
    return replace(spec, terms=spec.terms - {"input"}), "no measurement (no decode rate)"


def apply_overheads(pred: Prediction, trace: Trace, spec: Overheads,
                    loader: str | None = None) -> Prediction:
    """``pred`` with the terms of ``spec`` added to its iteration (breakdown ``sync_ms``,
    ``input_ms``; ``overheads`` in the JSON); speedup against one worker with the same
    terms. An empty spec returns ``pred`` unchanged."""
    if not spec.terms:
        return pred
    p = pred.workers
    t1 = pred.speedup_vs_1 * pred.iter_ms / p if pred.iter_ms > 0 else 0.0
    detail: dict = {"terms": spec.label}
    sync = inp = inp1 = 0.0
    if "sync" in spec.terms:
        d = sync_term(spec, p, t1)
        sync, detail["sync"] = d["ms"], d
    if "input" in spec.terms:
        per_node = int(pred.cluster.get("gpus_per_node", 1))
        need, how = input_ms_needed(spec, trace, min(per_node, p), loader)
        if need is not None:
            inp = max(0.0, need - pred.iter_ms)
            need1 = need / min(per_node, p)
            inp1 = max(0.0, need1 - t1)
        detail["input"] = {"ms": inp, "needed_ms": need, "how": how,
                           "formula": "max(0, g x b x 1000 / R - T_dag)"}
    it = pred.iter_ms + sync + inp
    single = t1 + inp1
    finite_results("modelled iteration with overheads", {"iter_ms": it, "sync_ms": sync,
                                                         "input_ms": inp})
    speedup = p * single / it if it > 0 else 1.0
    breakdown = dict(pred.breakdown, sync_ms=sync, input_ms=inp)
    notes = pred.notes
    if "sync" in spec.terms:  # quote the validation of the same terms
        notes = requote(notes, kind_of(trace.device), "sync", pred.cluster, None)
    notes = notes + (f"overheads {spec.label} added after the DAG (pre-registered, "
                     "docs/predictor-overheads.md)",)
    left = [t for t in ADOPTED if t not in spec.terms]
    if left:  # e.g. --overheads input: the adopted sync term is off, say so
        notes = notes + (f"the adopted term{'s' if len(left) > 1 else ''} "
                         f"{', '.join(left)} not added (not in --overheads {spec.label}; "
                         f"'measured,{spec.label}' adds {'them' if len(left) > 1 else 'it'})",)
    return replace(pred, iter_ms=it, throughput_img_s=p * pred.batch_size * 1000.0 / it,
                   speedup_vs_1=speedup, efficiency=speedup / p, breakdown=breakdown,
                   notes=notes, overheads=detail)


def check_sweep_measurements(spec: Overheads) -> None:
    """MISSING_MEASUREMENT when a sweep asks for the input term without a decode rate."""
    if "input" in spec.terms and spec.host_decode_img_s is None:
        raise _no_decode_rate()


def apply_overheads_frame(df: pd.DataFrame, spec: Overheads) -> pd.DataFrame:
    """The terms of ``spec`` on sweep rows (columns workers, gpus_per_node, batch_size,
    iter_ms, speedup_vs_1), as :func:`apply_overheads` does for one prediction; adds
    ``sync_ms``, ``input_ms`` and ``overheads``. The input term needs ``host_decode_img_s``
    (sweep rows carry no measured io)."""
    import numpy as np

    if not spec.terms:
        return df
    check_sweep_measurements(spec)
    p = df["workers"].to_numpy(float)
    it = df["iter_ms"].to_numpy(float)
    t1 = df["speedup_vs_1"].to_numpy(float) * it / p
    sync = np.zeros_like(it)
    inp = np.zeros_like(it)
    inp1 = np.zeros_like(it)
    if "sync" in spec.terms:
        cv = spec.iteration_cv if spec.iteration_cv is not None else kineto_step_cv()[0]
        e = {w: expected_max_normal(int(w)) for w in set(p)}
        sync = cv * t1 * np.array([e[w] for w in p])
    if "input" in spec.terms and spec.host_decode_img_s is not None:
        g = np.minimum(df["gpus_per_node"].to_numpy(float), p)
        need = g * df["batch_size"].to_numpy(float) * 1000.0 / spec.host_decode_img_s
        inp, inp1 = np.maximum(0.0, need - it), np.maximum(0.0, need / g - t1)
    new_it = it + sync + inp
    finite_results("modelled iterations with overheads", {"iter_ms": new_it, "sync_ms": sync,
                                                          "input_ms": inp})
    speedup = p * (t1 + inp1) / new_it
    return df.assign(iter_ms=new_it, throughput_img_s=p * df["batch_size"] * 1000.0 / new_it,
                     speedup_vs_1=speedup, efficiency=speedup / p, sync_ms=sync,
                     input_ms=inp, overheads=spec.label)
