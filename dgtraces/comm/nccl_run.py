"""What a collective costs when it runs, beyond NCCL's tuning model (issue #34 item 2).

NCCL ranks algorithms with ``lat + n / bw`` (:mod:`.nccl_tuning`). The pair it picks then
runs with three costs that ranking leaves out, each from a cited source, nothing fitted:

* **launch**: the host enqueues the collective's kernel on each GPU it drives, one after the
  other (nccl-tests ``-g G``: one thread, G GPUs). ``LAUNCH_US_PER_GPU`` per GPU: NVIDIA/nccl
  issue #1984 (4 x H800, nccl-tests ``-g 4``, 1 KiB all-reduce: 3.5 us per iteration without
  CUDA graphs, 0.5 us with them; the 3.0 us difference is the launch of 4 GPUs' kernels).
* **channels**: for small sizes NCCL launches fewer channels than it has (``getAlgoInfo`` /
  ``topoGetAlgoInfo`` in ``src/enqueue.cc``: ``while (nBytes < nc * nt * threadThreshold)
  nc--``), and the bandwidth scales with them (``bw / comm->nChannels * nChannels``,
  ``ncclTopoGetAlgoTime`` from 2.12).
* **pipeline fill**: algorithms that move the data through a chain of ``D`` stages in chunks
  (broadcast/reduce pipelines, CollNet chain and direct, NVLS, NVLS tree) finish ``D - 1``
  chunk times after the bandwidth term; chunk sizes from ``computeColl`` (``src/enqueue.cc``,
  v2.18.6-1). Ring all-reduce has none (every link carries data on every step: ``n / bw``
  already counts all steps); tree has NCCL's own correction factor (its stand-in for fill).

The pair runs on the achieved NIC bandwidth (``links.csv``), not NCCL's line-rate view.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from dgtraces.comm.fabrics import PCI_GB_S
from dgtraces.comm.nccl_tuning import NVLS, Entry, Graph, algo_parts, graph, nvls_graph
from dgtraces.comm.nccl_versions import NcclVersion

if TYPE_CHECKING:  # pragma: no cover
    from dgtraces.comm.nccl import Kind, Topology

LAUNCH_US_PER_GPU = 0.75  # NVIDIA/nccl issue #1984: (3.5 - 0.5) us / 4 GPUs
LAUNCH_SOURCE = ("NVIDIA/nccl issue #1984: 4 x H800, nccl-tests -g 4, 1 KiB all-reduce, 3.5 us "
                 "without CUDA graphs, 0.5 us with: 3.0 us / 4 GPUs = 0.75 us per GPU launched")
STEPS = 8  # NCCL_STEPS
BUFF = {"Simple": 1 << 22, "LL": 8 * 512 * STEPS * 16,
        "LL128": 120 * 640 * STEPS * 8}  # DEFAULT_BUFFSIZE; LL/LL128 buffers (device.h)
DATA = {"Simple": 1.0, "LL": 0.5, "LL128": 120 / 128}  # data per byte of a protocol's line
THREADS = {"LL": 512, "LL128": 640, "Simple": 512}  # NCCL_{LL,LL128,SIMPLE}_MAX_NTHREADS
THRESHOLD = {"LL": 8, "LL128": 8, "Simple": 64}  # NCCL_*_THREAD_THRESHOLD (bytes per thread)


def launch_us(gpus_per_process: int) -> float:
    return LAUNCH_US_PER_GPU * gpus_per_process


def launched_channels(t: "Topology", e: Entry, g: Graph, n: np.ndarray) -> np.ndarray:
    """Channels NCCL launches for ``n`` bytes (ring/tree channel tuning; others all)."""
    if e.algorithm not in ("ring", "tree"):
        return np.full(n.shape, float(g.comm_channels))
    nt = THREADS[e.protocol]
    # ring Simple runs 256 threads when its graph carries <= PCI_BW (tuning.cc)
    if e.algorithm == "ring" and e.protocol == "Simple" and g.bus_gb_s <= PCI_GB_S:
        nt = 256
    thr = THRESHOLD[e.protocol] * (t.ranks if (e.algorithm, e.protocol) == ("ring", "LL")
                                   else 1)
    return np.clip(np.floor(n / (nt * thr)), 1, g.comm_channels)


def _halve(chunk: np.ndarray, short: np.ndarray, floor: int) -> np.ndarray:
    return np.where(short & (chunk > floor), chunk / 2, chunk)


def _chunk(k: "Kind", t: "Topology", e: Entry, n: np.ndarray, nc: np.ndarray,
           heads: int) -> np.ndarray:
    """computeColl's chunk size (bytes of data) of the pipelined algorithms."""
    step = BUFF[e.protocol] / STEPS
    a = e.algorithm
    if a == "nvls":
        c = np.full(n.shape, min(step, 131072.0))
        ops = nc * heads
        for mult, floor in ((64, 65536), (8, 32768), (2, 16384)):
            c = np.where((n < mult * ops * c) & (c > floor), floor, c)
        return c
    if a == "nvls-tree":
        c = np.full(n.shape, step)
        ops = nc * heads
        for mult, size in ((32, 262144), (16, 131072), (4, 65536), (1, 32768)):
            c = np.where((n < mult * ops * c) & (c > size), size, c)
        return c
    if a == "collnet-chain":
        c = np.full(n.shape, min(262144.0, step))
        depth = t.per_node
        for mult, floor in ((64, 131072), (8, 65536), (1, 32768)):
            c = _halve(c, n / (nc * c) < depth * mult, floor)
        return c
    return np.full(n.shape, step * DATA[e.protocol])  # broadcast/reduce pipeline, collnet


def _stages(k: "Kind", t: "Topology", a: str) -> int:
    if a == "ring":
        return t.ranks - 1 if k.chain else 1
    if a == "collnet-chain":
        return 2 * (t.per_node - 1) + 1
    if a in ("collnet", "collnet-direct"):
        return 3
    if a == "nvls":
        return 2
    if a == "nvls-tree":
        return 2 + 2 * int(math.log2(t.nodes))
    return 1  # tree (NCCL's correction), pat


def run_us(v: NcclVersion, k: "Kind", t: "Topology", e: Entry, n: np.ndarray,
           gpus_per_process: int = 1) -> np.ndarray:
    """Time (us) of ``n`` bytes when pair ``e`` (from the achieved-bandwidth tables) runs."""
    g = graph(v, t, achieved=True)
    gn = nvls_graph(v, t, achieved=True) if e.algorithm in NVLS else None
    used = gn if gn is not None else g
    lat, bw = algo_parts(v, k, t, e, n, g.comm_channels)
    nc = launched_channels(t, e, used, n)
    bw = bw * nc / used.comm_channels
    data = n / (1000.0 * bw)
    fill = np.zeros(n.shape)
    d = _stages(k, t, e.algorithm)
    if d > 1:
        per_channel = np.maximum(n / nc, 1.0)
        chunk = np.minimum(_chunk(k, t, e, n, nc, used.channels), per_channel)
        fill = (d - 1) * chunk / (1000.0 * bw / nc)
    return launch_us(gpus_per_process) + lat + data + fill
