"""Parameter sweeps: every combination of the given lists, computed by :mod:`.fast`.

The comm grid (workers x gpus per node x intra x inter x algorithm) is costed as arrays once;
then each (model, batch size) trace, policy and io-overlap choice is one vectorised pass.
Rows of NCCL's model (``auto``, ``nccl-*``: not affine in size, release ``nccl``) are costed
by :mod:`.fast_nccl`, once per distinct configuration, vectorised over message sizes.
Rows are modelled numbers: ``provenance`` is ``modelled`` and each row names its trace.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from itertools import product
from typing import TYPE_CHECKING, Any

import numpy as np

from dgtraces.errors import Code
from dgtraces.predict.cluster import DEFAULT_BUCKET_BYTES, NCCL_NAMES, POLICY_NAMES, Cluster, Policy
from dgtraces.values import bad_value as bad

from ..comm.collectives import ALGORITHMS, collective_ab
from ..comm.fabrics import default_nics, link_or_spec
from ..comm.links import Link, get_link
from ..values import finite_results, whole_number
from .fast import comm_end, finish, prepare
from .trace import Trace

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

PER_ROW = "default"  # algorithm: the device's default, chosen per row (comm.algorithm_default)


@dataclass(frozen=True)
class Grid:
    """Lists to combine. ``traces`` maps (model, batch_size) to a Trace; missing ones are
    resolved with ``trace_loader(model, batch_size)`` (the CLI passes ``trace.resolve``, which
    adds the modelled input copy of GPU traces as ``predict`` does). ``release`` names the
    release whose ``comm_fits`` replace the measured link presets (``"latest"``: newest)."""

    models: Sequence[str] = ("resnet50",)
    batch_sizes: Sequence[int] = (64,)
    workers: Sequence[int] = (1, 2, 4, 8)
    gpus_per_node: Sequence[int] = (1,)
    intra: Sequence[str | Link] = ("pcie3",)  # preset names, or a Link (--link-fit)
    inter: Sequence[str | Link] = ("10gbe",)
    algorithms: Sequence[str] = ("ring",)
    policies: Sequence[str] = ("wfbp",)
    io_overlap: Sequence[bool] = (False,)
    bucket_bytes: int = DEFAULT_BUCKET_BYTES
    first_bucket_bytes: int | None = None  # --framework profiles (frameworks.py)
    cycle_ms: float = 0.0
    servers: int = 1
    alpha_us: float | None = None
    gbps: float | None = None
    staging: str | None = None
    staging_passes: int = 2
    shared_cpu: bool = False
    release: str | None = "latest"  # whose comm_fits give the measured links (loopback-gloo)
    nics_per_node: int | None = 1  # NICs (rails) per node (None: the NIC preset's count)
    traces: dict = field(default_factory=dict)
    nccl: str | None = None  # NCCL release of auto/nccl-* rows (None: the newest modelled)
    nccl_time: str = "run"  # run | tuning (comm.nccl.Model)
    device: str | None = None  # whose default algorithm PER_ROW resolves to, row by row

    def policy(self, name: str, io_overlap: bool = False) -> Policy:
        return Policy(name, io_overlap, self.bucket_bytes, self.first_bucket_bytes,
                      self.cycle_ms)

    def size(self) -> int:
        dims = (self.models, self.batch_sizes, self.workers, self.gpus_per_node, self.intra,
                self.inter, self.algorithms, self.policies, self.io_overlap)
        return int(np.prod([len(d) for d in dims]))


def _check(grid: Grid) -> None:
    for name in ("models", "batch_sizes", "workers", "gpus_per_node", "intra", "inter",
                 "algorithms", "policies", "io_overlap"):
        value = getattr(grid, name)
        if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple, range,
                                                                          np.ndarray)):
            raise bad(name, "must be a list of values", "a list or tuple", repr(value)[:60])
        if not len(value):
            raise bad(name, "empty list", "at least one value", [])
    for w, g in product(grid.workers, grid.gpus_per_node):
        Cluster(w, g)  # raises BAD_INPUT naming workers / gpus_per_node
    for b in grid.batch_sizes:
        whole_number("batch_size", b)
    known = ALGORITHMS + NCCL_NAMES + (PER_ROW,)
    for a in grid.algorithms:
        if a == PER_ROW:
            continue
        if a not in known:
            raise bad("algorithm", "unknown collective algorithm", " | ".join(known), a)
        Cluster(1, intra=grid.intra[0], inter=grid.inter[0], algorithm=a,
                alpha_us=grid.alpha_us, gbps=grid.gbps,
                nics_per_node=grid.nics_per_node or 1, nccl=grid.nccl,
                nccl_time=grid.nccl_time)  # NCCL's model refuses overrides and fits
    for p in grid.policies:
        grid.policy(p)
    Cluster(1, servers=grid.servers, staging_passes=grid.staging_passes)


def comm_grid(grid: Grid) -> dict[str, Any]:
    """Column arrays of the comm grid plus its collective cost (A ms, B ms/byte)."""
    kw: dict[str, Any] = dict(alpha_us=grid.alpha_us, gbps=grid.gbps, release=grid.release)
    intra = {_name(n): link_or_spec(n, "intra", **kw) for n in grid.intra}
    inter = {_name(n): link_or_spec(n, "inter", **kw) for n in grid.inter}
    combos = list(product(grid.workers, grid.gpus_per_node, intra, inter, grid.algorithms))
    whys = _per_row_defaults(grid, combos)
    w, g, li, le, al = (np.array(col) for col in zip(*combos, strict=True))
    nccl = np.isin(al, NCCL_NAMES)
    a, b = np.full(len(w), np.nan), np.full(len(w), np.nan)  # NaN: NCCL rows (fast_nccl)
    ab = ~nccl
    if ab.any():
        a[ab], b[ab] = collective_ab(al[ab], w[ab], g[ab],
                                     [intra[x].alpha_ms for x in li[ab]],
                                     [intra[x].beta_ms_per_byte for x in li[ab]],
                                     [inter[x].alpha_ms for x in le[ab]],
                                     [inter[x].beta_ms_per_byte for x in le[ab]],
                                     grid.servers)
    stage_ab = (0.0, 0.0)
    if grid.staging is not None:
        stage = get_link(grid.staging, field="staging", release=grid.release)
        stage_ab = (grid.staging_passes * stage.alpha_ms,
                    grid.staging_passes * stage.beta_ms_per_byte)
        comm = w > 1
        a = a + np.where(comm, stage_ab[0], 0.0)
        b = b + np.where(comm, stage_ab[1], 0.0)
    figures = {f"{side}_{k}": np.array([getattr(links[x], k) for x in names])
               for side, links, names in (("intra", intra, li), ("inter", inter, le))
               for k in ("alpha_us", "bandwidth_gb_s")}
    labels: dict[str, Any] = {"intra_source": _labels(li, intra),
                              "inter_source": _labels(le, inter)}
    if nccl.any():
        _nccl_figures(figures, labels, nccl, w, g, li, le, grid)
    return {"workers": w.astype(np.int64), "gpus_per_node": g.astype(np.int64), "intra": li,
            "inter": le, "algorithm": al, "a_ms": a, "b_ms_per_byte": b, **figures, **labels,
            "nccl": nccl, "staging_ab": stage_ab, "algorithm_why": np.array(whys, dtype=object)}


def _per_row_defaults(grid: Grid, combos: list) -> list[str]:
    """Resolve :data:`PER_ROW` in ``combos`` (in place) to the device's default for each row's
    own workers, GPUs per node and links (a row NCCL's model cannot cost gets ring, the others
    keep auto); returns each row's reason ("given" for a named algorithm)."""
    from ..comm.algorithm_default import default_algorithm

    overridden = ((grid.alpha_us, grid.gbps) != (None, None)  # a fitted Link too
                  or any(isinstance(x, Link) for x in (*grid.intra, *grid.inter)))
    memo: dict = {}
    whys = []
    for i, (w, g, li, le, a) in enumerate(combos):
        if a != PER_ROW:
            whys.append("given (--algorithms)")
            continue
        if (w, g, li, le) not in memo:
            memo[(w, g, li, le)] = default_algorithm(grid.device, [li], [le], [(w, g)],
                                                     overridden=overridden)
        choice = memo[(w, g, li, le)]
        combos[i] = (w, g, li, le, choice.algorithm)
        whys.append(choice.why)
    return whys


def _name(link: "str | Link") -> str:
    """A row's ``intra``/``inter`` label: the preset, or a given Link's name (``fit:...``)."""
    return link.name if isinstance(link, Link) else link


def _nccl_figures(figures: dict, labels: dict, nccl, w, g, li, le, grid: Grid) -> None:
    """NCCL rows show what NCCL's model used: the fabric as the release sees it, with its
    source (latency is per algorithm and protocol: NaN here)."""
    import pandas as pd

    from ..comm.fabrics import default_nics
    from ..comm.nccl import fabric_view, model, topology

    m = model(grid.nccl, grid.nccl_time)
    keys = list(zip(w.tolist(), g.tolist(), li.tolist(), le.tolist(), strict=True))
    views = {}
    for k in {k for k, on in zip(keys, nccl.tolist(), strict=True) if on}:
        # only NCCL rows: a per-row ring row (e.g. workers not filling nodes) has no NCCL view
        p, q, a, b = k
        t = topology(int(p), min(int(q), int(p)), a, b, default_nics(b, grid.nics_per_node))
        views[k] = fabric_view(m, t)
    for side in ("intra", "inter"):
        used = [views[k][side] if k in views else None for k in keys]
        figures[f"{side}_alpha_us"] = np.where(nccl, np.nan, figures[f"{side}_alpha_us"])
        figures[f"{side}_bandwidth_gb_s"] = np.where(
            nccl, [np.nan if f is None else f["bandwidth_gb_s"] for f in used],
            figures[f"{side}_bandwidth_gb_s"])
        text = np.asarray(labels[f"{side}_source"], dtype=object)
        text = np.where(nccl, ["" if f is None else f"NCCL {m.version.key} model: "
                               f"{f['source']}" for f in used], text)
        labels[f"{side}_source"] = pd.Categorical(text)


def _labels(names: np.ndarray, links: dict) -> "pd.Categorical[str]":
    """``provenance: source`` of each row's link, as a categorical (few distinct values)."""
    import pandas as pd

    uniq, inverse = np.unique(names, return_inverse=True)
    return pd.Categorical([f"{links[n].provenance}: {links[n].source}" for n in uniq]
                          )[inverse]


def run_sweep(grid: Grid, trace_loader: Callable[[str, int], Trace] | None = None,
              progress: Callable[[int], None] | None = None) -> "pd.DataFrame":
    """All combinations of ``grid`` as a DataFrame (one row per configuration)."""
    import pandas as pd

    _check(grid)
    with np.errstate(over="ignore", invalid="ignore"):  # absurd rates: finite_results below
        cg = comm_grid(grid)
    n = len(cg["a_ms"])
    frames = []
    for model, batch in product(grid.models, grid.batch_sizes):
        trace = grid.traces.get((model, batch))
        if trace is None:
            if trace_loader is None:
                raise bad("traces", f"no trace for {model} batch {batch}", "a Trace",
                          None, code=Code.NOT_FOUND)
            trace = trace_loader(model, int(batch))
        prep = prepare(trace)
        for pname in grid.policies:
            policy = grid.policy(pname)
            with np.errstate(over="ignore", invalid="ignore"):
                # one worker sends nothing: no fusion cycle to wait for (as dag.simulate)
                rel_single = comm_end(prep, replace(policy, cycle_ms=0.0), np.zeros(1),
                                      np.zeros(1), grid.shared_cpu)
                rel_end = _comm_ends(grid, cg, prep, policy, rel_single)
                frames.extend(_rows(grid, cg, trace, prep, pname, rel_end, rel_single))
            if progress:
                progress(n * len(grid.io_overlap))
    out = pd.concat(frames, ignore_index=True)
    finite_results("modelled iterations", {c: out[c].to_numpy(float) for c in
                                           ("iter_ms", "speedup_vs_1")})
    return out


def _comm_ends(grid: Grid, cg: dict, prep, policy: Policy,
               rel_single: np.ndarray) -> np.ndarray:
    """Relative comm finish of every row: one-worker rows are ``rel_single[0]`` (computed
    once by the caller), affine rows by :func:`.fast.comm_end`, NCCL rows by
    :func:`.fast_nccl.comm_ends`."""
    from .fast_nccl import comm_ends

    one = cg["workers"] == 1
    nccl = cg["nccl"] & ~one
    affine = ~cg["nccl"] & ~one
    out = np.empty(len(one))
    if one.any():
        out[one] = rel_single[0]
    if affine.any():
        out[affine] = comm_end(prep, policy, cg["a_ms"][affine], cg["b_ms_per_byte"][affine],
                               grid.shared_cpu)
    if nccl.any():
        keys = list(zip(*(cg[k][nccl] for k in ("workers", "gpus_per_node", "intra", "inter",
                                                 "algorithm")), strict=True))
        out[nccl] = comm_ends(prep, policy, keys, grid.shared_cpu, grid.nics_per_node,
                              cg["staging_ab"], (grid.nccl, grid.nccl_time))
    return out


def _rows(grid, cg, trace, prep, pname, rel_end, rel_single):
    import pandas as pd

    from .dag import reproducibility

    repro = reproducibility(Cluster(1, release=grid.release),
                            grid.policy(pname))

    for overlap in grid.io_overlap:
        iter_ms, exposed = finish(prep, bool(overlap), rel_end)
        single, _ = finish(prep, bool(overlap), rel_single)
        speedup = cg["workers"] * single[0] / iter_ms
        yield pd.DataFrame({
            "model": trace.model, "batch_size": trace.batch_size,
            **{k: cg[k] for k in ("workers", "gpus_per_node", "intra", "inter", "algorithm",
                                  "algorithm_why")},
            "policy": pname, "io_overlap": bool(overlap), "iter_ms": iter_ms,
            "throughput_img_s": cg["workers"] * trace.batch_size * 1000.0 / iter_ms,
            "speedup_vs_1": speedup, "efficiency": speedup / cg["workers"],
            "comm_exposed_ms": exposed, "trace_provenance": trace.provenance,
            "trace_run_id": trace.run_id, "trace_source": trace.source,
            "intra_source": cg["intra_source"], "inter_source": cg["inter_source"],
            **{f"{side}_{k}": cg[f"{side}_{k}"] for side in ("intra", "inter")
               for k in ("alpha_us", "bandwidth_gb_s")},
            "trace_device": trace.device, "trace_io_ms": trace.io_ms,
            "bucket_bytes": repro["bucket_bytes"], "package_version": repro["package_version"],
            "dataset_release": repro["dataset_release"], "provenance": "modelled"})


def reference_row(trace: Trace, row: dict, grid: Grid) -> float:
    """The reference event simulation of one sweep row (for tests and the benchmark)."""
    from .dag import simulate

    given = {_name(x): x for x in (*grid.intra, *grid.inter)}  # a row's label -> its link
    cluster = Cluster(int(row["workers"]), int(row["gpus_per_node"]), given[row["intra"]],
                      given[row["inter"]], row["algorithm"], grid.servers, grid.alpha_us,
                      grid.gbps, grid.release, staging=grid.staging,
                      staging_passes=grid.staging_passes, shared_cpu=grid.shared_cpu,
                      nics_per_node=default_nics(row["inter"], grid.nics_per_node),
                      nccl=grid.nccl, nccl_time=grid.nccl_time)
    policy = grid.policy(row["policy"], bool(row["io_overlap"]))
    return simulate(trace, cluster, policy).iter_ms


__all__ = ["Grid", "comm_grid", "run_sweep", "reference_row", "POLICY_NAMES"]
