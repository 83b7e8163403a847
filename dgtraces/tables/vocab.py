"""The one declaration of gradient aggregation policies (names, grouping, who implements them).

Everything that names a policy reads :data:`POLICIES`: ``Policy`` validation, the DAG and the
vectorised sweep (through :attr:`PolicySpec.grouping`), the CLI choices, the measured
collector (``collected``) and ``schema.POLICIES`` (which adds the ``framework-default`` label
of published rows). It lives in the tables layer, below the predictor, so that importing
:mod:`dgtraces.tables.schema` loads no predictor module; :mod:`dgtraces.predict.policy_registry`
re-exports it. Standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Grouping(StrEnum):
    """How a policy turns gradients (backward order) into messages."""

    AFTER_BACKWARD = "after-backward"  # one message per gradient, all after the backward pass
    PER_LAYER = "per-layer"  # one message per gradient as soon as it is ready
    BUCKET = "bucket"  # consecutive gradients fused up to bucket_bytes
    OPTIMAL = "optimal"  # MG-WFBP dynamic program


@dataclass(frozen=True)
class PolicySpec:
    name: str
    grouping: Grouping
    summary: str
    collected: bool  # implemented by the measured S-SGD collector (dgtraces.collect.ssgd)


POLICIES: dict[str, PolicySpec] = {p.name: p for p in (
    PolicySpec("naive", Grouping.AFTER_BACKWARD, "one all-reduce per layer after the whole "
               "backward pass (Shi et al. 2018's naive S-SGD)", True),
    PolicySpec("wfbp", Grouping.PER_LAYER, "wait-free backpropagation: one all-reduce per "
               "layer as soon as its gradient is ready", True),
    PolicySpec("bucketed", Grouping.BUCKET, "consecutive gradients fused into buckets "
               "(PyTorch DDP, Horovod tensor fusion)", True),
    PolicySpec("mgwfbp", Grouping.OPTIMAL, "optimal merging by dynamic programming "
               "(Shi et al. 2019, MG-WFBP)", False),
)}
POLICY_NAMES = tuple(POLICIES)
COLLECTED_POLICIES = tuple(n for n, p in POLICIES.items() if p.collected)
# label of published rows whose framework used its own default aggregation
FRAMEWORK_DEFAULT = "framework-default"


def grouping(name: str) -> Grouping:
    return POLICIES[name].grouping
