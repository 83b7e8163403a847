"""Before/after of the pre-registered ``device-time`` rule (docs/gpu-traces.md, issue #13
item 5): the report's per-layer figures and the calibration leave-one-out rms under the
shipped rule (dispatch inside each layer) and under the new one (dispatch per iteration),
and the declared adoption criterion.

    python scripts/evaluate_dispatch_rule.py    # Markdown on stdout (a few minutes: LOO fits)
"""

from __future__ import annotations

import sys
import time

from dgtraces.evaluation.dispatch import Trial, criterion
from dgtraces.evaluation.reconstruction import figures


def main() -> int:
    t0 = time.time()
    before, after = figures("layer"), figures("iteration")
    print("| figure | before (dispatch in layers, roofline-1.1) | after (device-time) |")
    print("| --- | ---: | ---: |")
    for run in before.gpu:
        b, a = before.gpu[run], after.gpu[run]
        print(f"| `{run}` per-layer MAPE | {b['layer_mape_pct']:.1f}% | "
              f"{a['layer_mape_pct']:.1f}% |")
        print(f"| `{run}` whole mapped iteration | {b['iteration_error_pct']:+.1f}% | "
              f"{a['iteration_error_pct']:+.1f}% |")
        for kind, kb in b["kinds"].items():
            ka = a["kinds"][kind]
            print(f"| `{run}` {kind} ({kb['layers']} layers): MAPE, sum error | "
                  f"{kb['mape_pct']:.1f}%, {kb['sum_error_pct']:+.1f}% | "
                  f"{ka['mape_pct']:.1f}%, {ka['sum_error_pct']:+.1f}% |")
    for label, b_mape, a_mape in Trial(before, after).held_out():
        print(f"| {label} | {b_mape:.1f}% | {a_mape:.1f}% |")
    for d in before.loo_rms:
        print(f"| {d} leave-one-out rms log | {before.loo_rms[d]:.6f} | "
              f"{after.loo_rms[d]:.6f} |")
    verdict = criterion(before, after)
    print()
    print("criterion: " + ", ".join(f"{k} {'yes' if v else 'NO'}" for k, v in verdict.items()))
    print(f"({time.time() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
