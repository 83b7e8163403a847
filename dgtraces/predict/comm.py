"""Collective cost models: every algorithm reduces to phases that are affine in message size.

A link moves ``n`` bytes point to point in ``alpha + n * beta`` (Hockney). For ``P`` workers:

* ``ring``   all-reduce (reduce-scatter + all-gather): ``2(P-1) alpha + 2(P-1)/P n beta``
* ``tree``   binomial-tree reduce then broadcast: ``2 ceil(log2 P) (alpha + n beta)``
* ``dbtree`` double binary tree (NCCL 2.4), pipelined: ``2 ceil(log2 P) alpha + 2 n beta``
  (each rank sends and receives ``n`` per phase; per-chunk pipeline fill is neglected)
* ``hierarchical`` intra-node reduce-scatter (``g`` GPUs), inter-node ring all-reduce of
  ``n/g`` over ``N`` nodes, intra-node all-gather
* ``ps``     parameter server with ``S`` servers: push then pull, each
  ``alpha + n beta max(1, P/S)`` (a server's ingress carries ``P n / S`` bytes)

Flat algorithms spanning several nodes run at the pace of the slower hop, so they use the
element-wise worse of the intra and inter link. One worker communicates nothing. Because every
phase is ``A + B n``, a whole collective is ``A + B n`` too, which is what makes the merged-
gradient dynamic program exact and the sweep vectorisable.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .links import Link

ALGORITHMS = ("ring", "tree", "dbtree", "hierarchical", "ps")


@dataclass(frozen=True)
class Phase:
    """One step of a collective on one link: ``a_ms + b_ms_per_byte * bytes``."""

    name: str
    link: str
    a_ms: float
    b_ms_per_byte: float


@dataclass(frozen=True)
class CommCost:
    """A collective as consecutive phases; ``time_ms(n)`` is their sum (0 for no bytes)."""

    algorithm: str
    phases: tuple[Phase, ...]

    @property
    def a_ms(self) -> float:
        return sum(p.a_ms for p in self.phases)

    @property
    def b_ms_per_byte(self) -> float:
        return sum(p.b_ms_per_byte for p in self.phases)

    def time_ms(self, nbytes: float) -> float:
        if nbytes <= 0 or not self.phases:
            return 0.0
        return self.a_ms + self.b_ms_per_byte * nbytes

    def phase_times(self, nbytes: float) -> list[tuple[Phase, float]]:
        return [(p, p.a_ms + p.b_ms_per_byte * nbytes) for p in self.phases]


def _worse(a: Link, b: Link) -> Link:
    """The pace of a flat collective crossing both links: slower latency, lower bandwidth.

    Compared by value (as :func:`collective_ab` does), never by name: two links may share a
    name with different parameters (user Links, overrides)."""
    if (a.alpha_us, a.bandwidth_gb_s) == (b.alpha_us, b.bandwidth_gb_s):
        return a
    return Link(f"{a.name}+{b.name}", max(a.alpha_us, b.alpha_us),
                min(a.bandwidth_gb_s, b.bandwidth_gb_s), "derived",
                f"worse of {a.name} and {b.name}")


def _ring(p: int, link: Link, scale: float = 1.0, name: str = "ring") -> Phase:
    steps = 2 * (p - 1)
    return Phase(name, link.name, steps * link.alpha_ms,
                 steps / p * link.beta_ms_per_byte * scale)


def collective(algorithm: str, workers: int, gpus_per_node: int, intra: Link, inter: Link,
               servers: int = 1) -> CommCost:
    """Cost of one gradient all-reduce (or push+pull) among ``workers``."""
    p = workers
    nodes = -(-workers // gpus_per_node)
    if p <= 1:
        return CommCost(algorithm, ())
    flat = intra if nodes == 1 else _worse(intra, inter)
    phases: tuple[Phase, ...]
    if algorithm == "ring":
        phases = (_ring(p, flat),)
    elif algorithm == "tree":
        d = math.ceil(math.log2(p))
        phases = (Phase("reduce", flat.name, d * flat.alpha_ms, d * flat.beta_ms_per_byte),
                  Phase("broadcast", flat.name, d * flat.alpha_ms, d * flat.beta_ms_per_byte))
    elif algorithm == "dbtree":
        d = math.ceil(math.log2(p))
        phases = (Phase("reduce", flat.name, d * flat.alpha_ms, flat.beta_ms_per_byte),
                  Phase("broadcast", flat.name, d * flat.alpha_ms, flat.beta_ms_per_byte))
    elif algorithm == "hierarchical":
        g = min(gpus_per_node, p)
        parts: list[Phase] = []
        if g > 1:
            k = g - 1
            parts.append(Phase("intra-reduce-scatter", intra.name, k * intra.alpha_ms,
                                k / g * intra.beta_ms_per_byte))
        if nodes > 1:
            parts.append(_ring(nodes, inter, 1.0 / g, "inter-allreduce"))
        if g > 1:
            parts.append(Phase("intra-all-gather", intra.name, parts[0].a_ms,
                               parts[0].b_ms_per_byte))
        phases = tuple(parts)
    elif algorithm == "ps":
        link = intra if nodes == 1 else inter
        load = max(1.0, p / servers)
        push = Phase("push", link.name, link.alpha_ms, link.beta_ms_per_byte * load)
        phases = (push, Phase("pull", link.name, push.a_ms, push.b_ms_per_byte))
    else:  # validated by Cluster; kept for direct callers
        from ..errors import DgtracesError

        raise DgtracesError(f"unknown algorithm {algorithm!r}", code="BAD_INPUT")
    return CommCost(algorithm, phases)


def collective_ab(algorithm, workers, gpus_per_node, intra_alpha_ms, intra_beta,
                  inter_alpha_ms, inter_beta, servers):
    """Vectorised :func:`collective`: arrays (one entry per configuration) -> (A, B) with
    ``T(n) = A + B n`` in ms. ``algorithm`` is an array of names from ALGORITHMS."""
    import numpy as np

    p = np.asarray(workers, float)
    g = np.asarray(gpus_per_node, float)
    ai, bi = np.asarray(intra_alpha_ms, float), np.asarray(intra_beta, float)
    ae, be = np.asarray(inter_alpha_ms, float), np.asarray(inter_beta, float)
    algo = np.asarray(algorithm)
    nodes = np.ceil(p / g)
    one = nodes == 1
    fa, fb = np.where(one, ai, np.maximum(ai, ae)), np.where(one, bi, np.maximum(bi, be))
    steps = 2 * (p - 1)
    d = np.ceil(np.log2(np.maximum(p, 1)))
    a = np.zeros_like(p)
    b = np.zeros_like(p)
    m = algo == "ring"
    a[m], b[m] = (steps * fa)[m], (steps / p * fb)[m]
    m = algo == "tree"
    a[m], b[m] = (2 * d * fa)[m], (2 * d * fb)[m]
    m = algo == "dbtree"
    a[m], b[m] = (2 * d * fa)[m], (2 * fb)[m]
    m = algo == "hierarchical"
    gg = np.minimum(g, p)
    k = gg - 1
    nsteps = 2 * (nodes - 1)
    ha = 2 * k * ai + nsteps * ae
    hb = 2 * (k / gg * bi) + nsteps / nodes * (be / gg)
    a[m], b[m] = ha[m], hb[m]
    m = algo == "ps"
    pa, pb = np.where(one, ai, ae), np.where(one, bi, be)
    load = np.maximum(1.0, p / np.asarray(servers, float))
    a[m], b[m] = (2 * pa)[m], (2 * (pb * load))[m]
    single = p <= 1
    a[single], b[single] = 0.0, 0.0
    return a, b
