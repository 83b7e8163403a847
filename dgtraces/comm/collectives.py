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

Each algorithm is declared ONCE in :data:`COLLECTIVES` as a function of the configuration
that returns its phases ``(name, side, a_ms, b_ms_per_byte)`` with numpy arithmetic, so the
same definition serves the scalar :func:`collective` (one configuration, named phases) and
the vectorised :func:`collective_ab` (arrays of configurations, summed). ``side`` says which
link a phase uses: ``intra``, ``inter``, ``flat`` (the worse of both when several nodes are
spanned) or ``local`` (intra inside one node, else inter). Adding an algorithm is one
function and one :func:`register` call; the CLI, the sweep and the scalar-vs-vectorised
agreement test iterate the registry.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from dgtraces.errors import Code

from .links import Link


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

    def times_ms(self, sizes: Sequence[float]) -> list[float]:
        """:meth:`time_ms` of each size (the merged-gradient dynamic program asks for all
        ``n(n+1)/2`` contiguous merges at once); a cost with a vectorised model overrides it."""
        return [self.time_ms(s) for s in sizes]



Num = Any  # a float (scalar path) or a numpy array (vectorised path)
Term = tuple[str, str, Num, Num]  # phase name, link side, a_ms, b_ms_per_byte
SIDES = ("intra", "inter", "flat", "local")


@dataclass(frozen=True)
class Shape:
    """One configuration (or arrays of them): workers, GPUs per node, nodes, servers and the
    per-hop ``(alpha_ms, beta_ms_per_byte)`` of each link side."""

    p: Num
    g: Num
    nodes: Num
    servers: Num
    hop: dict  # side -> (alpha_ms, beta_ms_per_byte)


@dataclass(frozen=True)
class Collective:
    """A registered collective algorithm: ``terms(shape)`` gives its phases."""

    name: str
    summary: str
    terms: Callable[[Shape], list[Term]]
    uses_servers: bool = False


COLLECTIVES: dict[str, Collective] = {}


def register(name: str, summary: str, *, uses_servers: bool = False):
    """Decorator: declare a collective algorithm (its phases) under ``name``."""
    def deco(fn: Callable[[Shape], list[Term]]) -> Callable[[Shape], list[Term]]:
        COLLECTIVES[name] = Collective(name, summary, fn, uses_servers)
        return fn
    return deco


def _depth(p: Num) -> Num:
    import numpy as np

    return np.ceil(np.log2(np.maximum(p, 1)))


def _ring_term(name: str, side: str, p: Num, hop: tuple[Num, Num], scale: Num = 1.0) -> Term:
    steps = 2 * (p - 1)
    return (name, side, steps * hop[0], steps / p * hop[1] * scale)


@register("ring", "ring all-reduce (reduce-scatter + all-gather) over all workers")
def _ring(x: Shape) -> list[Term]:
    return [_ring_term("ring", "flat", x.p, x.hop["flat"])]


@register("tree", "binomial-tree reduce then broadcast")
def _tree(x: Shape) -> list[Term]:
    d = _depth(x.p)
    a, b = x.hop["flat"]
    return [("reduce", "flat", d * a, d * b), ("broadcast", "flat", d * a, d * b)]


@register("dbtree", "double binary tree (NCCL >= 2.4), pipelined")
def _dbtree(x: Shape) -> list[Term]:
    d = _depth(x.p)
    a, b = x.hop["flat"]
    return [("reduce", "flat", d * a, b), ("broadcast", "flat", d * a, b)]


@register("hierarchical", "intra-node reduce-scatter, inter-node ring all-reduce of n/g, "
          "intra-node all-gather (e.g. NCCL inside nodes + MPI between them, Caffe-MPI 2.0)")
def _hierarchical(x: Shape) -> list[Term]:
    import numpy as np

    g = np.minimum(x.g, x.p)
    k = g - 1
    ia, ib = x.hop["intra"]
    rs = ("intra-reduce-scatter", "intra", k * ia, k / g * ib)
    return [rs, _ring_term("inter-allreduce", "inter", x.nodes, x.hop["inter"], 1.0 / g),
            ("intra-all-gather", "intra", rs[2], rs[3])]


@register("ps", "parameter server(s): push then pull, each server's ingress carries P n / S "
          "bytes; on one node over the intra link (a host-CPU server: give the host link, "
          "e.g. pcie3, as intra)", uses_servers=True)
def _ps(x: Shape) -> list[Term]:
    import numpy as np

    a, b = x.hop["local"]
    load = np.maximum(1.0, x.p / x.servers)
    return [("push", "local", a, b * load), ("pull", "local", a, b * load)]


ALGORITHMS = tuple(COLLECTIVES)


def _unknown(algorithm: object) -> Exception:
    from ..errors import DgtracesError, Failure

    return DgtracesError(f"unknown algorithm {algorithm!r}", code=Code.BAD_INPUT,
                         failures=[Failure(Code.BAD_INPUT, "unknown collective algorithm",
                                           column="algorithm",
                                           expected=" | ".join(COLLECTIVES),
                                           found=repr(algorithm))])


def _worse(a: Link, b: Link) -> Link:
    """The pace of a flat collective crossing both links: slower latency, lower bandwidth.

    Compared by value (as :func:`collective_ab` does), never by name: two links may share a
    name with different parameters (user Links, overrides)."""
    if (a.alpha_us, a.bandwidth_gb_s) == (b.alpha_us, b.bandwidth_gb_s):
        return a
    return Link(f"{a.name}+{b.name}", max(a.alpha_us, b.alpha_us),
                min(a.bandwidth_gb_s, b.bandwidth_gb_s), "derived",
                f"worse of {a.name} and {b.name}")


def collective(algorithm: str, workers: int, gpus_per_node: int, intra: Link, inter: Link,
               servers: int = 1) -> CommCost:
    """Cost of one gradient all-reduce (or push+pull) among ``workers`` (scalar path)."""
    if algorithm not in COLLECTIVES:
        raise _unknown(algorithm)
    p = workers
    nodes = -(-workers // gpus_per_node)
    if p <= 1:
        return CommCost(algorithm, ())
    one = nodes == 1
    links = {"intra": intra, "inter": inter, "flat": intra if one else _worse(intra, inter),
             "local": intra if one else inter}
    shape = Shape(p, gpus_per_node, nodes, servers,
                  {k: (v.alpha_ms, v.beta_ms_per_byte) for k, v in links.items()})
    phases = tuple(Phase(name, links[side].name, float(a), float(b))
                   for name, side, a, b in COLLECTIVES[algorithm].terms(shape)
                   if float(a) != 0.0 or float(b) != 0.0)
    return CommCost(algorithm, phases)


def collective_ab(algorithm, workers, gpus_per_node, intra_alpha_ms, intra_beta,
                  inter_alpha_ms, inter_beta, servers):
    """Vectorised :func:`collective`: arrays (one entry per configuration) -> (A, B) with
    ``T(n) = A + B n`` in ms. ``algorithm`` is an array of names from the registry; each
    algorithm's one declaration is evaluated on the configurations that use it."""
    import numpy as np

    p = np.asarray(workers, float)
    g = np.asarray(gpus_per_node, float)
    ai, bi = np.asarray(intra_alpha_ms, float), np.asarray(intra_beta, float)
    ae, be = np.asarray(inter_alpha_ms, float), np.asarray(inter_beta, float)
    s = np.broadcast_to(np.asarray(servers, float), p.shape)
    algo = np.asarray(algorithm)
    nodes = np.ceil(p / g)
    one = nodes == 1
    hop = {"intra": (ai, bi), "inter": (ae, be),
           "flat": (np.where(one, ai, np.maximum(ai, ae)), np.where(one, bi, np.maximum(bi, be))),
           "local": (np.where(one, ai, ae), np.where(one, bi, be))}
    a = np.zeros_like(p)
    b = np.zeros_like(p)
    for name in np.unique(algo):
        if name not in COLLECTIVES:
            raise _unknown(str(name))
        m = algo == name
        shape = Shape(p[m], g[m], nodes[m], s[m],
                      {k: (v[0][m], v[1][m]) for k, v in hop.items()})
        for _, _, ta, tb in COLLECTIVES[str(name)].terms(shape):
            a[m] += ta
            b[m] += tb
    single = p <= 1
    a[single], b[single] = 0.0, 0.0
    return a, b
