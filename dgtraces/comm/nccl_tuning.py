"""NCCL's tuning model, for any release of :data:`.nccl_versions.VERSIONS` (issue #34 item 1).

Re-expressed from ``ncclTopoTuneModel`` and ``ncclTopoGetAlgoTime`` (``src/graph/tuning.cc``)
and the topology search (``src/graph/search.cc``): for each algorithm ``a`` and protocol ``p``
NCCL computes a latency ``lat`` (us) and an algorithm bandwidth ``bw`` (GB/s), and the time of
``n`` bytes is ``lat + n / (1000 bw)`` after a size-dependent tree correction and ring
plateau. Every constant comes from the :class:`~.nccl_versions.NcclVersion` entry; this module
holds the forms. Two views of a NIC: NCCL's (what it ranks with: its line rate, or issue #25's
``NET_BW`` figure for 2.4/2.7) and the achieved one of ``links.csv`` (``achieved=True``: the
time of the pair NCCL picked, :mod:`.nccl_run`). docs/collectives.md states every form.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

from dgtraces.comm.nccl_versions import VERSIONS, NcclVersion

if TYPE_CHECKING:  # pragma: no cover
    from dgtraces.comm.nccl import Kind, Topology

PROTOCOLS = ("LL", "LL128", "Simple")
COLLNET = ("collnet", "collnet-direct", "collnet-chain")
NVLS = ("nvls", "nvls-tree")
# the collectives each non-ring NCCL algorithm runs (tuning.cc skips the others); read by
# enabled and by nccl's check of a forced algorithm
RUNS = {**{a: ("allreduce",) for a in ("tree", *NVLS, *COLLNET)},
        "pat": ("allgather", "reducescatter")}
CHANNEL_GB_S = 20.0  # issue #25's bus rule: one channel per 20 GB/s of bus bandwidth
LL128_PER_COLL_GB_S = {"broadcast": 18.8, "reduce": 12.0, "allgather": 18.3,
                       "reducescatter": 15.2, "allreduce": 16.7}  # 2.7 ll128MaxBwPerCh
NVLS_ARITY = {"2.18": 8, "2.30": 32}  # NCCL_MAX_NVLS_ARITY (device.h)


@dataclass(frozen=True)
class Graph:
    """What NCCL's topology search yields: channels and bandwidth per channel (GB/s), and the
    channels a collective may launch (``comm->nChannels``)."""

    channels: int
    bw: float
    comm_channels: int
    bus_gb_s: float  # channels x bw (kept as computed: the bus rule's figure unrounded)


def board_gb_s(v: NcclVersion, t: "Topology") -> float:
    """The board's bandwidth per GPU under release ``v`` (NVLinks x its SMxx_NVLINK_BW)."""
    f = t.intra
    if f.hw == "nvlink" and f.compcap is not None:
        return f.links * v.nvlink_gb_s[f.compcap]
    return f.bandwidth_gb_s


def nic_gb_s(v: NcclVersion, t: "Topology", achieved: bool) -> float:
    """One NIC's bandwidth: achieved (links.csv), else as release ``v``'s topology reads it."""
    if achieved:
        return t.nic_achieved_gb_s
    return t.nic.bandwidth_gb_s if v.nic == "net12" else t.nic.line_gbit_s / 8.0


def _search(speeds, total: float, max_bw: float, max_ch: int) -> tuple[int, float]:
    """search.cc in closed form: from the fastest speed that fits, the channel count and speed
    of largest total (ties: the faster); stop once the total is reached or the next speed is
    under half of the best (``speedArray[i+1] / bw > .49``)."""
    best: tuple[int, float] | None = None
    for s in speeds:
        if s > max_bw + 1e-9 or s > total + 1e-9:
            continue
        if best is not None and s / best[1] <= 0.49:
            break
        n = min(max_ch, int(total / s + 1e-9))
        if best is None or n * s > best[0] * best[1] + 1e-9:
            best = (n, s)
        if n * s >= total - 1e-9:
            break
    return best if best is not None else (1, speeds[-1])


@lru_cache(maxsize=512)
def graph(v: NcclVersion, t: "Topology", achieved: bool = False) -> Graph:
    """The ring/tree graph of ``t`` under ``v`` (bus rule for 2.4/2.7, else the search)."""
    board = board_gb_s(v, t)
    nic = nic_gb_s(v, t, achieved)
    cc = t.intra.compcap or 0
    if v.graph == "bus":
        bus = board if t.nodes == 1 else min(board, t.nics_per_node * nic)
        ch = max(1, math.ceil(bus / CHANNEL_GB_S))
        return Graph(ch, bus / ch, min(2 * ch, v.max_channels), bus)
    path = board if t.intra.path_links is None else (
        t.intra.path_links * board / max(1, t.intra.links))
    sm90 = v.speeds_sm90 is not None and cc >= 90
    if t.nodes == 1:
        speeds = v.speeds_sm90[0] if sm90 and v.speeds_sm90 else v.speeds_intra
        total, max_bw = board, path
    else:
        speeds = v.speeds_sm90[1] if sm90 and v.speeds_sm90 else v.speeds_inter
        total, max_bw = min(board, t.nics_per_node * nic), min(path, nic)
    n, s = _search(speeds, total, max_bw, v.max_channels // 2)
    dup = s >= 25.0 and not ("cc>80" in v.dup_rule and cc > 80 and s < 50.0 and n > 4)
    if dup:
        n2 = min(2 * n, v.max_channels // 2)
        s, n = s / math.ceil(n2 / n), n2
    return Graph(n, s, min(2 * n, v.max_channels), n * s)


@lru_cache(maxsize=512)
def nvls_graph(v: NcclVersion, t: "Topology", achieved: bool = False) -> Graph | None:
    """NVLS's graph: one channel per GPU of the node (per NIC head across nodes), at the
    fastest SM90 intra speed the GPU's NVLink carries (non-ring patterns: total x g/(g-1))."""
    if not (t.intra.nvswitch and (t.intra.compcap or 0) >= 90 and v.speeds_sm90):
        return None
    g = t.per_node
    heads = g if t.nodes == 1 else min(g, t.nics_per_node)
    heads = min(heads, NVLS_ARITY.get(v.key, 8))
    if heads < 2:
        return None
    total = board_gb_s(v, t) * (g / (g - 1) if g > 1 else 1.0)
    s = next((x for x in v.speeds_sm90[0] if x * heads <= total + 1e-9), v.speeds_sm90[0][-1])
    if t.nodes > 1:
        s = min(s, nic_gb_s(v, t, achieved))
    return Graph(heads, s, heads, heads * s)


def _arch(v: NcclVersion, table, cc: int | None) -> int:
    cc = cc or 0
    if len(table) == 2:  # 2.12: compCap80
        return 1 if cc == 80 else 0
    return min(len(table) - 1, 3 if cc >= 100 else 2 if cc >= 90 else 1 if cc >= 80 else 0)


def _col(t: "Topology") -> int:
    return 0 if t.nodes == 1 else 1 if t.nodes == 2 else 2


def _ll_max(v: NcclVersion, t: "Topology") -> float:
    if v.ll_max is None:
        return math.inf
    row = _arch(v, v.ll_max, t.intra.compcap) if t.nodes == 1 else 0  # Intel CPU assumed
    return v.ll_max[row][_col(t)]


def _per_ch(v: NcclVersion, table, t: "Topology") -> float:
    return table[_arch(v, table, t.intra.compcap)][_col(t)]


def _bus(v: NcclVersion, k: "Kind", t: "Topology", a: str, p: str, g: Graph) -> float:
    """tuning.cc's bus bandwidth of ``a``/``p`` (0: not used), before the algorithm ratio."""
    bus = g.bus_gb_s
    cc = t.intra.compcap
    if v.cc80_bus_cap is not None and cc == 80:
        bus = min(bus, v.cc80_bus_cap)
    ppn = t.per_node
    if a == "ring":
        if p == "LL":
            f = v.ring_ll[0] if (t.nodes > 1 or k.name in ("allreduce", "reduce")) else \
                v.ring_ll[1]
            return min(_ll_max(v, t), bus / f)
        if p == "LL128":
            cap = {"per-coll": LL128_PER_COLL_GB_S.get(k.name, 0.0), "flat20": 20.0,
                   "arch": _per_ch(v, v.ring_ll128_per_ch, t) if v.ring_ll128_per_ch else 0.0
                   }[v.ring_ll128_cap]
            return min(bus * v.ring_ll128_eff[0 if ppn < 2 else 1], cap * g.channels)
        return bus
    if a == "tree":
        if v.tree_cap == "per-ch":
            bus = min(bus * v.tree_eff, g.channels * _per_ch(v, v.tree_per_ch, t))
        elif v.tree_cap == "absolute-2.5":
            bus = min(bus * v.tree_eff, 70.0 if t.nodes > 1 else 90.0)
        else:
            c80 = cc == 80 and p == "LL128"
            cap = (105.0 if c80 else 80.0) if t.nodes > 2 else (130.0 if c80 else 110.0)
            bus = min(bus * v.tree_eff, cap)
        if p == "LL":
            return min(bus / v.tree_ll_div, _ll_max(v, t))
        if p == "LL128":
            eff = 7.0 / 9.0 if t.nodes == 1 else v.tree_ll128_multi
            if v.tree_ll128_per_ch is not None:
                cap = _per_ch(v, v.tree_ll128_per_ch, t) * g.channels
            elif v.ring_ll128_cap == "flat20":
                cap = 20.0 * g.channels
            else:
                cap = LL128_PER_COLL_GB_S["allreduce"] * g.channels * 7.0 / 9.0
            return min(bus * eff, cap)
        return bus
    if p != "Simple" and (a != "collnet" or v.key != "2.7"):
        return 0.0
    if a == "collnet":  # 2.7: .9, LL / 6, no LL128; 2.12: Simple only
        if v.key == "2.7":
            return 0.0 if p == "LL128" else bus * 0.9 / (6.0 if p == "LL" else 1.0)
        return bus
    if a == "collnet-direct":
        factor = ppn / g.channels
        factor -= (factor - 1) / 2
        return bus / factor * (0.85 if (cc or 0) >= 90 else 1.0)
    return bus  # collnet-chain


def _nvls_bw(v: NcclVersion, k: "Kind", t: "Topology", a: str, g: Graph) -> float:
    """NVLS / NVLS tree algorithm bandwidth (2.18: 5/6 and .70 N/2(N-1); 2.30: efficiency)."""
    if v.nvls_eff is None:
        ratio = 5.0 / 6.0 if a == "nvls" else 0.70 * t.nodes / (2 * (t.nodes - 1))
        return g.bus_gb_s * ratio
    intra = g.bw * v.nvls_eff * (g.channels - 1) / g.channels * 2.0  # all-reduce pipelines 2
    inter = g.bw * (2.0 if (t.nodes <= 2 and a == "nvls-tree") else 1.0)
    bw = min(intra, inter) if t.nodes > 1 else intra
    if a == "nvls-tree" and v.nvls_tree_per_ch is not None:
        bw = min(bw, _per_ch(v, v.nvls_tree_per_ch, t))
    return g.channels * bw * t.ranks / k.steps(t.ranks)


def _hop(v: NcclVersion, hw: str, a: str, p: str) -> float:
    return v.hw_lat[hw][a][PROTOCOLS.index(p)]


def _latency(v: NcclVersion, k: "Kind", t: "Topology", a: str, p: str) -> float:
    i = PROTOCOLS.index(p)
    base = v.base_lat[a][i]
    ihw = "nvlink" if t.intra.hw == "nvlink" else "pci"
    intra = _hop(v, ihw, a, p) * (v.ll_intra_multinode if t.nodes > 1 and p == "LL" else 1.0)
    inter = _hop(v, "net", "tree" if (v.ppn1_tree_net_lat and t.per_node == 1
                                      and a in ("ring", "tree")) else a, p)
    ppn, log_n = t.per_node, int(math.log2(t.nodes))
    if a == "ring":
        steps = k.steps(t.ranks)
        hw = ihw if t.nodes == 1 else "net"
        if k.chain:  # broadcast/reduce, not sameChannels: Simple takes the tree hop
            return base + steps * _hop(v, hw, "tree" if p == "Simple" else "ring", p)
        if v.ring_inter_steps == "all":
            return base + steps * _hop(v, hw, "ring", p)
        if t.nodes > 1 and v.net_overhead_us is not None:
            intra = max(intra, v.net_overhead_us * (3.0 if p == "Simple" else 1.0))
        if t.nodes == 1:
            n_inter = 0
        elif k.name == "allreduce":
            n_inter = 2 * t.nodes if v.ring_inter_steps == "2N" else 2 * (t.nodes - 1)
        else:
            n_inter = t.nodes - 1
        return base + (steps - n_inter) * intra + n_inter * inter
    if a == "tree":
        return base + 2 * ((ppn - 1) * intra + log_n * inter)
    if a == "collnet":
        if v.key == "2.7":
            return base + 2 * (ppn - 1) * intra + inter
        return base + 2 * (min(1, ppn - 1) * intra + (ppn - 1) * 0.5) + inter
    if a == "collnet-direct":
        serial = 0.4 if v.key == "2.30" else 0.5
        return base + 2 * (min(1, ppn - 1) * intra + (ppn - 1) * serial) + inter
    if a == "collnet-chain":
        return base + 2 * (ppn - 1) * intra + inter
    if a == "nvls":
        if v.nvls_eff is None:  # 2.18: base + the NET hop on several nodes
            return base + (_hop(v, "net", a, p) if t.nodes > 1 else 0.0)
        return intra + (inter if t.nodes > 1 else 0.0)
    if a == "nvls-tree":
        if v.nvls_eff is None:
            return base + 2 * (t.nodes - 1) * _hop(v, "net", a, p)
        return base + intra + 2 * log_n * inter
    # pat (all-gather / reduce-scatter, one GPU per node)
    return base + log_n * (inter / 3.5) + t.ranks * 2.8


def enabled(v: NcclVersion, k: "Kind", t: "Topology", a: str) -> bool:
    """Whether release ``v`` runs algorithm ``a`` for ``k`` on ``t`` (tuning.cc's enables)."""
    if not v.has(a):
        return False
    if a == "ring":
        return True
    if k.name not in RUNS[a]:
        return False
    if a == "pat":
        return t.per_node == 1 and t.nodes > 1
    if a == "tree":
        return v.select != "threshold" or t.nodes > 1
    if a in COLLNET:
        return (t.nodes > 1 and t.nic.sharp
                and (a != "collnet-direct" or t.intra.nvswitch))
    if a == "nvls":
        return nvls_graph(v, t) is not None and (t.nodes == 1 or t.nic.sharp)
    return a == "nvls-tree" and t.nodes > 1 and nvls_graph(v, t) is not None


def protocol_on(v: NcclVersion, t: "Topology", a: str, p: str) -> bool:
    if p == "LL128":
        return t.intra.hw == "nvlink" and (t.intra.compcap or 0) in v.ll128_cc
    return True


@dataclass(frozen=True)
class Entry:
    """One (algorithm, protocol) of ``ncclTopoTuneModel``: latency and algorithm bandwidth."""

    algorithm: str
    protocol: str
    lat_us: float
    bw_gb_s: float


@lru_cache(maxsize=1024)
def tune(v: NcclVersion, k: "Kind", t: "Topology", achieved: bool = False,
         algorithm: str = "auto") -> tuple[Entry, ...]:
    """The enabled pairs with a bandwidth, in NCCL's order (algorithms, then protocols);
    computed once per (release, collective, topology) and kept (they are constants)."""
    out = []
    g = graph(v, t, achieved)
    gn = nvls_graph(v, t, achieved)
    for a in v.algorithms:
        if (algorithm != "auto" and a != algorithm) or not enabled(v, k, t, a):
            continue
        for p in PROTOCOLS:
            if not protocol_on(v, t, a, p):
                continue
            if a in NVLS:
                if p != "Simple" or gn is None:
                    continue
                bw = _nvls_bw(v, k, t, a, gn)
            else:
                bus = _bus(v, k, t, a, p, g)
                if a == "ring":
                    bw = bus * t.ranks / k.steps(t.ranks)
                else:  # pat (all-gather / reduce-scatter) keeps its bus figure, x .75
                    bw = bus * 0.75 if a == "pat" else bus * 0.5
            if bw > 0:
                out.append(Entry(a, p, _latency(v, k, t, a, p), bw))
    return tuple(out)


def algo_parts(v: NcclVersion, k: "Kind", t: "Topology", e: Entry, n: np.ndarray,
               comm_channels: int) -> tuple[np.ndarray, np.ndarray]:
    """``ncclTopoGetAlgoTime``'s latency (us) and bandwidth (GB/s) for the sizes ``n``
    (bytes): the tree correction and the ring plateau."""
    bw = np.full(n.shape, e.bw_gb_s)
    lat = np.full(n.shape, e.lat_us)
    if e.algorithm == "tree":
        table = np.asarray(v.tree_corr[e.protocol])
        log_size = np.where(n >= 128, np.floor(np.log2(np.maximum(n, 128.0) / 64)), 0)
        inside = log_size < len(table)
        idx = np.minimum(log_size, len(table) - 1).astype(np.int64)
        bw = np.where(inside, bw * table[idx], bw)
    if (e.algorithm == "ring" and e.protocol == "Simple" and t.nodes > 1
            and k.name == "allreduce"):
        if v.plateau == "bytes":
            hit, factor = n >= t.ranks / 16.0 * 65536, 1.9
        else:
            hit = n / (comm_channels * t.ranks) >= 64
            factor = 1.9 if (t.intra.compcap or 0) < 80 else v.plateau_factor_cc80
        lat = np.where(hit, lat * factor, lat)
    return lat, bw


def algo_time(v: NcclVersion, k: "Kind", t: "Topology", e: Entry, n: np.ndarray,
              comm_channels: int) -> np.ndarray:
    """``ncclTopoGetAlgoTime``: the time (us) NCCL ranks pair ``e`` with."""
    lat, bw = algo_parts(v, k, t, e, n, comm_channels)
    return lat + n / (1000.0 * bw)


def select_threshold(k: "Kind", t: "Topology", n: np.ndarray, entries: tuple[Entry, ...],
                      forced: str) -> np.ndarray:
    """NCCL 2.4's choice (enqueue.cu getPatternInfo / getKernelInfo, init.cu thresholds):
    tree while ``n <= treeThreshold`` (all-reduce, several nodes), LL while
    ``n <= nc x nt x nchunksPerLoop x threadThreshold``."""
    g = graph(VERSIONS["2.4"], t)
    nvlink = t.intra.hw == "nvlink"
    ring_bw = 5000.0 * g.channels if nvlink else 5000.0
    tree_bw = ring_bw * 3 / 4 * (2 if t.nodes == 2 else 1) if nvlink else ring_bw * 2 / 3
    ring_lat = 6.0 * (t.ranks - 1)
    tree_lat = 15.0 * int(math.log2(t.nodes)) + 4.0 * (t.per_node - 1)
    if t.nodes < 2 or ring_lat <= tree_lat:
        tree_max = 0.0
    elif tree_bw > ring_bw:
        tree_max = math.inf
    else:
        tree_max = ring_bw * tree_bw / (ring_bw - tree_bw) * (ring_lat - tree_lat)
    if forced == "auto":
        tree = (n <= tree_max) & (k.name == "allreduce")
    else:
        tree = np.full(n.shape, forced == "tree")
    thr = (64 if (t.intra.compcap or 70) >= 70 else 32) * (2 if t.nodes > 1 else 1)
    chunks = np.where(tree, 1, t.ranks if k.name in ("allreduce", "allgather",
                                                     "reducescatter") else 1)
    nt = np.full(n.shape, 64.0)
    for _ in range(2):  # 64 -> 128 -> 256 (NCCL_LL_MAX_NTHREADS)
        nt = np.where(np.ceil(n / (nt * chunks)) > 8, nt * 2, nt)
    nc = np.clip(np.ceil(n / (nt * chunks * 8)), 1, g.channels)
    ll = n <= nc * nt * chunks * thr * np.where(tree, 4, 1)
    pairs = [(e.algorithm, e.protocol) for e in entries]
    want = [("tree" if tr else "ring", "LL" if low else "Simple")
            for tr, low in zip(tree.tolist(), ll.tolist(), strict=True)]
    return np.asarray([pairs.index(w) for w in want], dtype=np.int64)
