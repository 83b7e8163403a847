"""What the store and the staging area hold already, for the duplicate and device checks.

Memory follows the contribution, not the store: key columns are read alone (column
projection over the shards), and stored run fingerprints are computed only for the stored
runs whose layer count and fwd/bwd sums match a new run (one DuckDB aggregate).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from dgtraces.tables.coverage import PEAK_COLUMNS, device_peaks, reference_peaks

from .identity import comm_keys, run_fingerprints

if TYPE_CHECKING:  # pragma: no cover
    from pathlib import Path

    import pandas as pd

    from dgtraces.store.release import Release


@dataclass
class Known:
    """Content already in the store or in staging (for duplicate and device checks)."""

    run_ids: set = field(default_factory=set)
    fingerprints: set = field(default_factory=set)
    iter_ids: set = field(default_factory=set)
    comm_keys: set = field(default_factory=set)
    digests: set = field(default_factory=set)
    devices: dict = field(default_factory=dict)  # device key -> kind (cpu | gpu)
    names: dict = field(default_factory=dict)  # device key -> its name (a CPU: the host's)
    peaks: dict = field(default_factory=dict)  # device -> precision -> peak FLOP/s

    def update(self, other: "Known") -> "Known":
        for name in self.__dataclass_fields__:
            getattr(self, name).update(getattr(other, name))
        return self


def _candidate_runs(rel: Release, sums: "pd.DataFrame | None") -> list[str] | None:
    """Stored runs whose per-run layer count and fwd/bwd sums match a new run's (``sums``:
    one row per new run, columns n, f, b) within the fingerprint's rounding: the only ones
    whose fingerprints can equal a new run's. None: no sums (compute every fingerprint)."""
    from dgtraces.store.duck import connect, scan

    if sums is None:
        return None
    con = connect()
    try:
        con.register("c", sums[["n", "f", "b"]].reset_index(drop=True))
        files = rel.files()["layer_timings"]
        rows = con.execute(
            "SELECT DISTINCT s.run_id FROM (SELECT run_id, count(*) AS n, "
            "sum(coalesce(fwd_ms, 0)) AS f, sum(coalesce(bwd_ms, 0)) AS b FROM "
            f"{scan(files, ['run_id', 'fwd_ms', 'bwd_ms'])} GROUP BY run_id) s JOIN c "
            "ON s.n = c.n AND abs(s.f - c.f) <= s.n * 1e-6 + 1e-9 * abs(c.f) "
            "AND abs(s.b - c.b) <= s.n * 1e-6 + 1e-9 * abs(c.b)").fetchall()
    finally:
        con.close()
    return [r[0] for r in rows]


def store_known(root: Path, sums: "pd.DataFrame | None" = None) -> Known:
    """Keys, fingerprints and devices of the latest release of the data folder ``root``
    (resolved by the caller; empty store: nothing), its manifest read once.

    ``sums``: the contribution's per-run layer count and time sums (columns n, f, b; see
    :func:`dgtraces.contribute.stream.run_sums`); without them every stored fingerprint
    is computed.
    """
    import pyarrow as pa
    import pyarrow.dataset as ds

    from dgtraces.store import manifest as store
    from dgtraces.store.release import Release
    from dgtraces.tables.schema import KEYS

    known = Known()
    known.peaks.update(reference_peaks())
    version = store.latest_or_none(root)
    if version is None:
        return known
    rel = Release.open(version, root)
    tables = rel.entries

    def read(name, columns=None, run_ids=None):
        if name not in tables:
            return None
        data = rel.dataset(name)
        where = None if run_ids is None else ds.field("run_id").isin(
            pa.array(run_ids, type=data.schema.field("run_id").type))
        return data.to_table(columns=columns, filter=where).to_pandas()

    runs = read("runs")
    if runs is not None:
        known.run_ids.update(runs["run_id"].astype(str))
        if "layer_timings" in tables and tables["layer_timings"]["rows"]:
            cands = _candidate_runs(rel, sums)
            lt = read("layer_timings", run_ids=cands) if cands != [] else None
            if lt is not None and len(lt):
                known.fingerprints.update(run_fingerprints(runs, lt).values())
    it = read("iterations", ["iter_id"])
    if it is not None:
        known.iter_ids.update(it["iter_id"].astype(str))
    comm = read("comm", list(KEYS["comm"]))
    if comm is not None:
        known.comm_keys.update(comm_keys(comm))
    devices = read("devices", ["device", "kind", "name", *sorted(
        {c for columns in PEAK_COLUMNS.values() for c in columns})])
    if devices is not None:
        keys = devices["device"].astype(str)
        known.devices.update(zip(keys, devices["kind"].astype(str), strict=True))
        known.names.update(zip(keys, devices["name"].astype(str), strict=True))
    known.peaks.update(device_peaks(devices))  # the store's rows (measured CPUs) win
    return known
