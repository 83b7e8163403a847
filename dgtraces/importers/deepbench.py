"""DeepBench training kernels -> the ``kernels`` table (provenance published): the shipped
sheets of eight GPUs (V100 in fp32 and in its FP16-input tensor-core sheet, precision ``amp``).

Each published convolution keeps its forward, data-gradient and weight-gradient times in one
row (as DeepBench publishes them); each GEMM is one row. A convolution whose shape (input
C x H x W, K, R x S, pads, strides; ungrouped) is exactly a layer of a shipped model carries
that ``(model, layer)`` as a key to ``layers``: the first such layer in registry order, then
execution order. Rows matching no layer stay in the table without the key.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

IMPORTER = "dgtraces.importers.deepbench"


@dataclass
class KernelImport:
    kernels: "pd.DataFrame"
    matched: int  # conv rows keyed to a layer of a shipped model
    convs: int
    gemms: int

    def frames(self) -> dict[str, "pd.DataFrame"]:
        return {"kernels": self.kernels}


def _shape_key(cs) -> tuple:
    return (cs.c, cs.h, cs.w, cs.k, cs.r, cs.s, cs.pad_h, cs.pad_w, cs.stride_h, cs.stride_w)


@cache
def layer_shapes() -> dict[tuple, tuple[str, str]]:
    """Conv shape -> (model, layer): the first ungrouped conv of that shape among the
    shipped models (registry order, then execution order)."""
    from dgtraces.models import MODELS
    from dgtraces.reconstruct.kernels2.gemm import ConvShape
    from dgtraces.reconstruct.kernels2.network import geometry
    from dgtraces.reconstruct.variants import records

    out: dict[tuple, tuple[str, str]] = {}
    for model in MODELS:
        names = [r["layer"] for r in records(model)[0]]
        for name, (geo, _) in zip(names, geometry(model), strict=True):
            if isinstance(geo, ConvShape) and geo.group == 1:
                out.setdefault(_shape_key(geo), (model, name))
    return out


def import_deepbench(sheets: Sequence[str] | None = None) -> KernelImport:
    """Every conv and GEMM row of the shipped DeepBench sheets (``sheets``: their keys in
    :data:`dgtraces.reconstruct.deepbench.SHEETS`; None: all of them), validated. Release
    v0.5.0 holds the seven fp32 sheets of ``SEVEN``, v0.6.0 adds V100's two."""
    from dgtraces.importers.base import frame
    from dgtraces.reconstruct.deepbench import (
        COMMIT,
        REPO,
        SHEETS,
        conv_kernels,
        gemm_kernels,
        get_sheet,
        sheet_path,
        specs,
    )

    shapes = layer_shapes()
    rows, matched, n_conv, n_gemm = [], 0, 0, 0
    for sheet in (SHEETS if sheets is None else sheets):
        declared = get_sheet(sheet)
        spec = specs(sheet)
        common = {"precision": declared.precision, "provenance": "published", "repository": REPO,
                  "path": sheet_path(sheet), "commit": COMMIT,
                  "cuda_version": spec.get("CUDA Version"),
                  "cudnn_version": spec.get("Cudnn Version")}

        # the line of each row is in its kernel_id (deepbench-<sheet>-<line>)
        cite = (f"{REPO} {sheet_path(sheet)} @ {COMMIT[:12]}, sheet {declared.tab} (Apache-2.0; "
                f"dgtraces/reference/{declared.csv}, line in kernel_id)")

        for kr in conv_kernels(sheet):
            cs = kr.shape
            key = shapes.get(_shape_key(cs))
            matched += key is not None
            n_conv += 1
            rows.append({**common, "kernel_id": f"deepbench-{sheet}-{kr.row}",
                         "device": kr.device, "op": "conv", "batch_size": cs.n,
                         "in_c": cs.c, "in_h": cs.h, "in_w": cs.w, "out_c": cs.k,
                         "out_h": cs.p, "out_w": cs.q, "kernel_h": cs.r, "kernel_w": cs.s,
                         "pad_h": cs.pad_h, "pad_w": cs.pad_w, "stride_h": cs.stride_h,
                         "stride_w": cs.stride_w, "fwd_ms": kr.fwd_ms,
                         "dgrad_ms": kr.dgrad_ms, "wgrad_ms": kr.wgrad_ms,
                         "algorithm": kr.algo or None, "model": key[0] if key else None,
                         "layer": key[1] if key else None, "source": cite})
        for gk in gemm_kernels(sheet):
            n_gemm += 1
            rows.append({**common, "kernel_id": f"deepbench-{sheet}-{gk.row}",
                         "device": gk.device, "op": "gemm", "gemm_m": gk.m, "gemm_n": gk.n,
                         "gemm_k": gk.k, "trans_a": gk.trans_a, "trans_b": gk.trans_b,
                         "fwd_ms": gk.time_ms, "source": cite})
    return KernelImport(frame("kernels", rows), matched, n_conv, n_gemm)
