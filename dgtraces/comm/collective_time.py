"""One collective's time for a list of message sizes (``dgtraces collective``).

``algorithm`` is ``auto`` (NCCL's own choice of algorithm and protocol per size,
:mod:`dgtraces.comm.nccl`, under the release ``nccl`` and its ``run`` or ``tuning`` time),
``nccl-ring`` / ``nccl-tree`` / ``nccl-collnet-*`` / ``nccl-nvls*`` / ``nccl-pat`` (NCCL's model
with the algorithm forced, protocol still chosen), or a name of the alpha-beta registry
(:data:`dgtraces.comm.collectives.COLLECTIVES`: today's all-reduce algorithms over ``links.csv``
presets). Rows carry nccl-tests' columns: time, algbw and busbw.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

from dgtraces.comm.collectives import COLLECTIVES
from dgtraces.comm.collectives import collective as alpha_beta  # (`collective` is a parameter)
from dgtraces.comm.fabrics import fabric, link_or_spec, unknown
from dgtraces.comm.links import Link, link_dict
from dgtraces.comm.nccl import (
    MODEL_NAMES,
    Kind,
    check_cluster,
    collective_us,
    fabric_view,
    kind,
    model,
    topology,
)
from dgtraces.errors import Code
from dgtraces.values import bad_value as bad

NCCL_ALGORITHMS = MODEL_NAMES
UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1024, "kib": 1024, "m": 1024 ** 2, "mb": 1024 ** 2,
         "mib": 1024 ** 2, "g": 1024 ** 3, "gb": 1024 ** 3, "gib": 1024 ** 3,
         "t": 1024 ** 4, "tb": 1024 ** 4, "tib": 1024 ** 4}
MAX_BYTES = 1 << 40
FLOAT_BYTES = 4  # the element type of every row (nccl-tests' default, -d float)


def algorithms() -> tuple[str, ...]:
    """Every name ``--algorithm`` takes: the NCCL model's, then the alpha-beta registry's."""
    return tuple(NCCL_ALGORITHMS) + tuple(COLLECTIVES)


def parse_size(text: str) -> int:
    """``8``, ``64KiB``, ``1M``, ``2GiB`` -> bytes (binary units, as nccl-tests' -b/-e)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", str(text), re.ASCII)
    unit = m[2].lower() if m else None
    if m is None or unit not in UNITS:
        raise bad("sizes", "not a size (bytes, or with K/KiB/M/MiB/G/GiB/T/TiB)",
                  "e.g. 8,64KiB,1MiB", text)
    value = float(m[1]) * UNITS[unit]
    if not 0 < value <= MAX_BYTES or value != int(value):
        raise bad("sizes", "must be a whole number of bytes in 1 B .. 1 TiB", "1 .. 2**40",
                  text)
    if int(value) % FLOAT_BYTES:  # the row's count would round it down silently (#36)
        raise bad("sizes", f"must be a whole number of float elements ({FLOAT_BYTES} bytes "
                  "each, as nccl-tests' float type)", f"a multiple of {FLOAT_BYTES} bytes",
                  text)
    return int(value)


def parse_sizes(text: str) -> tuple[int, ...]:
    sizes = tuple(parse_size(x) for x in str(text).split(",") if x.strip())
    if not sizes:
        raise bad("sizes", "no size given", "e.g. 8,64KiB,1MiB", text)
    return sizes


@dataclass(frozen=True)
class Row:
    message_bytes: int
    time_us: float
    algbw_gb_s: float
    busbw_gb_s: float
    algorithm: str
    protocol: str


@dataclass
class CollectiveResult:
    """Rows per size plus what was used (links with sources, the model)."""

    collective: str
    workers: int
    gpus_per_node: int
    nodes: int
    nics_per_node: int
    algorithm: str
    rows: list[Row]
    links: dict
    model: str
    nccl: str | None = None  # the NCCL release modelled (None: an alpha-beta algorithm)
    nccl_time: str | None = None  # run | tuning
    provenance: str = "modelled"
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        out = asdict(self)
        out["rows"] = [asdict(r) for r in self.rows]
        return out


def _row(k: Kind, p: int, n: int, t_us: float, algo: str, proto: str) -> Row:
    algbw = n / t_us / 1000.0 if t_us > 0 else 0.0
    return Row(n, t_us, algbw, algbw * k.bus_factor(p) if p > 1 else 0.0, algo, proto)


def predict_collective(collective: str, sizes, *, workers: int, gpus_per_node: int = 1,
                       intra: "str | Link" = "pcie3", inter: "str | Link" = "10gbe",
                       nics_per_node: int | None = 1,
                       algorithm: str = "auto", release: str | None = "latest",
                       nccl: str | None = None, nccl_time: str = "run",
                       gpus_per_process: int = 1) -> CollectiveResult:
    """Time of ``collective`` for each size in bytes (see the module docstring)."""
    k = kind(collective)
    sizes = [parse_size(s) if isinstance(s, str) else parse_size(str(s)) for s in sizes]
    nodes = check_cluster(workers, gpus_per_node, 1 if nics_per_node is None else nics_per_node)
    g = min(gpus_per_node, workers)
    if algorithm not in algorithms():
        raise unknown("algorithm", algorithm, algorithms())
    rows: list[Row] = []
    notes = []
    version: str | None = None
    time: str | None = None
    if algorithm in NCCL_ALGORITHMS:
        assert isinstance(intra, str) and isinstance(inter, str)  # a Link: alpha-beta only
        m = model(nccl, nccl_time, gpus_per_process)
        fabric(inter, "inter")  # a NIC, even on one node (UNKNOWN_LINK with a did-you-mean)
        t = topology(workers, gpus_per_node, intra, inter, nics_per_node)
        times, algos, protos = collective_us(k, t, sizes, NCCL_ALGORITHMS[algorithm], m)
        for n, us, a, p in zip(sizes, times.tolist(), algos, protos, strict=True):
            rows.append(_row(k, workers, n, us, a, p))
        used = fabric_view(m, t)
        if nodes > 1 and t.nic.kind == "efa":
            notes.append("EFA presets are not validated here (no EFA log among the "
                         "reference outputs)")
        label, version, time = m.label, m.version.key, m.time
        nics_per_node = t.nics_per_node
    else:
        if k.name != "allreduce":
            raise bad("algorithm", "the alpha-beta algorithms model all-reduce only",
                      "auto | nccl-ring", algorithm, code=Code.BAD_INPUT)
        links = (link_or_spec(intra, "intra", release=release),
                 link_or_spec(inter, "inter", release=release))
        cost = alpha_beta(algorithm, workers, g, *links)
        for n in sizes:
            rows.append(_row(k, workers, n, cost.time_ms(n) * 1000.0, algorithm, "-"))
        used = {side: link_dict(link) for side, link in zip(("intra", "inter"), links,
                                                               strict=True)}
        label = f"alpha-beta {algorithm} (dgtraces.comm.collectives), links.csv presets"
        nics_per_node = 1 if nics_per_node is None else nics_per_node
    if nodes == 1:
        notes.append("one node: --inter and --nics-per-node are not used")
    return CollectiveResult(k.name, workers, g, nodes, nics_per_node, algorithm, rows, used,
                            label, version, time, notes=notes)
