"""The catalog of shipped published GPU measurements (``reference/gpu/``): every file of
:data:`.shipped.SOURCES` run through the importer it names (:mod:`.registry`).

The declarations themselves (repository, path, commit, licence, model, device, importer)
live in :mod:`.shipped`, which the importers read to recognise a shipped file; this module
is the only one that calls importers for them, and no importer imports it.
"""

from __future__ import annotations

from dgtraces.importers.shipped import (
    SOURCES,
    UNSTATED_GPU,
    GpuSource,
    licences,
    shipped,
)


def import_source(src: GpuSource):
    """Import one shipped file with the importer its declaration names."""
    from dgtraces import reference
    from dgtraces.importers.registry import importer

    return importer(src.importer).load()(reference.path(src.file), src.model)


def gpu_tables() -> dict:
    """``runs`` + ``layer_timings`` of every shipped GPU file (provenance published),
    validated together."""
    import pandas as pd

    from dgtraces.tables.checks import validate_tables

    results = [import_source(s) for s in SOURCES]
    return validate_tables({
        "runs": pd.concat([r.runs for r in results], ignore_index=True),
        "layer_timings": pd.concat([r.layer_timings for r in results], ignore_index=True)})


__all__ = ["SOURCES", "UNSTATED_GPU", "GpuSource", "gpu_tables", "import_source", "licences",
           "shipped"]
