"""The shipped published GPU measurements (``reference/gpu/``), declared once.

Each :class:`GpuSource` says where a file comes from (repository, path, commit, licence),
what it measured (model spec, device key, framework, batch) and what is stated or inferred.
Importers recognise a shipped file by its sha256 and cite it from here; any other file needs
``--source`` (and ``--device``) from the caller.

Device keys: ``titanx-maxwell`` and ``v100-dgxs-32gb`` are datasheet rows in
``reference/devices_datasheet.csv``. PipeDream's profiles do not state their GPU, so their
runs carry :data:`UNSTATED_GPU` (``gpu-unstated``), which is deliberately *not* a devices row:
no peak figures can be joined to it and nothing attributes those timings to a guessed GPU.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache

UNSTATED_GPU = "gpu-unstated"
# when the shared reference/gpu/ copies were made: the import date of a shipped file whose
# source states no measurement date (PipeDream), so its rows are the same on every rebuild
COPIED_UTC = "2026-12-03T03:19:00Z"
CONVNET = ("soumith/convnet-benchmarks", "6f718dbcfdaefe1af6c04ab2be3927e0728b599e", "MIT")
PIPEDREAM = ("msr-fiddle/pipedream", "11c40c015e1b7a8e668363c8521609ad48e287f3", "MIT")
KINETO = ("pytorch/kineto", "041e7ce99f1562dd81232ee58b7c454ef16bfae2", "BSD-3-Clause")


@dataclass(frozen=True)
class GpuSource:
    file: str  # path under dgtraces/reference/
    repo: str
    path: str  # path in the repository at ``commit``
    commit: str
    licence: str
    model: str
    device: str
    framework: str
    batch_size: int | None  # stated batch (None: inferred by the importer and said so)
    stated: str  # what the source states about the setup
    date_utc: str | None = None  # when measured, where the source says (else COPIED_UTC)

    def citation(self) -> str:
        return (f"{self.repo} {self.path} (commit {self.commit}, licence {self.licence}; "
                f"shipped as dgtraces/reference/{self.file})")


def _pd(model: str, folder: str) -> GpuSource:
    return GpuSource(f"gpu/pipedream/{folder}/graph.txt", PIPEDREAM[0],
                     f"profiler/image_classification/profiles/{folder}/graph.txt", PIPEDREAM[1],
                     PIPEDREAM[2], model, UNSTATED_GPU, "pytorch (PipeDream profiler)", None,
                     "GPU and batch not stated in the repository; the PipeDream paper's "
                     "clusters used V100 and Titan X GPUs (not attributed here)")


def _kineto(workers: int, name: str) -> GpuSource:
    return GpuSource(f"gpu/kineto/resnet50_v100_b32_num_workers_{workers}.pt.trace.json.gz",
                     KINETO[0], f"tb_plugin/samples/resnet50_num_workers_{workers}/{name}",
                     KINETO[1], KINETO[2], "resnet50-v1.5", "v100-dgxs-32gb",
                     "pytorch (kineto trace)", 32,
                     f"deviceProperties 'Tesla V100-DGXS-32GB'; input dims [32,3,224,224]; "
                     f"torchvision resnet50; {workers} DataLoader workers")


SOURCES: tuple[GpuSource, ...] = (
    GpuSource("gpu/convnet-benchmarks/caffe/output_alexnet.log", CONVNET[0],
              "caffe/output_alexnet.log", *CONVNET[1:], "alexnet-owt", "titanx-maxwell",
              "caffe (convnet-benchmarks, caffe time)", 128,
              "README: Titan X (Maxwell), i7-5930K host; batch 128 in the echoed prototxt",
              "2016-02-28T23:01:58Z"),
    GpuSource("gpu/convnet-benchmarks/caffe/output_googlenet.log", CONVNET[0],
              "caffe/output_googlenet.log", *CONVNET[1:], "googlenet", "titanx-maxwell",
              "caffe (convnet-benchmarks, caffe time)", 128,
              "README: Titan X (Maxwell), i7-5930K host; batch 128 in the echoed prototxt",
              "2016-02-28T23:02:20Z"),
    _pd("alexnet-owt", "alexnet"), _pd("resnet50-v1.5", "resnet50"), _pd("vgg16", "vgg16"),
    _pd("inception-v3", "inception_v3"),
    _kineto(0, "worker0.1623143089861.pt.trace.json.gz"),
    _kineto(4, "worker0.1623212756351.pt.trace.json.gz"),
)


@lru_cache(maxsize=1)
def _by_digest() -> dict[str, GpuSource]:
    from .. import reference

    sums = json.loads((reference.ROOT / "SHA256SUMS.json").read_text(encoding="utf-8"))
    return {sums[s.file]: s for s in SOURCES}


def shipped(digest: str) -> GpuSource | None:
    """The shipped GPU file with this sha256, or None."""
    return _by_digest().get(digest)


def import_source(src: GpuSource):
    """Import one shipped file with its importer (by the file's folder)."""
    from .. import reference

    path = reference.path(src.file)
    if src.file.startswith("gpu/convnet-benchmarks/"):
        from .caffe_time import import_log

        return import_log(path, src.model)
    if src.file.startswith("gpu/pipedream/"):
        from .pipedream import import_graph

        return import_graph(path, src.model)
    from .kineto import import_trace

    return import_trace(path, src.model, batch_size=None)


def gpu_tables() -> dict:
    """``runs`` + ``layer_timings`` of every shipped GPU file (provenance published),
    validated together."""
    import pandas as pd

    from dgtraces.tables.checks import validate_tables

    results = [import_source(s) for s in SOURCES]
    return validate_tables({
        "runs": pd.concat([r.runs for r in results], ignore_index=True),
        "layer_timings": pd.concat([r.layer_timings for r in results], ignore_index=True)})


def licences() -> dict[str, str]:
    """repository -> licence of every shipped GPU source."""
    return {s.repo: s.licence for s in SOURCES}


def resolve(known: GpuSource | None, path, source: str | None, device: str | None
            ) -> tuple[str, str]:
    """(source text, device key) of an imported GPU file: a shipped file cites its
    repository, path, commit and licence; any other file needs ``source`` and ``device``."""
    from ..errors import DgtracesError

    if known is None:
        if not (source and device):
            raise DgtracesError(f"{path}: not a shipped reference file; give --source (its "
                                f"origin) and --device", code="BAD_INPUT")
        return source, device
    cited = f"{source}; {known.citation()}" if source else known.citation()
    return cited, device or known.device


def run_row(*, run_id: str, model: str, device: str, known: GpuSource | None, framework: str,
            batch_size: int, source: str, importer: str, params: dict, notes: str,
            **times) -> dict:
    """The ``runs`` row shared by the GPU importers: published when the file is shipped."""
    from dgtraces.io.files import utc_now

    from . import IMPORTER_VERSION

    if known is not None:
        params = {**params, "stated": known.stated, "licence": known.licence}
    return {"run_id": run_id, "model": model, "device": device, "device_kind": "gpu",
            "framework": known.framework if known else framework, "precision": "fp32",
            "batch_size": batch_size, "provenance": "published" if known else "measured",
            "source": source, "collector_version": f"dgtraces.importers.{importer} "
            f"{IMPORTER_VERSION}",
            "timestamp_utc": (known.date_utc or COPIED_UTC) if known else utc_now(),
            "flagged": False, "params_json": json.dumps(params, sort_keys=True),
            "notes": notes, **times}
