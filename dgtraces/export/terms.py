"""What an export records about ``--framework`` and ``--overheads`` (issue #35 item 1): the
exports take the options with ``predict``'s defaults. The simulators model one iteration's
compute and collectives; the overhead terms (``predict.overheads``: the wait for the slowest
of P workers, a node's shared input pipeline) are not nodes or layers of their formats, so an
export records them, as ``predict`` computes them, beside what it writes."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from ..predict.dag import Prediction
    from ..predict.overheads import Overheads
    from ..predict.trace import Trace
    from ..reference.frameworks import FrameworkChoice

ASTRA_PROFILE_NOTE = ("ASTRA-sim 1.0 workloads all-reduce each layer's weight gradient: a "
                      "profile's grouping (buckets, fusion cycle) is not expressible in the "
                      "format and is recorded here only")
TERMS_NOTE = ("added after the DAG by dgtraces predict (docs/predictor-overheads.md); not "
              "simulated: add them to the simulator's iteration time")


def export_terms(pred: Prediction, trace: Trace, spec: Overheads,
                 chosen: FrameworkChoice) -> tuple[dict, float]:
    """The framework profile (and how it was chosen) and each overhead term in ms for the
    DAG's prediction ``pred``, as ``predict`` adds them after the DAG; and the iteration with
    them (ms), the figure ``predict`` prints."""
    from ..predict.overheads import apply_overheads

    after = apply_overheads(pred, trace, spec)
    return {"framework": chosen.describe(), "overheads": spec.label,
            "sync_ms": float(after.breakdown.get("sync_ms", 0.0)),
            "input_ms": float(after.breakdown.get("input_ms", 0.0)),
            "overheads_note": TERMS_NOTE}, float(after.iter_ms)
