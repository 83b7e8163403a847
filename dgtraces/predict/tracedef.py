"""The :class:`Trace` a prediction runs on and :func:`from_frame`, its one constructor from a
per-layer frame (measured, reconstructed or shape-only). :mod:`dgtraces.predict.trace`
finds the run a setup means and builds the trace from it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from numbers import Integral, Real
from typing import TYPE_CHECKING

from dgtraces.values import bad_value as bad

from ..errors import Code, DgtracesError, Failure
from ..values import whole_number

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np
    import pandas as pd


PREFERENCE = ("measured", "reconstructed", "published")
# default link of the modelled input copy of GPU traces: the word "host" means the GPU's
# own host interface (reference.devices.host_link: reference/host_links.csv, pcie3 when
# the GPU has no row); any other value is a link preset
H2D_LINK = "host"


@dataclass(frozen=True)
class Trace:
    """Per-layer forward/backward times (ms, per iteration of one worker) in forward order."""

    model: str
    batch_size: int
    layers: tuple[str, ...]
    fwd_ms: tuple[float, ...]
    bwd_ms: tuple[float, ...]
    grad_bytes: tuple[int, ...]
    io_ms: float = 0.0
    h2d_ms: float = 0.0
    update_ms: float = 0.0
    provenance: str = "user"
    source: str = "DataFrame passed by the caller"
    run_id: str | None = None
    device: str | None = None

    def __post_init__(self) -> None:
        """Refuse what the DAG cannot schedule: BAD_INPUT for shapes, DUPLICATE for a layer
        named twice (its tasks would form a cycle), PLAUSIBILITY for times that are not
        finite and >= 0 or that sum to no compute at all."""
        if not isinstance(self.model, str):
            raise bad("model", "must be a model name", "a str", repr(self.model)[:40])
        object.__setattr__(self, "batch_size", whole_number("batch_size", self.batch_size))
        n = len(self.layers)
        if not n or not all(len(x) == n for x in (self.fwd_ms, self.bwd_ms, self.grad_bytes)):
            raise bad("layers", "needs one fwd_ms, bwd_ms and grad_bytes per layer (at least "
                      "one layer)", f"{n} each", (len(self.fwd_ms), len(self.bwd_ms),
                                                  len(self.grad_bytes)))
        if len(set(self.layers)) != n:
            dup = next(x for i, x in enumerate(self.layers) if x in self.layers[:i])
            raise bad("layers", "layer named twice", "unique layer names", dup,
                      code=Code.DUPLICATE)
        for name in ("fwd_ms", "bwd_ms"):
            for layer, value in zip(self.layers, getattr(self, name), strict=True):
                if not (isinstance(value, Real) and math.isfinite(value)
                        and float(value) >= 0):
                    raise bad(name, f"time of layer {layer} must be finite and >= 0", ">= 0",
                              value, code=Code.PLAUSIBILITY)
        for name in ("io_ms", "h2d_ms", "update_ms"):
            nonneg(name, getattr(self, name))
        if any(not (isinstance(g, Integral) and g >= 0) for g in self.grad_bytes):
            raise bad("grad_bytes", "must be whole byte counts >= 0", ">= 0", None)
        total = float(sum(self.fwd_ms)) + float(sum(self.bwd_ms))
        if not (math.isfinite(total) and total > 0):
            raise bad("fwd_ms", "layer times sum to no compute (or overflow)", "> 0 ms in all",
                      total, code=Code.PLAUSIBILITY)

    def arrays(self) -> tuple["np.ndarray", "np.ndarray", "np.ndarray"]:
        import numpy as np

        return (np.asarray(self.fwd_ms, float), np.asarray(self.bwd_ms, float),
                np.asarray(self.grad_bytes, float))

    @property
    def compute_ms(self) -> float:
        return sum(self.fwd_ms) + sum(self.bwd_ms) + self.update_ms

    def scaled(self, factor: float, note: str) -> "Trace":
        """Compute times (fwd, bwd, update) multiplied by ``factor`` (calibration)."""
        return replace(self, fwd_ms=tuple(f * factor for f in self.fwd_ms),
                       bwd_ms=tuple(b * factor for b in self.bwd_ms),
                       update_ms=self.update_ms * factor, source=f"{self.source}; {note}")

    def provenance_dict(self) -> dict:
        return {"trace_provenance": self.provenance, "trace_source": self.source,
                "trace_run_id": self.run_id, "trace_device": self.device}


def nonneg(name: str, value) -> float:
    try:
        value = float(0.0 if value is None or (isinstance(value, float) and math.isnan(value))
                      else value)
    except (TypeError, ValueError):
        raise bad(name, "must be a time in ms", ">= 0", repr(value)[:40]) from None
    if value < 0 or math.isinf(value):
        raise bad(name, "must be a finite time >= 0", ">= 0", value, code=Code.PLAUSIBILITY)
    return value


def from_frame(df: "pd.DataFrame", model: str, batch_size: int, *, io_ms: float = 0.0,
               h2d_ms: float = 0.0, update_ms: float = 0.0, provenance: str = "user",
               source: str = "DataFrame passed by the caller", run_id: str | None = None,
               device: str | None = None) -> Trace:
    """Build a Trace from columns ``layer, fwd_ms, bwd_ms`` covering every layer of ``model``.

    GoogLeNet traces without the auxiliary classifiers are accepted (aux layers dropped).
    """
    import pandas as pd

    from ..models import layers_frame

    if not isinstance(df, pd.DataFrame):
        raise bad("trace", "layer timings must be a DataFrame", "a pandas DataFrame",
                  type(df).__name__)
    if not isinstance(model, str):
        raise bad("model", "must be a model name", "a str", repr(model)[:40])
    whole_number("batch_size", batch_size, float_ok=True)
    for col in ("layer", "fwd_ms", "bwd_ms"):
        if col not in df.columns:
            raise bad(col, "column missing from the layer timings", "a column", None)
    structure = layers_frame(model)  # raises UNKNOWN_MODEL
    known = set(structure["layer"])
    extra = sorted(set(df["layer"]) - known)
    if extra:
        from dgtraces.names import did_you_mean, listing

        raise DgtracesError(f"{len(extra)} layer(s) not in {model}", code=Code.UNKNOWN_LAYER,
                            failures=[Failure(Code.UNKNOWN_LAYER, f"not a layer of {model}"
                                              + did_you_mean(str(x), known), column="layer",
                                              expected=listing(known), found=repr(x))
                                      for x in extra])
    if df["layer"].duplicated().any():
        dup = df.loc[df["layer"].duplicated(), "layer"].iloc[0]
        raise bad("layer", "layer timed twice", "unique layers", dup, code=Code.DUPLICATE)
    timed = df.set_index("layer")
    missing = structure.loc[~structure["layer"].isin(timed.index)]
    if len(missing) and missing["aux"].all():
        structure = structure.loc[~structure["aux"]]
        missing = missing.iloc[:0]
    if len(missing):
        raise DgtracesError(
            f"trace lacks {len(missing)} of {len(structure)} layers of {model}",
            code=Code.INCOMPLETE_TRACE,
            failures=[Failure(Code.INCOMPLETE_TRACE, "no timing row for layer", column="layer",
                              expected="a row with fwd_ms and bwd_ms", found=repr(x))
                      for x in missing["layer"]])
    timed = timed.loc[structure["layer"]]
    for col in ("fwd_ms", "bwd_ms"):
        values = pd.to_numeric(timed[col], errors="coerce")
        text = values.isna() & timed[col].notna()
        if text.any():
            i = values.index[text][0]
            raise bad(col, f"time of layer {i} is not a number", "a number",
                      repr(timed[col][i])[:40], code=Code.SCHEMA)
        bad_rows = (values < 0) | values.map(math.isinf)
        if bad_rows.any():
            i = values.index[bad_rows][0]
            raise bad(col, f"negative or infinite time for layer {i}", ">= 0", values[i],
                      code=Code.PLAUSIBILITY)
    # A present row with an empty time (e.g. no backward recorded) counts as 0 ms.
    timed = timed.assign(fwd_ms=timed["fwd_ms"].astype(float).fillna(0.0),
                         bwd_ms=timed["bwd_ms"].astype(float).fillna(0.0))
    return Trace(model, int(batch_size), tuple(structure["layer"]),
                 tuple(map(float, timed["fwd_ms"])), tuple(map(float, timed["bwd_ms"])),
                 tuple(map(int, structure["grad_bytes"])), nonneg("io_ms", io_ms),
                 nonneg("h2d_ms", h2d_ms), nonneg("update_ms", update_ms), provenance,
                 source, run_id, device)


