"""The collective algorithm a command uses when ``--algorithm`` is not given (issue #25).

One rule for ``predict``, ``sweep``, ``export-chakra`` and the demo (``collective`` and
``validate-comm`` always default to ``auto``):

* a **GPU device** (a key of the device registry, ``reference.device_rows()``) gets ``auto``:
  NCCL's own choice of algorithm and protocol per message size (:mod:`.nccl`,
  docs/collectives.md), provided NCCL's model knows the links: every intra preset is a board
  and every inter preset a NIC of :data:`.nccl.FABRICS` (an inter preset that is not a NIC
  is allowed when the cluster is one node: no network is crossed), with no link override
  (``--link-alpha-us``, ``--link-bandwidth-gb-s``) and no ``--link-fit``. Otherwise the GPU
  keeps the alpha-beta ``ring`` and the reason says why;
* any other device (CPU workers, whose collectives run in gloo or MPI, not NCCL) keeps
  ``ring``, today's default.

An explicit ``--algorithm`` always wins. The choice and its reason are recorded on the
:class:`~dgtraces.predict.cluster.Cluster` (``algorithm_why``) and printed in the prediction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

GPU_DEFAULT = "auto"
OTHER_DEFAULT = "ring"
GIVEN = "given (--algorithm)"


@dataclass(frozen=True)
class AlgorithmChoice:
    """The algorithm a command runs and why (``explicit``: the user gave it)."""

    algorithm: str
    why: str
    explicit: bool = False


def is_gpu(device: str | None) -> bool:
    """Whether ``device`` is a GPU of the device registry (datasheet rows)."""
    from dgtraces.predict.trace import gpu_devices

    return device is not None and device in gpu_devices()


def nccl_blocker(intra: Sequence[object], inter: Sequence[object], one_node: bool,
                 overridden: bool) -> str | None:
    """Why NCCL's model cannot cost these links (None when it can)."""
    from dgtraces.errors import DgtracesError
    from dgtraces.predict.nccl import fabric

    if overridden:
        return "link overrides or a link fit are alpha-beta links, not NCCL presets"
    for side, names in (("intra", intra), ("inter", inter)):
        for name in names:
            if not isinstance(name, str):
                return f"{side} link {getattr(name, 'name', name)!r} is not a preset name"
            try:
                fabric(name, side)
            except DgtracesError:
                if side == "inter" and one_node:
                    continue  # one node crosses no network
                return f"NCCL's model has no {side} preset {name!r}"
    return None


def default_algorithm(device: str | None, intra: Sequence[object], inter: Sequence[object],
                      *, one_node: bool, overridden: bool = False,
                      given: str | None = None) -> AlgorithmChoice:
    """The algorithm for ``device`` on these links (see the module doc); ``given`` wins."""
    if given is not None:
        return AlgorithmChoice(given, GIVEN, True)
    if not is_gpu(device):
        return AlgorithmChoice(OTHER_DEFAULT, f"default for non-GPU devices ({device}): "
                               "alpha-beta ring (gloo/MPI, not NCCL)")
    blocker = nccl_blocker(intra, inter, one_node, overridden)
    if blocker is not None:
        return AlgorithmChoice(OTHER_DEFAULT, f"GPU device {device}, but {blocker}: "
                               "alpha-beta ring")
    return AlgorithmChoice(GPU_DEFAULT, f"default for GPU devices ({device}): NCCL's "
                           "algorithm and protocol per message size (docs/collectives.md)")
