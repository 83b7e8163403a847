"""What is being predicted: the cluster (workers, links, collective) and the policy."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from dgtraces.errors import Code

from ..comm.collectives import ALGORITHMS, CommCost, Phase, collective
from ..comm.fabrics import link_or_spec
from ..comm.links import Link, get_link, link_dict
from ..comm.nccl import MODEL_NAMES, model, plausible_ranks
from ..values import bad_value as bad
from ..values import whole_number
from .policy_registry import POLICY_NAMES

if TYPE_CHECKING:  # pragma: no cover
    from dgtraces.store.release import Release

DEFAULT_BUCKET_BYTES = 25 * 1024 * 1024  # PyTorch DDP bucket_cap_mb default


NCCL_NAMES = tuple(MODEL_NAMES)  # NCCL's tuning model (comm/nccl.py)
MAX_COUNT = 2 ** 31 - 1  # workers, GPUs per node, servers: far beyond any cluster


@dataclass(frozen=True)
class Cluster:
    """``workers`` data-parallel workers, ``gpus_per_node`` per machine; ``intra``/``inter``
    are links presets (names) or :class:`Link` objects; ``algorithm`` one of ALGORITHMS;
    ``servers`` only for ``ps``. ``alpha_us``/``gbps`` override every interconnect.

    ``staging`` (a link, e.g. ``cpu-memcpy`` or ``pcie3``) adds ``staging_passes`` copies of
    every message around the collective (pack/scale/unpack on CPUs; D2H + H2D for GPUs
    without GPU-direct). ``shared_cpu`` says the collective runs on the cores that compute
    (CPU workers filling every core), so it cannot overlap with compute: messages are
    serialised into the compute chain instead of a separate comm stream."""

    workers: int
    gpus_per_node: int = 1
    intra: "str | Link" = "pcie3"
    inter: "str | Link" = "10gbe"
    algorithm: str = "ring"
    servers: int = 1
    alpha_us: float | None = None
    gbps: float | None = None
    # a version of the default store, or an open Release (of any store): where the link
    # presets' measured fits and the digest a prediction cites are read
    release: "Release | str | None" = field(default="latest", compare=False)
    staging: "str | Link | None" = None
    staging_passes: int = 2
    shared_cpu: bool = False
    nics_per_node: int = 1
    algorithm_why: str = field(default="", compare=False)  # why this algorithm (defaults)
    nccl: str | None = None  # NCCL release of auto/nccl-* (None: the newest modelled)
    nccl_time: str = "run"  # run | tuning (comm.nccl.Model)

    def __post_init__(self) -> None:
        for name in ("workers", "gpus_per_node", "servers", "staging_passes", "nics_per_node"):
            object.__setattr__(self, name, whole_number(name, getattr(self, name),
                                                        most=MAX_COUNT))
        plausible_ranks(self.workers)  # PLAUSIBILITY past any cluster (comm.nccl)
        for name in ("intra", "inter", "staging"):
            value = getattr(self, name)
            if not (isinstance(value, (str, Link)) or (name == "staging" and value is None)):
                raise bad(name, "must be a links preset name or a Link", "a str or Link",
                          repr(value)[:60], code=Code.UNKNOWN_LINK)
        known = ALGORITHMS + NCCL_NAMES
        if self.algorithm not in known:
            raise bad("algorithm", "unknown collective algorithm", " | ".join(known),
                      self.algorithm)
        if self.algorithm in NCCL_NAMES and not (
                isinstance(self.intra, str) and isinstance(self.inter, str)
                and self.alpha_us is None and self.gbps is None):
            raise bad("algorithm", "NCCL's model (auto) takes intra/inter presets by name, "
                      "without link overrides or link fits", "ring | tree | ...",
                      self.algorithm)
        self.nccl_model()  # UNKNOWN_NCCL / BAD_INPUT now, not at the first message

    @property
    def nodes(self) -> int:
        return -(-self.workers // self.gpus_per_node)

    def links(self) -> tuple[Link, Link]:
        kw: dict[str, Any] = dict(alpha_us=self.alpha_us, gbps=self.gbps, release=self.release)
        return (link_or_spec(self.intra, "intra", **kw),
                link_or_spec(self.inter, "inter", **kw))

    def staging_link(self) -> Link | None:
        if self.staging is None:
            return None
        return get_link(self.staging, field="staging", release=self.release)

    def comm_cost(self) -> CommCost:
        if self.algorithm in NCCL_NAMES:  # per message size, NCCL's tuning model
            from ..comm.nccl import nccl_allreduce_cost

            assert isinstance(self.intra, str) and isinstance(self.inter, str)
            cost: CommCost = nccl_allreduce_cost(self.algorithm, self.workers,
                                                 self.gpus_per_node, self.intra, self.inter,
                                                 self.nics_per_node, self.nccl_model())
        else:
            intra, inter = self.links()
            cost = collective(self.algorithm, self.workers, self.gpus_per_node, intra, inter,
                              self.servers)
        stage = self.staging_link()
        if stage is None or not cost.phases:
            return cost
        k = self.staging_passes
        return replace(cost, phases=cost.phases + (
            Phase("staging", stage.name, k * stage.alpha_ms, k * stage.beta_ms_per_byte),))

    def with_workers(self, workers: int) -> "Cluster":
        return replace(self, workers=workers)

    def describe(self) -> dict:
        intra, inter = self.links()
        stage = self.staging_link()
        return {"workers": self.workers, "gpus_per_node": self.gpus_per_node,
                "nodes": self.nodes, "algorithm": self.algorithm,
                **({"algorithm_why": self.algorithm_why} if self.algorithm_why else {}),
                "servers": self.servers,
                "intra": link_dict(intra), "inter": link_dict(inter),
                "staging": None if stage is None else dict(link_dict(stage),
                                                            passes=self.staging_passes),
                "shared_cpu": self.shared_cpu, "nics_per_node": self.nics_per_node,
                **({"nccl": self._nccl_describe()} if self.algorithm in NCCL_NAMES else {})}

    def nccl_model(self):
        """The NCCL release and time of ``auto``/``nccl-*`` (:class:`comm.nccl.Model`)."""
        return model(self.nccl, self.nccl_time)

    def _nccl_describe(self) -> dict:
        """The fabrics NCCL's model used (they differ from the alpha-beta presets)."""
        from ..comm.nccl import fabric_view, topology

        m = self.nccl_model()
        t = topology(self.workers, self.gpus_per_node, str(self.intra), str(self.inter),
                     self.nics_per_node)
        return {"model": f"{m.label} (docs/collectives.md)", "version": m.version.key,
                "time": m.time, **fabric_view(m, t)}


@dataclass(frozen=True)
class Policy:
    """Gradient aggregation policy; ``io_overlap`` prefetches the next batch during compute."""

    name: str = "wfbp"
    io_overlap: bool = False
    bucket_bytes: int = DEFAULT_BUCKET_BYTES
    first_bucket_bytes: int | None = None  # cap of the first bucket (PyTorch DDP: 1 MiB)
    cycle_ms: float = 0.0  # fusion cycle (Horovod): gradients ready within a cycle fuse

    def __post_init__(self) -> None:
        if self.name not in POLICY_NAMES:
            raise bad("policy", "unknown policy", " | ".join(POLICY_NAMES), self.name)
        object.__setattr__(self, "bucket_bytes", whole_number("bucket_bytes",
                                                              self.bucket_bytes))
        if self.first_bucket_bytes is not None:
            object.__setattr__(self, "first_bucket_bytes", whole_number(
                "first_bucket_bytes", self.first_bucket_bytes))
        if not 0.0 <= self.cycle_ms < 1e6:  # also NaN
            raise bad("cycle_ms", "must be a finite number of ms >= 0", ">= 0", self.cycle_ms)
