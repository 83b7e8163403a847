"""One collective's time for a list of message sizes (``dgtraces collective``).

``algorithm`` is ``auto`` (NCCL's own choice of algorithm and protocol per size,
:mod:`dgtraces.comm.nccl`), ``nccl-ring`` / ``nccl-tree`` (NCCL's model with the algorithm
forced, protocol still chosen), or a name of the alpha-beta registry
(:data:`dgtraces.comm.collectives.COLLECTIVES`: today's all-reduce algorithms over ``links.csv``
presets). Rows carry nccl-tests' columns: time, algbw and busbw.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

from dgtraces.comm.collectives import COLLECTIVES
from dgtraces.comm.collectives import collective as alpha_beta  # (`collective` is a parameter)
from dgtraces.comm.links import get_link, link_dict
from dgtraces.comm.nccl import (
    MODEL_NAMES,
    NCCL_VERSION,
    TUNING_SOURCE,
    Kind,
    Topology,
    check_cluster,
    choose,
    fabric,
    kind,
)
from dgtraces.errors import Code
from dgtraces.values import bad_value as bad

NCCL_ALGORITHMS = MODEL_NAMES
UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1024, "kib": 1024, "m": 1024 ** 2, "mb": 1024 ** 2,
         "mib": 1024 ** 2, "g": 1024 ** 3, "gb": 1024 ** 3, "gib": 1024 ** 3}
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
        raise bad("sizes", "not a size (bytes, or with K/KiB/M/MiB/G/GiB)",
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
                       intra: str = "pcie3", inter: str = "10gbe", nics_per_node: int = 1,
                       algorithm: str = "auto", release: str | None = "latest"
                       ) -> CollectiveResult:
    """Time of ``collective`` for each size in bytes (see the module docstring)."""
    from dgtraces.comm.nccl import unknown

    k = kind(collective)
    sizes = [parse_size(s) if isinstance(s, str) else parse_size(str(s)) for s in sizes]
    nodes = check_cluster(workers, gpus_per_node, nics_per_node)
    g = min(gpus_per_node, workers)
    if algorithm not in algorithms():
        raise unknown("algorithm", algorithm, algorithms())
    rows: list[Row] = []
    if algorithm in NCCL_ALGORITHMS:
        forced = NCCL_ALGORITHMS[algorithm]
        if forced == "tree" and not k.tree:
            raise bad("algorithm", "NCCL runs tree for all-reduce only", "auto | nccl-ring",
                      algorithm)
        t = Topology(workers, nodes, fabric(intra, "intra"), fabric(inter, "inter"),
                     nics_per_node)
        for n in sizes:
            rows.append(_row(k, workers, n, *choose(k, t, n, forced)))
        used = {side: {"link": f.name, "class": f.hw, "bandwidth_gb_s": f.bandwidth_gb_s,
                       "source": f.source} for side, f in (("intra", t.intra), ("inter", t.nic))}
        model = f"NCCL {NCCL_VERSION} tuning model ({TUNING_SOURCE}); docs/collectives.md"
    else:
        if k.name != "allreduce":
            raise bad("algorithm", "the alpha-beta algorithms model all-reduce only",
                      "auto | nccl-ring", algorithm, code=Code.BAD_INPUT)
        links = (get_link(intra, field="intra", release=release),
                 get_link(inter, field="inter", release=release))
        cost = alpha_beta(algorithm, workers, g, *links)
        for n in sizes:
            rows.append(_row(k, workers, n, cost.time_ms(n) * 1000.0, algorithm, "-"))
        used = {side: link_dict(link) for side, link in zip(("intra", "inter"), links,
                                                               strict=True)}
        model = f"alpha-beta {algorithm} (dgtraces.comm.collectives), links.csv presets"
    notes = []
    if nodes == 1:
        notes.append("one node: --inter and --nics-per-node are not used")
    return CollectiveResult(k.name, workers, g, nodes, nics_per_node, algorithm, rows, used,
                            model, notes=notes)
