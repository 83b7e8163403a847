"""Links fitted from a user's own measurements: ``--link-fit FILE|RUN`` of ``predict``,
``sweep``, ``export-chakra`` and ``collective``.

Accepted, all turned into one allreduce fit ``T = alpha + beta n`` among ``P`` workers and
inverted through the ring cost (:func:`.links.ring_link_from_allreduce`) into a per-hop link:

* ``INTERCONNECT[@WORKERS]``: an ``allreduce`` row of the ``comm_fits`` table of a release
  (e.g. ``loopback-gloo@2``);
* a ``comm_fits`` file (CSV or Parquet, the table's columns), as written by
  ``dgtraces collect comm`` and by the nccl-tests importer: its allreduce row;
* a ``comm`` file (points: ``collective, workers, message_bytes, time_ms``): fitted here
  with the collector's weighted alpha-beta fit;
* a folder holding either (a ``collect comm`` output folder);
* a raw nccl-tests log (``all_reduce_perf`` output; recognised by its ``# nThread`` /
  ``# Using devices`` header): imported with :mod:`dgtraces.importers.nccl_tests` and its
  allreduce ``comm_fits`` row used;
* an OSU ``osu_allreduce`` text output (``# Size  Avg Latency(us)`` rows, optionally
  ``P,size`` as in the B-Caffe logs); ``@WORKERS`` gives P when the file does not (default 2).

Messages under 12 KiB are left out of OSU and point fits (eager protocol, another regime), as
for the shipped ``10gbe-mpi`` row. Every file is validated first (:mod:`.linkfit_files`), and
the fit must give a link within :data:`LINK_BOUNDS` (PLAUSIBILITY otherwise): alpha finite and
>= 0 (0 is what a fit through the origin gives), beta finite and > 0 (0 is a free link), the
link's bandwidth and latency within physical reach. ``@WORKERS`` is ASCII digits, >= 2.

**What a fit replaces** (:meth:`LinkFit.replacing`). The fitted link is one alpha-beta link:
it replaces *both* presets (``--intra`` and ``--inter``) on every hop of the alpha-beta
collectives (``ring`` by default, or the ``--algorithm`` given from that registry). NCCL's
algorithm and protocol choice (``auto``, ``nccl-ring``, ``nccl-tree``) is not used with a fit:
NCCL's model costs its own per-algorithm, per-protocol fabric tables, which one allreduce fit
does not give (asking for both is BAD_INPUT). The link's ``source`` says which presets it
replaced, and the fit's measured range travels with it (:class:`LinkFit`): ``collective``
refuses sizes above the largest size measured (BAD_INPUT; no fit is made), ``predict`` notes
a message beyond it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import Code, DgtracesError, Failure
from .linkfit_files import (
    ACCEPTED,
    bad,
    fit_points,
    is_nccl_tests,
    nccl_tests_fit,
    osu_points,
    pick_fit,
    read_table,
)
from .links import Link, ring_link_from_allreduce

if TYPE_CHECKING:  # pragma: no cover
    from dgtraces.store.release import Release

    from .collective_time import CollectiveResult

# (lowest, highest) of a fitted per-hop link: 1 kB/s .. 100 TB/s (NVLink 5 moves 1.8 TB/s
# per GPU), latency up to 10 s; outside, the fit is a unit error or a forged file
LINK_BOUNDS = {"bandwidth_gb_s": (1e-6, 1e5), "alpha_us": (0.0, 1e7)}
REPLACES = ("replaces the presets {intra} (intra) and {inter} (inter) on every hop of the "
            "alpha-beta collective; NCCL's algorithm choice is not used with a fit "
            "(docs/collectives.md)")


def _split_workers(spec: str) -> tuple[str, int | None]:
    if "@" not in spec:
        return spec, None
    name, _, w = spec.rpartition("@")
    if not (w.isascii() and w.isdigit() and len(w) <= 9 and int(w) >= 2):  # "²".isdigit()
        raise bad("@WORKERS must be an integer >= 2 (ASCII digits)", spec)
    return name, int(w)


@dataclass(frozen=True)
class LinkFit:
    """A link fitted from a measurement, with the fit it came from and its measured range
    (``None``: the file does not say)."""

    link: Link
    spec: str
    workers: int
    alpha_us: float
    beta_us_per_byte: float
    min_bytes: int | None
    max_bytes: int | None

    def check_sizes(self, sizes) -> None:
        """BAD_INPUT when a size asked is larger than the largest size the fit measured."""
        over = [int(n) for n in sizes if self.max_bytes is not None and n > self.max_bytes]
        if over:
            raise DgtracesError(
                f"--link-fit {self.spec}: sizes up to {max(over)} B asked, but the fit was "
                f"measured up to {self.max_bytes} B (maxBytes); measure larger sizes (nccl-"
                "tests -e) or ask for smaller ones", code=Code.BAD_INPUT, failures=[Failure(
                    Code.BAD_INPUT, "size beyond the fit's measured range", column="sizes",
                    expected=f"<= {self.max_bytes}", found=str(max(over)))])

    def replacing(self, intra: str | Link, inter: str | Link) -> Link:
        """The fitted link, its source naming the presets it replaces (module doc)."""
        return replace(self.link, source=f"{self.link.source}; " + self.replaces(intra, inter))

    def replaces(self, intra: str | Link, inter: str | Link) -> str:
        return REPLACES.format(intra=getattr(intra, "name", intra),
                               inter=getattr(inter, "name", inter))

    def note(self, intra: str | Link, inter: str | Link) -> str:
        """One line for a command's output: where the link comes from and what it replaces."""
        return f"link from fit: {self.link.name} ({self.replaces(intra, inter)})"

    def range_note(self, largest_bytes: float) -> str | None:
        """A note when a message is larger than the fit measured (extrapolated), else None."""
        if self.max_bytes is None or largest_bytes <= self.max_bytes:
            return None
        return (f"the largest message ({int(largest_bytes)} B) is beyond the --link-fit "
                f"measurement ({self.max_bytes} B at most): its time is extrapolated")

    def notes(self, intra: str | Link, inter: str | Link, largest_bytes: float
              ) -> tuple[str, ...]:
        """The notes of a prediction over the fitted link: :meth:`note`, and
        :meth:`range_note` for its largest message."""
        beyond = self.range_note(largest_bytes)
        return (self.note(intra, inter),) + (() if beyond is None else (beyond,))

    def to_dict(self, intra: str | Link, inter: str | Link) -> dict:
        """The fit as ``predict --json`` records it: the fit, its range, what it replaces."""
        return {"spec": self.spec, "link": self.link.name, "workers": self.workers,
                "alpha_us": self.alpha_us, "beta_us_per_byte": self.beta_us_per_byte,
                "min_bytes": self.min_bytes, "max_bytes": self.max_bytes,
                "replaces": {"intra": getattr(intra, "name", intra),
                             "inter": getattr(inter, "name", inter)},
                "nccl_algorithm_choice": False, "source": self.link.source}


def _from_path(path: Path, workers: int | None) -> dict:
    from dgtraces.io.lines import check_regular

    if path.is_dir():
        for stem in ("comm_fits", "comm"):
            for ext in (".parquet", ".csv"):
                if (path / f"{stem}{ext}").exists():  # a FIFO by that name: refused below
                    return _from_path(path / f"{stem}{ext}", workers)
        raise bad("folder holds no comm_fits or comm table", str(path), code=Code.NOT_FOUND)
    check_regular(path)  # before anything opens it: a FIFO blocks, /dev/zero never ends
    if path.suffix.lower() in (".csv", ".parquet"):
        df = read_table(path)
        if "beta_us_per_byte" in df.columns:
            return pick_fit(df, workers, str(path))
        if {"message_bytes", "time_ms"} <= set(df.columns):
            return fit_points(df, workers, str(path))
        raise bad("a CSV/Parquet that is neither a comm_fits nor a comm table", str(path))
    if is_nccl_tests(path):
        return nccl_tests_fit(path, workers)
    osu = osu_points(path, workers)
    if osu is None:
        raise bad("unrecognised file format", str(path), expected=ACCEPTED, code=Code.BAD_FILE)
    return fit_points(osu, workers, f"OSU output {path.name}")


def _bounded(fit: dict, what: str) -> tuple[float, float, float, float]:
    """(fit alpha_us, fit beta_us_per_byte, link alpha_us, link bandwidth_gb_s), every value
    finite and within :data:`LINK_BOUNDS` (PLAUSIBILITY)."""
    alpha, beta = float(fit["alpha_us"]), float(fit["beta_us_per_byte"])
    for name, value, ok in (("alpha_us", alpha, alpha >= 0), ("beta_us_per_byte", beta,
                                                              beta > 0)):
        if not (math.isfinite(value) and ok):
            raise _implausible(what, name, value, "finite, " + (">= 0" if name == "alpha_us"
                                                                else "> 0"))
    link_alpha, bw = ring_link_from_allreduce(alpha, beta, int(fit["workers"]))
    for name, value in (("alpha_us", link_alpha), ("bandwidth_gb_s", bw)):
        low, high = LINK_BOUNDS[name]
        if not low <= value <= high:
            raise _implausible(what, f"link {name}", value, f"in [{low:g}, {high:g}]")
    return alpha, beta, link_alpha, bw


def _implausible(what: str, name: str, value: float, expected: str) -> DgtracesError:
    return DgtracesError(f"--link-fit: {what}: {name} {value!r} is not a usable fit "
                         f"({expected})", code=Code.PLAUSIBILITY, failures=[Failure(
                             Code.PLAUSIBILITY, "implausible fit", column=name,
                             expected=expected, found=repr(value))])


def _whole(value: object) -> int | None:
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return int(number) if math.isfinite(number) else None


def fit_link(spec: str, release: "Release | str | None") -> LinkFit:
    """The :class:`LinkFit` named by ``spec`` (see module doc); a release's ``comm_fits``
    are read from ``release`` (a Release or a version, default latest)."""
    from dgtraces.store.release import as_release

    if not isinstance(spec, str) or not spec:
        raise bad("empty", spec)
    target, workers = _split_workers(spec)
    path = Path(target)
    if path.exists() or path.is_symlink():
        fit = _from_path(path, workers)
        origin, what = str(path), str(path)
    else:
        rel = as_release(release)
        if "comm_fits" not in rel.entries:
            raise bad(f"release {rel.version} has no comm_fits table and no file {target!r} "
                      "exists", spec, code=Code.NOT_FOUND)
        fits = rel.cached("comm_fits")
        what = f"comm_fits of release {rel.version} (interconnect {target})"
        fit = pick_fit(fits[fits["interconnect"] == target], workers, what)
        origin = f"comm_fits of release {rel.version}"
    alpha, beta, link_alpha, bw = _bounded(fit, what)
    link = Link(f"fit:{Path(target).name}", link_alpha, bw, str(fit.get("provenance", "measured")),
                f"--link-fit {spec}: allreduce fit among {int(fit['workers'])} workers "
                f"(alpha {alpha:.4g} us, beta {beta:.4g} us/byte) from {origin}: "
                f"{fit.get('source', '')}; inverted through the ring cost")
    return LinkFit(link, spec, int(fit["workers"]), alpha, beta, _whole(fit.get("min_bytes")),
                   _whole(fit.get("max_bytes")))


def link_from_fit(spec: str, release: "Release | str | None" = None) -> Link:
    """The per-hop :class:`Link` of an allreduce fit named by ``spec`` (see module doc)."""
    return fit_link(spec, release).link


def fitted_collective(collective: str, sizes, fit: LinkFit, *, workers: int,
                      gpus_per_node: int = 1, intra: str = "pcie3", inter: str = "10gbe",
                      nics_per_node: int = 1, algorithm: str | None = None,
                      release: str | None = "latest") -> CollectiveResult:
    """``dgtraces collective --link-fit``: the collective over the fitted link in place of
    both presets (module doc), ``algorithm`` an alpha-beta one (default ``ring``); sizes
    beyond the fit's measured range are BAD_INPUT."""
    from .collective_time import NCCL_ALGORITHMS, parse_size, predict_collective

    algorithm = algorithm or "ring"
    if algorithm in NCCL_ALGORITHMS:
        raise DgtracesError(
            f"--algorithm {algorithm} with --link-fit: NCCL's model costs its own fabric "
            "tables, a fit is one alpha-beta link; give an alpha-beta algorithm (ring, tree, "
            "...) or no --link-fit", code=Code.BAD_INPUT, failures=[Failure(
                Code.BAD_INPUT, "NCCL's model takes no link fit", column="algorithm",
                expected="an alpha-beta algorithm (ring, tree, dbtree, hierarchical, ps)",
                found=algorithm)])
    sizes = [parse_size(str(n)) for n in sizes]
    fit.check_sizes(sizes)
    link = fit.replacing(intra, inter)
    res = predict_collective(collective, sizes, workers=workers, gpus_per_node=gpus_per_node,
                             intra=link, inter=link, nics_per_node=nics_per_node,
                             algorithm=algorithm, release=release)
    res.links = {side: dict(res.links[side], replaces=preset)
                 for side, preset in (("intra", intra), ("inter", inter))}
    res.model = (f"alpha-beta {algorithm} (dgtraces.comm.collectives) over the --link-fit "
                 "link on every hop")
    res.notes = [fit.note(intra, inter), *res.notes]
    return res
