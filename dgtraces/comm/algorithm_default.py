"""The collective algorithm a command uses when ``--algorithm`` is not given (issue #25).

One rule for ``predict``, ``sweep``, ``export-chakra`` and the demo (``collective`` and
``validate-comm`` always default to ``auto``):

* a **GPU device** (a key of the device registry, ``reference.device_rows()``) gets ``auto``:
  NCCL's own choice of algorithm and protocol per message size (:mod:`.nccl`,
  docs/collectives.md), provided NCCL's model knows the links: every intra preset is a board
  and every inter preset a NIC of :data:`.fabrics.FABRICS` or a NIC spec (an inter preset
  that is not a NIC is allowed when the cluster is one node: no network is crossed), with
  no link override
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
from enum import StrEnum

GPU_DEFAULT = "auto"
OTHER_DEFAULT = "ring"
GIVEN = "given (--algorithm)"


class Basis(StrEnum):
    """Why an algorithm was chosen."""

    GIVEN = "given"  # --algorithm
    GPU_DEFAULT = "gpu-default"  # auto: a GPU and links NCCL's model knows
    GPU_FALLBACK = "gpu-fallback"  # ring: a GPU, but NCCL's model cannot cost these links
    OTHER_DEFAULT = "other-default"  # ring: not a GPU of the registry (CPU workers)


@dataclass(frozen=True)
class AlgorithmChoice:
    """The algorithm a command runs, the basis of the choice and a sentence saying why."""

    algorithm: str
    why: str
    basis: Basis = Basis.GIVEN


def is_gpu(device: str | None) -> bool:
    """Whether ``device`` is a GPU of the device registry (datasheet rows)."""
    from dgtraces.reference import gpu_devices

    return device is not None and str(device).lower() in gpu_devices()


def nccl_blocker(intra: Sequence[object], inter: Sequence[object],
                 shapes: Sequence[tuple[int, int]], overridden: bool) -> str | None:
    """Why NCCL's model cannot cost these links and (workers, GPUs per node) shapes (None
    when it can)."""
    from dgtraces.comm.fabrics import fabric
    from dgtraces.errors import Code, DgtracesError

    if overridden:
        return "link overrides or a link fit are alpha-beta links, not NCCL presets"
    uneven = [(w, g) for w, g in shapes if w > g and w % g]
    if uneven:
        return (f"{uneven[0][0]} workers do not fill nodes of {uneven[0][1]} GPUs (NCCL's "
                "model needs equal nodes)")
    one_node = all(w <= g for w, g in shapes)
    for side, names in (("intra", intra), ("inter", inter)):
        for name in names:
            if not isinstance(name, str):
                return f"{side} link {getattr(name, 'name', name)!r} is not a preset name"
            try:
                fabric(name, side)
            except DgtracesError as exc:
                if exc.code == Code.UNSUPPORTED_HARDWARE:
                    raise  # e.g. SHARP asked for on Ethernet: refused, not a silent ring
                if side == "inter" and one_node:
                    continue  # one node crosses no network
                return f"NCCL's model has no {side} preset {name!r}"
    return None


def default_algorithm(device: str | None, intra: Sequence[object], inter: Sequence[object],
                      shapes: Sequence[tuple[int, int]], *, overridden: bool = False,
                      given: str | None = None) -> AlgorithmChoice:
    """The algorithm for ``device`` on these links and ``(workers, gpus_per_node)`` shapes
    (see the module doc); ``given`` wins."""
    if given is not None:
        return AlgorithmChoice(given, GIVEN, Basis.GIVEN)
    if not is_gpu(device):
        return AlgorithmChoice(OTHER_DEFAULT, f"default for devices that are not GPUs of "
                               f"the device registry ({device}; CPU workers run gloo/MPI, "
                               "not NCCL): alpha-beta ring", Basis.OTHER_DEFAULT)
    blocker = nccl_blocker(intra, inter, shapes, overridden)
    if blocker is not None:
        return AlgorithmChoice(OTHER_DEFAULT, f"GPU device {device}, but {blocker}: "
                               "alpha-beta ring", Basis.GPU_FALLBACK)
    return AlgorithmChoice(GPU_DEFAULT, f"default for GPU devices ({device}): NCCL's "
                           "algorithm and protocol per message size (docs/collectives.md)",
                           Basis.GPU_DEFAULT)
