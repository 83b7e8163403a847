"""PyTorch-profiler (Kineto) Chrome traces -> ``runs`` + ``layer_timings``.

Three stages: :mod:`.parse` (trace -> events), attribution (:mod:`.scopes` for traces with
layer scopes or a ``--map``; :mod:`.automap` for torch models without either: profiler ops
matched to spec layers by module order, op kind and input shapes, GPU kernel time via
correlation / external ids) and :mod:`.rows` (tables, run id, consistency flags).
"""

from .parse import Event, load_trace, read_map
from .rows import KinetoImport, Unmapped, import_trace
from .scopes import attribute, enclosing, outermost

__all__ = ["Event", "KinetoImport", "Unmapped", "attribute", "enclosing", "import_trace",
           "load_trace", "outermost", "read_map"]
