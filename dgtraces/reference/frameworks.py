"""The one declaration of framework profiles (``--framework``): how each framework groups and
sends gradients by default, one frozen row per framework version whose defaults differ.

Every value is the framework's documented default, with its version and citation
(docs/predictor-overheads.md lists the rows and which were checked). ``none`` changes nothing.
Read by ``predict``, ``sweep`` and ``validate-predictor`` (and the published-row rules), and by
``reconstruct``: each profile's ``family`` names the per-layer framework overhead kernels-3
charges (docs/reconstruction-kernels3.md; the fitted values live in the release, not here).
It sits in the declarations layer so that both the cost models and the predictor read it.
Kept free of heavy imports.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, replace
from enum import StrEnum

from ..errors import Code, DgtracesError, Failure

MIB = 1024 * 1024
ALL_GRADIENTS = 1 << 62  # one pack holding every gradient (TF NcclAllReduce num_packs=1)


class PsPlacement(StrEnum):
    HOST_CPU = "host-cpu"  # parameter servers on the host CPUs (push/pull over the host link)
    GPU = "gpu"  # aggregation on the GPUs (MXNet kvstore 'device')


@dataclass(frozen=True)
class FrameworkProfile:
    """One framework version's defaults. ``bucket_bytes`` None = no fusion (one message per
    gradient); ``first_bucket_bytes`` None = the first bucket is like the others;
    ``cycle_ms`` 0 = no background cycle; ``blocking``: each all-reduce blocks the host (no
    overlap with the backward pass); ``family``: the framework family whose per-layer overhead
    a reconstructed trace carries (:data:`FAMILIES`; None: it runs on any of them, so the
    mean of the fitted families)."""

    name: str
    version: str
    policy: str
    bucket_bytes: int | None
    first_bucket_bytes: int | None
    cycle_ms: float
    blocking: bool
    ps_placement: PsPlacement | None
    citation: str
    family: str | None = None

    @property
    def key(self) -> str:
        return f"{self.name}@{self.version}"

    def describe(self) -> dict:
        return {"framework": self.key, "policy": self.policy, "bucket_bytes": self.bucket_bytes,
                "first_bucket_bytes": self.first_bucket_bytes, "cycle_ms": self.cycle_ms,
                "blocking": self.blocking,
                "ps_placement": None if self.ps_placement is None else str(self.ps_placement),
                "citation": self.citation}


# framework families with a per-layer overhead of their own (kernels-3, item 3 of issue #33)
FAMILIES = ("pytorch", "mxnet", "caffe", "tf", "paddle")
_P = FrameworkProfile
# Order matters: within a name, the last row is the newest (what a bare name selects).
FRAMEWORKS: tuple[FrameworkProfile, ...] = (
    _P("pytorch-ddp", ">=1.8", "bucketed", 25 * MIB, 1 * MIB, 0.0, False, None,
       "torch.nn.parallel.DistributedDataParallel bucket_cap_mb=25; "
       "dist._DEFAULT_FIRST_BUCKET_BYTES = 1 MiB (pytorch/pytorch "
       "torch/nn/parallel/distributed.py)", "pytorch"),
    _P("apex-ddp", "delay-allreduce", "bucketed", ALL_GRADIENTS, None, 0.0, False, None,
       "apex.parallel.DistributedDataParallel with delay_allreduce=True (shared_param=True before "
       "NVIDIA/apex fa183ee, 2018-09-28): every gradient all-reduced in one flat call per dtype "
       "after the backward pass (apex/parallel/distributed.py allreduce_params)", "pytorch"),
    _P("apex-ddp", "message-size-1e7", "bucketed", 10_000_000 * 4, None, 0.0, False, None,
       "apex.parallel.DistributedDataParallel defaults message_size=10000000 (elements; 4 bytes "
       "each in fp32), delay_allreduce=False: buckets of at least 1e7 elements sent as they fill "
       "during backward (NVIDIA/apex apex/parallel/distributed.py)", "pytorch"),
    _P("horovod", "0.16-0.20", "bucketed", 64 * MIB, None, 5.0, False, None,
       "Horovod docs tensor-fusion.rst: default fusion buffer 64 MB; cycle time 5 ms "
       "(horovod issue #1552, maintainer answer, 2019)"),
    _P("horovod", ">=0.21", "bucketed", 128 * MIB, None, 1.0, False, None,
       "horovod PR #2468 (Nov 2020, in 0.21.0): default cycle time 5 ms -> 1 ms, fusion "
       "threshold 64 MB -> 128 MB"),
    _P("tf-mirrored", "1.x-replicated", "wfbp", None, None, 0.0, False, None,
       "TF 1.x graph mode, replicated variables: one NCCL all-reduce per gradient when ready "
       "(tf_cnn_benchmarks --variable_update=replicated, --gradient_repacking=0 default)", "tf"),
    _P("tf-mirrored", "2.x", "bucketed", ALL_GRADIENTS, None, 0.0, False, None,
       "tf.distribute.MirroredStrategy with NcclAllReduce(num_packs=1) default: every "
       "gradient packed into one all-reduce (TF API docs r2.0-r2.21)", "tf"),
    _P("tf-ps", "1.x", "wfbp", None, None, 0.0, False, PsPlacement.HOST_CPU,
       "tf_cnn_benchmarks --variable_update=parameter_server --local_parameter_device=cpu: "
       "push/pull per variable to servers on the host CPU", "tf"),
    _P("mxnet-kvstore", "1.x-device", "wfbp", None, None, 0.0, False, PsPlacement.GPU,
       "kvstore='device': per-key push/pull with priority -index (mxnet "
       "python/mxnet/model.py _update_params_on_kvstore), aggregated on GPUs", "mxnet"),
    _P("paddle", "2.x-fleet", "bucketed", 32 * MIB, None, 0.0, True, None,
       "DistributedStrategy fuse_all_reduce_ops=True, fuse_grad_size_in_MB=32 "
       "(paddle/fluid/framework/distributed_strategy.proto); c_allreduce_sum on the "
       "calculation stream (synchronous with compute)", "paddle"),
    _P("caffe-mpi", "1.0-2.0", "wfbp", None, None, 0.0, False, None,
       "Caffe-MPI README: layer-wise all-reduce overlapped with backward, NCCL inside nodes, "
       "MPI between nodes (Shi, Wang, Chu, Li 2018)", "caffe"),
)
NONE = "none"
AUTO = "auto"  # the default: the profile the trace's run implies (validate-predictor: each
# published setup's declared profile)
NAMES: tuple[str, ...] = (NONE,) + tuple(dict.fromkeys(p.name for p in FRAMEWORKS))
KEYS: tuple[str, ...] = tuple(p.key for p in FRAMEWORKS)
# A run's framework (the first word of runs.framework, lower case) -> the one profile it
# implies: that framework's own data-parallel wrapper with its defaults. A word not listed
# implies none (not inferable). A run whose params_json has METADATA_KEY says otherwise.
SOURCE_PROFILES: dict[str, str] = {
    "pytorch": "pytorch-ddp",  # torch.nn.parallel.DistributedDataParallel
}
METADATA_KEY = "framework_profile"


@dataclass(frozen=True)
class FrameworkChoice:
    """The profile a command uses and how it was chosen: ``given`` (--framework), inferred
    from the run's source or metadata, or ``not inferable`` (then no profile)."""

    profile: FrameworkProfile | None
    how: str

    def describe(self) -> dict:
        base = {"framework": NONE} if self.profile is None else self.profile.describe()
        return {**base, "how": self.how}

    @property
    def label(self) -> str:
        return f"{NONE if self.profile is None else self.profile.key} ({self.how})"


def choose_framework(spec: str | None, run: dict | None) -> FrameworkChoice:
    """``--framework spec`` for a trace whose stored ``runs`` row is ``run`` (None: the
    trace has no stored run): a name is given, ``auto`` infers (:func:`infer_framework`)."""
    text = (spec or AUTO).strip()
    if text != AUTO:
        return FrameworkChoice(get_framework(text, extra=(AUTO,)), "given")
    return infer_framework(run)


def infer_framework(run: dict | None) -> FrameworkChoice:
    """The one profile a run's source implies: its metadata's METADATA_KEY, else
    SOURCE_PROFILES of the first word of its ``framework`` column; else none."""
    import json

    if run is None:
        return FrameworkChoice(None, "not inferable: the trace has no stored run")
    try:
        meta = json.loads(run.get("params_json") or "{}")
    except (TypeError, ValueError):
        meta = {}
    if isinstance(meta, dict) and meta.get(METADATA_KEY):
        return FrameworkChoice(get_framework(str(meta[METADATA_KEY])),
                               f"inferred from the run's metadata ({METADATA_KEY})")
    text = str(run.get("framework") or "")
    word = text.split(" ")[0].split("(")[0].strip().lower()
    if word not in SOURCE_PROFILES:
        return FrameworkChoice(None, f"not inferable: the run's framework {text!r} names no "
                                     "profile")
    profile = get_framework(SOURCE_PROFILES[word])
    assert profile is not None
    how = f"inferred from the run's source: framework {text!r}"
    stated = re.match(rf"{re.escape(word)}\s+v?(\d+)\.(\d+)", text.strip().lower())
    if stated is None:  # PipeDream's 2019 profiles, Kineto samples: no version given
        return FrameworkChoice(profile, f"{how}; its version is not stated: the newest "
                                        f"{profile.name} profile ({profile.version}) assumed")
    version = (int(stated[1]), int(stated[2]))
    if not _covers(profile.version, version):
        return FrameworkChoice(None, f"not inferable: the run's framework {text!r} is "
                                     f"outside the versions of the {profile.key} profile")
    return FrameworkChoice(profile, how)


def _covers(versions: str, version: tuple[int, int]) -> bool:
    """Whether a profile's version range (``>=1.8``, ``0.16-0.20``) holds ``version``; a
    range in another form (``1.x-replicated``) is taken to hold it."""
    def number(text: str) -> tuple[int, int] | None:
        m = re.fullmatch(r"(\d+)\.(\d+)", text.strip())
        return (int(m[1]), int(m[2])) if m else None

    if versions.startswith(">="):
        low = number(versions[2:])
        return low is None or version >= low
    low_text, _, high_text = versions.partition("-")
    low, high = number(low_text), number(high_text)
    return low is None or high is None or low <= version <= high


def get_framework(spec: str | None, extra: tuple[str, ...] = ()) -> FrameworkProfile | None:
    """``NAME`` (newest row of that name), ``NAME@VERSION`` or ``none`` (-> None).
    Anything else is UNKNOWN_FRAMEWORK with the known names and a did-you-mean; ``extra``
    names the caller also accepts (``auto`` of validate-predictor) join both."""
    text = (spec or NONE).strip()
    if text == NONE:
        return None
    for p in reversed(FRAMEWORKS):
        if text in (p.name, p.key):
            return p
    known = NAMES + tuple(extra) + KEYS
    close = difflib.get_close_matches(text, known, n=3, cutoff=0.5)
    hint = f"; did you mean {' or '.join(close)}?" if close else ""
    message = f"unknown framework {text!r}{hint}"  # the names: the failure's expected
    raise DgtracesError(message, code=Code.UNKNOWN_FRAMEWORK,
                        failures=[Failure(Code.UNKNOWN_FRAMEWORK, message, column="framework",
                                          expected=" | ".join(known), found=repr(text))])


def apply_framework(profile: FrameworkProfile | None, cluster, policy,
                    explicit: frozenset[str] = frozenset()):
    """(cluster, policy) with the profile's grouping, bucket, first bucket, cycle and
    blocking; names in ``explicit`` (``policy``, ``bucket_bytes``, ``algorithm``) were given
    by the user and win. ``None`` returns both unchanged."""
    if profile is None:
        return cluster, policy
    changes: dict = {"first_bucket_bytes": profile.first_bucket_bytes,
                     "cycle_ms": profile.cycle_ms}
    if "policy" not in explicit:
        changes["policy_name"] = profile.policy
    if "bucket_bytes" not in explicit and profile.bucket_bytes is not None:
        changes["bucket_bytes"] = profile.bucket_bytes
    name = changes.pop("policy_name", policy.name)
    policy = replace(policy, name=name, **changes)
    if profile.blocking:
        cluster = replace(cluster, shared_cpu=True)
    if profile.ps_placement is PsPlacement.HOST_CPU and "algorithm" not in explicit:
        cluster = replace(cluster, algorithm="ps")
    return cluster, policy
