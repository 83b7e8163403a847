"""How the README's test command (``python -m pytest`` over the whole suite) spreads over
pytest-xdist workers: how many (``tests/conftest.py`` applies it and
``benchmarks/suite_cpu.py`` runs its id-list runs with the same count) and which test
modules share one worker (:data:`SHARED`). No heavy imports: the benchmark reads it too."""

import os

MAX_WORKERS = 4  # a cap: every worker pays the suite's imports (~10 s CPU)


def suite_workers() -> int:
    """min(usable CPUs, MAX_WORKERS); 0 (serial) where that is a single worker."""
    usable = (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
              else os.cpu_count() or 1)
    workers = min(MAX_WORKERS, usable)
    return workers if workers > 1 else 0


# Test modules that pay the same first-time cost in whatever process runs them (an import,
# a parse or a fit that the package then keeps per process) run as one unit on one worker,
# so that the cost is paid once per suite instead of once per worker (issue #36). Every
# other module is a unit of its own (``--dist loadscope``). A prefix names a folder or a file.
SHARED: dict[str, tuple[str, ...]] = {
    # torch and torch.optim (~1.4 s of CPU per process) and the collectors' spawn set-up
    "torch": ("tests/collect/", "tests/models/test_models_torchvision.py"),
    # the calibration fits and the kernels-2/-3 models (functools.cache in
    # dgtraces.reconstruct and dgtraces.evaluation)
    "fits": ("tests/reconstruct/", "tests/evaluation/"),
    # the two V100 Kineto traces of dgtraces/reference/gpu/kineto (~0.4 s each to parse)
    "v100-traces": ("tests/importers/test_importers_gpu.py",
                    "tests/predict/test_predict_kineto.py", "tests/predict/test_captions.py",
                    "tests/predict/test_framework_defaults.py"),
}


def scope(nodeid: str) -> str:
    """The unit of work a test belongs to: its :data:`SHARED` group, else its module."""
    module = nodeid.split("::", 1)[0]
    for group, prefixes in SHARED.items():
        if module.startswith(prefixes):
            return f"shared:{group}"
    return module
