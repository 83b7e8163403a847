"""Interconnect presets (the ``links`` table) and their resolution into :class:`Link` objects.

The presets ship in ``links.csv`` beside this module, each with a cited source. The measured
``loopback-gloo`` row is replaced at load time by the allreduce fit of a release's
``comm_fits`` table when one exists (measured on this machine by the collector). Allreduce
fits are converted to per-hop link parameters through the ring cost they were measured with:
``T = 2(P-1) alpha + 2(P-1)/P n / bw`` (for 2 processes: ``2 alpha + n / bw``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache
from numbers import Real
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import Code, DgtracesError, Failure

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from dgtraces.store.release import Release

LINKS_CSV = Path(__file__).resolve().parent / "links.csv"
ALIASES_CSV = Path(__file__).resolve().parent / "link_aliases.csv"
FIT_LINKS = ("loopback-gloo",)  # presets superseded by a release's measured comm_fits


@dataclass(frozen=True)
class Link:
    """One interconnect: per-message latency and per-direction bandwidth."""

    name: str
    alpha_us: float
    bandwidth_gb_s: float
    provenance: str = "published"
    source: str = "user override"

    @property
    def beta_ms_per_byte(self) -> float:
        return 1.0 / (self.bandwidth_gb_s * 1e6)

    @property
    def alpha_ms(self) -> float:
        return self.alpha_us / 1000.0


def link_dict(link: Link) -> dict:
    """A link as a prediction or ``dgtraces collective`` records it (with its source)."""
    return {"link": link.name, "alpha_us": link.alpha_us,
            "bandwidth_gb_s": link.bandwidth_gb_s, "provenance": link.provenance,
            "source": link.source}


def ring_link_from_allreduce(alpha_us: float, beta_us_per_byte: float,
                             workers: int) -> tuple[float, float]:
    """Invert a ring allreduce fit into (link alpha_us, link bandwidth_gb_s)."""
    if workers < 2:
        raise DgtracesError("an allreduce fit needs >= 2 workers", code=Code.BAD_INPUT,
                            failures=[Failure(Code.BAD_INPUT, "workers < 2", column="workers",
                                              expected=">= 2", found=str(workers))])
    steps = 2 * (workers - 1)
    beta_link = beta_us_per_byte * workers / steps  # us per byte
    return alpha_us / steps, 1.0 / (beta_link * 1e3)


def _fit_rows(release: "str | tuple[str, str] | None") -> "pd.DataFrame | None":
    """The release's allreduce fits of :data:`FIT_LINKS` (None: none, or no release);
    ``release``: a version of the default store, or ``(root, version)`` of an open handle."""
    from dgtraces.store import manifest as store
    from dgtraces.store.release import Release

    if release is None:
        release = store.latest_or_none()
        if release is None:  # no release at all: the shipped preliminary values
            return None
    # a bad or missing release raises
    rel = (Release.open(release[1], release[0]) if isinstance(release, tuple)
           else Release.open(release))
    if "comm_fits" not in rel.entries:
        return None
    fits = rel.table("comm_fits")
    fits = fits[(fits["collective"] == "allreduce") & fits["interconnect"].isin(FIT_LINKS)]
    return fits if len(fits) else None


def links_frame(release: str | None = "latest", *, use_store: bool = True) -> "pd.DataFrame":
    """The links table: shipped presets, with measured rows taken from ``comm_fits`` of
    ``release`` (``"latest"`` = newest release that exists; ``None`` in ``use_store=False``
    mode keeps the shipped preliminary values). Validated against ``schema.Links``."""
    import pandas as pd

    from dgtraces.tables.checks import validate_frame

    return validate_frame("links", pd.DataFrame(_links_rows(release, use_store)),
                          file=str(LINKS_CSV))


def _links_rows(release: "str | tuple[str, str] | None", use_store: bool) -> "pd.DataFrame":
    """:func:`links_frame` before its schema validation: what the predictor reads on every
    call. Nothing here needs pandera: ``links.csv`` ships with the package and the tests
    validate it (``tests/predict/test_predict.py``, and ``tests/test_cold_start.py`` checks
    that this reading gives the validated links), and a ``comm_fits`` row was validated when
    its release was written and is checked against the manifest when read; its inversion keeps
    ``alpha_us >= 0`` and ``bandwidth_gb_s > 0``."""
    from dgtraces.tables.checks import read_file

    df = read_file(LINKS_CSV)
    if use_store:
        fits = _fit_rows(None if release == "latest" else release)
        if fits is not None:
            for link, rows in fits.groupby("interconnect"):
                row = rows.sort_values(["workers", "r2"], ascending=[True, False]).iloc[0]
                alpha, bw = ring_link_from_allreduce(float(row["alpha_us"]),
                                                     float(row["beta_us_per_byte"]),
                                                     int(row["workers"]))
                i = df.index[df["link"] == link]
                df.loc[i, ["alpha_us", "bandwidth_gb_s"]] = [alpha, bw]
                df.loc[i, "provenance"] = str(row["provenance"])
                df.loc[i, "source"] = (f"comm_fits allreduce fit ({int(row['workers'])} workers, "
                                       f"{int(row['n_points'])} points, r2 {row['r2']:.3f}): "
                                       f"{row['source']}; inverted through the ring cost")
    return df.astype({"alpha_us": float, "bandwidth_gb_s": float})


@lru_cache(maxsize=8)
def _cached_links(release: "str | tuple[str, str] | None", use_store: bool,
                  data_env: str | None) -> dict:
    df = _links_rows(release, use_store)
    return {r["link"]: Link(r["link"], float(r["alpha_us"]), float(r["bandwidth_gb_s"]),
                            r["provenance"], r["source"]) for r in df.to_dict("records")}


@lru_cache(maxsize=1)
def link_aliases() -> dict[str, tuple[str, str]]:
    """Short names of common cases -> (preset, why), from ``link_aliases.csv``: e.g. ``10gbe``
    is the NCCL-over-TCP row ``10gbe-nccl`` (the v0.3 MPI fit is ``10gbe-mpi``)."""
    import csv

    with open(ALIASES_CSV, encoding="utf-8", newline="") as fh:
        return {r["alias"]: (r["link"], r["reason"]) for r in csv.DictReader(fh)}


def known_links(release: "Release | str | None" = "latest",
                use_store: bool = True) -> dict[str, Link]:
    """Presets by name, plus each alias mapped to its preset's Link (named by the preset).
    ``release``: a version of the default store, or an open Release (of any store), whose
    ``comm_fits`` supersede :data:`FIT_LINKS`."""
    import os

    from dgtraces.store.release import Release

    key = (str(release.root), release.version) if isinstance(release, Release) else release
    links = dict(_cached_links(key, use_store, os.environ.get("DGTRACES_DATA")))
    for alias, (target, _) in link_aliases().items():
        if target in links and alias not in links:
            links[alias] = links[target]
    return links


def get_link(name: "str | Link", *, field: str = "link", alpha_us: float | None = None,
             gbps: float | None = None, release: "Release | str | None" = "latest",
             use_store: bool = True) -> Link:
    """Resolve a preset name (or pass a Link through), applying optional overrides.

    ``gbps`` is in gigabits per second (network convention); unknown names raise
    UNKNOWN_LINK naming ``field``.
    """
    if isinstance(name, Link):
        link = name
    else:
        links = known_links(release, use_store)
        if name not in links:
            from dgtraces.errors import suggestions

            near = next(iter(suggestions(str(name), links, n=1)), None)
            raise DgtracesError(
                f"unknown link {name!r} for {field}"
                + (f"; did you mean {near!r}?" if near else "")
                + f"; known: {', '.join(sorted(links))}",
                code=Code.UNKNOWN_LINK,
                failures=[Failure(Code.UNKNOWN_LINK, "unknown interconnect preset", column=field,
                                  expected=" | ".join(sorted(links)), found=repr(name))])
        link = links[name]
    for value, col in ((alpha_us, "link_alpha_us"), (gbps, "link_gbps")):
        ok = isinstance(value, Real) and not isinstance(value, bool) and math.isfinite(value)
        if value is not None and not (ok and value >= 0 and (col == "link_alpha_us"
                                                              or value > 0)):
            raise DgtracesError(f"{col} must be positive", code=Code.BAD_INPUT,
                                failures=[Failure(Code.BAD_INPUT, "out of range", column=col,
                                                  expected="finite, > 0", found=str(value))])
    if alpha_us is not None or gbps is not None:
        link = replace(link, alpha_us=link.alpha_us if alpha_us is None else float(alpha_us),
                       bandwidth_gb_s=link.bandwidth_gb_s if gbps is None else gbps / 8.0,
                       provenance="user-override",
                       source=f"{link.source}; overridden by user "
                              f"(alpha_us={alpha_us}, gbps={gbps})")
    return link
