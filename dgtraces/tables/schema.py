"""pandera DataFrameModels for every table: declaration only (execution lives in ``checks``).

Column names carry units. ``metadata={"unit": ...}`` and ``description`` feed the exported
JSON schemas, the dataset card and Croissant. Cross-table keys are declared in ``KEYS`` and
``FOREIGN_KEYS`` and enforced by :mod:`dgtraces.tables.checks`.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import pandera.pandas as pa
from pandera.typing import Series

from dgtraces.errors import Code
from dgtraces.models import KINDS, MODELS
from dgtraces.tables.vocab import FRAMEWORK_DEFAULT, POLICY_NAMES

SCHEMA_VERSION = "1"
PROVENANCE = ("measured", "reconstructed", "published")
PRECISIONS = ("fp32", "amp", "fp16", "bf16")
POLICIES = POLICY_NAMES + (FRAMEWORK_DEFAULT,)  # declared in tables.vocab
KERNEL_OPS = ("conv", "gemm")
# cost-model versions whose fitted parameters ship in ``method_params`` (issue #33)
PARAM_METHODS = ("kernels-3",)
PARAM_SCOPES = ("kernel", "shape", "range", "memory", "framework", "metric", "prediction")
KERNEL_CONV_FIELDS = ("batch_size", "in_c", "in_h", "in_w", "out_c", "out_h", "out_w",
                      "kernel_h", "kernel_w", "pad_h", "pad_w", "stride_h", "stride_w")
KERNEL_GEMM_FIELDS = ("gemm_m", "gemm_n", "gemm_k", "trans_a", "trans_b")
COLLECTIVES = ("allreduce", "broadcast", "allgather", "reduce_scatter", "reduce")
# \Z, not $ ($ matches before a final newline), and [0-9], not \d (any Unicode digit):
# identifiers and timestamps match exactly (#29 M3); strict.py parses timestamps too
ISO_UTC = (r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?"
           r"(Z|[+-][0-9]{2}:[0-9]{2})\Z")
ID = r"^[A-Za-z0-9][A-Za-z0-9._:+-]*\Z"
# a free-text key (interconnect, backend): printable, no line break, no edge blank, so
# "10GbE\n" is no second "10GbE" (#36 low)
LABEL = (r"^[^\s\x00-\x1f\x7f-\x9f](?:[^\x00-\x1f\x7f-\x9f\u2028\u2029]*"
         r"[^\s\x00-\x1f\x7f-\x9f])?\Z")
# comm rows (#36 lows: contribution bounds, importer plausibility): ranks as the importers
# bound them; messages as ``collective --sizes``; across >= 2 ranks no collective moves its
# message faster than 2 TB/s (beyond any interconnect's algbw; a time in another unit)
MAX_COLLECTIVE_RANKS = 32768
MAX_MESSAGE_BYTES = 1 << 40
MAX_COMM_BYTES_PER_US = 2e6


def F(description: str, unit: str | None = None, **kw):
    """A pandera Field with a description and a unit in its metadata."""
    return pa.Field(description=description, metadata={"unit": unit}, **kw)


class _Base(pa.DataFrameModel):
    class Config:
        strict = True
        coerce = True
        ordered = False


class Layers(_Base):
    """Per-layer structure of each model at Caffe granularity, derived from the specs."""

    model: Series[str] = F("model name", isin=MODELS)
    layer_idx: Series[int] = F("execution order within the model (0-based)", ge=0)
    layer: Series[str] = F("layer name: the Caffe prototxt name, or the torchvision module path "
                           "for torchvision specs (docs/gpu-traces.md)",
                           str_length={"min_value": 1})
    kind: Series[str] = F("layer kind", isin=KINDS)
    bottoms: Series[str] = F("comma-separated producing layers ('data' = input)")
    aux: Series[bool] = F("belongs to an auxiliary classifier (GoogLeNet loss1/loss2, "
                          "Inception-v3 AuxLogits)")
    out_c: Series[int] = F("output channels", ge=1)
    out_h: Series[int] = F("output height", "px", ge=1)
    out_w: Series[int] = F("output width", "px", ge=1)
    params: Series[int] = F("learnable parameters", "count", ge=0)
    bias_params: Series[int] = F("learnable parameters in the bias/beta blob", "count", ge=0)
    buffers: Series[int] = F("non-learnable state (BatchNorm running mean/var + factor)",
                             "count", ge=0)
    grad_bytes: Series[int] = F("fp32 gradient size", "bytes", ge=0)
    fwd_flops: Series[int] = F("forward FLOPs per sample (multiply-add = 2)", "FLOP", ge=0)
    bwd_flops: Series[int] = F("backward FLOPs per sample", "FLOP", ge=0)
    in_bytes: Series[int] = F("fp32 input activations per sample", "bytes", ge=0)
    act_bytes: Series[int] = F("fp32 output activations per sample", "bytes", ge=0)

    class Config(_Base.Config):
        unique = ["model", "layer"]

    @pa.dataframe_check(error="grad_bytes must be 4 * params (fp32)")
    def _grad_is_fp32(cls, df: pd.DataFrame) -> pd.Series:
        return df["grad_bytes"] == 4 * df["params"]


class Runs(_Base):
    """One row per trace collection (measured, reconstructed or published)."""

    run_id: Series[str] = F("unique run id", unique=True, str_matches=ID)
    model: Series[str] = F("model name", isin=MODELS)
    device: Series[str] = F("device key (see devices table)", str_matches=ID)
    device_kind: Series[str] = F("cpu or gpu", isin=("cpu", "gpu"))
    host: Series[str] = F("CPU/GPU model string as reported", nullable=True)
    framework: Series[str] = F("framework and version", str_length={"min_value": 1})
    precision: Series[str] = F("numeric precision", isin=PRECISIONS)
    batch_size: Series[int] = F("per-device batch size", "samples", gt=0)
    threads: Series[pd.Int64Dtype] = F("intra-op threads (CPU runs)", "count", nullable=True, ge=1)
    cores: Series[pd.Int64Dtype] = F("cores visible to the collector", "count", nullable=True, ge=1)
    provenance: Series[str] = F("measured | reconstructed | published", isin=PROVENANCE)
    source: Series[str] = F("citation or collection description", str_length={"min_value": 3})
    collector_version: Series[str] = F("collector / method / importer and its version",
                                       str_length={"min_value": 1})
    timestamp_utc: Series[str] = F("when the run was made or imported (ISO 8601)",
                                   str_matches=ISO_UTC)
    fwd_ms: Series[float] = F("whole-model forward time", "ms", nullable=True, ge=0)
    bwd_ms: Series[float] = F("whole-model backward time", "ms", nullable=True, ge=0)
    update_ms: Series[float] = F("optimizer update time", "ms", nullable=True, ge=0)
    iter_ms: Series[float] = F("whole training iteration time", "ms", nullable=True, ge=0)
    layer_sum_ratio: Series[float] = F("sum of per-layer fwd+bwd over whole fwd+bwd",
                                       "ratio", nullable=True, gt=0)
    flagged: Series[bool] = F("failed a self-consistency check; see flag_reason")
    flag_reason: Series[str] = F("why the run is flagged", nullable=True)
    params_json: Series[str] = F("JSON: environment, fitted parameters, calibration rows",
                                 nullable=True)
    notes: Series[str] = F("free text", nullable=True)


class LayerTimings(_Base):
    """Per-layer forward/backward times of a run (medians with spread)."""

    run_id: Series[str] = F("run id (runs.run_id)", str_matches=ID)
    layer: Series[str] = F("layer name (layers.layer of the run's model)")
    fwd_ms: Series[float] = F("forward time, median", "ms", nullable=True, ge=0)
    bwd_ms: Series[float] = F("backward time, median", "ms", nullable=True, ge=0)
    fwd_p10_ms: Series[float] = F("forward time, 10th percentile", "ms", nullable=True, ge=0)
    fwd_p90_ms: Series[float] = F("forward time, 90th percentile", "ms", nullable=True, ge=0)
    bwd_p10_ms: Series[float] = F("backward time, 10th percentile", "ms", nullable=True, ge=0)
    bwd_p90_ms: Series[float] = F("backward time, 90th percentile", "ms", nullable=True, ge=0)
    comm_ms: Series[float] = F("gradient communication time of the layer, when logged", "ms",
                               nullable=True, ge=0)
    n: Series[int] = F("number of timed repetitions", "count", ge=1)

    class Config(_Base.Config):
        unique = ["run_id", "layer"]

    @pa.dataframe_check(error="need p10 <= median <= p90 where present")
    def _ordered_spread(cls, df: pd.DataFrame) -> pd.Series:
        ok = pd.Series(True, index=df.index)
        for p in ("fwd", "bwd"):
            lo, med, hi = df[f"{p}_p10_ms"], df[f"{p}_ms"], df[f"{p}_p90_ms"]
            eps = 1e-9
            ok &= ~((lo > med + eps) | (med > hi + eps)).fillna(False).astype(bool)
        return ok


class Iterations(_Base):
    """End-to-end iteration times (measured S-SGD or published throughputs)."""

    iter_id: Series[str] = F("unique row id", unique=True, str_matches=ID)
    model: Series[str] = F("model name", isin=MODELS)
    device: Series[str] = F("device key", str_matches=ID)
    framework: Series[str] = F("framework and version", str_length={"min_value": 1})
    precision: Series[str] = F("numeric precision", isin=PRECISIONS)
    phase: Series[str] = F("train or inference", isin=("train", "inference"))
    batch_size: Series[pd.Int64Dtype] = F("per-worker batch size", "samples", nullable=True, gt=0)
    workers: Series[int] = F("data-parallel workers", "count", ge=1)
    nodes: Series[int] = F("machines", "count", ge=1)
    interconnect: Series[str] = F("link the workers used (a links preset key, 'none (single GPU)' "
                                        "or 'unknown')", str_matches=LABEL)
    backend: Series[str] = F("communication library (gloo, nccl, mpi)", nullable=True,
                             str_matches=LABEL)
    policy: Series[str] = F("gradient aggregation policy", isin=POLICIES)
    bucket_bytes: Series[pd.Int64Dtype] = F("bucket size for bucketed policies", "bytes",
                                            nullable=True, gt=0)
    io_overlap: Series[pd.BooleanDtype] = F("input pipeline overlapped with compute",
                                            nullable=True)
    threads_per_worker: Series[pd.Int64Dtype] = F("intra-op threads per worker", "count",
                                                  nullable=True, ge=1)
    iter_ms: Series[float] = F("iteration time, median", "ms", nullable=True, gt=0)
    iter_p10_ms: Series[float] = F("iteration time, 10th percentile", "ms", nullable=True, gt=0)
    iter_p90_ms: Series[float] = F("iteration time, 90th percentile", "ms", nullable=True, gt=0)
    n: Series[pd.Int64Dtype] = F("timed iterations", "count", nullable=True, ge=1)
    throughput_img_s: Series[float] = F("samples per second, all workers", "img/s",
                                        nullable=True, gt=0)
    provenance: Series[str] = F("measured | reconstructed | published", isin=PROVENANCE)
    source: Series[str] = F("citation or collection description", str_length={"min_value": 3})
    trace_run_id: Series[str] = F("runs.run_id of the layer trace for this setup",
                                  nullable=True)
    timestamp_utc: Series[str] = F("when measured or imported", nullable=True,
                                   str_matches=ISO_UTC)
    phases_json: Series[str] = F("JSON: per-phase times of the iteration", nullable=True)
    notes: Series[str] = F("free text", nullable=True)

    @pa.dataframe_check(error="need iter_ms or throughput_img_s")
    def _has_time(cls, df: pd.DataFrame) -> pd.Series:
        return df["iter_ms"].notna() | df["throughput_img_s"].notna()


class Comm(_Base):
    """Collective timings by message size."""

    collective: Series[str] = F("collective operation", isin=COLLECTIVES)
    backend: Series[str] = F("library (gloo, nccl, mpi/osu)", str_matches=LABEL)
    interconnect: Series[str] = F("link (a links preset key or a description)",
                                  str_matches=LABEL)
    workers: Series[int] = F("participating processes", "count", ge=1,
                             le=MAX_COLLECTIVE_RANKS)
    message_bytes: Series[int] = F("message size", "bytes", ge=1, le=MAX_MESSAGE_BYTES)
    time_ms: Series[float] = F("time, median (or average where published so)", "ms", gt=0)
    p10_ms: Series[float] = F("10th percentile", "ms", nullable=True, gt=0)
    p90_ms: Series[float] = F("90th percentile", "ms", nullable=True, gt=0)
    n: Series[pd.Int64Dtype] = F("repetitions", "count", nullable=True, ge=1)
    provenance: Series[str] = F("measured | reconstructed | published", isin=PROVENANCE)
    source: Series[str] = F("citation or collection description", str_length={"min_value": 3})
    timestamp_utc: Series[str] = F("when measured or imported", nullable=True,
                                   str_matches=ISO_UTC)

    class Config(_Base.Config):
        unique = ["collective", "backend", "interconnect", "workers", "message_bytes", "source"]

    @pa.dataframe_check(error="need p10 <= time <= p90 where present")
    def _ordered_spread(cls, df: pd.DataFrame) -> pd.Series:
        eps = 1e-9
        ok = pd.Series(True, index=df.index)
        if "p10_ms" in df:  # a subset of the columns (a --link-fit points file) may lack them
            ok &= ~(df["p10_ms"] > df["time_ms"] + eps).fillna(False).astype(bool)
        if "p90_ms" in df:
            ok &= ~(df["time_ms"] > df["p90_ms"] + eps).fillna(False).astype(bool)
        return ok

    @pa.dataframe_check(error="faster than any interconnect: message_bytes / time over 2 TB/s "
                              "across >= 2 workers (a time in another unit?)")
    def _below_any_interconnect(cls, df: pd.DataFrame) -> pd.Series:
        rate = df["message_bytes"] / (df["time_ms"] * 1000.0)  # bytes per us
        return ~((df["workers"] >= 2) & (rate > MAX_COMM_BYTES_PER_US)).astype(bool)


class CommFits(_Base):
    """alpha-beta fits (time = alpha + beta * bytes) of the comm points."""

    collective: Series[str] = F("collective operation", isin=COLLECTIVES)
    backend: Series[str] = F("library", str_matches=LABEL)
    interconnect: Series[str] = F("link", str_matches=LABEL)
    workers: Series[int] = F("participating processes", "count", ge=1, le=MAX_COLLECTIVE_RANKS)
    alpha_us: Series[float] = F("latency term", "us", ge=0)
    beta_us_per_byte: Series[float] = F("per-byte term", "us/byte", ge=0)
    bandwidth_gb_s: Series[float] = F("1 / beta", "GB/s", gt=0, lt=float("inf"))
    r2: Series[float] = F("coefficient of determination of the fit", le=1)
    n_points: Series[int] = F("points fitted", "count", ge=2)
    min_bytes: Series[int] = F("smallest message fitted", "bytes", ge=1)
    max_bytes: Series[int] = F("largest message fitted", "bytes", ge=1)
    provenance: Series[str] = F("measured | reconstructed | published", isin=PROVENANCE)
    source: Series[str] = F("citation or collection description", str_length={"min_value": 3})

    class Config(_Base.Config):
        unique = ["collective", "backend", "interconnect", "workers", "source"]


class Devices(_Base):
    """Device peak figures."""

    device: Series[str] = F("device key", unique=True, str_matches=ID)
    name: Series[str] = F("full device name")
    kind: Series[str] = F("cpu or gpu", isin=("cpu", "gpu"))
    peak_fp32_tflops: Series[float] = F("peak fp32 throughput (null: a contributed device "
                                        "declared without datasheet figures)", "TFLOP/s",
                                        nullable=True, gt=0)
    peak_fp16_tensor_tflops: Series[float] = F("peak fp16 tensor-core throughput (dense)",
                                               "TFLOP/s", nullable=True, gt=0)
    mem_bandwidth_gb_s: Series[float] = F("peak memory bandwidth (null: a contributed device "
                                          "declared without datasheet figures)", "GB/s",
                                          nullable=True, gt=0)
    memory_gb: Series[float] = F("memory size", "GB", nullable=True, gt=0)
    provenance: Series[str] = F("measured | reconstructed | published", isin=PROVENANCE)
    source: Series[str] = F("citation", str_length={"min_value": 3})
    notes: Series[str] = F("free text", nullable=True)


class Links(_Base):
    """Interconnect presets for the predictor's comm models."""

    link: Series[str] = F("preset key", unique=True, str_matches=ID)
    alpha_us: Series[float] = F("per-message latency", "us", ge=0)
    bandwidth_gb_s: Series[float] = F("effective bandwidth per direction", "GB/s", gt=0)
    scope: Series[str] = F("intra-node, inter-node or either", isin=("intra", "inter", "any"))
    provenance: Series[str] = F("measured | reconstructed | published", isin=PROVENANCE)
    source: Series[str] = F("citation or measurement", str_length={"min_value": 3})
    notes: Series[str] = F("free text", nullable=True)


class Kernels(_Base):
    """Single GPU kernels timed in isolation (cuDNN convolutions with forward, data-gradient
    and weight-gradient times kept apart; cuBLAS GEMMs): one row per published problem."""

    kernel_id: Series[str] = F("unique kernel id: source, sheet and CSV line "
                               "(deepbench-P100-191)", unique=True, str_matches=ID)
    device: Series[str] = F("device key (see devices table)", str_matches=ID)
    op: Series[str] = F("conv (cuDNN convolution) or gemm (cuBLAS matrix multiply)",
                        isin=KERNEL_OPS)
    precision: Series[str] = F("numeric precision", isin=PRECISIONS)
    batch_size: Series[pd.Int64Dtype] = F("conv: batch N", "samples", nullable=True, ge=1)
    in_c: Series[pd.Int64Dtype] = F("conv: input channels C", "count", nullable=True, ge=1)
    in_h: Series[pd.Int64Dtype] = F("conv: input height H", "px", nullable=True, ge=1)
    in_w: Series[pd.Int64Dtype] = F("conv: input width W", "px", nullable=True, ge=1)
    out_c: Series[pd.Int64Dtype] = F("conv: output channels K", "count", nullable=True, ge=1)
    out_h: Series[pd.Int64Dtype] = F("conv: output height P", "px", nullable=True, ge=1)
    out_w: Series[pd.Int64Dtype] = F("conv: output width Q", "px", nullable=True, ge=1)
    kernel_h: Series[pd.Int64Dtype] = F("conv: filter height R", "px", nullable=True, ge=1)
    kernel_w: Series[pd.Int64Dtype] = F("conv: filter width S", "px", nullable=True, ge=1)
    pad_h: Series[pd.Int64Dtype] = F("conv: vertical padding", "px", nullable=True, ge=0)
    pad_w: Series[pd.Int64Dtype] = F("conv: horizontal padding", "px", nullable=True, ge=0)
    stride_h: Series[pd.Int64Dtype] = F("conv: vertical stride", "px", nullable=True, ge=1)
    stride_w: Series[pd.Int64Dtype] = F("conv: horizontal stride", "px", nullable=True, ge=1)
    gemm_m: Series[pd.Int64Dtype] = F("gemm: rows of C", "count", nullable=True, ge=1)
    gemm_n: Series[pd.Int64Dtype] = F("gemm: columns of C", "count", nullable=True, ge=1)
    gemm_k: Series[pd.Int64Dtype] = F("gemm: reduction length", "count", nullable=True, ge=1)
    trans_a: Series[pd.BooleanDtype] = F("gemm: A transposed", nullable=True)
    trans_b: Series[pd.BooleanDtype] = F("gemm: B transposed", nullable=True)
    fwd_ms: Series[float] = F("conv forward, or the GEMM", "ms", gt=0)
    dgrad_ms: Series[float] = F("conv data gradient (wrt inputs; null: not measured)", "ms",
                                nullable=True, gt=0)
    wgrad_ms: Series[float] = F("conv weight gradient (wrt parameters)", "ms", nullable=True,
                                gt=0)
    algorithm: Series[str] = F("cuDNN forward algorithm as published", nullable=True)
    cuda_version: Series[str] = F("CUDA version as published", nullable=True)
    cudnn_version: Series[str] = F("cuDNN version as published", nullable=True)
    model: Series[str] = F("shipped model with a layer of exactly this conv shape (first in "
                           "registry and layer order; null: none)", nullable=True, isin=MODELS)
    layer: Series[str] = F("that layer (key to layers with model)", nullable=True)
    provenance: Series[str] = F("measured | reconstructed | published", isin=PROVENANCE)
    repository: Series[str] = F("source repository", str_length={"min_value": 3})
    path: Series[str] = F("file in the repository", str_length={"min_value": 1})
    commit: Series[str] = F("commit of the file", str_matches=r"^[0-9a-f]{40}\Z")  # \Z: #29 M3
    source: Series[str] = F("citation (repository, path, commit, sheet)",
                            str_length={"min_value": 3})

    # cross-field checks (#36 low): a row is one op's problem, with that op's fields only
    @pa.dataframe_check(error="conv rows give every conv field and no gemm field; gemm rows "
                              "give gemm_m/n/k and trans_a/b, no conv field and no dgrad/wgrad")
    def _fields_of_the_op(cls, df: pd.DataFrame) -> pd.Series:
        conv, gemm = df[list(KERNEL_CONV_FIELDS)], df[list(KERNEL_GEMM_FIELDS)]
        is_conv = df["op"] == "conv"
        conv_ok = conv.notna().all(axis=1) & gemm.isna().all(axis=1)
        gemm_ok = (gemm.notna().all(axis=1) & conv.isna().all(axis=1)
                   & df["dgrad_ms"].isna() & df["wgrad_ms"].isna())
        return (conv_ok.where(is_conv, gemm_ok)).astype(bool)

    @pa.dataframe_check(error="conv output size must be (in + 2 pad - kernel) // stride + 1")
    def _conv_geometry(cls, df: pd.DataFrame) -> pd.Series:
        ok = pd.Series(True, index=df.index)
        for a in ("h", "w"):
            size = ((df[f"in_{a}"] + 2 * df[f"pad_{a}"] - df[f"kernel_{a}"]) // df[f"stride_{a}"]
                    + 1)
            ok &= ~((df["op"] == "conv") & (size != df[f"out_{a}"])).fillna(True).astype(bool)
        return ok

    @pa.dataframe_check(error="model and layer are given together (a layer of that model)")
    def _model_with_layer(cls, df: pd.DataFrame) -> pd.Series:
        return df["model"].isna() == df["layer"].isna()


class MethodParams(_Base):
    """Fitted parameters of a cost model, its fit metrics and its pre-registered evaluation,
    fitted once when the release was built (docs/reconstruction-kernels3.md): one row per
    parameter, metric or held-out prediction; the value sits in the column of its unit."""

    param_id: Series[str] = F("unique id: method, scope and what the row is", unique=True,
                              str_matches=ID)
    # a list: pandera reads a one-element tuple as its element (isin "kernels-3": characters)
    method: Series[str] = F("cost model version", isin=list(PARAM_METHODS))
    scope: Series[str] = F("kernel (a GPU's kernel constants; device null: the shared prior), "
                           "shape (a shared shape effect), range (what the fit covered), memory "
                           "(a GPU's memory-bound constants), framework (a family's per-layer "
                           "overhead), metric (a fit or evaluation figure), prediction (a "
                           "held-out prediction of the evaluation)", isin=PARAM_SCOPES)
    precision: Series[str] = F("numeric precision of a kernel fit", nullable=True,
                               isin=PRECISIONS)
    device: Series[str] = F("device key", nullable=True)
    family: Series[str] = F("framework family (reference.frameworks.FAMILIES)", nullable=True)
    shape: Series[str] = F("kernel shape key without the batch (conv:c..h..w.. / gemm:m..n..k..)",
                           nullable=True)
    direction: Series[str] = F("kernel direction (fwd, dgrad, wgrad, gemm) or GEMM class",
                               nullable=True)
    name: Series[str] = F("parameter or metric name", str_length={"min_value": 1})
    value_frac: Series[float] = F("a fraction (efficiency of datasheet peak or bandwidth)",
                                  "fraction", nullable=True)
    value_us: Series[float] = F("a time", "us", nullable=True)
    value_ms: Series[float] = F("a time", "ms", nullable=True)
    value_pct: Series[float] = F("a percentage (error, MAPE)", "%", nullable=True)
    value_log: Series[float] = F("a natural-log ratio (shape effect)", "ln ratio", nullable=True)
    value_num: Series[float] = F("a dimensionless number (exponent, rms log error, GEMM size, "
                                 "bytes)", nullable=True)
    target_pct: Series[float] = F("the pre-registered target of a metric", "%", nullable=True)
    baseline_pct: Series[float] = F("roofline-1.1's figure on the same rows", "%", nullable=True)
    count: Series[pd.Int64Dtype] = F("rows, kernels or GPUs behind the value", "count",
                                     nullable=True, ge=0)
    basis: Series[str] = F("what constrained the value, or the held-out row", nullable=True)
    kernel_id: Series[str] = F("kernel of a held-out prediction (kernels.kernel_id)",
                               nullable=True)
    fit_digest: Series[str] = F("sha256 of the kernels rows the fit was made on",
                                str_matches=r"^[0-9a-f]{64}\Z")
    provenance: Series[str] = F("measured | reconstructed | published", isin=PROVENANCE)
    source: Series[str] = F("the fit data and method", str_length={"min_value": 3})


TABLES: dict[str, type[_Base]] = {
    "layers": Layers,
    "runs": Runs,
    "layer_timings": LayerTimings,
    "iterations": Iterations,
    "comm": Comm,
    "comm_fits": CommFits,
    "devices": Devices,
    "links": Links,
    "kernels": Kernels,
    "method_params": MethodParams,
}

# Primary keys (unique per table) and foreign keys (table.column -> table.column).
KEYS: dict[str, tuple[str, ...]] = {
    "layers": ("model", "layer"),
    "runs": ("run_id",),
    "layer_timings": ("run_id", "layer"),
    "iterations": ("iter_id",),
    "comm": ("collective", "backend", "interconnect", "workers", "message_bytes", "source"),
    "comm_fits": ("collective", "backend", "interconnect", "workers", "source"),
    "devices": ("device",),
    "links": ("link",),
    "kernels": ("kernel_id",),
    "method_params": ("param_id",),
}


@dataclass(frozen=True)
class ForeignKey:
    """``table.columns`` must name a row of ``parent.parent_columns``.

    ``via`` derives a child column the table does not carry from a row it references:
    ``{"model": ("run_id", "runs", "run_id")}`` takes the model of the referenced run. Rows
    whose key is null (optional references, or a ``via`` row that does not exist, which its
    own key reports) are not checked. Parent rows come from the frames checked together,
    from the store where the caller passes it, and for ``layers`` from the shipped model
    catalog only (a layers row must be a layer of a shipped model). ``code`` is the reason
    code of each failure."""

    table: str
    columns: tuple[str, ...]
    parent: str
    parent_columns: tuple[str, ...]
    code: str = Code.CROSS_TABLE
    via: tuple[tuple[str, str, str, str], ...] = ()  # (column, own key, parent, parent key)

    @property
    def label(self) -> str:
        return f"{', '.join(self.columns)} not in {self.parent}"


FOREIGN_KEYS: tuple[ForeignKey, ...] = (
    ForeignKey("layer_timings", ("run_id",), "runs", ("run_id",)),
    ForeignKey("iterations", ("trace_run_id",), "runs", ("run_id",)),
    ForeignKey("layer_timings", ("model", "layer"), "layers", ("model", "layer"),
               code=Code.UNKNOWN_LAYER, via=(("model", "run_id", "runs", "run_id"),)),
    ForeignKey("layers", ("model", "layer"), "layers", ("model", "layer"),
               code=Code.UNKNOWN_LAYER),
    ForeignKey("kernels", ("model", "layer"), "layers", ("model", "layer"),
               code=Code.UNKNOWN_LAYER),
)
# parents whose rows come from the package itself, never from the checked frames
CATALOG_PARENTS = ("layers",)
DESCRIPTIONS = {name: (model.__doc__ or "").strip() for name, model in TABLES.items()}
