"""DeepBench training kernels of eight GPUs (published, Apache-2.0), parsed from the shipped
copies in ``dgtraces/reference/deepbench/csv/`` (see that folder's README).

Each results sheet holds blocks one after another; this module reads the dense GEMM block and
the convolution block (forward, data-gradient and weight-gradient times kept apart, with the
cuDNN forward algorithm). Columns are found by their header text (the T4 sheet orders R/S, pads
and strides differently from the others).

:data:`SHEETS` declares every shipped sheet once (its key in ``kernel_id``, device, precision);
:data:`SEVEN` are the fp32 sheets of release v0.5.0, the ones kernels-2.x fits on (the V100
sheets came later, issue #33).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from functools import cache

from dgtraces import reference
from dgtraces.errors import Code, DgtracesError
from dgtraces.reconstruct.kernels2.gemm import ConvShape

REPO = "baidu-research/DeepBench"
COMMIT = "da81ba7820739e2e506dc27f382d15be5479f98f"


@dataclass(frozen=True)
class Sheet:
    """One shipped results sheet: ``key`` names it in ``kernel_id`` (deepbench-KEY-LINE),
    ``gpu`` the workbook (``DeepBench_NV_<gpu>.xlsx``), ``tab`` the results sheet as its CSV is
    named (``<gpu>_<tab>.csv``)."""

    key: str
    gpu: str
    device: str
    precision: str = "fp32"
    tab: str = "Results_FP32"

    @property
    def csv(self) -> str:
        return f"deepbench/csv/{self.gpu}_{self.tab}.csv"


_S = Sheet
SHEETS: dict[str, Sheet] = {s.key: s for s in (
    _S("P100", "P100", "p100-pcie"), _S("T4", "T4", "t4"), _S("M40", "M40", "m40"),
    _S("TitanX", "TitanX", "titanx-maxwell"),
    _S("TitanX_Pascal", "TitanX_Pascal", "titanx-pascal"),
    _S("TitanXp", "TitanXp", "titanxp"), _S("1080Ti", "1080Ti", "gtx1080ti"),
    _S("V100", "V100", "v100"),
    # FP16 inputs, FP16 multiplies, FP32 accumulation on tensor cores: the amp case
    _S("V100-FP16", "V100", "v100", "amp", "Results_FP16_ip_Mixed_math"),
)}
SEVEN = ("P100", "T4", "M40", "TitanX", "TitanX_Pascal", "TitanXp", "1080Ti")
DIRECTIONS = ("fwd", "dgrad", "wgrad")
# header text (lower case, "(Filter ...)" dropped) -> field
_CONV_COLS = {"w": "w", "h": "h", "c": "c", "n": "n", "k": "k", "r": "r", "s": "s",
              "pad_h": "pad_h", "pad_w": "pad_w", "vertical stride": "stride_h",
              "horizontal stride": "stride_w", "forward (msec)": "fwd",
              "wrt inputs (msec)": "dgrad", "wrt parameters (msec)": "wgrad",
              "forward algorithm": "algo"}


def seven_devices() -> tuple[str, ...]:
    """The devices of :data:`SEVEN` (kernels-2.x's DeepBench GPUs)."""
    return tuple(SHEETS[s].device for s in SEVEN)


def _key(header: str) -> str:
    h = header.strip().lower()
    return h.split("(")[0].strip() if "filter" in h else h


@dataclass(frozen=True)
class ConvKernel:
    """One cuDNN convolution of DeepBench: its shape and the time of each direction (ms;
    None where not measured)."""

    device: str
    sheet: str
    row: int  # 1-based line of the CSV
    shape: ConvShape  # batch n, C x H x W in, K x P x Q out, R x S kernel, strides, pads
    fwd_ms: float | None
    dgrad_ms: float | None
    wgrad_ms: float | None
    algo: str

    def time_ms(self, direction: str) -> float | None:
        return {"fwd": self.fwd_ms, "dgrad": self.dgrad_ms, "wgrad": self.wgrad_ms}[direction]


@dataclass(frozen=True)
class GemmKernel:
    device: str
    sheet: str
    row: int
    m: int
    n: int
    k: int
    trans_a: bool
    trans_b: bool
    time_ms: float


def _num(text: str) -> float | None:
    text = text.strip()
    try:
        v = float(text)
    except ValueError:
        return None
    return v if v > 0 else None


def sheet_path(sheet: str) -> str:
    """Path in the DeepBench repository of the workbook a sheet was converted from."""
    return f"results/train/DeepBench_NV_{get_sheet(sheet).gpu}.xlsx"


def get_sheet(sheet: str) -> Sheet:
    """The declared sheet; UNKNOWN_DEVICE with the known keys otherwise."""
    if sheet not in SHEETS:
        raise DgtracesError(f"unknown DeepBench sheet {sheet!r}; known: "
                            f"{', '.join(sorted(SHEETS))}", code=Code.UNKNOWN_DEVICE)
    return SHEETS[sheet]


@cache
def _parse(sheet: str) -> tuple[tuple[ConvKernel, ...], tuple[GemmKernel, ...]]:
    declared = get_sheet(sheet)
    path = reference.path(declared.csv)
    lines = list(csv.reader(path.read_text().splitlines()))
    device = declared.device
    convs: list[ConvKernel] = []
    gemms: list[GemmKernel] = []
    block, header = "", [""]
    for i, row in enumerate(lines, start=1):
        if row and row[0].strip():
            block = row[0].strip()
            header = row
            continue
        if block == "Convolution" and len(row) > 2 and row[2].strip() == "W":
            header = row
            continue
        cells = dict(zip((_key(h) for h in header), row, strict=False))
        if block.startswith("Dense Matrix") and _num(cells.get("m", "")):
            t = _num(cells.get("time (msec)", ""))
            if t is None:
                continue
            gemms.append(GemmKernel(device, sheet, i, int(float(cells["m"])),
                                    int(float(cells["n"])), int(float(cells["k"])),
                                    cells.get("a transpose", "N").strip() == "T",
                                    cells.get("b transpose", "N").strip() == "T", t))
        elif block == "Convolution" and _num(cells.get("w", "")):
            v = {_CONV_COLS[k]: val for k, val in cells.items() if k in _CONV_COLS}
            x = {k: int(float(v[k])) for k in ("n", "c", "h", "w", "k", "r", "s", "pad_h",
                                               "pad_w", "stride_h", "stride_w")}
            p = (x["h"] + 2 * x["pad_h"] - x["r"]) // x["stride_h"] + 1
            q = (x["w"] + 2 * x["pad_w"] - x["s"]) // x["stride_w"] + 1
            shape = ConvShape(x["n"], x["c"], x["h"], x["w"], x["k"], x["r"], x["s"],
                              x["stride_h"], x["stride_w"], p, q, 1, x["pad_h"], x["pad_w"])
            convs.append(ConvKernel(device, sheet, i, shape, _num(v["fwd"]),
                                    _num(v["dgrad"]), _num(v["wgrad"]),
                                    v.get("algo", "").strip()))
    return tuple(convs), tuple(gemms)


def conv_kernels(sheet: str | None = None) -> list[ConvKernel]:
    """Convolution rows of one sheet (None: of the seven of :data:`SEVEN`)."""
    return [k for s in ([sheet] if sheet else SEVEN) for k in _parse(s)[0]]


def gemm_kernels(sheet: str | None = None) -> list[GemmKernel]:
    """Dense GEMM rows of one sheet (None: of the seven of :data:`SEVEN`)."""
    return [k for s in ([sheet] if sheet else SEVEN) for k in _parse(s)[1]]


def specs(sheet: str) -> dict[str, str]:
    """The ``Specs`` sheet of the sheet's GPU: CPU, GPU, kernel, CUDA and cuDNN versions as
    stated."""
    path = reference.path(f"deepbench/csv/{get_sheet(sheet).gpu}_Specs.csv")
    return {r[0].strip(): r[1].strip() for r in csv.reader(path.read_text().splitlines())
            if len(r) >= 2}
