"""Checks beyond the schemas, all vectorised: gradient sizes, finiteness, layer sums, devices.

Tolerances (documented in CONTRIBUTING.md):

* every float must be finite (the schema check, :func:`dgtraces.tables.strict.infinite_failures`,
  which ``dgtraces validate`` runs too); ``layer_timings.fwd_ms`` and ``bwd_ms`` must be
  present;
* every run needs layer timings, and its layers' forward (backward) medians must sum to a
  positive total;
* where a run gives its whole-model ``fwd_ms`` / ``bwd_ms``, the sum of its layers' medians
  divided by it must lie in [:data:`SUM_RATIO_MIN`, :data:`SUM_RATIO_MAX`] (per-layer timing
  adds hooks and synchronisation, fused kernels can make the sum smaller);
* a declared ``layer_sum_ratio`` must match the computed one within
  :data:`RATIO_REL_TOL` (relative), and a run whose computed fwd+bwd ratio is off 1 by more
  than the collector's ``RATIO_TOLERANCE`` (0.10, :mod:`dgtraces.collect.env`) must carry
  ``flagged = true`` (the collector keeps such runs, flagged; so do we);
* ``grad_bytes`` / ``grad_numel`` carried in layer_timings must equal the model structure:
  numel = learnable parameters of the layer, bytes = numel x 4 (fp32, amp) or x 2 (fp16, bf16).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..errors import Code, Failure

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

SUM_RATIO_MIN = 0.5
SUM_RATIO_MAX = 1.5
RATIO_REL_TOL = 0.05
GRAD_COLUMNS = ("grad_bytes", "grad_numel")
BYTES_PER_GRAD = {"fp32": 4, "amp": 4, "fp16": 2, "bf16": 2}
MAX_REPORTED = 200  # failures per check; the report says how many more


def _located(code: str, message: str, mask: "pd.Series", df: "pd.DataFrame", column: str,
             file: str | None, expected: str,
             found: Callable[..., str] | None = None) -> list[Failure]:
    """One failure per True row of ``mask`` (row = position in the file), capped.

    ``found(row)`` describes the found value (default: the cell's repr); it runs only for
    reported rows, so the hot path stays vectorised.
    """
    import numpy as np

    rows = np.flatnonzero(mask.to_numpy(dtype=bool, na_value=False))
    if found is None:
        values = df[column].to_numpy()
        found = lambda r: repr(values[r])  # noqa: E731
    out = [Failure(code, message, file=file, row=int(r), column=column, expected=expected,
                   found=found(int(r))) for r in rows[:MAX_REPORTED]]
    if len(rows) > MAX_REPORTED:
        out.append(Failure(code, f"{len(rows) - MAX_REPORTED} more rows fail: {message}",
                           file=file, column=column))
    return out


def missing_time_failures(frames, files) -> list[Failure]:
    """A contribution's layer timings give both ``fwd_ms`` and ``bwd_ms`` (a release's
    published rows may lack one; an infinite value is refused by the schema check)."""
    import numpy as np
    import pandas as pd

    out: list[Failure] = []
    df = frames.get("layer_timings")
    for col in ("fwd_ms", "bwd_ms"):
        if df is None or col not in df.columns or df[col].dtype.kind != "f":
            continue
        bad = np.isnan(df[col].to_numpy(dtype=float, na_value=np.nan))
        if bad.any():
            out += _located("PLAUSIBILITY", "value must be a finite number",
                            pd.Series(bad), df, col, files.get("layer_timings"), "finite")
    return out


def split_grad_columns(frames: dict) -> "pd.DataFrame | None":
    """Take the optional ``grad_bytes``/``grad_numel`` columns out of a layer_timings frame
    (in ``frames``), for :func:`grad_failures`; None when it has none."""
    lt = frames.get("layer_timings")
    cols = [] if lt is None else [c for c in GRAD_COLUMNS if c in lt.columns]
    if lt is None or not cols:
        return None
    frames["layer_timings"] = lt.drop(columns=cols)
    return lt[cols]


def grad_failures(lt: "pd.DataFrame", grads: "pd.DataFrame", runs: "pd.DataFrame",
                  file: str | None) -> list[Failure]:
    """Compare contributed grad_numel/grad_bytes with the model structure."""
    import pandas as pd

    from dgtraces.tables.checks import catalog

    out: list[Failure] = []
    layers = catalog("layers")[["model", "layer", "params"]]  # built once per process
    run_info = runs[["run_id", "model", "precision"]].drop_duplicates("run_id")
    key = lt[["run_id", "layer"]].reset_index(drop=True)
    merged = key.merge(run_info, on="run_id", how="left").merge(
        layers, on=["model", "layer"], how="left")
    known = merged["params"].notna()
    for col in GRAD_COLUMNS:
        if col not in grads:
            continue
        values = pd.to_numeric(grads[col].reset_index(drop=True), errors="coerce")
        bad_type = values.isna() | (values != values.round())
        out += _located("SCHEMA", "must be a whole number", bad_type, grads, col, file,
                        "integer")
        expected = merged["params"].astype(float)
        if col == "grad_bytes":
            expected = expected * merged["precision"].map(BYTES_PER_GRAD).astype(float)
        mismatch = known & ~bad_type & (values != expected)
        exp_text = "numel = params of the layer" if col == "grad_numel" else \
            "bytes = params x 4 (fp32/amp) or x 2 (fp16/bf16)"
        out += _located("GRAD_MISMATCH", f"{col} disagrees with the model structure",
                        mismatch, grads, col, file, exp_text,
                        lambda i, v=values, e=expected: f"{v[i]:.0f} (structure: {e[i]:.0f})")
    return out


def layer_sum_failures(runs: "pd.DataFrame", lt: "pd.DataFrame",
                       files: dict) -> list[Failure]:
    """Per run: has timings, positive layer sums, sums vs whole-model times."""
    out: list[Failure] = []
    sums = lt.groupby("run_id", sort=False)[["fwd_ms", "bwd_ms"]].sum()
    r = runs.reset_index(drop=True)
    fsum = r["run_id"].map(sums["fwd_ms"])
    bsum = r["run_id"].map(sums["bwd_ms"])
    rfile = files.get("runs")
    out += _located("PLAUSIBILITY", "run has no layer timings", fsum.isna(), r, "run_id",
                    rfile, "rows in layer_timings")
    for phase, total in (("fwd", fsum), ("bwd", bsum)):
        col = f"{phase}_ms"
        out += _located("PLAUSIBILITY", f"sum of layer {col} is not positive",
                        total.notna() & (total <= 0), r, "run_id", rfile, "> 0",
                        lambda i, t=total: f"sum {t[i]}")
        whole = r[col].astype(float)
        ratio = total / whole
        bad = whole.notna() & total.notna() & (
            (whole <= 0) | (ratio < SUM_RATIO_MIN) | (ratio > SUM_RATIO_MAX))
        out += _located("PLAUSIBILITY", f"sum of layer {col} vs the run's whole {col}",
                        bad, r, col, rfile, f"ratio in [{SUM_RATIO_MIN}, {SUM_RATIO_MAX}]",
                        lambda i, w=whole, t=total, q=ratio:
                        f"{w[i]} (layer sum {t[i]:.6g}, ratio {q[i]:.3g})")
    whole = r["fwd_ms"].astype(float) + r["bwd_ms"].astype(float)
    computed = (fsum + bsum) / whole
    declared = r["layer_sum_ratio"].astype(float)
    bad = declared.notna() & computed.notna() & (
        (declared - computed).abs() > RATIO_REL_TOL * computed.abs())
    out += _located("PLAUSIBILITY", "declared layer_sum_ratio differs from the timings",
                    bad, r, "layer_sum_ratio", rfile, f"within {RATIO_REL_TOL:.0%} of computed",
                    lambda i: f"{declared[i]} (computed {computed[i]:.4g})")
    from ..fitting import RATIO_TOLERANCE  # the collector's own flagging rule

    unflagged = computed.notna() & ((computed - 1).abs() > RATIO_TOLERANCE) & ~r["flagged"]
    out += _located("PLAUSIBILITY", "run must be flagged: its layer sum is off the whole "
                    "fwd+bwd by more than the collector's tolerance", unflagged, r, "flagged",
                    rfile, f"flagged = true when |ratio - 1| > {RATIO_TOLERANCE}",
                    lambda i: f"False (ratio {computed[i]:.3g})")
    return out


def device_failures(frames, files, known: dict[str, str | None]) -> list[Failure]:
    """Devices must be known (store or contribution.yaml: key -> kind), and a run's
    ``device_kind`` must be the kind its device is known as."""
    out: list[Failure] = []
    for name in ("runs", "iterations"):
        df = frames.get(name)
        if df is None:
            continue
        d = df.reset_index(drop=True)
        out += _located("UNKNOWN_DEVICE", "device not in the store's devices table nor in "
                        "contribution.yaml devices", ~d["device"].isin(sorted(known)), d,
                        "device", files.get(name), "a known device key")
        if "device_kind" in d.columns:
            want = d["device"].map(known)
            bad = want.notna() & (d["device_kind"] != want)
            out += _located("DEVICE_MISMATCH", "device_kind differs from the kind of its device "
                            "(devices table or contribution.yaml)", bad, d, "device_kind",
                            files.get(name), "the device's kind",
                            lambda i, d=d, want=want:
                            f"{d['device_kind'][i]!r} (device {d['device'][i]!r} is {want[i]!r})")
    return out


def host_failures(frames, files, names: dict[str, str], kinds: dict[str, str | None]
                  ) -> list[Failure]:
    """A CPU run's device must be its host's CPU (#36 item 8): its ``host`` equals the
    device's name, or the name is the host followed by `` (`` (the store's measured rows:
    ``<cpu model> (2 of 2 cores)``). The store's ``cpu`` row is the machine that built the
    release; a trace from another host filed under it would borrow that machine's name and
    peaks (DEVICE_MISMATCH: declare the host's CPU as a device in contribution.yaml).
    ``names``/``kinds``: device key -> name/kind (store, staging, contribution.yaml); a run
    whose kind differs from its device's is DEVICE_MISMATCH already."""
    runs = frames.get("runs")
    if runs is None or "host" not in runs.columns:
        return []
    import pandas as pd

    d = runs.reset_index(drop=True)
    name = d["device"].astype(str).map(names)
    host = d["host"].astype("string").fillna("").str.strip()
    same = [h != "" and isinstance(n, str) and (n == h or n.startswith(h + " ("))
            for n, h in zip(name, host, strict=True)]
    cpu = (d["device_kind"] == "cpu") & (d["device"].astype(str).map(kinds) == "cpu")
    bad = cpu & name.notna() & ~pd.Series(same, dtype=bool)
    return _located("DEVICE_MISMATCH", "a CPU run's host is not the CPU its device names (the "
                    "device key names another machine); declare this host's CPU as a device "
                    "in contribution.yaml and use its key", bad, d, "host", files.get("runs"),
                    "the device's name", lambda i: f"host {d['host'][i]!r}, device "
                    f"{d['device'][i]!r} is {name[i]!r}")


def declared_device_failures(declared: dict[str, str | None], known: dict[str, str | None]
                             ) -> list[Failure]:
    """A device of contribution.yaml that the store or a staged contribution knows already
    must be declared with the kind it is known as (issue #29 M2: a device has one kind)."""
    return [Failure(Code.DEVICE_MISMATCH, "device declared with another kind than the store or "
                    "a staged contribution gives it", file="contribution.yaml",
                    column="devices", expected=f"kind {known[key]!r}",
                    found=f"{key!r} declared {kind!r}")
            for key, kind in sorted(declared.items())
            if key in known and known[key] is not None and kind != known[key]]


CONTRIBUTED_PROVENANCE = ("measured", "reconstructed")  # published: the package's importers


def provenance_failures(frames, files) -> list[Failure]:
    """A contribution's rows are its contributor's: none may claim ``published`` (restated
    from a paper, which only the package's importers add, citing it; issue #29)."""
    out: list[Failure] = []
    for name, df in sorted(frames.items()):
        if "provenance" not in df.columns:
            continue
        d = df.reset_index(drop=True)
        out += _located("SCHEMA", "contributed rows cannot claim provenance 'published'",
                        ~d["provenance"].isin(CONTRIBUTED_PROVENANCE), d, "provenance",
                        files.get(name), " | ".join(CONTRIBUTED_PROVENANCE))
    return out
