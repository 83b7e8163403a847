"""HTA's temporal breakdown of a measured Kineto trace next to a predicted one (per step).

    python scripts/hta_side_by_side.py [MEASURED_TRACE.json.gz] [--run-id RUN] [--workers N]

Defaults: the shipped-in-shared V100 ResNet-50 batch-32 Kineto trace (torchvision v1.5) and
the reconstructed V100 ResNet-50 batch-32 run (Caffe v1 layers): similar, not identical,
networks. Needs the [sim] extra. Prints one row per trace, times in ms per analysed step.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_TRACE = (REPO.parent / "shared" / "reference" / "gpu" / "kineto"
                 / "resnet50_v100_b32_num_workers_0.pt.trace.json.gz")


def _per_step(folder: Path, label: str) -> dict:
    from hta.trace_analysis import TraceAnalysis

    analysis = TraceAnalysis(trace_dir=str(folder))
    tb = analysis.get_temporal_breakdown(visualize=False).iloc[0]
    steps = len(analysis.t.get_iterations()) or 1
    return {"trace": label, "steps": steps,
            **{k.replace("(us)", "_ms_per_step"): tb[k] / 1000 / steps
               for k in ("compute_time(us)", "non_compute_time(us)", "idle_time(us)")}}


def main() -> None:
    from dgtraces.export import load_run_trace
    from dgtraces.predict import Cluster, Policy, predict_trace
    from dgtraces.predict.kineto import write_kineto_dir

    ap = argparse.ArgumentParser()
    ap.add_argument("measured", nargs="?", default=str(DEFAULT_TRACE))
    ap.add_argument("--run-id", default="rec-v100-resnet50-b32-fp32-v1.1")
    ap.add_argument("--workers", type=int, default=1)
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    with tempfile.TemporaryDirectory() as tmp:
        measured, predicted = Path(tmp, "measured"), Path(tmp, "predicted")
        measured.mkdir()
        shutil.copy(args.measured, measured)
        pred, sched = predict_trace(load_run_trace(args.run_id), Cluster(args.workers),
                                    Policy("wfbp"))
        write_kineto_dir(predicted, sched, pred)
        rows = [_per_step(measured, f"measured {Path(args.measured).name}"),
                _per_step(predicted, f"modelled {args.run_id} x{args.workers}")]
    import pandas as pd

    print(pd.DataFrame(rows).to_string(index=False, float_format=lambda v: f"{v:.2f}"))


if __name__ == "__main__":
    main()
