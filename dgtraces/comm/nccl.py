"""NCCL's own tuning model: which algorithm and protocol NCCL runs for a message, and its time.

Form and tables: NCCL 2.7.5, ``src/graph/tuning.cc`` (``ncclTopoTuneModel``,
``ncclTopoGetAlgoTime``), read and re-expressed; link widths from NCCL's ``src/graph/topo.h``.
For each algorithm ``a`` (tree, ring) and protocol ``p`` (LL, LL128, Simple) NCCL predicts a
latency ``lat`` (us) and an algorithm bandwidth ``bw`` (GB/s) and runs the pair of least
``lat + n / (1000 bw)``. The pre-registration, every constant and its source:
``docs/collectives.md``. Hardware is declared once in :data:`FABRICS` (intra-node boards and
NICs with the bandwidth NCCL's topology gives them); collectives once in :data:`KINDS`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from dgtraces.comm.collectives import CommCost, Phase
from dgtraces.errors import Code, DgtracesError, Failure
from dgtraces.values import bad_value, whole_number

NCCL_VERSION = "2.7.5"
TUNING_SOURCE = "NVIDIA/nccl v2.7.5 src/graph/tuning.cc (commit 01afd20)"
TOPO_SOURCE = "NVIDIA/nccl src/graph/topo.h (commit 069a3d4)"

ALGORITHMS = ("tree", "ring")
# names of this model for --algorithm -> the NCCL algorithm forced ("auto": NCCL's choice)
MODEL_NAMES = {"auto": "auto", "nccl-ring": "ring", "nccl-tree": "tree"}
PROTOCOLS = ("LL", "LL128", "Simple")
# latencies in us, per (algorithm) over (LL, LL128, Simple)
BASE_LAT_US = {"tree": (4.4, 4.4, 0.0), "ring": (3.6, 10.0, 8.4)}
HOP_LAT_US = {"nvlink": {"tree": (0.52, 1.2, 28.0), "ring": (0.47, 1.9, 3.4)},
              "pci": {"tree": (1.0, 1.9, 28.0), "ring": (1.0, 2.5, 5.7)},
              "net": {"tree": (5.0, 8.5, 50.0), "ring": (2.7, 4.0, 9.6)}}
# tree bandwidth correction by log2(bytes / 64), 64 B .. 128 MiB (22 entries per protocol)
TREE_CORRECTION = {
    "LL": (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0,
           1.0, 1.0),
    "LL128": (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .5, .6, .6, .7, .7, .8,
              .9, .9, 1.0),
    "Simple": (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .5, .5, .6, .6, .7,
               .8, .9)}
CC80_BUS_CAP_GB_S = 235.0
CHANNEL_GB_S = 20.0  # one channel per NVLink at SM70/SM80 width (assumption: docs/collectives.md)
NVLINK_GB_S = {60: 18.0, 70: 20.0, 80: 20.0, 90: 20.6}  # topo.h SMxx_NVLINK_BW, per link
PCI_GB_S = 12.0  # topo.h PCI_BW, gen3 x16
NET_GB_S_PER_GBIT = 12.0 / 100.0  # topo.h NET_BW 12 for 100 Gbit
TCP_EFFICIENCY = 0.60  # NVIDIA/nccl issue #209 (as links.csv)
MAX_NICS_PER_NODE = 32  # topo.h: "up to 32 NICs per node on GB200-NVL72"
MAX_RANKS = 2 ** 31 - 1  # NCCL's nranks is a C int (ncclCommInitRank); as predict's MAX_COUNT


@dataclass(frozen=True)
class Fabric:
    """What NCCL's topology sees of a link: class (nvlink, pci, net), bandwidth (per GPU for a
    board, per NIC for a network), the GPU's compute capability for boards, and a source."""

    name: str
    hw: str
    bandwidth_gb_s: float
    source: str
    compcap: int | None = None


def _nvlink(name: str, cc: int, links: int, gpu: str) -> Fabric:
    return Fabric(name, "nvlink", links * NVLINK_GB_S[cc],
                  f"{links} NVLinks per GPU ({gpu} datasheet) x SM{cc}_NVLINK_BW "
                  f"{NVLINK_GB_S[cc]} GB/s ({TOPO_SOURCE})", cc)


def _pci(name: str, factor: int) -> Fabric:
    return Fabric(name, "pci", PCI_GB_S * factor,
                  f"PCI_BW {PCI_GB_S} GB/s gen3 x16 ({TOPO_SOURCE})"
                  + (f" x {factor} by lane rate (assumed)" if factor > 1 else ""))


def _rdma(name: str, gbit_s: float, spec: str) -> Fabric:
    return Fabric(name, "net", gbit_s * NET_GB_S_PER_GBIT,
                  f"{spec}: {gbit_s:g} Gb/s x NET_BW 12 GB/s per 100 Gbit ({TOPO_SOURCE})")


def _tcp(name: str, gbit_s: float, spec: str) -> Fabric:
    return Fabric(name, "net", gbit_s / 8 * TCP_EFFICIENCY,
                  f"{spec}: {gbit_s:g} Gb/s / 8 x {TCP_EFFICIENCY} (NCCL over TCP sockets, "
                  f"NVIDIA/nccl issue #209)")


FABRICS: dict[str, Fabric] = {f.name: f for f in (
    _nvlink("nvlink1", 60, 4, "P100 SXM2"), _nvlink("nvlink2", 70, 6, "V100 SXM2"),
    _nvlink("nvlink2-link", 70, 1, "V100 SXM2, one link"),
    _nvlink("nvlink3", 80, 12, "A100 SXM4"), _nvlink("nvlink4", 90, 18, "H100 SXM5"),
    _pci("pcie3", 1), _pci("pcie4", 2), _pci("pcie5", 4),
    _rdma("ib-fdr", 54.5, "IBTA 1.3 4x FDR"), _rdma("ib-edr", 100, "IBTA 1.3 4x EDR"),
    _rdma("ib-hdr", 200, "IBTA 1.4 4x HDR"), _rdma("ib-ndr", 400, "IBTA 1.5 4x NDR"),
    _rdma("100gbe-roce", 100, "IEEE 802.3ba/bj 100GBASE, RoCE"),
    _rdma("200gbe-roce", 200, "IEEE 802.3bs 200GBASE, RoCE"),
    _rdma("400gbe-roce", 400, "IEEE 802.3bs 400GBASE, RoCE"),
    _tcp("10gbe-nccl", 10, "IEEE 802.3ae 10GBASE"), _tcp("25gbe-nccl", 25, "IEEE 802.3by"),
    _tcp("100gbe-tcp", 100, "IEEE 802.3ba/bj 100GBASE"))}


@dataclass(frozen=True)
class Kind:
    """A collective: NCCL's step counts (per ranks ``P`` / nodes ``N``), nccl-tests' busbw
    factor, the LL128 per-channel cap, whether tree is a choice, and ring-latency form."""

    name: str
    steps: Callable[[int], int]
    bus_factor: Callable[[int], float]
    ll128_per_ch_gb_s: float
    tree: bool = False
    chain: bool = False  # broadcast/reduce: latency per step, not per intra/inter hop


KINDS: dict[str, Kind] = {k.name: k for k in (
    Kind("allreduce", lambda p: 2 * (p - 1), lambda p: 2 * (p - 1) / p, 16.7, tree=True),
    Kind("allgather", lambda p: p - 1, lambda p: (p - 1) / p, 18.3),
    Kind("reducescatter", lambda p: p - 1, lambda p: (p - 1) / p, 15.2),
    Kind("broadcast", lambda p: p, lambda p: 1.0, 18.8, chain=True),
    Kind("reduce", lambda p: p, lambda p: 1.0, 12.0, chain=True),
    Kind("alltoall", lambda p: p - 1, lambda p: (p - 1) / p, 0.0))}
ALIASES = {"reduce_scatter": "reducescatter", "all_reduce": "allreduce",
           "all_gather": "allgather", "all_to_all": "alltoall"}


def closest(name: object, known) -> str | None:
    """The known name most like ``name`` (the did-you-mean), if any is close."""
    import difflib

    close = difflib.get_close_matches(str(name), sorted(known), n=1)
    return close[0] if close else None


def unknown(what: str, name: object, known, code: Code = Code.BAD_INPUT) -> DgtracesError:
    """A typed error for an unknown name: the known ones and the closest (did you mean)."""
    known = sorted(known)
    close = closest(name, known)
    hint = f"; did you mean {close!r}?" if close else ""
    return DgtracesError(f"unknown {what} {name!r}{hint} known: {', '.join(known)}", code=code,
                         failures=[Failure(code, f"unknown {what}", column=what,
                                           expected=" | ".join(known), found=repr(name))])


def kind(name: str) -> Kind:
    name = ALIASES.get(name, name)
    if name not in KINDS:
        raise unknown("collective", name, KINDS)
    return KINDS[name]


def fabric(name: str, field: str) -> Fabric:
    """The board (``field`` intra: nvlink, pci) or NIC (inter: net) of a preset or alias."""
    from dgtraces.comm.links import link_aliases

    target = link_aliases().get(name, (name, ""))[0]
    known = {k: f for k, f in FABRICS.items() if (f.hw == "net") == (field == "inter")}
    if target not in known:
        raise unknown(field, name, known, Code.UNKNOWN_LINK)
    return known[target]


# The NVLink generation of each NVLink GPU of the device registry: the GPU each preset of
# FABRICS is taken from (nvlink1 P100 SXM2, nvlink2 V100 SXM2, nvlink3 A100 SXM4, nvlink4
# H100 SXM5; the H200 SXM keeps the H100's NVLink 4, as the V100-DGXS the V100's).
NVLINK_OF_DEVICE = {"p100": "nvlink1", "v100": "nvlink2", "v100-dgxs-32gb": "nvlink2",
                    "a100": "nvlink3", "h100": "nvlink4", "h200": "nvlink4"}


def check_nvlink_alias(device: str | None, intra) -> None:
    """BAD_INPUT when a bare alias names another GPU's NVLink than ``device``'s: ``nvlink``
    is the V100's NVLink 2 (link_aliases.csv, as in v0.3), so ``--device a100 --intra
    nvlink`` modelled an A100 on V100 links; the error names the device's own preset (#36
    trial). A preset named in full (``nvlink2``) is taken as given. ``intra``: preset names
    (or Links, ignored)."""
    from dgtraces.comm.links import link_aliases

    native = NVLINK_OF_DEVICE.get(str(device).lower()) if device else None
    for name in intra:
        if not isinstance(name, str) or name not in link_aliases():
            continue
        target = link_aliases()[name][0]
        if native is not None and target in FABRICS and FABRICS[target].hw == "nvlink" \
                and target != native:
            gpu = next(d for d, link in NVLINK_OF_DEVICE.items() if link == target)
            raise bad_value("intra", f"'{name}' is the {gpu}'s NVLink ({target}), not the "
                            f"{device}'s ({native}): give --intra {native}",
                            f"{native} (the {device}'s NVLink)", name)


UNUSED_NIC = Fabric("unused", "net", 0.0, "one node: no network is crossed")


def nic(name: str, nodes: int) -> Fabric:
    """The NIC of ``name``; on one node any inter preset (even a board) reads as unused."""
    if nodes > 1:
        return fabric(name, "inter")
    try:
        return fabric(name, "inter")
    except DgtracesError:
        return UNUSED_NIC


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
    def bus_gb_s(self) -> float:
        if self.nodes == 1:
            return self.intra.bandwidth_gb_s
        return min(self.intra.bandwidth_gb_s, self.nics_per_node * self.nic.bandwidth_gb_s)

    @property
    def channels(self) -> int:
        return max(1, math.ceil(self.bus_gb_s / CHANNEL_GB_S))

    def ll128(self) -> bool:
        return self.intra.hw == "nvlink" and self.intra.compcap in (70, 80, 90)


def _bandwidth(k: Kind, t: Topology, a: str, p: str) -> float:
    """Algorithm bandwidth (GB/s) of ``a``/``p`` as tuning.cc refines the graph's bus one."""
    bus = t.bus_gb_s
    if t.intra.compcap == 80:
        bus = min(bus, CC80_BUS_CAP_GB_S)
    if p == "LL128" and not t.ll128():
        return 0.0
    if a == "ring":
        if p == "LL":
            bus /= 4.0 if (t.nodes > 1 or k.name in ("allreduce", "reduce")) else 3.0
        elif p == "LL128":
            eff = 0.7 if t.per_node < 2 else 0.92
            bus = min(bus * eff, k.ll128_per_ch_gb_s * t.channels)
        return bus * t.ranks / k.steps(t.ranks)
    cc80 = t.intra.compcap == 80 and p == "LL128"
    cap = (105.0 if cc80 else 80.0) if t.nodes > 2 else (130.0 if cc80 else 110.0)
    bus = min(bus * 0.9, cap)
    if p == "LL":
        bus /= 3.8
    elif p == "LL128":
        bus = min(bus * (7.0 / 9.0 if t.nodes == 1 else 0.915),
                  k.ll128_per_ch_gb_s * t.channels * 7.0 / 9.0)
    return bus * 0.5


def _latency(k: Kind, t: Topology, a: str, p: str) -> float:
    i = PROTOCOLS.index(p)
    hw = t.intra.hw if t.intra.hw in ("nvlink",) else "pci"
    intra = HOP_LAT_US[hw][a][i] * (1.8 if t.nodes > 1 and p == "LL" else 1.0)
    net = HOP_LAT_US["net"][a][i]
    base = BASE_LAT_US[a][i]
    if a == "tree":
        return base + 2 * ((t.per_node - 1) * intra + int(math.log2(t.nodes)) * net)
    steps = k.steps(t.ranks)
    if k.chain:
        hop_hw = hw if t.nodes == 1 else "net"
        hop = HOP_LAT_US[hop_hw]["tree" if p == "Simple" else "ring"][i]
        return base + steps * hop
    inter_steps = k.steps(t.nodes) if t.nodes > 1 else 0
    return base + (steps - inter_steps) * intra + inter_steps * net


def candidates(k: Kind, t: Topology, algorithm: str = "auto") -> list[tuple[str, str]]:
    """The (algorithm, protocol) pairs NCCL may run for ``k`` (``algorithm`` forces one)."""
    algos = [a for a in ALGORITHMS if a == "ring" or k.tree]
    if algorithm != "auto":
        algos = [a for a in algos if a == algorithm]
    return [(a, p) for a in algos for p in PROTOCOLS if _bandwidth(k, t, a, p) > 0]


def time_us(k: Kind, t: Topology, nbytes: float, a: str, p: str) -> float:
    """NCCL's predicted time of one ``a``/``p`` collective of ``nbytes`` bytes."""
    if k.name == "alltoall":
        return _alltoall_us(t, nbytes)
    bw = _bandwidth(k, t, a, p)
    lat = _latency(k, t, a, p)
    log_size = int(math.log2(nbytes / 64)) if nbytes >= 128 else 0
    if a == "tree" and log_size < len(TREE_CORRECTION[p]):
        bw *= TREE_CORRECTION[p][log_size]
    if (a == "ring" and p == "Simple" and t.nodes > 1 and k.name == "allreduce"
            and nbytes >= t.ranks / 16.0 * 65536):
        lat *= 1.9  # NCCL's "plateau effect of ring"
    return lat + nbytes / (1000.0 * bw)


def allreduce_ms(t: Topology, nbytes, algorithm: str = "auto"):
    """Vectorised :func:`choose` for all-reduce: NCCL's least time (ms) of each size in the
    array ``nbytes`` (0 for sizes <= 0 or one rank). The same candidates and the same
    size-dependent rules as :func:`time_us` (tree correction, ring plateau), applied to an
    array; the sweep uses it (fast path == DAG path, tested)."""
    import numpy as np

    k = KINDS["allreduce"]
    n = np.asarray(nbytes, float)
    if t.ranks <= 1:
        return np.zeros(n.shape)
    safe = np.maximum(n, 128.0)
    log_size = np.where(n >= 128, np.floor(np.log2(safe / 64)), 0).astype(np.int64)
    best = np.full(n.shape, np.inf)
    for a, p in candidates(k, t, algorithm):
        bw = np.full(n.shape, _bandwidth(k, t, a, p))
        lat = np.full(n.shape, _latency(k, t, a, p))
        if a == "tree":
            table = np.asarray(TREE_CORRECTION[p])
            inside = log_size < len(table)
            bw = np.where(inside, bw * table[np.minimum(log_size, len(table) - 1)], bw)
        if a == "ring" and p == "Simple" and t.nodes > 1:
            lat = np.where(n >= t.ranks / 16.0 * 65536, lat * 1.9, lat)
        best = np.minimum(best, lat + n / (1000.0 * bw))
    return np.where(n > 0, best / 1000.0, 0.0)


def _alltoall_us(t: Topology, nbytes: float) -> float:
    """Point-to-point all-to-all (not in NCCL's tuning model; docs/collectives.md)."""
    p = t.ranks
    hw = t.intra.hw if t.nodes == 1 else "net"
    bw = t.intra.bandwidth_gb_s if t.nodes == 1 else min(
        t.intra.bandwidth_gb_s, t.nics_per_node * t.nic.bandwidth_gb_s / t.per_node)
    lat = BASE_LAT_US["ring"][2] + (p - 1) * HOP_LAT_US[hw]["ring"][2]
    return lat + nbytes * (p - 1) / p / (1000.0 * bw)


def choose(k: Kind, t: Topology, nbytes: float, algorithm: str = "auto"
           ) -> tuple[float, str, str]:
    """(time_us, algorithm, protocol) of least time, as NCCL picks them (0 for one rank)."""
    if t.ranks <= 1 or nbytes <= 0:
        return 0.0, "none", "none"
    if k.name == "alltoall":
        return _alltoall_us(t, nbytes), "p2p", "Simple"
    best = min((time_us(k, t, nbytes, a, p), a, p) for a, p in candidates(k, t, algorithm))
    return best


def check_cluster(workers: int, gpus_per_node: int, nics_per_node: int) -> int:
    """Nodes of a cluster; BAD_INPUT for counts that cannot be."""
    workers = whole_number("workers", workers, least=1, most=MAX_RANKS)
    gpus_per_node = whole_number("gpus_per_node", gpus_per_node, least=1, most=MAX_RANKS)
    nics = whole_number("nics_per_node", nics_per_node, least=1)
    if workers % gpus_per_node and workers > gpus_per_node:
        raise bad_value("workers", f"not a multiple of --gpus-per-node {gpus_per_node}",
                        f"a multiple of {gpus_per_node}", workers)
    if nics > MAX_NICS_PER_NODE:
        raise bad_value("nics_per_node", "more NICs than NCCL's topology holds per node",
                        f"1 .. {MAX_NICS_PER_NODE}", nics)
    return -(-workers // gpus_per_node)


@dataclass(frozen=True)
class NcclCost(CommCost):
    """A gradient all-reduce costed per message size by NCCL's tuning model (``auto``,
    ``nccl-ring``, ``nccl-tree``) for :func:`dgtraces.predict.dag.simulate`: the phase named
    ``nccl`` stands for NCCL's choice (no affine terms); further phases (staging) add theirs."""

    topology: Topology | None = None
    forced: str = "auto"

    def _nccl_ms(self, nbytes: float) -> float:
        assert self.topology is not None
        return choose(KINDS["allreduce"], self.topology, nbytes, self.forced)[0] / 1000.0

    def time_ms(self, nbytes: float) -> float:
        if nbytes <= 0 or not self.phases:
            return 0.0
        return self._nccl_ms(nbytes) + self.a_ms + self.b_ms_per_byte * nbytes

    def phase_times(self, nbytes: float) -> list[tuple[Phase, float]]:
        return [(p, self._nccl_ms(nbytes) if p.name == "nccl" else p.a_ms
                 + p.b_ms_per_byte * nbytes) for p in self.phases]


def nccl_allreduce_cost(algorithm: str, workers: int, gpus_per_node: int, intra: str,
                        inter: str, nics_per_node: int) -> NcclCost:
    """The DAG's cost of one gradient all-reduce under NCCL's model (presets by name)."""
    nodes = check_cluster(workers, gpus_per_node, nics_per_node)
    t = Topology(workers, nodes, fabric(intra, "intra"), nic(inter, nodes), nics_per_node)
    link = t.intra.name if nodes == 1 else f"{t.intra.name}+{nics_per_node}x{t.nic.name}"
    phases = (Phase("nccl", link, 0.0, 0.0),) if workers > 1 else ()
    return NcclCost(algorithm, phases, t, MODEL_NAMES[algorithm])
