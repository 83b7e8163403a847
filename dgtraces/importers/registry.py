"""The registry of importers: each declared once (name, ``module:function``, what it reads,
the tables it writes, its CLI help). ``dgtraces import NAME`` subcommands take their name and
help from here (:mod:`dgtraces.cli.importers`), the catalog of shipped files
(:mod:`.gpu_sources`) runs a shipped file with the importer its :class:`~.shipped.GpuSource`
names, and ``tests/importers/test_importers_registry.py`` checks that every entry has its subcommand
and loads. Adding an importer = its module + one entry here + its subcommand's options.

Targets are text, resolved on use, so this module imports no importer.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

from dgtraces.errors import Code


@dataclass(frozen=True)
class Importer:
    name: str  # the ``dgtraces import NAME`` subcommand
    target: str  # "dgtraces.importers.<module>:<function>"
    reads: str  # what it reads (listed by ``dgtraces import --help``)
    writes: tuple[str, ...]  # the tables it produces
    help: str  # the subcommand's help text
    # layer times attributed from a profiler's trace (scopes, autograd sequence numbers), not
    # timed around each layer: the predictor ranks such a run after a layer-wise timed run of
    # the same setup (docs/predictor.md, "Which stored run")
    attributed: bool = False

    @property
    def module(self) -> str:
        return self.target.partition(":")[0]

    def load(self) -> Callable:
        """The importer function (imports its module)."""
        module, _, function = self.target.partition(":")
        return getattr(importlib.import_module(module), function)


_P = "dgtraces.importers."
RUNS = ("runs", "layer_timings")
COMM = ("comm", "comm_fits")

IMPORTERS: tuple[Importer, ...] = (
    Importer("kineto", _P + "kineto:import_trace", "PyTorch profiler", RUNS,
             """PyTorch-profiler Chrome trace (.json or .json.gz) -> runs + layer_timings.

    Forward time per layer from scopes named like the layers (record_function) or mapped
    by --map; backward time from autograd nodes linked by sequence number. A trace with
    neither (a plain torch.profiler run of a torch model) is mapped by op order, kind and
    input shapes per ProfilerStep, with GPU kernel time where it has kernels. Everything
    that cannot be attributed is listed, never dropped.
    """, attributed=True),
    Importer("bcaffe", _P + "bcaffe:import_log", "B-Caffe", RUNS,
             """B-Caffe distributed.cpp per-blob log -> runs + layer_timings (provenance published).

    Blob sizes are checked against the model (64-element padding accepted).
    """),
    Importer("caffe-time", _P + "caffe_time:import_log", "caffe time", RUNS,
             """`caffe time` log -> runs + layer_timings; layers matched to the spec by name.

    Log layers the spec lacks (input, *_split) are listed, never dropped silently.
    """),
    Importer("pipedream", _P + "pipedream:import_graph", "PipeDream", RUNS,
             """PipeDream profile graph.txt -> runs + layer_timings; nodes mapped to spec layers by
    op type, order and parameter/activation size. A shipped profile's GPU is not stated:
    device 'gpu-unstated'."""),
    Importer("osu", _P + "osu:import_log", "OSU", COMM,
             """OSU MPI allreduce latency logs -> comm points + comm_fits (alpha-beta, R^2)."""),
    Importer("nccl-tests", _P + "nccl_tests:import_log", "nccl-tests", COMM,
             """nccl-tests logs (all_reduce_perf, all_gather_perf, ...) -> comm points (out-of-place
    and in-place, workers = ranks, backend nccl) + comm_fits (alpha-beta)."""),
    Importer("published", _P + "published:published_tables", "published reference tables",
             ("devices", "iterations", *COMM, *RUNS),
             """Every published reference table (devices, calibration iterations, OSU comm and
    fits, B-Caffe runs and layer timings), validated together."""),
    Importer("deepbench", _P + "deepbench:import_deepbench", "DeepBench", ("kernels",),
             """The shipped DeepBench training kernels of eight GPUs (V100 also in its FP16-input
    tensor-core sheet, precision amp) -> kernels.csv (provenance published; conv forward, data
    and weight gradients apart; GEMMs)."""),
)

BY_NAME = {i.name: i for i in IMPORTERS}


def attributed_prefixes() -> tuple[str, ...]:
    """``runs.collector_version`` prefixes of the importers whose layer times are attributed
    from a profiler's trace (:attr:`Importer.attributed`)."""
    return tuple(f"{i.module} " for i in IMPORTERS if i.attributed)


def importer(name: str) -> Importer:
    """The registered importer ``name``; an unknown name is BAD_INPUT with a did-you-mean."""
    from dgtraces.names import match

    return BY_NAME[match(name, BY_NAME, what="importer", code=Code.BAD_INPUT)]
