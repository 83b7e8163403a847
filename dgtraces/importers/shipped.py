"""The registry of shipped source files (``dgtraces/reference/``), declared once.

Each :class:`GpuSource` says where a published GPU file comes from (repository, path, commit,
licence), what it measured (model spec, device key, framework, batch), what is stated or
inferred, and which importer (:data:`dgtraces.importers.registry.IMPORTERS` name) reads it.
The B-Caffe logs (``reference/bcaffe/``) are listed with the commit that last changed each.
Importers recognise a shipped file by its sha256 (``reference/SHA256SUMS.json``) and cite it
from here; any other file needs ``--source`` (and ``--device``) from the caller.

Device keys: ``titanx-maxwell`` and ``v100-dgxs-32gb`` are datasheet rows in
``reference/devices_datasheet.csv``. PipeDream's profiles do not state their GPU, so their
runs carry :data:`UNSTATED_GPU` (``gpu-unstated``), which is deliberately *not* a devices row:
no peak figures can be joined to it and nothing attributes those timings to a guessed GPU.

Data only: this module imports no importer (the catalog that runs them is
:mod:`dgtraces.importers.gpu_sources`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache

from dgtraces.errors import Code, DgtracesError, Failure

UNSTATED_GPU = "gpu-unstated"
# when the shared reference/gpu/ copies were made: the import date of a shipped file whose
# source states no measurement date (PipeDream), so its rows are the same on every rebuild
COPIED_UTC = "2026-12-03T03:19:00Z"
CONVNET = ("soumith/convnet-benchmarks", "6f718dbcfdaefe1af6c04ab2be3927e0728b599e", "MIT")
PIPEDREAM = ("msr-fiddle/pipedream", "11c40c015e1b7a8e668363c8521609ad48e287f3", "MIT")
KINETO = ("pytorch/kineto", "041e7ce99f1562dd81232ee58b7c454ef16bfae2", "BSD-3-Clause")

BCAFFE_REPO = "shyhuai/B-Caffe"
# commit that last changed each shipped B-Caffe log (reference/bcaffe/README.md); the
# tmp*comm.log files all come from BCAFFE_TMP_COMMIT
BCAFFE_COMMITS = {
    "allreduce2.log": "2ef1db1f3fcc",
    "allreduce4.log": "2c643ba82a5c",
    "allreduce8.log": "2ef1db1f3fcc",
}
BCAFFE_TMP_COMMIT = "afc8063dca05"
# the shipped B-Caffe per-blob logs (reference/bcaffe/<name>.log) and OSU allreduce logs
# (reference/bcaffe/allreduce<workers>.log) that the published tables import
BCAFFE_LOGS = ("tmpcomm", "tmp2comm", "tmp4comm", "tmp4ocomm", "tmp8comm", "tmp8ocomm")
OSU_LOGS = (2, 4, 8)


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
    importer: str = "kineto"  # the registry name of the importer that reads it

    def citation(self) -> str:
        return (f"{self.repo} {self.path} (commit {self.commit}, licence {self.licence}; "
                f"shipped as dgtraces/reference/{self.file})")


def _caffe(model: str, name: str, date_utc: str) -> GpuSource:
    return GpuSource(f"gpu/convnet-benchmarks/caffe/{name}", CONVNET[0], f"caffe/{name}",
                     *CONVNET[1:], model, "titanx-maxwell",
                     "caffe (convnet-benchmarks, caffe time)", 128,
                     "README: Titan X (Maxwell), i7-5930K host; batch 128 in the echoed "
                     "prototxt", date_utc, importer="caffe-time")


def _pd(model: str, folder: str) -> GpuSource:
    return GpuSource(f"gpu/pipedream/{folder}/graph.txt", PIPEDREAM[0],
                     f"profiler/image_classification/profiles/{folder}/graph.txt", PIPEDREAM[1],
                     PIPEDREAM[2], model, UNSTATED_GPU, "pytorch (PipeDream profiler)", None,
                     "GPU and batch not stated in the repository; the PipeDream paper's "
                     "clusters used V100 and Titan X GPUs (not attributed here)",
                     importer="pipedream")


def _kineto(workers: int, name: str) -> GpuSource:
    return GpuSource(f"gpu/kineto/resnet50_v100_b32_num_workers_{workers}.pt.trace.json.gz",
                     KINETO[0], f"tb_plugin/samples/resnet50_num_workers_{workers}/{name}",
                     KINETO[1], KINETO[2], "resnet50-v1.5", "v100-dgxs-32gb",
                     "pytorch (kineto trace)", 32,
                     f"deviceProperties 'Tesla V100-DGXS-32GB'; input dims [32,3,224,224]; "
                     f"torchvision resnet50; {workers} DataLoader workers", importer="kineto")


SOURCES: tuple[GpuSource, ...] = (
    _caffe("alexnet-owt", "output_alexnet.log", "2016-02-28T23:01:58Z"),
    _caffe("googlenet", "output_googlenet.log", "2016-02-28T23:02:20Z"),
    _pd("alexnet-owt", "alexnet"), _pd("resnet50-v1.5", "resnet50"), _pd("vgg16", "vgg16"),
    _pd("inception-v3", "inception_v3"),
    _kineto(0, "worker0.1623143089861.pt.trace.json.gz"),
    _kineto(4, "worker0.1623212756351.pt.trace.json.gz"),
)


def _sums() -> dict[str, str]:
    from dgtraces import reference

    return json.loads((reference.ROOT / "SHA256SUMS.json").read_text(encoding="utf-8"))


@lru_cache(maxsize=1)
def _by_digest() -> dict[str, GpuSource]:
    sums = _sums()
    return {sums[s.file]: s for s in SOURCES}


def shipped(digest: str) -> GpuSource | None:
    """The shipped GPU file with this sha256, or None."""
    return _by_digest().get(digest)


def licences() -> dict[str, str]:
    """repository -> licence of every shipped GPU source."""
    return {s.repo: s.licence for s in SOURCES}


def resolve(known: GpuSource | None, path, source: str | None, device: str | None
            ) -> tuple[str, str]:
    """(source text, device key) of an imported GPU file: a shipped file cites its
    repository, path, commit and licence; any other file needs ``source`` and ``device``."""
    if known is None:
        if not (source and device):
            raise DgtracesError(f"{path}: not a shipped reference file; give --source (its "
                                f"origin) and --device", code=Code.BAD_INPUT)
        return source, device
    cited = f"{source}; {known.citation()}" if source else known.citation()
    return cited, device or known.device


def shipped_log(digest: str) -> str | None:
    """The B-Caffe log name (e.g. ``tmpcomm.log``) whose shipped copy has this sha256."""
    for name, known in _sums().items():
        if known == digest and name.startswith("bcaffe/"):
            return name.split("/", 1)[1]
    return None


def citation(digest: str, source: str | None, path) -> tuple[str, str | None]:
    """(source text, shipped log name or None) of a B-Caffe or OSU log. A shipped log cites
    repo, path and commit; any other file must come with ``source`` (code BAD_INPUT
    otherwise)."""
    name = shipped_log(digest)
    if name is not None:
        commit = BCAFFE_COMMITS.get(name, BCAFFE_TMP_COMMIT)
        cited = f"{BCAFFE_REPO} logdata/{name} (commit {commit})"
        return (f"{source}; {cited}" if source else cited), name
    if not source:
        raise DgtracesError(
            f"{path}: not one of the shipped reference logs, so its origin is unknown; "
            f"give --source (where the log comes from)", code=Code.BAD_INPUT,
            failures=[Failure(Code.BAD_INPUT, "source required", file=str(path), column="source",
                              expected="a citation", found="none")])
    return source, None
