"""Published multi-GPU validation with the v0.3 link presets vs the stack-aware ones (#15).

    python benchmarks/published_presets.py

v0.3 had no nvlink1 row (an unstated P100 link fell back to the default intra, pcie3), its
``nvlink2`` was one link (now ``nvlink2-link``) and InfiniBand FDR was the spec rate
(``56gb-ib``: 6.82 GB/s, alpha 1 us). Everything else (traces, calibration, rules) is the same,
so the difference is the presets alone. Rows on devices v0.3 could not predict (p40, m40:
no device rows) are still predicted here with the new device rows.
"""

from dgtraces.evaluation import published as pub
from dgtraces.predict import Link


def run(label: str) -> None:
    res = pub.validate_published()
    h = res.headline()
    print(f"{label}: MAPE {h['mape_pct']:.2f}%, median {h['median_ape_pct']:.2f}% "
          f"over {h['rows']} rows")
    for r in res.by_source().itertuples():
        print(f"  {r.source[:70]:70s} n={r.rows:2d} MAPE {r.mape_pct:6.2f}%")


if __name__ == "__main__":
    run("stack-aware presets")
    pub.BOARD_LINK = {"p100": "pcie3", "v100": "nvlink2-link"}
    pub.UNSTATED_IB = Link("56gb-ib", 1.0, 6.82)
    run("v0.3 presets")
