"""B-Caffe ``distributed.cpp`` per-blob logs -> ``runs`` + ``layer_timings`` (published).

Each glog line ``... distributed.cpp:112] [blob_id, numel, compute_us, comm_us(, merged_us)]``
describes one learnable blob in Caffe's parameter order; a block of lines with ids 0..N-1 is
one logged iteration. Per layer: ``bwd_ms`` = the layer's ``compute_us`` (Caffe Backward() of
the owning layer, repeated on its weight and bias lines, so taken once); ``comm_ms`` = sum of
its blobs' ``comm_us`` (device-to-host copy + MPI allreduce + scaling + copy back, not pure
network time); ``fwd_ms`` is null (not logged); ``n`` = distinct blocks averaged.

Blocks whose times are all zero (sizes only) are skipped. A block whose compute/comm columns
equal an earlier block's is a re-print of the same iteration (tmp8comm, tmp8ocomm print every
iteration twice, the first time before the merged-bucket column is filled) and is not counted
again; its fifth column replaces the earlier print's. The fifth column (``merged_us``: time of
the merged gradient bucket that ends at this blob, 0 where the gradient was merged into a
later bucket) is kept per blob in ``params_json``.

Every blob size is checked against :func:`dgtraces.models.blobs`: B-Caffe pads each blob to a
multiple of 64 elements, so the true size or its 64-padded size is accepted; anything else is
a ``GRAD_MISMATCH`` naming line, blob, layer, expected and found.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dgtraces.errors import Code, DgtracesError, Failure
from dgtraces.importers.base import TraceImport, collector_version, frame, read_text
from dgtraces.importers.shipped import citation
from dgtraces.tables.runrow import runs_row
from dgtraces.values import positive_int

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

ALIGN = 64
LINE = re.compile(r"^[IWEF](\d{2})(\d{2}) (\d{2}:\d{2}:\d{2})\.\d+\s+\d+\s+distributed\.cpp:\d+\]"
                  r"\s*\[(?P<body>[^\]]*)\]\s*$", re.ASCII)
MARKER = "distributed.cpp:"
# Settings stated nowhere in the shipped logs; inferred from the group's scripts (README.md).
INFERRED: dict[str, Any] = {"device": "k80", "batch_size": 64, "interconnect": "10GbE",
                            "year": 2017}
FIELDS = ("blob_id", "numel", "compute_us", "comm_us", "merged_us")


@dataclass(frozen=True)
class BlobLine:
    line: int
    blob: int
    numel: int
    compute_us: float
    comm_us: float
    merged_us: float | None
    stamp: str


@dataclass
class BcaffeImport(TraceImport):
    """Result of one log: the two tables plus what happened to every block."""

    blocks_total: int
    blocks_zero: int
    blocks_duplicate: int
    blocks_used: int
    padded_blobs: int
    ignored_lines: int
    inferred: dict = field(default_factory=dict)


def _bad(file: str, line: int, msg: str, found: str, expected: str = "") -> DgtracesError:
    return DgtracesError(f"{file} line {line}: {msg}", code=Code.BAD_FILE, failures=[
        Failure(Code.BAD_FILE, msg, file=file, row=line, expected=expected or None, found=found)])


def parse_blocks(text: str, file: str = "<log>") -> tuple[list[list[BlobLine]], int]:
    """Split a log into blocks of blob lines; returns (blocks, ignored non-blob lines)."""
    blocks: list[list[BlobLine]] = []
    ignored = 0
    for lineno, raw in enumerate(text.splitlines(), start=1):
        if MARKER not in raw:
            ignored += bool(raw.strip())
            continue
        m = LINE.match(raw.strip())
        if not m:
            raise _bad(file, lineno, "malformed distributed.cpp line", repr(raw[:120]),
                       "glog prefix + [blob_id, numel, compute_us, comm_us(, merged_us)]")
        parts = [p.strip() for p in m["body"].split(",")]
        if len(parts) not in (4, 5):
            raise _bad(file, lineno, "wrong number of fields", str(len(parts)), "4 or 5")
        try:
            if not m["body"].isascii():  # int("٣") is 3 (#36: ASCII digits only)
                raise ValueError
            blob, numel = int(parts[0]), int(parts[1])
            times = [float(p) for p in parts[2:]]
        except ValueError:
            raise _bad(file, lineno, "non-numeric field", repr(m["body"]),
                       "integers id, numel; numbers for times") from None
        if numel <= 0 or blob < 0 or any(t < 0 or t != t for t in times):
            raise DgtracesError(f"{file} line {lineno}: negative or empty value",
                                code=Code.PLAUSIBILITY, failures=[Failure(
                                    Code.PLAUSIBILITY, "negative value", file=file, row=lineno,
                                    found=repr(m["body"]))])
        stamp = f"{m[1]}-{m[2]}T{m[3]}"
        item = BlobLine(lineno, blob, numel, times[0], times[1],
                        times[2] if len(times) == 3 else None, stamp)
        if blob == 0:
            blocks.append([])
        elif not blocks or blocks[-1][-1].blob != blob - 1:
            prev = "start of block" if not blocks else f"blob {blocks[-1][-1].blob}"
            raise _bad(file, lineno, f"blob id out of order after {prev}", str(blob),
                       str(0 if not blocks else blocks[-1][-1].blob + 1))
        blocks[-1].append(item)
    return blocks, ignored


def check_block(block: list[BlobLine], model: str, file: str = "<log>") -> int:
    """Check blob count and sizes against the model; returns how many blobs are padded."""
    from dgtraces.models import blobs

    expected = blobs(model)
    if len(block) != len(expected):
        raise DgtracesError(
            f"{file}: block at line {block[0].line} lists {len(block)} blobs, model {model} "
            f"has {len(expected)} (wrong model?)", code=Code.GRAD_MISMATCH,
            failures=[Failure(Code.GRAD_MISMATCH, "blob count", file=file, row=block[0].line,
                              expected=str(len(expected)), found=str(len(block)))])
    failures, padded = [], 0
    for item, blob in zip(block, expected, strict=True):
        pad = blob.padded(ALIGN)
        if item.numel == pad and pad != blob.numel:
            padded += 1
        elif item.numel != blob.numel:
            failures.append(Failure(
                Code.GRAD_MISMATCH, f"blob {item.blob} ({blob.layer} {blob.role}) size",
                file=file, row=item.line, column="numel",
                expected=f"{blob.numel} or padded {pad}", found=str(item.numel)))
    if failures:
        f = failures[0]
        raise DgtracesError(f"{file} line {f.row}: {f.message} {f.found}, expected "
                            f"{f.expected} for model {model}", code=Code.GRAD_MISMATCH,
                            failures=failures)
    return padded


def _layer_times(block: list[BlobLine], model: str, file: str) -> dict[str, tuple[float, float]]:
    """layer -> (compute_us, summed comm_us) of one block."""
    from dgtraces.models import blobs

    out: dict[str, tuple[float, float]] = {}
    for item, blob in zip(block, blobs(model), strict=True):
        if blob.layer in out:
            compute, comm = out[blob.layer]
            if abs(compute - item.compute_us) > 1e-6 * max(compute, 1.0):
                raise DgtracesError(
                    f"{file} line {item.line}: compute_us of {blob.layer} differs between its "
                    f"blobs", code=Code.PLAUSIBILITY, failures=[Failure(
                        Code.PLAUSIBILITY, "compute_us differs within a layer", file=file,
                        row=item.line, expected=str(compute), found=str(item.compute_us))])
            out[blob.layer] = (compute, comm + item.comm_us)
        else:
            out[blob.layer] = (item.compute_us, item.comm_us)
    return out


def select_blocks(blocks: list[list[BlobLine]]) -> tuple[list[list[BlobLine]], int, int]:
    """(distinct non-zero blocks, all-zero count, duplicate re-prints count)."""
    kept: list[list[BlobLine]] = []
    seen: dict[tuple, int] = {}
    zero = dup = 0
    for block in blocks:
        if all(b.compute_us == 0 and b.comm_us == 0 and not b.merged_us for b in block):
            zero += 1
            continue
        key = tuple((b.compute_us, b.comm_us) for b in block)
        if key in seen:  # the same iteration printed again: keep its later fifth column
            dup += 1
            kept[seen[key]] = block
            continue
        seen[key] = len(kept)
        kept.append(block)
    return kept, zero, dup


def _shipped_settings(name: str) -> dict:
    """Settings of a shipped log inferred from its name and the group's scripts."""
    m = re.match(r"tmp(\d*)(o?)comm\.log$", name)
    workers = int(m[1]) if m and m[1] else 2
    out = dict(INFERRED, workers=workers)
    out["policy"] = ("mgwfbp (merged-gradient WFBP, most likely)" if m and m[2]
                     else "not stated (per-blob allreduce as logged)")
    return out


def _stamp(stamp: str, year: int | None) -> str:
    if year is None:
        from dgtraces.io.files import utc_now

        return utc_now()
    return f"{year}-{stamp}Z"


@dataclass(frozen=True)
class Parsed:
    """Stage 1 (parse): the log's blocks and which of them count."""

    file: str
    blocks: list[list[BlobLine]]
    used: list[list[BlobLine]]
    zero: int
    duplicate: int
    ignored: int


@dataclass(frozen=True)
class Attributed:
    """Stage 2 (attribute): per-layer times averaged over the used blocks."""

    layers: dict[str, tuple[float, float]]  # layer -> (bwd_ms, comm_ms)
    padded: int
    n: int


def parse(text: str, file: str = "<log>") -> Parsed:
    """Stage 1: blob lines -> blocks; all-zero blocks and re-prints set aside."""
    blocks, ignored = parse_blocks(text, file)
    if not blocks:
        raise DgtracesError(f"{file}: no distributed.cpp blob lines", code=Code.EMPTY)
    used, zero, dup = select_blocks(blocks)
    if not used:
        raise DgtracesError(f"{file}: every block is all zeros (sizes only)", code=Code.EMPTY)
    return Parsed(file, blocks, used, zero, dup, ignored)


def attribute(parsed: Parsed, model: str) -> Attributed:
    """Stage 2: every block checked against the model's blobs, then each used block's blob
    times attributed to layers and averaged (bwd once per layer, comm summed over blobs)."""
    padded = 0
    for block in parsed.blocks:
        padded = check_block(block, model, parsed.file)
    per_block = [_layer_times(b, model, parsed.file) for b in parsed.used]
    n = len(per_block)
    layers = {layer: (sum(t[layer][0] for t in per_block) / n / 1000.0,
                      sum(t[layer][1] for t in per_block) / n / 1000.0)
              for layer in per_block[0]}
    return Attributed(layers, padded, n)


def _settings(file: str, shipped: str | None, device, batch_size, workers
              ) -> tuple[dict, dict]:
    """(settings, inferred): what the caller gave wins; a shipped log's missing settings
    are the INFERRED ones (labelled so); any other log must give device and batch size."""
    inferred = _shipped_settings(shipped) if shipped else {}
    given = {"device": device, "batch_size": batch_size, "workers": workers}
    missing = [k for k in ("device", "batch_size") if given[k] is None and k not in inferred]
    if missing:
        raise DgtracesError(f"{file}: not a shipped log, so give "
                            f"--{missing[0].replace('_', '-')}", code=Code.BAD_INPUT)
    for k, v in given.items():
        if v is not None:
            if k != "device":
                given[k] = positive_int(k, v, text_ok=True)
            inferred.pop(k, None)
    settings = {**{k: v for k, v in inferred.items() if k != "year"},
                **{k: v for k, v in given.items() if v is not None}}
    return settings, inferred


def _notes(five: bool, inferred: dict) -> str:
    labels = ", ".join(f"{k} {v}" for k, v in inferred.items() if k != "year")
    notes = ("B-Caffe per-blob log: bwd_ms per layer = Caffe Backward() time (compute_us, "
             "taken once per layer); comm_ms = sum of the layer's blobs' comm_us (D2H copy + "
             "MPI allreduce + scaling + H2D copy, not pure network time); no forward, update "
             "or iteration times are logged; runs.bwd_ms is the sum of the layer times. "
             "Blob sizes checked against the model (B-Caffe pads blobs to 64 elements).")
    if five:
        notes += (" Fifth field merged_us (time of the merged gradient bucket ending at the "
                  "blob, 0 where merged into a later one) kept in params_json.")
    if labels:
        notes += f" INFERRED, not in the log: {labels}; timestamp year 2017 inferred, " \
                 "time zone not logged."
    return notes


def build_rows(parsed: Parsed, attributed: Attributed, *, model: str, run_id: str,
               source: str, digest: str, shipped: str | None, settings: dict,
               inferred: dict, file_name: str) -> tuple["pd.DataFrame", "pd.DataFrame"]:
    """Stage 3: the ``runs`` row and the ``layer_timings`` rows (schema-valid frames)."""
    timings: list[dict[str, Any]] = [
        {"run_id": run_id, "layer": layer, "bwd_ms": bwd, "comm_ms": comm, "n": attributed.n}
        for layer, (bwd, comm) in attributed.layers.items()]
    used = parsed.used
    five = used[0][0].merged_us is not None
    params = {
        "file": shipped or file_name, "sha256": digest, "blobs": len(used[0]),
        "padded_blobs": attributed.padded, "pad_align_elements": ALIGN,
        "blocks": {"total": len(parsed.blocks), "all_zero": parsed.zero,
                   "duplicate_reprint": parsed.duplicate, "used": len(used)},
        "fields": list(FIELDS[:5 if five else 4]),
        "inferred": dict(inferred),
        "settings": settings,
    }
    if five:
        params["merged_us_by_blob"] = [[b.merged_us for b in blk] for blk in used]
    year = INFERRED["year"] if shipped else None
    run = runs_row(
        run_id=run_id, model=model, device=str(settings["device"]),
        device_kind="gpu" if shipped or "cpu" not in str(settings["device"]) else "cpu",
        framework="B-Caffe (Caffe fork, distributed.cpp)", precision="fp32",
        batch_size=int(settings["batch_size"]), provenance="published", source=source,
        collector_version=collector_version("bcaffe"),
        timestamp_utc=_stamp(used[0][0].stamp, year),
        bwd_ms=sum(t["bwd_ms"] for t in timings), flagged=False, params=params,
        notes=_notes(five, inferred))
    return frame("runs", [run]), frame("layer_timings", timings)


def import_log(path, model: str = "googlenet", *, run_id: str | None = None,
               source: str | None = None, device: str | None = None,
               batch_size: int | None = None, workers: int | None = None) -> BcaffeImport:
    """Import one B-Caffe log: :func:`parse`, :func:`attribute`, :func:`build_rows`. For a
    shipped log (recognised by sha256) device, batch size, workers and interconnect default
    to the INFERRED settings and are labelled so; for any other log ``source``, ``device``
    and ``batch_size`` must be given."""
    from dgtraces.models import get_spec

    get_spec(model)  # UNKNOWN_MODEL early
    path = Path(path)
    text, digest = read_text(path)
    source, shipped = citation(digest, source, path)
    parsed = parse(text, str(path))
    attributed = attribute(parsed, model)
    settings, inferred = _settings(str(path), shipped, device, batch_size, workers)
    # shipped logs keep their released ids (bcaffe-googlenet-tmpcomm, in v0.3.0); any other
    # file's id also carries its content hash, so two logs named alike do not collide
    stem = (shipped.removesuffix(".log") if shipped
            else f"{path.name.split('.')[0]}-{digest[:8]}")
    run_id = run_id or f"bcaffe-{model}-{re.sub(r'[^A-Za-z0-9._-]', '-', stem)}"
    runs, timings = build_rows(parsed, attributed, model=model, run_id=run_id, source=source,
                               digest=digest, shipped=shipped, settings=settings,
                               inferred=inferred, file_name=path.name)
    return BcaffeImport(runs, timings, len(parsed.blocks), parsed.zero, parsed.duplicate,
                        len(parsed.used), attributed.padded, parsed.ignored, inferred)
