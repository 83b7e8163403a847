"""``dgtraces contribute --template DIR``: a fillable example contribution.

The example's times are NOT measurements: they are computed from the layers' FLOPs at a
nominal throughput (:data:`NOMINAL_GFLOP_S`) so that the files have the right shape;
``source`` and ``notes`` say so. Every placeholder value (:data:`PLACEHOLDERS`: contributor,
hardware, software, the example device and its name, ``source`` and ``run_id`` prefixes,
host, timestamp, notes) is refused by validation until it is replaced (:data:`TO_REPLACE`);
once replaced, the files pass every check.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dgtraces.tables.runrow import runs_row

from .intake import META_FILE

NOMINAL_GFLOP_S = 100.0
# Placeholder values: ``validate.check`` refuses a contribution that still carries any of
# them (:data:`PLACEHOLDERS`), so the unedited template, or one with only some of its
# markers renamed, can never be staged as measured data (#36 item 8).
PLACEHOLDER_CONTRIBUTOR = "Your Name <you@example.org>"
EXAMPLE_SOURCE = "EXAMPLE"  # prefix of the template's runs.source
EXAMPLE_RUN_PREFIX = "example-"  # prefix of the template's run_id
EXAMPLE_DEVICE = "example-gpu"
EXAMPLE_DEVICE_NAME = "Example GPU 24 GB"
EXAMPLE_HARDWARE = "1x Example GPU 24 GB, 16-core host CPU"
EXAMPLE_SOFTWARE = "PyTorch 2.13.0, CUDA 12.x, driver 5xx"
EXAMPLE_HOST = "Example host CPU"
EXAMPLE_TIMESTAMP = "2026-01-01T00:00:00Z"
EXAMPLE_NOTES = (f"template values from FLOPs at a nominal {NOMINAL_GFLOP_S:g} GFLOP/s, "
                 "not measured")


@dataclass(frozen=True)
class Placeholder:
    """One placeholder of the template: ``field`` of ``contribution.yaml`` (``devices.*``:
    of any entry of its devices list) or a column of ``runs``, holding ``value`` (or, with
    ``prefix``, starting with it)."""

    file: str  # "contribution.yaml" or "runs"
    field: str
    value: str
    prefix: bool = False

    def matches(self, found: object) -> bool:
        text = str(found).strip() if isinstance(found, str) else None
        if text is None:
            return False
        return text.startswith(self.value) if self.prefix else text == self.value


PLACEHOLDERS = (
    Placeholder(META_FILE, "contributor", PLACEHOLDER_CONTRIBUTOR),
    Placeholder(META_FILE, "hardware", EXAMPLE_HARDWARE),
    Placeholder(META_FILE, "software", EXAMPLE_SOFTWARE),
    Placeholder(META_FILE, "devices.device", EXAMPLE_DEVICE),
    Placeholder(META_FILE, "devices.name", EXAMPLE_DEVICE_NAME),
    Placeholder("runs", "run_id", EXAMPLE_RUN_PREFIX, prefix=True),
    Placeholder("runs", "source", EXAMPLE_SOURCE, prefix=True),
    Placeholder("runs", "device", EXAMPLE_DEVICE),
    Placeholder("runs", "host", EXAMPLE_HOST),
    Placeholder("runs", "timestamp_utc", EXAMPLE_TIMESTAMP),
    Placeholder("runs", "notes", EXAMPLE_NOTES),
)
TO_REPLACE = (
    f"contribution.yaml: contributor ({PLACEHOLDER_CONTRIBUTOR!r}), hardware, software, "
    "collection and devices: describe your machine and how you measured",
    f"runs: run_id (must not start with {EXAMPLE_RUN_PREFIX!r}; the same id in "
    "layer_timings), source (must not start with "
    f"{EXAMPLE_SOURCE!r}), device, host, framework, timestamp_utc, notes",
    "runs + layer_timings: every time is a FLOP-derived placeholder: put your measured "
    "times there (dgtraces collect layers writes both files)",
)
EXAMPLE_META = f"""\
# Fill in every field; see CONTRIBUTING.md.
contributor: {PLACEHOLDER_CONTRIBUTOR}
license: CC-BY-4.0          # one of: CC-BY-4.0, CC0-1.0, ODC-By-1.0, PDDL-1.0
hardware: {EXAMPLE_HARDWARE}
software: {EXAMPLE_SOFTWARE}
collection: >-
  dgtraces collect layers --model alexnet --batch-size 32 --repeats 20 --warmup 5
  --threads 16 --out DIR ; medians of 20 timed iterations after 5 warm-up iterations
devices:                    # only devices that are not in the store's devices table
  - device: {EXAMPLE_DEVICE}
    kind: gpu
    name: {EXAMPLE_DEVICE_NAME}
"""


def template_frames(model: str = "alexnet", batch_size: int = 32):
    """(runs, layer_timings) example frames for ``model`` (with grad_bytes for the check)."""
    import pandas as pd

    from ..models import layers_frame

    lay = layers_frame(model)
    per_ms = NOMINAL_GFLOP_S * 1e6  # FLOP per ms
    fwd = (lay["fwd_flops"] * batch_size / per_ms + 0.01).round(4)
    bwd = (lay["bwd_flops"] * batch_size / per_ms + 0.01).round(4)
    run_id = f"{EXAMPLE_RUN_PREFIX}{model}-bs{batch_size}"
    lt = pd.DataFrame({
        "run_id": run_id, "layer": lay["layer"], "fwd_ms": fwd, "bwd_ms": bwd,
        "fwd_p10_ms": (fwd * 0.97).round(4), "fwd_p90_ms": (fwd * 1.05).round(4),
        "bwd_p10_ms": (bwd * 0.97).round(4), "bwd_p90_ms": (bwd * 1.05).round(4),
        "comm_ms": None, "n": 20, "grad_bytes": lay["grad_bytes"],
    })
    fsum, bsum = float(fwd.sum()), float(bwd.sum())
    runs = pd.DataFrame([runs_row(
        run_id=run_id, model=model, device=EXAMPLE_DEVICE, device_kind="gpu",
        host=EXAMPLE_HOST, framework="pytorch 2.13.0", precision="fp32",
        batch_size=batch_size, threads=None, cores=16, provenance="measured",
        source=f"{EXAMPLE_SOURCE} - replace with a description of your measurement",
        collector_version="dgtraces-collect 0.1", timestamp_utc=EXAMPLE_TIMESTAMP,
        fwd_ms=round(fsum * 1.04, 4), bwd_ms=round(bsum * 1.04, 4), update_ms=1.0,
        iter_ms=round((fsum + bsum) * 1.04 + 1.0, 4),
        layer_sum_ratio=round((fsum + bsum) / ((fsum + bsum) * 1.04), 4),
        flagged=False, flag_reason=None, params=None, notes=EXAMPLE_NOTES)])
    return runs, lt


def write_template(out_dir: str | Path) -> list[Path]:
    """Write contribution.yaml, runs.csv and layer_timings.csv into ``out_dir`` (new or
    empty); returns the written paths."""
    from dgtraces.io.files import atomic_folder
    from dgtraces.store.manifest import refuse_inside_data

    out = Path(out_dir)
    refuse_inside_data(out, "--template")  # the one data-folder guard (#29 M6)
    runs, lt = template_frames()
    files = {"contribution.yaml": EXAMPLE_META.encode(),
             "runs.csv": runs.to_csv(index=False).encode(),
             "layer_timings.csv": lt.to_csv(index=False).encode()}
    with atomic_folder(out) as tmp:  # new or empty; appears whole (#36)
        for name, data in files.items():
            (tmp / name).write_bytes(data)
    return [out / name for name in files]
