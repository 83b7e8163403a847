"""The kernels-3 model as rows of the release's ``method_params`` table and back; reading it
from a release, refused (INTEGRITY) when the table does not belong to the ``kernels`` rows of
the release it is read from (docs/reconstruction-kernels3.md, "Fitted once, shipped").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from dgtraces.errors import Code, DgtracesError
from dgtraces.reconstruct.kernels2.gemm import CLASSES
from dgtraces.reconstruct.kernels3.fit import KernelFit
from dgtraces.reconstruct.kernels3.model import METHOD, Model
from dgtraces.reconstruct.kernels3.stagef import StageF

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from dgtraces.store.release import Release

TABLE = "method_params"
DIMS = ("m", "n", "k")
SOURCE = ("kernels-3 fit (docs/reconstruction-kernels3.md): kernels K1-K4 on the release's "
          "kernels rows (baidu-research/DeepBench); stage F on the release's published "
          "per-layer GPU runs and dgtraces/reference/calibration.csv")


def _row(scope: str, name: str, key: str, **cells) -> dict:
    return {"param_id": f"{METHOD}:{scope}:{key}", "method": METHOD, "scope": scope,
            "name": name, **cells}


def model_rows(m: Model) -> list[dict]:
    """The model's parameters as table rows (without the digest, provenance and source)."""
    out = []
    for prec, f in sorted(m.fits.items()):
        out.append(_row("kernel", "gamma", f"{prec}:gamma", precision=prec, value_num=f.gamma,
                        basis="shared by every GPU of the precision (K1)"))
        for dev, theta in [(None, f.theta0), *sorted(f.theta.items())]:
            tag = dev or "prior"
            basis = ("shared prior: pooled fit (K1)" if dev is None else
                     f"own kernels (K3), rms log error {f.rms_log[dev]:.4f}")
            for c, name in enumerate(CLASSES):
                out.append(_row("kernel", f"e_{name}", f"{prec}:{tag}:e_{name}", precision=prec,
                                device=dev, value_frac=float(theta[c]), basis=basis,
                                count=f.kernels.get(dev) if dev else sum(f.kernels.values())))
            out.append(_row("kernel", "t0", f"{prec}:{tag}:t0", precision=prec, device=dev,
                            value_us=float(theta[-1]), basis=basis))
            if dev is not None:
                out.append(_row("kernel", "rms_log", f"{prec}:{tag}:rms_log", precision=prec,
                                device=dev, value_num=f.rms_log[dev], count=f.kernels[dev]))
        for (key, d), (u, n) in sorted(f.effects.items()):
            out.append(_row("shape", "log_effect", f"{prec}:{key}:{d}", precision=prec,
                            shape=key, direction=d, value_log=u, count=n))
        for cls, (lo, hi) in sorted(f.ranges.items()):
            for j, dim in enumerate(DIMS):
                for end, v in (("min", lo[j]), ("max", hi[j])):
                    out.append(_row("range", f"{dim}_{end}", f"{prec}:{cls}:{dim}_{end}",
                                    precision=prec, direction=cls, value_num=float(v)))
    for end, v in zip(("min", "max"), m.mem_range, strict=True):
        out.append(_row("range", f"memory_bytes_{end}", f"memory:bytes_{end}",
                        value_num=float(v)))
    if m.stage is not None:
        for dev in sorted(m.stage.e_mem):
            out.append(_row("memory", "e_mem", f"{dev}:e_mem", device=dev,
                            value_frac=m.stage.e_mem[dev], basis="stage F: its per-layer traces"))
            out.append(_row("memory", "floor", f"{dev}:floor", device=dev,
                            value_us=m.stage.floor_us[dev], basis="stage F: its per-layer traces"))
        for fam in sorted(m.stage.overhead_us):
            out.append(_row("framework", "overhead", f"{fam}:overhead", family=fam,
                            value_us=m.stage.overhead_us[fam], basis="stage F"))
    return out


def to_frame(m: Model, extra: list[dict] = ()) -> "pd.DataFrame":  # type: ignore[assignment]
    """The ``method_params`` frame of ``m`` and ``extra`` rows (metrics, predictions), each
    with the fit digest, provenance and source; validated."""
    import pandas as pd

    from dgtraces.tables.checks import validate_frame
    from dgtraces.tables.schema import TABLES

    rows = [{"method": METHOD, **r, "fit_digest": m.digest, "provenance": "reconstructed",
             "source": r.get("source") or SOURCE} for r in [*model_rows(m), *extra]]
    columns = list(TABLES[TABLE].to_schema().columns)
    return validate_frame(TABLE, pd.DataFrame(rows, columns=columns))


def _num(v) -> float | None:
    return None if v is None or (isinstance(v, float) and np.isnan(v)) else float(v)


def from_frame(df: "pd.DataFrame", kernels: "pd.DataFrame") -> Model:
    """The model of a ``method_params`` frame, pricing from ``kernels``; INTEGRITY when the
    frame was fitted on other kernels rows (its digest) or lacks a part of the model."""
    from dgtraces.reconstruct.kernels3.kernelrows import digest, kernel_rows
    from dgtraces.reconstruct.kernels3.price import measured_index

    digests = set(df["fit_digest"])
    want = digest(kernels)
    if digests != {want}:
        raise DgtracesError(f"{TABLE} was fitted on other kernels rows than this release's "
                            f"(digest {sorted(digests)[:1]} != {want[:12]}...): refused",
                            code=Code.INTEGRITY)
    rows = df[df["method"] == METHOD]
    try:
        fits = {prec: _kernel_fit(rows, prec) for prec in
                sorted(set(rows.loc[rows["scope"] == "kernel", "precision"].dropna()))}
        mem = rows[rows["scope"] == "memory"].set_index(["device", "name"])
        fam = rows[rows["scope"] == "framework"]
        fam = fam[fam["name"] == "overhead"].set_index("family")
        stage = StageF({d: float(mem.loc[(d, "e_mem"), "value_frac"]) for d in
                        sorted(set(mem.index.get_level_values(0)))},
                       {d: float(mem.loc[(d, "floor"), "value_us"]) for d in
                        sorted(set(mem.index.get_level_values(0)))},
                       {str(f): float(v) for f, v in fam["value_us"].items()})
        rng = rows[rows["scope"] == "range"].set_index("name")["value_num"]
        mem_range = (float(rng["memory_bytes_min"]), float(rng["memory_bytes_max"]))
        if not fits or not stage.e_mem or not stage.overhead_us:
            raise KeyError("kernel fits, memory constants or framework overheads")
    except (KeyError, ValueError, IndexError) as e:
        raise DgtracesError(f"{TABLE} lacks part of the kernels-3 model ({e!r}): refused",
                            code=Code.INTEGRITY) from None
    return Model(fits, measured_index(kernel_rows(kernels)), stage, mem_range, want)


def _kernel_fit(rows: "pd.DataFrame", prec: str) -> KernelFit:
    k = rows[(rows["scope"] == "kernel") & (rows["precision"] == prec)]
    gamma = float(k.loc[k["name"] == "gamma", "value_num"].iloc[0])
    names = [f"e_{c}" for c in CLASSES]

    def theta(sub):
        s = sub.set_index("name")
        return np.array([float(s.loc[n, "value_frac"]) for n in names]
                        + [float(s.loc["t0", "value_us"])])

    params = k[k["name"].isin([*names, "t0"])]
    prior = params[params["device"].isna()]
    own = params[params["device"].notna()]
    rms = k[k["name"] == "rms_log"].set_index("device")
    sh = rows[(rows["scope"] == "shape") & (rows["precision"] == prec)]
    effects = {(str(r["shape"]), str(r["direction"])): (float(r["value_log"]), int(r["count"]))
               for r in sh.to_dict("records")}
    rg = rows[(rows["scope"] == "range") & (rows["precision"] == prec)]
    ranges = {}
    for cls, g in rg.groupby("direction"):
        v = g.set_index("name")["value_num"]
        ranges[str(cls)] = (np.array([float(v[f"{d}_min"]) for d in DIMS]),
                            np.array([float(v[f"{d}_max"]) for d in DIMS]))
    return KernelFit(prec, gamma, theta(prior),
                     {str(d): theta(g) for d, g in own.groupby("device")}, effects, ranges,
                     {str(d): float(v) for d, v in rms["value_num"].items()},
                     {str(d): int(v) for d, v in rms["count"].items()})


def load(release: "Release") -> Model:
    """The model shipped in ``release`` (its ``method_params`` and ``kernels`` tables, each
    checked against the manifest); NO_CALIBRATION for a release without the table."""
    if TABLE not in release.table_names:
        raise DgtracesError(f"release {release.version} has no {TABLE} table: kernels-3 needs "
                            "release 0.6.0 or later", code=Code.NO_CALIBRATION)
    return from_frame(release.cached(TABLE), release.cached("kernels"))
