"""Vectorised iteration times: loop over layers, vectorise over configurations (numpy).

For one trace and one policy, gradients become ready at the same times in every
configuration; only the collective's ``T(n) = A + B n`` differs. So each policy is a short
loop over messages with array operations over configurations. ``mgwfbp`` runs the same
dynamic program as :func:`dgtraces.predict.policies.optimal_groups`, rewritten as

    F(i) = A + B S_i + min( r_i - B S_{K-1},  min_{m in [K, i-1]} (F_m - B S_m) )

where ``K`` = number of prefixes already finished by ``r_i`` (``F`` is non-decreasing, so
these form a prefix; ``K`` only grows with ``i``) and the range minimum comes from a sparse
table: O(n log n) per configuration instead of O(n^2). ``dag.simulate`` stays the reference;
tests check agreement to 1e-9 relative.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .cluster import Policy
from .policies import bucket_groups, fusion_groups
from .policy_registry import Grouping, grouping
from .trace import Trace


@dataclass(frozen=True)
class Prepared:
    """A trace reduced to what the sweep needs. Gradient ready times are relative to the
    start of the backward pass, so one comm pass serves both io-overlap choices."""

    fwd_end: float  # h2d + forward (plus io when it is not overlapped)
    bwd_ms: float
    ready: np.ndarray  # gradient ready times from backward start, backward order
    nbytes: np.ndarray  # their sizes
    io_ms: float
    update_ms: float

    def bwd_start(self, io_overlap: bool) -> float:
        return self.fwd_end + (0.0 if io_overlap else self.io_ms)


def prepare(trace: Trace) -> Prepared:
    t = trace.h2d_ms
    for f in trace.fwd_ms:
        t += f
    start, rel = t, 0.0
    ready, sizes = [], []
    for b, n in zip(reversed(trace.bwd_ms), reversed(trace.grad_bytes), strict=True):
        rel += b
        if n > 0:
            ready.append(rel)
            sizes.append(float(n))
    return Prepared(start, rel, np.asarray(ready, float), np.asarray(sizes, float),
                    trace.io_ms, trace.update_ms)


def _stream(ready, nbytes, a, b) -> np.ndarray:
    end = np.zeros_like(a)
    for r, n in zip(ready, nbytes, strict=True):
        end = np.maximum(end, r) + (a + b * n)
    return end


CHUNK = 4096  # configurations per pass of the dynamic program (keeps its table in cache)


def _optimal(ready, nbytes, a, b) -> np.ndarray:
    if len(a) > CHUNK:
        return np.concatenate([_optimal(ready, nbytes, a[s:s + CHUNK], b[s:s + CHUNK])
                               for s in range(0, len(a), CHUNK)])
    n, c = len(ready), len(a)
    s = np.concatenate([[0.0], np.cumsum(nbytes)])
    levels = max(1, int(n).bit_length())
    # table[p, m] = min G[m .. m + 2^p - 1]; queries only read entries already written
    table = np.empty((levels, n + 1, c))
    flat = table.reshape(levels * (n + 1), c)
    log2 = np.zeros(n + 2, dtype=np.int64)
    for j in range(2, n + 2):
        log2[j] = log2[j // 2] + 1
    f = np.empty((n + 1, c))
    f[0] = 0.0
    cols = np.arange(c)
    k = np.ones(c, dtype=np.int64)
    table[0, 0] = 0.0
    for i in range(1, n + 1):
        r = ready[i - 1]
        while True:  # advance K past prefixes finished by r (amortised O(n) per config)
            kc = np.minimum(k, i - 1)
            step = (k < i) & (f[kc, cols] <= r)
            if not step.any():
                break
            k += step
        best = r - b * s[k - 1]
        width = i - k
        has = width > 0
        if has.any():
            p = log2[np.maximum(width, 1)]
            lo = flat[p * (n + 1) + np.minimum(k, i - 1), cols]
            hi = flat[p * (n + 1) + np.maximum(i - (1 << p), 0), cols]
            best = np.where(has, np.minimum(best, np.minimum(lo, hi)), best)
        f[i] = (a + b * s[i]) + best
        table[0, i] = f[i] - b * s[i]
        for lv in range(1, levels):
            start = i - (1 << lv) + 1
            if start < 0:
                break
            table[lv, start] = np.minimum(table[lv - 1, start],
                                          table[lv - 1, start + (1 << (lv - 1))])
    return f[n]


def message_sizes(prep: Prepared, policy: Policy, shared: bool) -> tuple[list, list]:
    """(ready, bytes) of the policy's messages (ready relative to backward start)."""
    kind = grouping(policy.name)
    if kind is Grouping.AFTER_BACKWARD:
        return [prep.bwd_ms] * len(prep.ready), list(prep.nbytes)
    if kind is Grouping.BUCKET or (shared and kind is Grouping.OPTIMAL):
        if kind is Grouping.BUCKET:
            groups, ready = fusion_groups(prep.nbytes.tolist(), prep.ready.tolist(), policy)
        else:
            groups = bucket_groups(prep.nbytes.tolist(), float("inf"))
            ready = [prep.ready[g[-1]] for g in groups]
        return (list(ready), [float(sum(prep.nbytes[i] for i in g)) for g in groups])
    return list(prep.ready), list(prep.nbytes)


def _distinct(fn, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``fn(a, b)`` computed once per distinct (a, b) pair (grids repeat many: e.g. the inter
    link does not matter inside one node); results are identical, only work is saved."""
    if len(a) < 2 * CHUNK:
        return fn(a, b)
    pairs, inverse = np.unique(np.stack([a, b], axis=1), axis=0, return_inverse=True)
    if len(pairs) > 0.8 * len(a):
        return fn(a, b)
    return fn(pairs[:, 0].copy(), pairs[:, 1].copy())[inverse.ravel()]


def comm_end(prep: Prepared, policy: Policy, a: np.ndarray, b: np.ndarray,
             shared: bool = False) -> np.ndarray:
    """Finish of the last message, relative to backward start (-inf with no gradients).

    ``shared``: the collective runs on the compute cores, so every message adds its time to
    the backward chain (see ``Cluster.shared_cpu``)."""
    if len(prep.ready) == 0:
        return np.full_like(a, -np.inf)
    if grouping(policy.name) is Grouping.OPTIMAL and not shared:
        return _distinct(lambda x, y: _optimal(prep.ready, prep.nbytes, x, y), a, b)
    ready, sizes = message_sizes(prep, policy, shared)
    if shared:
        end = np.full_like(a, prep.bwd_ms)
        for n in sizes:
            end = end + (a + b * n)
        return end
    return _stream(ready, sizes, a, b)


def finish(prep: Prepared, io_overlap: bool, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(iter_ms, comm_exposed_ms) from the relative comm finish times ``end``."""
    exposed = np.maximum(0.0, end - prep.bwd_ms)
    start = prep.bwd_start(io_overlap)
    chain = start + np.maximum(end, prep.bwd_ms) + prep.update_ms
    if io_overlap:
        chain = np.maximum(chain, prep.io_ms)
    return chain, exposed


def iter_times(prep: Prepared, policy: Policy, a, b,
               shared: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(iter_ms, comm_exposed_ms) per configuration with collective cost ``A + B n``."""
    a = np.asarray(a, float)
    b = np.asarray(b, float)
    return finish(prep, policy.io_overlap, comm_end(prep, policy, a, b, shared))
