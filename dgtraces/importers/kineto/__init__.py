"""PyTorch-profiler (Kineto) Chrome traces -> ``runs`` + ``layer_timings``.

Three stages: :mod:`.parse` (trace -> events), attribution (:mod:`.scopes` for traces with
layer scopes or a ``--map``; :mod:`.automap` for torch models without either: profiler ops
matched to spec layers by module order, op kind and input shapes, GPU kernel time via
correlation / external ids) and rows (:mod:`.rows` in scope mode, :mod:`.autorows` for
automap; the result, run id and per-layer rows they share are in :mod:`.result`).
"""

from dgtraces.importers.kineto.parse import Event, load_trace, read_map
from dgtraces.importers.kineto.result import KinetoImport, Unmapped
from dgtraces.importers.kineto.rows import import_trace
from dgtraces.importers.kineto.scopes import attribute, enclosing, outermost

__all__ = ["Event", "KinetoImport", "Unmapped", "attribute", "enclosing", "import_trace",
           "load_trace", "outermost", "read_map"]
