"""The NCCL releases whose tuning model :mod:`.nccl` can run, declared once as data (issue #34).

Each :class:`NcclVersion` holds what that release's own source says, read at a cited tag and
commit of NVIDIA/nccl (``src/graph/tuning.cc``: base and per-hop latencies, bandwidth
refinements and caps, the tree correction; ``src/graph/search.cc``: the speeds of the topology
search; ``src/graph/topo.h``: link widths; ``src/enqueue.cc`` and the device headers: thread
thresholds, threads, buffers). Nothing here is fitted. Code (:mod:`.nccl_tuning`) reads these
fields; it has no per-version branches beyond what a field names. ``docs/collectives.md`` lists
every value with its line of source.

Index conventions: protocol triples are ``(LL, LL128, Simple)``; ``arch`` rows are (Volta,
Ampere, Hopper, Blackwell) and columns (one node, two nodes, more), as tuning.cc's tables.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from dgtraces.comm.fabrics import NVLINK_GB_S
from dgtraces.errors import Code, DgtracesError, Failure

Triple = tuple[float, float, float]
ArchTable = tuple[tuple[float, float, float], ...]  # [arch][one node | two nodes | more]
REPO = "NVIDIA/nccl"

# tree correction factors (ncclTopoGetAlgoTime), by log2(bytes / 64)
_TREE_CORR_22 = {
    "LL": (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0,
           1.0, 1.0),
    "LL128": (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .5, .6, .6, .7, .7, .8,
              .9, .9, 1.0),
    "Simple": (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .5, .5, .6, .6, .7,
               .8, .9)}
_TREE_CORR_23 = {
    "LL": _TREE_CORR_22["LL"] + (1.0,),
    "LL128": (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9,
              .9, .9, 1.0, 1.0),
    "Simple": (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7,
               .8, .9, .9)}
_TREE_CORR_24 = {p: t + (t[-1],) for p, t in _TREE_CORR_23.items()}

# tuning.cc tables of 2.12 (two arch rows) and 2.18+ (three or four)
_LL_MAX_212: ArchTable = ((39.0, 39.0, 20.4), (87.7, 22.5, 19.0))
_TREE_PER_CH_212: ArchTable = ((26.5, 18.5, 10.0), (24.0, 23.6, 17.8))
_LL_MAX_218: ArchTable = _LL_MAX_212 + ((87.7, 22.5, 19.0),)
_TREE_PER_CH_218: ArchTable = _TREE_PER_CH_212 + ((38.7, 41.4, 36.0),)
_RING_LL128_PER_CH_218: ArchTable = ((20.0, 20.0, 20.0), (20.0, 20.0, 20.0), (36.7, 36.7, 36.7))
_TREE_LL128_PER_CH_218: ArchTable = ((20.0, 20.0, 20.0), (20.0, 20.0, 20.0), (36.7, 36.7, 29.0))

_SPEEDS_INTRA = (40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0)
_SPEEDS_INTER = (48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0,
                 3.0, 2.4, 1.2, 0.24, 0.12)


@dataclass(frozen=True, eq=False)  # one object per release: compared and hashed by identity
class NcclVersion:
    """One NCCL release's tuning model, as its source states it (see the module doc)."""

    key: str  # what --nccl takes: "2.18"
    tag: str  # the git tag read
    commit: str  # the commit of that tag
    released: str  # date of the tag's commit (the rule for logs that do not print a version)
    read: str  # files read
    algorithms: tuple[str, ...]  # NCCL's all-reduce algorithms of this release (in its order)
    base_lat: Mapping[str, Triple]  # baseLat per algorithm, us
    hw_lat: Mapping[str, Mapping[str, Triple]]  # hwLat per hardware (nvlink, pci, net), us
    tree_corr: Mapping[str, tuple[float, ...]]  # treeCorrectionFactor per protocol
    nvlink_gb_s: Mapping[int, float]  # topo.h SMxx_NVLINK_BW(WIDTH) per compute capability
    select: str = "time"  # "time": least modelled time; "threshold": 2.4's size thresholds
    graph: str = "search"  # "search": NCCL's speed search; "bus": issue #25's bus rule
    nic: str = "line"  # "line": NIC speed Mb/s / 8000 (topo.cc); "net12": NET_BW 12 per 100 Gb
    cc80_bus_cap: float | None = None  # 2.7/2.12: busBw <= 235 on compute capability 8.0
    ring_ll: tuple[float, float] = (4.0, 3.0)  # divisor: (several nodes or AR/reduce, other)
    ll_max: ArchTable | None = None  # llMaxBws (caps LL), from 2.12
    ring_ll128_eff: tuple[float, float] = (0.7, 0.92)  # (ppn < 2, ppn >= 2)
    ring_ll128_cap: str = "per-coll"  # "per-coll" (2.7), "flat20" (2.12), "arch" (2.18+)
    ring_ll128_per_ch: ArchTable | None = None
    tree_eff: float = 0.9
    tree_cap: str = "absolute"  # "absolute" (2.7 maxTreeBw), "absolute-2.5", "per-ch"
    tree_ll_div: float = 3.8  # tree LL bus bandwidth divisor (2.5.6: 3)
    tree_per_ch: ArchTable | None = None
    tree_ll128_multi: float = 0.915
    tree_ll128_per_ch: ArchTable | None = None
    ring_inter_steps: str = "2(N-1)"  # all-reduce ring steps on the network ("all": 2.5.6)
    ll_intra_multinode: float = 1.8  # LL intra hop latency factor on several nodes
    net_overhead_us: float | None = None  # getNetOverhead (x86 Intel): ring hops >= it
    ppn1_tree_net_lat: bool = False  # 2.30: one GPU per node takes the tree's NET latency
    plateau: str = "bytes"  # "bytes": n >= P/16 * 64 KiB; "per-channel": n / (C P) >= 64
    plateau_factor_cc80: float = 1.9  # ring Simple latency factor on cc >= 8.0
    ll128_cc: tuple[int, ...] = (70, 80)  # compute capabilities with LL128 on by default
    speeds_intra: tuple[float, ...] = _SPEEDS_INTRA
    speeds_inter: tuple[float, ...] = _SPEEDS_INTER
    speeds_sm90: tuple[tuple[float, ...], tuple[float, ...]] | None = None  # (intra, inter)
    dup_rule: str = "bw>=25"  # "bw>=25" or "bw>=25, not (cc>80 and bw<50 and nCh>4)"
    max_channels: int = 32  # MAXCHANNELS (the graph search takes up to half)
    nvls_eff: float | None = None  # nvlsEfficiency of Hopper (2.30)
    nvls_tree_per_ch: ArchTable | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def source(self) -> str:
        return f"{REPO} {self.tag} (commit {self.commit[:7]}): {self.read}"

    def has(self, algorithm: str) -> bool:
        return algorithm in self.algorithms


_TUNING = "src/graph/tuning.cc, src/graph/search.cc, src/graph/topo.h, src/enqueue.cc"

VERSIONS: dict[str, NcclVersion] = {v.key: v for v in (
    NcclVersion(
        "2.4", "v2.4.2-1", "1450d42675be325cd3b7a684d4b231eedceb22fb", "2018-12-13",
        "src/enqueue.cu (getKernelInfo, getPatternInfo), src/init.cu (ncclTreeThreshold, "
        "ncclThreadThreshold), src/include/core.h; times from v2.5.6-1 src/graph/tuning.cc "
        "(commit 299c554), the first release with a tuning model",
        ("tree", "ring"),
        base_lat={"tree": (4.4, 4.4, 0.0), "ring": (3.6, 3.6, 8.4)},
        hw_lat={"nvlink": {"tree": (.5, 1.9, 28.0), "ring": (.4, 2.5, 5.7)},
                "pci": {"tree": (1.0, 1.9, 28.0), "ring": (1.0, 2.5, 5.7)},
                "net": {"tree": (5.0, 7.5, 50.0), "ring": (.9, 2.5, 6.6)}},
        tree_corr=_TREE_CORR_22, nvlink_gb_s=NVLINK_GB_S, select="threshold", graph="bus",
        nic="net12", ring_ll=(4.0, 4.0), ll128_cc=(), tree_cap="absolute-2.5",
        tree_ll_div=3.0, ring_inter_steps="all", ll_intra_multinode=1.0,
        notes=("2.4 picks tree and LL by size thresholds, not by a time model; the time of "
               "the pair it picks is costed with 2.5.6's tables (LL and Simple only: no LL128 "
               "before 2.5); tree on several nodes only",)),
    NcclVersion(
        "2.7", "v2.7.5-1", "01afd20a77b5804e0ecf1042509dd9d20ebf9e93", "2020-06-22", _TUNING,
        ("tree", "ring", "collnet"),
        base_lat={"tree": (4.4, 4.4, 0.0), "ring": (3.6, 10.0, 8.4),
                  "collnet": (4.4, 4.4, 0.0)},
        hw_lat={"nvlink": {"tree": (.52, 1.2, 28.0), "ring": (.47, 1.9, 3.4),
                           "collnet": (.5, 1.2, 4.0)},
                "pci": {"tree": (1.0, 1.9, 28.0), "ring": (1.0, 2.5, 5.7),
                        "collnet": (1.0, 1.9, 5.5)},
                "net": {"tree": (5.0, 8.5, 50.0), "ring": (2.7, 4.0, 9.6),
                        "collnet": (5.0, 5.0, 10.7)}},
        tree_corr=_TREE_CORR_22, nvlink_gb_s=NVLINK_GB_S, graph="bus", nic="net12",
        cc80_bus_cap=235.0, ll128_cc=(70, 80, 90),
        notes=("issue #25's model, unchanged: the bus rule for channels and NET_BW 12 per "
               "100 Gbit, LL128 extended to compute capability 9.0",)),
    NcclVersion(
        "2.12", "v2.12.12-1", "7aa1c46fd551d5514474cfc55848219dc67ca683", "2022-05-03",
        _TUNING, ("tree", "ring", "collnet"),
        base_lat={"tree": (4.4, 4.4, 0.0), "ring": (3.6, 10.0, 8.4),
                  "collnet": (4.4, 4.4, 0.0)},
        hw_lat={"nvlink": {"tree": (.52, 1.25, 28.0), "ring": (.47, 1.9, 3.4),
                           "collnet": (.5, 1.2, 8.0)},
                "pci": {"tree": (1.0, 1.9, 28.0), "ring": (1.0, 2.5, 5.7),
                        "collnet": (1.0, 1.9, 8.0)},
                "net": {"tree": (5.0, 8.5, 28.0), "ring": (2.7, 4.0, 28.0),
                        "collnet": (5.0, 5.0, 10.7)}},
        tree_corr=_TREE_CORR_23, nvlink_gb_s={60: 18.0, 70: 22.0, 80: 22.0, 90: 22.0},
        cc80_bus_cap=235.0, ll_max=_LL_MAX_212, ring_ll128_cap="flat20", tree_eff=0.92,
        tree_cap="per-ch", tree_per_ch=_TREE_PER_CH_212, tree_ll128_multi=120 / 128,
        ring_inter_steps="2N",
        speeds_intra=(42.0, 24.0, 21.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0,
                      2.4, 1.2, 0.24, 0.12),
        speeds_inter=(42.0, 24.0, 21.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0,
                      2.4, 1.2, 0.24, 0.12)),
    NcclVersion(
        "2.18", "v2.18.6-1", "0b083e52096c387bad7a5c5c65b26a9dca54de8c", "2023-10-10",
        _TUNING, ("tree", "ring", "collnet-direct", "collnet-chain", "nvls", "nvls-tree"),
        base_lat={"tree": (6.8, 14.0, 0.0), "ring": (6.6, 14.0, 8.4),
                  "collnet-direct": (6.8, 14.0, 0.0), "collnet-chain": (6.8, 14.0, 0.0),
                  "nvls": (0.0, 0.0, 23.0), "nvls-tree": (0.0, 0.0, 23.0)},
        hw_lat={"nvlink": {"tree": (.6, 1.25, 4.0), "ring": (.6, 1.9, 3.4),
                           "collnet-direct": (0, 0, 8.0), "collnet-chain": (0, 0, 4.75),
                           "nvls": (0, 0, 0), "nvls-tree": (0, 0, 0)},
                "pci": {"tree": (1.0, 1.9, 6.0), "ring": (1.0, 2.5, 5.7),
                        "collnet-direct": (0, 0, 8.0), "collnet-chain": (0, 0, 8.0),
                        "nvls": (0, 0, 0), "nvls-tree": (0, 0, 0)},
                "net": {"tree": (5.0, 8.5, 14.0), "ring": (2.7, 4.0, 14.0),
                        "collnet-direct": (0, 0, 10.7), "collnet-chain": (0, 0, 14.0),
                        "nvls": (0, 0, 18.0), "nvls-tree": (0, 0, 19.0)}},
        tree_corr=_TREE_CORR_23, nvlink_gb_s={60: 18.0, 70: 20.0, 80: 20.0, 90: 20.0},
        ll_max=_LL_MAX_218, ring_ll128_cap="arch", ring_ll128_per_ch=_RING_LL128_PER_CH_218,
        tree_eff=0.92, tree_cap="per-ch", tree_per_ch=_TREE_PER_CH_218,
        tree_ll128_multi=120 / 128, tree_ll128_per_ch=_TREE_LL128_PER_CH_218,
        ring_inter_steps="2N", ll_intra_multinode=1.0, net_overhead_us=1.0,
        plateau="per-channel", plateau_factor_cc80=1.4, ll128_cc=(70, 80, 90),
        speeds_sm90=((60.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 6.0, 3.0),
                     (48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0,
                      2.4, 1.2, 0.24, 0.12)),
        dup_rule="bw>=25, not (cc>80 and bw<50 and nCh>4)"),
    NcclVersion(
        "2.30", "v2.30.7-1", "73cf112295c33aee2b895f329f592f2a9b4b0f97", "2026-06-04",
        _TUNING, ("tree", "ring", "collnet-direct", "collnet-chain", "nvls", "nvls-tree",
                  "pat"),
        base_lat={"tree": (6.8, 14.0, 8.4), "ring": (6.6, 14.0, 8.4),
                  "collnet-direct": (0, 0, 0), "collnet-chain": (0, 0, 0),
                  "nvls": (0, 0, 0), "nvls-tree": (0, 0, 0), "pat": (8.0, 8.0, 8.0)},
        hw_lat={"nvlink": {"tree": (.6, 1.25, 4.0), "ring": (.6, 1.9, 3.4),
                           "collnet-direct": (0, 0, 3.7), "collnet-chain": (0, 0, 2.8),
                           "nvls": (0, 0, 25.0), "nvls-tree": (0, 0, 25.0),
                           "pat": (0, 0, 4.0)},
                "pci": {"tree": (1.0, 1.9, 4.0), "ring": (1.0, 2.5, 5.7),
                        "collnet-direct": (0, 0, 3.7), "collnet-chain": (0, 0, 2.8),
                        "nvls": (0, 0, 0), "nvls-tree": (0, 0, 0), "pat": (0, 0, 4.0)},
                "net": {"tree": (5.0, 8.5, 14.0), "ring": (2.7, 4.0, 14.0),
                        "collnet-direct": (0, 0, 31.0), "collnet-chain": (0, 0, 30.0),
                        "nvls": (0, 0, 18.0), "nvls-tree": (0, 0, 20.9),
                        "pat": (0, 0, 14.0)}},
        tree_corr=_TREE_CORR_24,
        nvlink_gb_s={60: 18.0, 70: 20.0, 80: 20.0, 90: 20.6, 100: 40.1},
        ring_ll=(2.0, 2.0),
        ll_max=((39.0, 39.0, 20.4), (87.7, 22.5, 19.0), (141.0, 45.0, 35.0),
                (282.0, 90.0, 70.0)),
        ring_ll128_eff=(0.92, 0.92), ring_ll128_cap="arch",
        ring_ll128_per_ch=_RING_LL128_PER_CH_218 + ((40.0, 40.0, 40.0),),
        tree_eff=0.92, tree_cap="per-ch", tree_per_ch=_TREE_PER_CH_218 + ((70.0, 42.8, 24.0),),
        tree_ll128_multi=120 / 128,
        tree_ll128_per_ch=_TREE_LL128_PER_CH_218 + ((55.6, 31.67, 20.0),),
        ll_intra_multinode=1.0, net_overhead_us=1.0, ppn1_tree_net_lat=True,
        plateau="per-channel", plateau_factor_cc80=1.4, ll128_cc=(70, 80, 90, 100),
        speeds_sm90=((60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0),
                     (48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0,
                      3.0, 2.4, 1.2, 0.24, 0.12)),
        dup_rule="bw>=25, not (cc>80 and bw<50 and nCh>4)", max_channels=64, nvls_eff=0.85,
        nvls_tree_per_ch=((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (0.0, 57.7, 45.5),
                          (0.0, 96.0, 80.0))),
)}
DEFAULT_VERSION = max(VERSIONS, key=lambda k: tuple(int(x) for x in k.split(".")))
ISSUE25_VERSION = "2.7"  # the model of issue #25 (before versions existed)


def _numbers(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split("."))


def unknown_version(text: object) -> DgtracesError:
    """UNKNOWN_NCCL: the known keys and the closest (did you mean)."""
    from dgtraces.errors import suggestions

    known = list(VERSIONS)
    near = next(iter(suggestions(str(text), known, n=1)), None)
    return DgtracesError(
        f"unknown NCCL version {text!r}" + (f"; did you mean {near!r}?" if near else "")
        + f"; modelled: {', '.join(known)} (a patch release, e.g. 2.18.3, reads as its "
        "minor release)", code=Code.UNKNOWN_NCCL,
        failures=[Failure(Code.UNKNOWN_NCCL, "unknown NCCL version", column="nccl",
                          expected=" | ".join(known), found=repr(text))])


def version(text: str | None = None) -> NcclVersion:
    """The modelled release of ``text`` (``2.18``, ``2.18.3``, ``v2.18.6-1``; None: the
    newest); UNKNOWN_NCCL for a release that is not modelled."""
    if text is None or str(text).strip() in ("", "latest", "newest"):
        return VERSIONS[DEFAULT_VERSION]
    m = re.fullmatch(r"\s*v?(\d+)\.(\d+)(?:\.\d+)?(?:-\d+)?\s*", str(text))
    key = f"{m[1]}.{m[2]}" if m else None
    if key not in VERSIONS:
        raise unknown_version(text)
    return VERSIONS[key]


def version_for_release(release: str) -> NcclVersion:
    """The newest modelled release not newer than ``release`` (e.g. ``2.8.3`` -> 2.7): the rule
    for a log that ran a release this model does not hold (pre-registered, docs)."""
    m = re.fullmatch(r"\s*v?(\d+)\.(\d+)(?:\.(\d+))?.*", str(release))
    if m is None:
        raise unknown_version(release)
    wanted = (int(m[1]), int(m[2]))
    older = [k for k in VERSIONS if _numbers(k) <= wanted]
    if not older:
        raise unknown_version(release)
    return VERSIONS[max(older, key=_numbers)]


def version_for_date(date: str) -> NcclVersion:
    """The newest modelled release whose tag is not later than ``date`` (YYYY-MM-DD)."""
    older = [v for v in VERSIONS.values() if v.released <= date]
    if not older:
        raise unknown_version(date)
    return max(older, key=lambda v: _numbers(v.key))
