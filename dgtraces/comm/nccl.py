"""NCCL's own choice of algorithm and protocol for a message, and its time (issues #25, #34).

The tuning model of a NCCL release (:mod:`.nccl_versions` declares the releases, read from
NCCL's source at cited tags; :mod:`.nccl_tuning` holds the forms) ranks every enabled
(algorithm, protocol) pair by ``lat + n / bw`` and picks the least; 2.4 picks by size
thresholds. The time reported is either that ranking time (``time="tuning"``, issue #25's
figure with ``--nccl 2.7``) or the time the pair takes when it runs (``time="run"``, the
default: launch, launched channels, pipeline fill, achieved NIC bandwidth; :mod:`.nccl_run`).
Hardware: :mod:`.fabrics`. Collectives are declared once in :data:`KINDS`. Every constant and
its source: ``docs/collectives.md``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from dgtraces.comm.collectives import CommCost, Phase
from dgtraces.comm.fabrics import (
    FABRICS,
    MAX_NICS_PER_NODE,
    UNUSED_NIC,
    Fabric,
    fabric,
    nic,
    nic_link,
    unknown,
    unsupported,
)
from dgtraces.comm.nccl_run import launch_us, run_us
from dgtraces.comm.nccl_tuning import (
    COLLNET,
    RUNS,
    Entry,
    algo_time,
    board_gb_s,
    enabled,
    graph,
    nic_gb_s,
    select_threshold,
    tune,
)
from dgtraces.comm.nccl_versions import (
    DEFAULT_VERSION,
    ISSUE25_VERSION,
    VERSIONS,
    NcclVersion,
    version,
)
from dgtraces.errors import Code
from dgtraces.values import bad_value, whole_number

__all__ = ["DEFAULT_VERSION", "FABRICS", "Fabric", "UNUSED_NIC", "fabric", "nic", "unknown"]

# names of this model for --algorithm -> the NCCL algorithm forced ("auto": NCCL's choice)
MODEL_NAMES = {"auto": "auto", "nccl-ring": "ring", "nccl-tree": "tree",
               "nccl-collnet": "collnet", "nccl-collnet-direct": "collnet-direct",
               "nccl-collnet-chain": "collnet-chain", "nccl-nvls": "nvls",
               "nccl-nvls-tree": "nvls-tree", "nccl-pat": "pat"}
TIMES = ("run", "tuning")
MAX_RANKS = 2 ** 31 - 1  # NCCL's nranks is a C int (ncclCommInitRank); as predict's MAX_COUNT
# The ranks a prediction models: 2^20 (1,048,576), about ten times the largest GPU clusters
# reported (about 100,000 GPUs); more is PLAUSIBILITY (a typo, not a cluster)
PLAUSIBLE_RANKS = 1 << 20


def plausible_ranks(workers: int) -> int:
    """``workers`` (a whole number already) when it is at most :data:`PLAUSIBLE_RANKS`."""
    if workers > PLAUSIBLE_RANKS:
        raise bad_value("workers", f"more than {PLAUSIBLE_RANKS} ranks, about ten times the "
                        "largest GPU cluster reported", f"<= {PLAUSIBLE_RANKS}", workers,
                        code=Code.PLAUSIBILITY)
    return workers


@dataclass(frozen=True)
class Kind:
    """A collective: NCCL's step counts (per ranks ``P``), nccl-tests' busbw factor, and
    whether its ring latency is a chain of steps (broadcast, reduce)."""

    name: str
    steps: Callable[[int], int]
    bus_factor: Callable[[int], float]
    chain: bool = False


KINDS: dict[str, Kind] = {k.name: k for k in (
    Kind("allreduce", lambda p: 2 * (p - 1), lambda p: 2 * (p - 1) / p),
    Kind("allgather", lambda p: p - 1, lambda p: (p - 1) / p),
    Kind("reducescatter", lambda p: p - 1, lambda p: (p - 1) / p),
    Kind("broadcast", lambda p: p, lambda p: 1.0, chain=True),
    Kind("reduce", lambda p: p, lambda p: 1.0, chain=True),
    Kind("alltoall", lambda p: p - 1, lambda p: (p - 1) / p))}
ALIASES = {"reduce_scatter": "reducescatter", "all_reduce": "allreduce",
           "all_gather": "allgather", "all_to_all": "alltoall"}


def closest(name: object, known) -> str | None:
    """The known name most like ``name`` (the did-you-mean), if any is close."""
    import difflib

    close = difflib.get_close_matches(str(name), sorted(known), n=1)
    return close[0] if close else None


def kind(name: str) -> Kind:
    name = ALIASES.get(name, name)
    if name not in KINDS:
        raise unknown("collective", name, KINDS)
    return KINDS[name]


@lru_cache(maxsize=64)
def _achieved(f: Fabric) -> float:
    if f.hw != "net" or f is UNUSED_NIC or f.bandwidth_gb_s == 0:
        return f.bandwidth_gb_s
    return nic_link(f).bandwidth_gb_s


@dataclass(frozen=True)
class Topology:
    """``ranks`` GPUs on ``nodes`` nodes; the board, the NIC and the NICs per node."""

    ranks: int
    nodes: int
    intra: Fabric
    nic: Fabric
    nics_per_node: int = 1

    @property
    def per_node(self) -> int:
        return self.ranks // self.nodes

    @property
    def nic_achieved_gb_s(self) -> float:
        return _achieved(self.nic)

    @property
    def bus_gb_s(self) -> float:  # issue #25's bus rule (2.7)
        return graph(VERSIONS[ISSUE25_VERSION], self).bus_gb_s


@dataclass(frozen=True)
class Model:
    """Which NCCL model runs: a release, ``run`` or ``tuning`` time, GPUs per process."""

    version: NcclVersion = field(default_factory=version)
    time: str = "run"
    gpus_per_process: int = 1

    @property
    def label(self) -> str:
        what = ("its tuning model's time" if self.time == "tuning" else
                "run time: launch, launched channels, pipeline fill, achieved NIC bandwidth")
        return f"NCCL {self.version.key} ({self.version.source}); {what}"


def model(nccl: str | None = None, time: str = "run", gpus_per_process: int = 1) -> Model:
    """A :class:`Model` from option values (UNKNOWN_NCCL, BAD_INPUT)."""
    if time not in TIMES:
        raise bad_value("nccl_time", "unknown time", " | ".join(TIMES), time)
    g = whole_number("gpus_per_process", gpus_per_process, least=1)
    return Model(version(nccl), time, g)


ISSUE25 = Model(VERSIONS[ISSUE25_VERSION], "tuning")  # issue #25's numbers


def fabric_view(m: Model, t: Topology) -> dict:
    """The board and NIC as release ``m.version`` sees them (``bandwidth_gb_s``), with
    sources; across nodes also the NIC's achieved bandwidth (the run time's)."""
    v = m.version
    out = {}
    for side, f in (("intra", t.intra), ("inter", t.nic)):
        d: dict[str, object] = {"link": f.name, "class": f.hw, "source": f.source}
        if side == "intra":
            d["bandwidth_gb_s"] = board_gb_s(v, t)
            if f.hw == "nvlink" and v.nic != "net12":
                d["source"] = (f"{f.links} NVLinks per GPU x SM{f.compcap}_NVLINK_BW "
                               f"{v.nvlink_gb_s[f.compcap or 0]} GB/s ({v.tag} topo.h)")
        elif f is not UNUSED_NIC:
            d["bandwidth_gb_s"] = nic_gb_s(v, t, False)
            d["line_gbit_s"] = f.line_gbit_s
            if v.nic != "net12":
                d["source"] = (f"{f.source.split(':')[0]}: {f.line_gbit_s:g} Gb/s / 8 "
                               f"({v.tag} topo.cc: NIC speed Mb/s / 8000)")
            if t.nodes > 1:
                d["achieved_gb_s"] = t.nic_achieved_gb_s
                d["achieved_source"] = nic_link(f).source
                d["nics_per_node"] = t.nics_per_node
        else:
            d["bandwidth_gb_s"] = 0.0
        out[side] = d
    return out


def why_not(v: NcclVersion, k: Kind, t: Topology, a: str) -> str:
    """Why release ``v`` cannot run algorithm ``a`` for ``k`` on ``t``."""
    if not v.has(a):
        return f"NCCL {v.key} has no {a} algorithm (its algorithms: {', '.join(v.algorithms)})"
    if a in ("nvls", "nvls-tree"):
        if not (t.intra.nvswitch and (t.intra.compcap or 0) >= 90):
            return (f"NVLS needs NVSwitch with NVLink SHARP (Hopper and later: nvlink4); "
                    f"{t.intra.name} has none")
        if a == "nvls-tree" and t.nodes == 1:
            return "NVLS tree runs across nodes only"
        return "NVLS across nodes needs SHARP on the network (NCCL's CollNet)"
    if a in COLLNET:
        if t.nodes == 1:
            return "CollNet (SHARP) reduces in the network: one node crosses none"
        if not t.nic.sharp:
            return "CollNet needs SHARP in InfiniBand switches (--inter ib-ndr,sharp)"
        return "CollNet Direct needs an NVSwitch board (NCCL disables it without one)"
    if a == "pat":
        return "PAT runs all-gather and reduce-scatter with one GPU per node"
    return f"NCCL runs {a} for all-reduce only" + (" across nodes" if v.key == "2.4" else "")


def _check(m: Model, k: Kind, t: Topology, forced: str) -> None:
    v = m.version
    if forced != "auto" and not v.has(forced):  # the release first (2.18 has no PAT)
        raise unsupported("algorithm", why_not(v, k, t, forced), forced)
    if forced in RUNS and k.name not in RUNS[forced]:
        raise bad_value("algorithm", f"NCCL runs {forced} for {' and '.join(RUNS[forced])} "
                        "only", "auto | nccl-ring", forced)
    if t.nic.sharp and t.nodes > 1 and not any(v.has(a) for a in COLLNET):
        raise unsupported("inter", f"NCCL {v.key} has no CollNet: SHARP (',sharp') is not "
                          "used", v.key)
    if forced != "auto" and not enabled(v, k, t, forced):
        raise unsupported("algorithm", why_not(v, k, t, forced), forced)


def _solve(k: Kind, t: Topology, n: np.ndarray, algorithm: str, m: Model
           ) -> tuple[np.ndarray, np.ndarray, tuple[Entry, ...]]:
    """Time (us) of each size of ``n`` (> 0), the index of the pair picked, the pairs."""
    _check(m, k, t, algorithm)
    v = m.version
    entries = tune(v, k, t, False, algorithm)
    if not entries:
        raise unsupported("algorithm", why_not(v, k, t, algorithm), algorithm)
    comm_channels = graph(v, t).comm_channels
    times = np.stack([algo_time(v, k, t, e, n, comm_channels) for e in entries])
    if v.select == "threshold":
        best = select_threshold(k, t, n, entries, algorithm)
        time = times[best, np.arange(n.size)]
    else:
        best = np.argmin(times, axis=0)
        time = times.min(axis=0)
    if m.time == "run":
        ach = {(e.algorithm, e.protocol): e for e in tune(v, k, t, True, algorithm)}
        for i in np.unique(best):
            e = entries[i]
            sel = best == i
            time[sel] = run_us(v, k, t, ach.get((e.algorithm, e.protocol), e), n[sel],
                               m.gpus_per_process)
    return time, best, entries


def collective_us(k: Kind, t: Topology, nbytes, algorithm: str = "auto",
                  m: Model | None = None) -> tuple[np.ndarray, list[str], list[str]]:
    """Time (us), algorithm and protocol of ``k`` for each size of the array ``nbytes``
    (0, ``none`` for sizes <= 0 or one rank). ``algorithm``: ``auto`` or a NCCL algorithm."""
    m = m or Model()
    n = np.atleast_1d(np.asarray(nbytes, float))
    positive = n > 0
    if t.ranks <= 1:
        return np.zeros(n.shape), ["none"] * n.size, ["none"] * n.size
    if k.name == "alltoall":
        out = _alltoall_us(t, n) + (0.0 if m.time == "tuning" else launch_us(m.gpus_per_process))
        return (np.where(positive, out, 0.0), ["p2p" if ok else "none" for ok in positive],
                ["Simple" if ok else "none" for ok in positive])
    time, best, entries = _solve(k, t, np.maximum(n, 1.0), algorithm, m)
    algos = [entries[i].algorithm if ok else "none" for i, ok in zip(best, positive,
                                                                         strict=True)]
    protos = [entries[i].protocol if ok else "none" for i, ok in zip(best, positive,
                                                                         strict=True)]
    return np.where(positive, time, 0.0), algos, protos


def choose(k: Kind, t: Topology, nbytes: float, algorithm: str = "auto",
           m: Model | None = None) -> tuple[float, str, str]:
    """(time_us, algorithm, protocol) of one size, as NCCL picks them (0 for one rank)."""
    times, algos, protos = collective_us(k, t, [nbytes], algorithm, m)
    return float(times[0]), algos[0], protos[0]


def candidates(k: Kind, t: Topology, algorithm: str = "auto",
               m: Model | None = None) -> list[tuple[str, str]]:
    """The (algorithm, protocol) pairs NCCL may run for ``k`` (``algorithm`` forces one)."""
    return [(e.algorithm, e.protocol) for e in tune((m or Model()).version, k, t, False,
                                                     algorithm)]


def time_us(k: Kind, t: Topology, nbytes: float, a: str, p: str, m: Model | None = None) -> float:
    """NCCL's ranking time of one ``a``/``p`` collective of ``nbytes`` bytes."""
    if k.name == "alltoall":
        return float(_alltoall_us(t, np.asarray([nbytes], float))[0])
    v = (m or Model()).version
    e = next(e for e in tune(v, k, t, False, a) if e.protocol == p)
    return float(algo_time(v, k, t, e, np.asarray([float(nbytes)]),
                           graph(v, t).comm_channels)[0])


def allreduce_ms(t: Topology, nbytes, algorithm: str = "auto", m: Model | None = None):
    """NCCL's time (ms) of an all-reduce of each size of ``nbytes`` (0 for sizes <= 0 or one
    rank); the sweep's vectorised cost (the DAG calls the same function per message)."""
    n = np.asarray(nbytes, float)
    if t.ranks <= 1 or n.size == 0:
        return np.zeros(n.shape)
    flat = np.maximum(n.ravel(), 1.0)
    times = _solve(KINDS["allreduce"], t, flat, algorithm, m or Model())[0]
    return np.where(n > 0, times.reshape(n.shape) / 1000.0, 0.0)


def _alltoall_us(t: Topology, n: np.ndarray) -> np.ndarray:
    """Point-to-point all-to-all (not in NCCL's tuning model; docs/collectives.md)."""
    v = VERSIONS[ISSUE25_VERSION]
    p = t.ranks
    hw = t.intra.hw if t.nodes == 1 else "net"
    bw = t.intra.bandwidth_gb_s if t.nodes == 1 else min(
        t.intra.bandwidth_gb_s, t.nics_per_node * t.nic.bandwidth_gb_s / t.per_node)
    hop = v.hw_lat["pci" if hw == "pci" else hw]["ring"][2]
    return v.base_lat["ring"][2] + (p - 1) * hop + n * (p - 1) / p / (1000.0 * bw)


def check_cluster(workers: int, gpus_per_node: int, nics_per_node: int) -> int:
    """Nodes of a cluster; BAD_INPUT for counts that cannot be."""
    workers = plausible_ranks(whole_number("workers", workers, least=1, most=MAX_RANKS))
    gpus_per_node = whole_number("gpus_per_node", gpus_per_node, least=1, most=MAX_RANKS)
    nics = whole_number("nics_per_node", nics_per_node, least=1)
    if workers % gpus_per_node and workers > gpus_per_node:
        raise bad_value("workers", f"not a multiple of --gpus-per-node {gpus_per_node}",
                        f"a multiple of {gpus_per_node}", workers)
    if nics > MAX_NICS_PER_NODE:
        raise bad_value("nics_per_node", "more NICs than NCCL's topology holds per node",
                        f"1 .. {MAX_NICS_PER_NODE}", nics)
    return -(-workers // gpus_per_node)


def topology(workers: int, gpus_per_node: int, intra: str, inter: str,
             nics_per_node: int | None) -> Topology:
    """The :class:`Topology` of a cluster by preset names (None NICs: the NIC preset's count,
    else one)."""
    nodes = check_cluster(workers, gpus_per_node, 1 if nics_per_node is None else nics_per_node)
    n = nic(inter, nodes)
    nics = nics_per_node if nics_per_node is not None else (n.nics or 1)
    return Topology(workers, nodes, fabric(intra, "intra"), n, nics)


@lru_cache(maxsize=1 << 16)
def _allreduce_one_ms(t: Topology, nbytes: float, forced: str, m: Model) -> float:
    """One all-reduce's time (ms); kept per size (the DAG asks the same sizes again)."""
    return choose(KINDS["allreduce"], t, nbytes, forced, m)[0] / 1000.0


@dataclass(frozen=True)
class NcclCost(CommCost):
    """A gradient all-reduce costed per message size by NCCL's model (``auto``, ``nccl-*``)
    for :func:`dgtraces.predict.dag.simulate`: the phase named ``nccl`` stands for NCCL's
    choice (no affine terms); further phases (staging) add theirs."""

    topology: Topology | None = None
    forced: str = "auto"
    model: Model = field(default_factory=Model)

    def _nccl_ms(self, nbytes: float) -> float:
        assert self.topology is not None
        return _allreduce_one_ms(self.topology, float(nbytes), self.forced, self.model)

    def time_ms(self, nbytes: float) -> float:
        if nbytes <= 0 or not self.phases:
            return 0.0
        return self._nccl_ms(nbytes) + self.a_ms + self.b_ms_per_byte * nbytes

    def phase_times(self, nbytes: float) -> list[tuple[Phase, float]]:
        return [(p, self._nccl_ms(nbytes) if p.name == "nccl" else p.a_ms
                 + p.b_ms_per_byte * nbytes) for p in self.phases]

    def times_ms(self, sizes) -> list[float]:
        """:meth:`time_ms` of every size in one vectorised call (:func:`allreduce_ms`, as
        the sweep's cost): the dynamic program of ``mgwfbp`` costs all its merges at once."""
        assert self.topology is not None
        n = np.asarray(sizes, float)
        if not self.phases or n.size == 0:
            return [0.0] * n.size
        nccl = allreduce_ms(self.topology, n, self.forced, self.model)
        return np.where(n > 0, nccl + self.a_ms + self.b_ms_per_byte * n, 0.0).tolist()


def nccl_allreduce_cost(algorithm: str, workers: int, gpus_per_node: int, intra: str,
                        inter: str, nics_per_node: int | None, m: Model | None = None
                        ) -> NcclCost:
    """The DAG's cost of one gradient all-reduce under NCCL's model (presets by name)."""
    t = topology(workers, gpus_per_node, intra, inter, nics_per_node)
    m = m or Model()
    if workers > 1:
        _check(m, KINDS["allreduce"], t, MODEL_NAMES[algorithm])
    link = (t.intra.name if t.nodes == 1
            else f"{t.intra.name}+{t.nics_per_node}x{t.nic.name}")
    phases = (Phase("nccl", link, 0.0, 0.0),) if workers > 1 else ()
    return NcclCost(algorithm, phases, t, MODEL_NAMES[algorithm], m)
