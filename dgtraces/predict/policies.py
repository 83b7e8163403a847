"""Gradient aggregation policies: which gradients travel together, and when they may start.

All policies see the gradient-carrying layers in backward order (last layer first) with the
time each gradient is ready (end of its backward). They return the messages put on the one
communication stream, in order; a message starts when its last gradient is ready and the
previous message is done.

* ``naive``    one all-reduce per layer, all after the whole backward pass
               (t_c = sum of per-layer all-reduces, as in Shi et al. 2018's naive S-SGD)
* ``wfbp``     one all-reduce per layer as soon as its gradient is ready (wait-free
               backpropagation: Caffe-MPI, MXNet, TensorFlow)
* ``bucketed`` consecutive gradients (backward order) fused until a bucket holds at least
               ``bucket_bytes`` (PyTorch DDP, Horovod tensor fusion)
* ``mgwfbp``   optimal merging (Shi et al. 2019, MG-WFBP) by the dynamic program
               ``F(i) = min_j max(F(j-1), ready_i) + T(bytes j..i)``; exact for one stream and
               any cost monotone in size, so never worse than wfbp or one single bucket.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ..comm.collectives import CommCost
from .cluster import Policy
from .policy_registry import Grouping, grouping


@dataclass(frozen=True)
class Message:
    """Gradients sent together: layers (backward order), bytes and ready time (ms)."""

    index: int
    layers: tuple[str, ...]
    nbytes: float
    ready_ms: float

    @property
    def task_id(self) -> str:
        return f"comm/m{self.index}"


def _groups_to_messages(groups: Sequence[Sequence[int]], names, nbytes, ready,
                        release_at: float | None = None) -> list[Message]:
    out = []
    for k, group in enumerate(groups):
        last = group[-1]
        out.append(Message(k, tuple(names[i] for i in group), float(sum(nbytes[i] for i in group)),
                           float(ready[last] if release_at is None else release_at)))
    return out


def bucket_groups(nbytes: Sequence[float], bucket_bytes: float,
                  first_bucket_bytes: float | None = None) -> list[list[int]]:
    """Fuse consecutive gradients until a bucket holds >= ``bucket_bytes`` (the first bucket
    >= ``first_bucket_bytes`` when given: PyTorch DDP's small first bucket)."""
    groups: list[list[int]] = []
    cur: list[int] = []
    size = 0.0
    for i, b in enumerate(nbytes):
        cur.append(i)
        size += b
        cap = first_bucket_bytes if not groups and first_bucket_bytes else bucket_bytes
        if size >= cap:
            groups.append(cur)
            cur, size = [], 0.0
    if cur:
        groups.append(cur)
    return groups


def fusion_groups(nbytes: Sequence[float], ready_rel: Sequence[float],
                  policy: Policy) -> tuple[list[list[int]], list[float]]:
    """Buckets of the bucketed policy and the time each may start, relative to the start of
    the backward pass. With ``policy.cycle_ms`` (Horovod's background cycle) gradients ready
    within one cycle (cycles counted from the backward start) are fused, split at the
    threshold, and sent at the end of that cycle; otherwise a bucket starts when its last
    gradient is ready."""
    cycle = policy.cycle_ms
    if cycle <= 0:
        groups = bucket_groups(nbytes, policy.bucket_bytes, policy.first_bucket_bytes)
        return groups, [float(ready_rel[g[-1]]) for g in groups]
    ticks = [math.ceil(r / cycle - 1e-9) * cycle for r in ready_rel]
    groups, starts = [], []
    i = 0
    while i < len(ticks):
        j = i
        while j + 1 < len(ticks) and ticks[j + 1] == ticks[i]:
            j += 1
        for g in bucket_groups(nbytes[i:j + 1], policy.bucket_bytes,
                               policy.first_bucket_bytes if not groups else None):
            groups.append([i + k for k in g])
            starts.append(float(ticks[i]))
        i = j + 1
    return groups, starts


def optimal_groups(nbytes: Sequence[float], ready: Sequence[float],
                   cost: CommCost) -> tuple[list[list[int]], float]:
    """MG-WFBP's dynamic program; returns (groups, finish time of the last message)."""
    n = len(nbytes)
    prefix = [0.0]
    for b in nbytes:
        prefix.append(prefix[-1] + b)
    # the cost of every contiguous merge, asked at once (row i: m = 0 .. i-1)
    table = cost.times_ms([prefix[i] - prefix[m] for i in range(1, n + 1) for m in range(i)])
    finish = [0.0] * (n + 1)
    choice = [0] * (n + 1)
    k = 0
    for i in range(1, n + 1):
        best, arg = float("inf"), 0
        r = ready[i - 1]
        for m in range(i):  # message = units m+1..i, starting after the first m are done
            t = max(finish[m], r) + table[k + m]
            if t < best:
                best, arg = t, m
        k += i
        finish[i], choice[i] = best, arg
    groups, i = [], n
    while i > 0:
        groups.append(list(range(choice[i], i)))
        i = choice[i]
    return groups[::-1], finish[n]


def messages(policy: Policy, names: Sequence[str], nbytes: Sequence[float],
             ready: Sequence[float], bwd_end: float, cost: CommCost,
             shared: bool = False, bwd_start: float = 0.0) -> list[Message]:
    """Messages of ``policy`` for gradient layers given in backward order.

    With ``shared`` (collective on the compute cores, no overlap possible) every message adds
    its full time to the iteration, so the optimal merge is one single message."""
    if not names:
        return []
    kind = grouping(policy.name)
    if shared and kind is Grouping.OPTIMAL:
        return _groups_to_messages([list(range(len(names)))], names, nbytes, ready)
    singles = [[i] for i in range(len(names))]
    if kind is Grouping.AFTER_BACKWARD:
        return _groups_to_messages(singles, names, nbytes, ready, release_at=bwd_end)
    if kind is Grouping.PER_LAYER:
        return _groups_to_messages(singles, names, nbytes, ready)
    if kind is Grouping.BUCKET:
        groups, starts = fusion_groups(nbytes, [r - bwd_start for r in ready], policy)
        return [Message(k, tuple(names[i] for i in g), float(sum(nbytes[i] for i in g)),
                        bwd_start + s) for k, (g, s) in enumerate(zip(groups, starts,
                                                                     strict=True))]
    groups, _ = optimal_groups(nbytes, ready, cost)
    return _groups_to_messages(groups, names, nbytes, ready)
