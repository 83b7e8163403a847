"""Published multi-GPU validation with the v0.3 intra-node link presets vs the stack-aware
ones (#15), on the older set (scaling_published.csv).

    python benchmarks/published_presets.py

v0.3 had no nvlink1 row (an unstated P100 link fell back to the default intra, pcie3) and its
``nvlink2`` was one link (now ``nvlink2-link``). The mapping's setups
(evaluation/scaling_mapping.yaml) are rewritten with those presets; everything else (traces,
calibration, profiles) is the same, so the difference is the presets alone. (v0.3's spec-rate
InfiniBand FDR is no preset any more; the Caffe-MPI rows keep ib-fdr.)
"""

from dataclasses import replace

from dgtraces.evaluation import published as pub
from dgtraces.evaluation.published_mapping import OLD_FILE, load_mapping

V03_INTRA = {"nvlink1": "pcie3", "nvlink2": "nvlink2-link"}


def run(label: str, setups) -> None:
    res = pub.validate_published(None, "none", setups=setups)
    s = res.scored()
    old = s[s["file"] == OLD_FILE]
    print(f"{label}: MAPE {old['ape_pct'].mean():.2f}% over {len(old)} older-set rows")
    for table, part in old.groupby("table", sort=False):
        print(f"  {table[:70]:70s} n={len(part):2d} MAPE {part['ape_pct'].mean():6.2f}%")


if __name__ == "__main__":
    setups = load_mapping()
    run("stack-aware presets", setups)
    run("v0.3 presets", tuple(replace(s, intra=V03_INTRA.get(s.intra or "", s.intra))
                              if s.file == OLD_FILE else s for s in setups))
