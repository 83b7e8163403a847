"""Which framework profile each published scaling row ran (``validate-predictor --published
--framework auto``), decided before scoring (docs/predictor-overheads.md, "Published rows").

A rule is (substring of the ``update`` column, substring of the ``framework`` column, profile
key, what was assumed); the first rule that matches wins. ``--framework NAME`` forces one
profile for every row; ``none`` keeps the update rules of :mod:`.published` alone.
"""

from __future__ import annotations

from dgtraces.reference.frameworks import FrameworkProfile, get_framework

AUTO = "auto"
PUBLISHED_FRAMEWORKS: tuple[tuple[str, str, str, str], ...] = (
    ("horovod", "", "horovod@0.16-0.20",
     "Horovod version not stated; the rows (May 2019, Jul 2020) precede 0.21.0 (Dec 2020), "
     "so the 64 MiB / 5 ms defaults"),
    ("parameter server on the host CPU", "", "tf-ps@1.x", "stated in the row"),
    ("replicated (NCCL all-reduce)", "", "tf-mirrored@1.x-replicated",
     "TF graph-mode replicated trainer: one NCCL all-reduce per gradient (the TF 2.2 row runs "
     "in v1 compatibility mode, not MirroredStrategy's packing)"),
    ("hierarchical", "Caffe-MPI", "caffe-mpi@1.0-2.0",
     "stated; the batch is taken as per GPU (the README does not say)"),
)


def row_framework(row: dict, choice: str | None) -> tuple[FrameworkProfile | None, str]:
    """(profile, why) of a published row under ``--framework choice``."""
    if choice in (None, "", "none"):
        return None, "none: the update rules alone"
    if choice != AUTO:
        return get_framework(choice), f"--framework {choice} (forced for every row)"
    for update, framework, key, why in PUBLISHED_FRAMEWORKS:
        if update.lower() in row["update"].lower() and framework in row["framework"]:
            return get_framework(key), why
    return None, "no rule matched: none"
