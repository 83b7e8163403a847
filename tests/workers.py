"""How many pytest-xdist workers the README's test command uses (``python -m pytest`` over
the whole suite): ``tests/conftest.py`` applies it and ``benchmarks/suite_cpu.py`` runs its
id-list runs with the same count. No heavy imports: the benchmark reads it too."""

import os

MAX_WORKERS = 4  # a cap: every worker pays the suite's imports (~10 s CPU)


def suite_workers() -> int:
    """min(usable CPUs, MAX_WORKERS); 0 (serial) where that is a single worker."""
    usable = (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
              else os.cpu_count() or 1)
    workers = min(MAX_WORKERS, usable)
    return workers if workers > 1 else 0
