"""The caveat a multi-worker prediction carries (issue #35 item 5): the measured signed error of
the validation that matches it, never a bound the validation does not support.

A GPU prediction quotes the published multi-GPU evaluation (predicted throughput vs published,
``validate-predictor --published``), a CPU prediction the measured CPU rows (predicted
iteration time vs measured, ``validate-predictor``) and says how its settings differ from the
ones behind that figure. The figures are declared here and recomputed from the evaluations by
``tests/predict/test_captions.py``; regenerate them with the commands they name.
"""

from __future__ import annotations

# (kind, framework, overhead terms) -> signed error (%) of the matching validation, as its
# command prints it. GPU: the published evaluation run with the same overhead terms and the
# same use of framework profiles: "none" when the prediction applies none (--framework none,
# or auto when the trace implies none), "auto" when it applies one (given or inferred; the
# evaluation gives each published row its declared profile). CPU: the measured CPU rows
# apply no framework profile ("any").
VALIDATION_ERROR: dict[tuple[str, str, str], dict] = {
    ("gpu", "none", "none"): {"rows": 87, "min_pct": -0.2, "max_pct": 28.3, "mean_pct": 7.0,
                              "mape_pct": 7.0, "command": "dgtraces validate-predictor "
                              "--published --framework none --overheads none"},
    ("gpu", "none", "sync"): {"rows": 87, "min_pct": -4.6, "max_pct": 20.2, "mean_pct": 2.4,
                              "mape_pct": 4.0, "command": "dgtraces validate-predictor "
                              "--published --framework none"},
    ("gpu", "auto", "none"): {"rows": 87, "min_pct": -1.5, "max_pct": 28.1, "mean_pct": 6.5,
                              "mape_pct": 6.5, "command": "dgtraces validate-predictor "
                              "--published --overheads none"},
    ("gpu", "auto", "sync"): {"rows": 87, "min_pct": -4.9, "max_pct": 20.0, "mean_pct": 2.0,
                              "mape_pct": 4.1, "command": "dgtraces validate-predictor "
                              "--published"},
    ("cpu", "any", "none"): {"rows": 9, "min_pct": -12.6, "max_pct": 2.3, "mean_pct": -5.8,
                             "mape_pct": 6.4, "command": "dgtraces validate-predictor "
                             "--overheads none"},
    ("cpu", "any", "sync"): {"rows": 9, "min_pct": -11.1, "max_pct": 3.5, "mean_pct": -4.4,
                             "mape_pct": 5.3, "command": "dgtraces validate-predictor"},
}
# What the measured CPU rows were predicted with (evaluation.validation.cpu_effects)
CPU_VALIDATION_SETTINGS = ("2 workers on one host, the collector's own gloo all-reduce and "
                           "policies, the release's loopback-gloo fit as the link, 3 staging "
                           "copies over cpu-memcpy, shared cores when the workers fill them")


SIGN = "negative = predicted too fast"  # of an iteration-time error, in both notes


def kind_of(device: str | None) -> str:
    """``gpu`` for a GPU of the device registry, else ``cpu``."""
    from dgtraces.comm.algorithm_default import is_gpu

    return "gpu" if is_gpu(device) else "cpu"


def validation_key(kind: str, framework: str | None, terms: str) -> tuple[str, str, str]:
    """The :data:`VALIDATION_ERROR` key of a ``kind`` prediction made with the framework
    profile ``framework`` (None or ``none``: no profile applied; a profile key: one applied)
    and the overhead ``terms`` (a label or term list; ``sync`` in it or not)."""
    fw = "any" if kind == "cpu" else ("none" if framework in (None, "none") else "auto")
    return kind, fw, "sync" if "sync" in terms else "none"


def validation_note(kind: str, terms: str, cluster: dict | None = None,
                    framework: str | None = None) -> str:
    """The caveat of a ``kind`` prediction with the overhead ``terms`` (``none`` or ``sync``)
    and the framework profile applied (:func:`validation_key`; the library's DAG applies
    none: None); a CPU note also states how ``cluster`` (a ``Cluster.describe()`` dict)
    differs from the CPU validation's settings."""
    e = VALIDATION_ERROR[validation_key(kind, framework, terms)]
    span = (f"{e['min_pct']:+.1f}% to {e['max_pct']:+.1f}% (mean {e['mean_pct']:+.1f}%, "
            f"MAPE {e['mape_pct']:.1f}%; `{e['command']}`)")
    if kind == "gpu":  # the same rows' iteration-time error: time = 1 / throughput
        lo, hi = (100.0 * (100.0 / (100.0 + e[k]) - 1.0) for k in ("max_pct", "min_pct"))
        return (f"on the {e['rows']} published multi-GPU rows scored, predicted throughput was "
                f"off by {span}, i.e. predicted iteration time by {lo:+.1f}% to {hi:+.1f}% "
                f"({SIGN}), so this iteration time is more likely too short than too long "
                "(docs/predictor-published.md)")
    text = (f"on the {e['rows']} measured CPU rows, predicted iteration time was off by "
            f"{span} ({SIGN}); they were predicted with: {CPU_VALIDATION_SETTINGS}")
    if cluster is None:
        return text
    st = cluster.get("staging")
    stage = "none" if not st else f"{st['link']} x{st['passes']}"
    return (f"{text}; this prediction: {cluster['workers']} workers, links "
            f"{cluster['intra']['link']}/{cluster['inter']['link']}, staging {stage}, shared "
            f"cores {cluster['shared_cpu']} (give --intra/--inter, --staging cpu-memcpy "
            "--staging-passes 3, --shared-cpu to match)")


def requote(notes: tuple[str, ...], kind: str, terms: str, cluster: dict,
            framework: str | None) -> tuple[str, ...]:
    """``notes`` with the validation caveat (if any) quoting the validation of the profile
    ``framework`` (:func:`validation_key`) and ``terms`` (``predict`` knows the profile it
    applied; the DAG and the overhead terms do not)."""
    note = validation_note(kind, terms, cluster, framework)
    return tuple(note if is_validation_note(n) else n for n in notes)


def is_validation_note(note: str) -> bool:
    """Whether ``note`` is one of this module's caveats (overheads swap it for its own)."""
    return "predicted throughput was off by" in note or "predicted iteration time was off" \
        in note
