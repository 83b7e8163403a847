"""Every published table, built from the byte-for-byte copies in ``dgtraces/reference/``.

>>> from dgtraces.importers.published import published_tables
>>> sorted(published_tables())
['comm', 'comm_fits', 'devices', 'iterations', 'layer_timings', 'runs']

- ``devices``: devices.csv (datasheet peaks), provenance published.
- ``iterations``: calibration.csv single-GPU throughputs, workers 1, nodes 1, policy
  framework-default, ``iter_ms`` = batch / img_s * 1000 where the batch is known (else null).
  calibration.csv also lists NVIDIA's ResNet-50 **v1.5** (stride on the 3x3 instead of the
  1x1 of each downsampling bottleneck); our model key ``resnet50`` is v1, so those rows are
  stored with model ``resnet50``, an ``iter_id`` containing ``:resnet50v1.5:`` and notes
  starting with ``VARIANT resnet50v1.5``; :func:`exclude_variants` drops them (the
  reconstruction must not fit v1 on them).
- ``comm`` / ``comm_fits``: the three OSU allreduce logs (:mod:`.osu`); ``comm.csv``'s rows are
  checked against them (:func:`comm_csv_disagreements`) instead of being stored twice.
- ``runs`` / ``layer_timings``: the six B-Caffe GoogLeNet logs (:mod:`.bcaffe`).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from dgtraces import reference
from dgtraces.errors import Code, DgtracesError, Failure
from dgtraces.importers.base import frame
from dgtraces.importers.shipped import BCAFFE_LOGS, OSU_LOGS

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

VARIANTS = {"resnet50v1.5": "resnet50"}
VARIANT_ID = re.compile(r":resnet50v1\.5:")


def _num(text: str) -> float | None:
    return float(text) if text.strip() else None


def devices_frame(files: tuple[str, ...] = ("devices.csv",)) -> "pd.DataFrame":
    """Shipped device rows -> ``devices`` (every shipped device is a GPU). Default: the
    byte-exact ``devices.csv`` that releases up to v0.3.0 hold; pass
    ``reference.DEVICE_FILES`` to add the ``devices_datasheet.csv`` rows (a100, h100, ...),
    which the predictor reads directly and a later release may include."""
    rows = [{
        "device": r["device"], "name": r["name"],
        "kind": "gpu" if re.search(r"NVIDIA|Tesla|GPU", r["name"]) else "cpu",
        "peak_fp32_tflops": _num(r["peak_fp32_tflops"]),
        "peak_fp16_tensor_tflops": _num(r["peak_fp16_tensor_tflops"]),
        "mem_bandwidth_gb_s": _num(r["mem_bandwidth_gb_s"]),
        "memory_gb": _num(r["memory_gb"]), "provenance": "published",
        "source": r["source"], "notes": r["notes"] or None,
    } for name in files for r in reference.rows(name)]
    return frame("devices", rows)


def calibration_iterations() -> "pd.DataFrame":
    """calibration.csv -> ``iterations`` rows (provenance published, source verbatim)."""
    rows, seen = [], set()
    for r in reference.rows("calibration.csv"):
        batch = int(r["batch_size"]) if r["batch_size"].strip() else None
        img_s = float(r["img_per_s"])
        model = VARIANTS.get(r["model"], r["model"])
        iter_id = ":".join(["published", "calibration", r["device"], r["model"], r["framework"],
                            r["phase"], r["precision"], f"b{batch}" if batch else "bNA"])
        if iter_id in seen:
            raise DgtracesError(f"calibration.csv: duplicate row {iter_id}", code=Code.DUPLICATE)
        seen.add(iter_id)
        notes = []
        if r["model"] != model:
            notes.append(f"VARIANT {r['model']}: not our {model} (v1) architecture; "
                         f"excluded from fits of {model} (see exclude_variants)")
        notes.append(f"gpus={r['gpus']}; throughput as published")
        notes.append("iter_ms = batch_size / img_s * 1000 (derived)" if batch
                     else "batch size not stated, so no iter_ms")
        if r["phase"] == "inference":
            notes.append("iter_ms is the forward-only time of one batch")
        if r["notes"]:
            notes.append("csv notes: " + r["notes"])
        rows.append({
            "iter_id": iter_id, "model": model, "device": r["device"],
            "framework": r["framework"], "precision": r["precision"], "phase": r["phase"],
            "batch_size": batch, "workers": int(r["gpus"]), "nodes": 1,
            "interconnect": "none (single GPU)", "policy": "framework-default",
            "iter_ms": batch / img_s * 1000.0 if batch else None, "throughput_img_s": img_s,
            "provenance": "published", "source": r["source"], "notes": "; ".join(notes),
        })
    return frame("iterations", rows)


def is_variant(iterations: "pd.DataFrame") -> "pd.Series":
    """True for rows of a variant architecture (e.g. ResNet-50 v1.5), by ``iter_id``."""
    return iterations["iter_id"].str.contains(VARIANT_ID)


def exclude_variants(iterations: "pd.DataFrame") -> "pd.DataFrame":
    """Only the rows whose architecture is exactly the model key's."""
    return iterations[~is_variant(iterations)].reset_index(drop=True)


def comm_csv_disagreements(comm: "pd.DataFrame") -> list[Failure]:
    """comm.csv rows that differ from (or are missing in) the OSU log points in ``comm``,
    compared at the precision comm.csv prints (it rounds 2251.96 us to 2252)."""
    out = []
    for i, r in enumerate(reference.rows("comm.csv")):
        hit = comm[(comm["workers"] == int(r["processes"]))
                   & (comm["message_bytes"] == int(r["message_bytes"]))
                   & (comm["collective"] == r["collective"])
                   & comm["source"].str.contains(r["source"].split()[-1], regex=False)]
        text = r["time_us"].strip()
        want = float(text) / 1000.0
        digits = len(text.split(".")[1]) if "." in text else 0
        if len(hit) != 1 or round(hit["time_ms"].iloc[0] * 1000.0, digits) != float(text):
            found = "missing" if hit.empty else repr(hit["time_ms"].tolist())
            out.append(Failure(Code.PLAUSIBILITY, "comm.csv row disagrees with its log",
                               file="comm.csv", row=i, column="time_us",
                               expected=f"{want} ms", found=found))
    return out


def published_tables() -> dict[str, "pd.DataFrame"]:
    """devices, iterations, comm, comm_fits, runs and layer_timings, validated together."""
    import pandas as pd

    from dgtraces.importers import bcaffe, osu
    from dgtraces.tables.checks import validate_tables

    osus = [osu.import_log(reference.path(f"bcaffe/allreduce{w}.log")) for w in OSU_LOGS]
    comm = pd.concat([o.comm for o in osus], ignore_index=True)
    bad = comm_csv_disagreements(comm)
    if bad:
        raise DgtracesError("reference comm.csv disagrees with the OSU logs",
                            code=Code.PLAUSIBILITY, failures=bad)
    traces = [bcaffe.import_log(reference.path(f"bcaffe/{name}.log")) for name in BCAFFE_LOGS]
    frames = {
        "devices": devices_frame(),
        "iterations": calibration_iterations(),
        "comm": comm,
        "comm_fits": pd.concat([o.comm_fits for o in osus], ignore_index=True),
        "runs": pd.concat([t.runs for t in traces], ignore_index=True),
        "layer_timings": pd.concat([t.layer_timings for t in traces], ignore_index=True),
    }
    return validate_tables(frames)
