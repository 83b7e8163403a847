"""The one builder of a ``runs`` row, shared by every producer of runs (the importers,
``collect layers``, the reconstructions, the contribution template).

A row is a dict with every column of the ``runs`` table in schema order; columns not given
are null, ``params`` is serialised once here (sorted JSON, so a rebuilt release is
byte-identical), and a key that is not a ``runs`` column is a SCHEMA error rather than a
column silently dropped later. Values are not changed or inferred: what a producer passes is
what the row holds; the schema check happens where the rows become a frame.
"""

from __future__ import annotations

import json
from typing import Any

from dgtraces.errors import Code, DgtracesError

# the measured or modelled figures a producer may add (all optional, null when absent)
MEASURES = ("host", "threads", "cores", "fwd_ms", "bwd_ms", "update_ms", "iter_ms",
            "layer_sum_ratio", "flag_reason")


# the runs table's columns in schema order, as plain data so that building a row loads no
# pandera (cold start, issue #24); tests/test_cold_start.py holds it equal to the schema
RUNS_COLUMNS = ("run_id", "model", "device", "device_kind", "host", "framework", "precision",
                "batch_size", "threads", "cores", "provenance", "source", "collector_version",
                "timestamp_utc", "fwd_ms", "bwd_ms", "update_ms", "iter_ms",
                "layer_sum_ratio", "flagged", "flag_reason", "params_json", "notes")


def runs_columns() -> list[str]:
    """The ``runs`` table's columns in schema order."""
    return list(RUNS_COLUMNS)


def runs_row(*, run_id: str, model: str, device: str, device_kind: str, framework: str,
             batch_size: int | None, provenance: str, source: str, collector_version: str,
             timestamp_utc: str, precision: str = "fp32", params: dict | None = None,
             flagged: bool = False, notes: str | None = None, **measures: Any) -> dict:
    """One ``runs`` row: the identifying fields, ``params`` as sorted JSON (``params_json``)
    and any of :data:`MEASURES`; every other column null."""
    extra = sorted(set(measures) - set(MEASURES))
    if extra:
        raise DgtracesError(f"runs row: {extra} are not runs measures (allowed: "
                            f"{', '.join(MEASURES)})", code=Code.SCHEMA)
    given = {"run_id": run_id, "model": model, "device": device, "device_kind": device_kind,
             "framework": framework, "precision": precision, "batch_size": batch_size,
             "provenance": provenance, "source": source,
             "collector_version": collector_version, "timestamp_utc": timestamp_utc,
             "flagged": flagged, "notes": notes,
             "params_json": None if params is None else json.dumps(params, sort_keys=True),
             **measures}
    return {column: given.get(column) for column in runs_columns()}
