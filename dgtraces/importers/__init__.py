"""Importers of traces recorded elsewhere, and the published reference tables.

- :mod:`.registry`: every importer declared once (name, ``module:function``, what it reads,
  the tables it writes, its CLI help); ``dgtraces import NAME`` is built from it.
- :mod:`.base`: what importers share (reading a log, version stamp, schema-valid frames, the
  ``runs`` row of an imported GPU file).
- :mod:`.shipped`: the registry of shipped source files (GPU files, B-Caffe logs) that
  importers recognise by their sha256 (``reference/SHA256SUMS.json``), so a row imported
  from one cites repository, path and commit; any other file needs a source given by the
  caller.
- :mod:`.gpu_sources`: the catalog that imports every shipped GPU file.
- :mod:`.kineto`, :mod:`.bcaffe`, :mod:`.caffe_time`, :mod:`.pipedream`, :mod:`.osu`,
  :mod:`.nccl_tests`, :mod:`.deepbench`: the importers; :mod:`.published`: every published
  table built from ``dgtraces/reference/``.

Importers import :mod:`.base`, :mod:`.shipped` and the layers below, never the catalog or
each other's internals: no import cycle. Nothing here prints or writes outside the path it
is given.
"""

from __future__ import annotations

from dgtraces.importers.base import IMPORTER_VERSION, frame, read_text
from dgtraces.importers.shipped import citation

__all__ = ["IMPORTER_VERSION", "citation", "frame", "read_text"]
