"""Sweep rows whose collective follows NCCL's model (``auto``, ``nccl-*``).

NCCL's cost is not affine in the message size (algorithm and protocol change with it), so
these rows cannot take :mod:`.fast`'s ``A + B n`` path. For a fixed cluster the cost is a
function of the size alone, so each *distinct* configuration (workers, GPUs per node, intra,
inter, algorithm) is costed once, vectorised over the array of its message sizes
(:func:`dgtraces.comm.nccl.allreduce_ms`), and its finish time is shared by every row
with that configuration:

* stream policies (naive, wfbp, bucketed; and every policy with ``shared_cpu``): the sizes of
  the policy's messages, one call, then the one-stream recurrence;
* ``mgwfbp``: the same dynamic program as :func:`dgtraces.predict.policies.optimal_groups`
  (``F(i) = min_m max(F(m), r_i) + T(S_i - S_m)``) over the costs of all ``n(n+1)/2``
  contiguous merges, computed in one call.

The DAG (``dag.simulate`` with :class:`~dgtraces.comm.nccl.NcclCost`) stays the
reference; tests check that a sweep row equals the single prediction.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from dgtraces.comm.collective_time import NCCL_ALGORITHMS

from ..comm.nccl import allreduce_ms, model, topology
from .cluster import Policy
from .fast import Prepared, message_sizes
from .policy_registry import Grouping, grouping

Cost = Callable[[np.ndarray], np.ndarray]  # message bytes -> ms


def cost_function(workers: int, gpus_per_node: int, intra: str, inter: str, algorithm: str,
                  nics_per_node: int | None = 1, staging: tuple[float, float] = (0.0, 0.0),
                  nccl: tuple[str | None, str] = (None, "run")) -> Cost:
    """Message bytes -> ms of one all-reduce under NCCL's model (release and time ``nccl``;
    plus ``staging``'s affine ``(a_ms, b_ms_per_byte)`` per message, as :class:`NcclCost`
    adds its staging phase)."""
    t = topology(workers, gpus_per_node, intra, inter, nics_per_node)
    m = model(*nccl)
    forced = NCCL_ALGORITHMS[algorithm]
    a, b = staging if workers > 1 else (0.0, 0.0)

    def cost(nbytes: np.ndarray) -> np.ndarray:
        n = np.asarray(nbytes, float)
        return np.where(n > 0, allreduce_ms(t, n, forced, m) + (a + b * n), 0.0)
    return cost


def comm_end_one(prep: Prepared, policy: Policy, cost: Cost, shared: bool = False) -> float:
    """Finish of the last message relative to backward start (as :func:`.fast.comm_end`)."""
    if len(prep.ready) == 0:
        return -np.inf
    if grouping(policy.name) is Grouping.OPTIMAL and not shared:
        return _optimal(prep.ready, prep.nbytes, cost)
    ready, sizes = message_sizes(prep, policy, shared)
    times = cost(np.asarray(sizes, float)).tolist()
    if shared:
        end = prep.bwd_ms
        for t in times:
            end = end + t
        return float(end)
    end = 0.0
    for r, t in zip(ready, times, strict=True):
        end = max(end, float(r)) + t
    return end


def _optimal(ready: np.ndarray, nbytes: np.ndarray, cost: Cost) -> float:
    n = len(ready)
    prefix = np.concatenate([[0.0], np.cumsum(nbytes)])
    rows, cols = np.triu_indices(n + 1, k=1)  # message = units rows+1 .. cols
    table = np.full((n + 1, n + 1), np.inf)
    table[cols, rows] = cost(prefix[cols] - prefix[rows])
    finish = np.zeros(n + 1)
    for i in range(1, n + 1):
        finish[i] = np.min(np.maximum(finish[:i], ready[i - 1]) + table[i, :i])
    return float(finish[n])


def comm_ends(prep: Prepared, policy: Policy, keys: list[tuple], shared: bool,
              nics_per_node: int | None, staging: tuple[float, float],
              nccl: tuple[str | None, str] = (None, "run")) -> np.ndarray:
    """:func:`comm_end_one` of each configuration key ``(workers, gpus_per_node, intra,
    inter, algorithm)``, each distinct key computed once."""
    done: dict[tuple, float] = {}
    out = np.empty(len(keys))
    for j, key in enumerate(keys):
        if key not in done:
            w, g, intra, inter, algo = key
            fn = cost_function(int(w), int(g), str(intra), str(inter), str(algo),
                               nics_per_node, staging, nccl)
            done[key] = comm_end_one(prep, policy, fn, shared)
        out[j] = done[key]
    return out
