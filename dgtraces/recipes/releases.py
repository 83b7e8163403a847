"""The shipped releases as recipes (plain data). Producers: :mod:`.producers`.

v0.1.0: the ``layers`` table of the three Caffe models.
v0.2.0: + the measured CPU collection (layer timings at threads 1 and 2, gloo loopback
        comm sweep with alpha-beta fits, 2-worker S-SGD iterations).
v0.3.0: + the published reference rows, 42 reconstructed K80/V100 traces, this CPU's
        measured peaks (devices rows); then the reconstruction card fragment.
v0.4.0: + published real GPU per-layer traces, 4 torchvision architectures' layers, 2
        datasheet devices (issue #13); then the reconstruction card fragment again (it gains
        the real-GPU-layer comparison).
v0.5.0: + the DeepBench kernels of seven GPUs (``kernels`` table) and their datasheet
        devices (issue #27); reconstructions unchanged (kernels-2.0 not adopted).
v0.6.0: + DeepBench's V100 kernels (fp32 and amp) and the kernels-3 parameter table
        (``method_params``: its fit, fit metrics and pre-registered evaluation; issue #33).
v0.7.0: + the first real-GPU collection: scripts/gpu_check.sh on a lent NVIDIA H200
        (``dgtraces/contributions/h200-2026-12-04``: 7 measured runs, their layer timings
        and a gloo loopback comm sweep).

Model lists are spelled out (not "every registry model"): a recipe describes one release,
and models added to the registry later must not change what these recipes build.
"""

from __future__ import annotations

from dgtraces.recipes.spec import Recipe, Step

P = "dgtraces.recipes.producers:"
V010_MODELS = ("alexnet", "googlenet", "resnet50")

V010 = Recipe(
    "0.1.0", None, "layers table for alexnet, googlenet (with aux), resnet50",
    (Step(P + "layers", ("layers",), {"models": V010_MODELS},
          "python -c 'from dgtraces.models import layers_frame'"),),
)

V020 = Recipe(
    "0.2.0", "0.1.0",
    "v0.1.0 + measured CPU traces (PyTorch, layer timings at threads 1 and 2), gloo loopback "
    "comm sweep with alpha-beta fits, measured 2-worker S-SGD iterations (naive, wfbp, "
    "bucketed); collection took {elapsed_s:.0f} s",
    (Step(P + "cpu_collection", ("runs", "layer_timings", "iterations", "comm", "comm_fits"),
          {"models": V010_MODELS,
           # model -> batch sizes at threads=1 (the ssgd batch included) and at threads=2
           "layer_batches": {"alexnet": ((4, 8, 16), (4, 16)),
                             "googlenet": ((4, 8, 16), (4, 16)),
                             "resnet50": ((4, 8), (4, 8))},
           "repeats": 15, "warmup": 2, "comm_repeats": 20, "comm_sizes": "4B..64MiB",
           "ssgd_batch": 8, "ssgd_iters": 10, "ssgd_warmup": 2, "bucket_mb": 25.0,
           "policies": ("naive", "wfbp", "bucketed")},
          "dgtraces collect layers|comm|ssgd (one call per model, batch and thread count)",
          measures=True),),
)

V030 = Recipe(
    "0.3.0", "0.2.0",
    "v0.2.0 + {reconstructed} reconstructed K80/V100 traces ({method}), the published "
    "reference rows (calibration throughputs, B-Caffe GoogLeNet traces, OSU allreduce, "
    "datasheet devices) and this CPU's measured peaks",
    (Step(P + "reconstructions", ("runs", "layer_timings"),
          {"devices": ("k80", "v100"),
           "batches": {"alexnet": (16, 32, 64, 128, 256, 512),
                       "googlenet": (16, 32, 64, 128), "resnet50": (16, 32, 64, 128)}},
          "dgtraces reconstruct --device D --model M --batch-size B [--precision amp]"),
     Step(P + "published", ("runs", "layer_timings", "iterations", "comm", "comm_fits",
                            "devices"), {}, "dgtraces import published --out DIR"),
     Step(P + "cpu_devices", ("devices",), {},
          "measured CPU peaks at the base release's thread counts", measures=True)),
    after=(P + "reconstruction_fragment",),
)

V040_MODELS = ("alexnet-owt", "resnet50-v1.5", "vgg16", "inception-v3")

V040 = Recipe(
    "0.4.0", "0.3.0",
    "v0.3.0 + published real GPU per-layer traces (caffe time on Titan X Maxwell, PipeDream "
    "on an unstated GPU, Kineto on V100-DGXS-32GB), the layers of alexnet-owt, "
    "resnet50-v1.5, vgg16 and inception-v3, and the Titan X / V100-DGXS datasheet devices "
    "({rows})",
    (Step(P + "layers", ("layers",), {"models": V040_MODELS},
          "dgtraces release --add-models " + ",".join(V040_MODELS)),
     Step(P + "gpu_traces", ("runs", "layer_timings"), {},
          "dgtraces import caffe-time|pipedream|kineto <shipped file> --model M --out DIR"),
     Step(P + "datasheet_devices", ("devices",),
          {"devices": ("titanx-maxwell", "v100-dgxs-32gb")},
          "rows of dgtraces/reference/devices_datasheet.csv")),
    after=(P + "reconstruction_fragment",),
)

DEEPBENCH_DEVICES = ("p100-pcie", "t4", "m40", "titanx-pascal", "titanxp", "gtx1080ti")

V050 = Recipe(
    "0.5.0", "0.4.0",
    "v0.4.0 + the DeepBench training kernels of seven GPUs (kernels table, published: "
    "{kernel_convs} cuDNN convolutions with forward, data- and weight-gradient times apart, "
    "{kernel_gemms} cuBLAS GEMMs; {kernels_keyed} convolutions keyed to a layer of a shipped "
    "model) and the datasheet devices of those GPUs ({rows}). The K80/V100 reconstructions "
    "stay roofline-1.1: kernels-2.0 was not adopted by its pre-registered rule "
    "(docs/reconstruction-kernels.md)",
    (Step(P + "deepbench_kernels", ("kernels",),
          {"sheets": ("P100", "T4", "M40", "TitanX", "TitanX_Pascal", "TitanXp", "1080Ti")},
          "dgtraces import deepbench --out DIR (the seven fp32 sheets shipped then)"),
     Step(P + "datasheet_devices", ("devices",), {"devices": DEEPBENCH_DEVICES},
          "rows of dgtraces/reference/devices_datasheet.csv")),
)

V060 = Recipe(
    "0.6.0", "0.5.0",
    "v0.5.0 + DeepBench's V100 kernels (kernels table, published: the FP32 sheet and the "
    "FP16-input tensor-core sheet as precision amp, {kernel_convs} conv and {kernel_gemms} GEMM "
    "rows, {kernels_keyed} convolutions keyed to a layer) and the kernels-3 parameter table "
    "(method_params, {method_params} rows: the fit of kernels-3 on the release's kernels, "
    "per-layer GPU runs and calibration.csv, its fit metrics and pre-registered evaluation; "
    "docs/reconstruction-kernels3.md) ({rows}). The K80/V100 reconstructions stay "
    "roofline-1.1 in this release",
    (Step(P + "deepbench_kernels", ("kernels",), {"sheets": ("V100", "V100-FP16")},
          "dgtraces import deepbench --out DIR (V100's two sheets)"),
     Step(P + "kernels3_params", ("method_params",), {},
          "the kernels-3 fit and evaluation (dgtraces reconstruct --report --method kernels-3 "
          "--refit recomputes them)")),
)

V070 = Recipe(
    "0.7.0", "0.6.0",
    "v0.6.0 + the first collection on a real GPU: scripts/gpu_check.sh on a lent NVIDIA H200 "
    "(torch 2.11.0+cu130, CUDA 13.0, cuDNN 9.19; {contributed_runs} measured runs: AlexNet "
    "b512 and ResNet-50 b128 and b32, fp32 and amp, one AlexNet run also profiled; a gloo "
    "loopback comm sweep on the host CPU; docs/gpu-collection.md) ({rows})",
    (Step(P + "contribution", ("runs", "layer_timings", "comm"),
          {"folder": "h200-2026-12-04"},
          "dgtraces contribute dgtraces/contributions/h200-2026-12-04 && dgtraces release "
          "0.7.0"),),
)

RECIPES = (V010, V020, V030, V040, V050, V060, V070)
