"""The caveat a multi-worker prediction carries (issue #35 item 5): the measured signed error of
the validation that matches it, never a bound the validation does not support.

A GPU prediction quotes the published multi-GPU evaluation (predicted throughput vs published,
``validate-predictor --published``), a CPU prediction the measured CPU rows (predicted
iteration time vs measured, ``validate-predictor``) and says how its settings differ from the
ones behind that figure. The figures are declared here and recomputed from the evaluations by
``tests/predict/test_captions.py``; regenerate them with the commands they name.
"""

from __future__ import annotations

# (kind, overhead terms) -> signed error (%) of the matching validation, as its command prints
VALIDATION_ERROR: dict[tuple[str, str], dict] = {
    ("gpu", "none"): {"rows": 87, "min_pct": -0.2, "max_pct": 28.3, "mean_pct": 7.0,
                      "mape_pct": 7.0, "command": "dgtraces validate-predictor --published "
                      "--framework none --overheads none"},
    ("gpu", "sync"): {"rows": 87, "min_pct": -4.9, "max_pct": 20.0, "mean_pct": 2.0,
                      "mape_pct": 4.1, "command": "dgtraces validate-predictor --published"},
    ("cpu", "none"): {"rows": 9, "min_pct": -12.6, "max_pct": 2.3, "mean_pct": -5.8,
                      "mape_pct": 6.4, "command": "dgtraces validate-predictor --overheads none"},
    ("cpu", "sync"): {"rows": 9, "min_pct": -11.1, "max_pct": 3.5, "mean_pct": -4.4,
                      "mape_pct": 5.3, "command": "dgtraces validate-predictor"},
}
# What the measured CPU rows were predicted with (evaluation.validation.cpu_effects)
CPU_VALIDATION_SETTINGS = ("2 workers on one host, the collector's own gloo all-reduce and "
                           "policies, the release's loopback-gloo fit as the link, 3 staging "
                           "copies over cpu-memcpy, shared cores when the workers fill them")


def kind_of(device: str | None) -> str:
    """``gpu`` for a GPU of the device registry, else ``cpu``."""
    from dgtraces.reference import gpu_devices

    return "gpu" if device is not None and str(device).lower() in gpu_devices() else "cpu"


def validation_note(kind: str, terms: str, cluster: dict | None = None) -> str:
    """The caveat of a ``kind`` prediction with the overhead ``terms`` (``none`` or ``sync``);
    a CPU note also states how ``cluster`` (a ``Cluster.describe()`` dict) differs from the
    CPU validation's settings."""
    e = VALIDATION_ERROR[(kind, "sync" if "sync" in terms else "none")]
    span = (f"{e['min_pct']:+.1f}% to {e['max_pct']:+.1f}% (mean {e['mean_pct']:+.1f}%, "
            f"MAPE {e['mape_pct']:.1f}%; `{e['command']}`)")
    if kind == "gpu":
        return (f"on the {e['rows']} published multi-GPU rows scored, predicted throughput was "
                f"off by {span}: positive = too fast, so this iteration time is more likely too "
                "short than too long (docs/predictor-published.md)")
    text = (f"on the {e['rows']} measured CPU rows, predicted iteration time was off by "
            f"{span}; they were predicted with: {CPU_VALIDATION_SETTINGS}")
    if cluster is None:
        return text
    st = cluster.get("staging")
    stage = "none" if not st else f"{st['link']} x{st['passes']}"
    return (f"{text}; this prediction: {cluster['workers']} workers, links "
            f"{cluster['intra']['link']}/{cluster['inter']['link']}, staging {stage}, shared "
            f"cores {cluster['shared_cpu']} (give --intra/--inter, --staging cpu-memcpy "
            "--staging-passes 3, --shared-cpu to match)")


def is_validation_note(note: str) -> bool:
    """Whether ``note`` is one of this module's caveats (overheads swap it for its own)."""
    return "predicted throughput was off by" in note or "predicted iteration time was off" \
        in note
