"""Kineto stage 1, parse: a (gzipped) Chrome trace -> :class:`Event` list + metadata.

Older traces name categories ``Operator``/``Kernel``/``Runtime``; they are normalised to the
current names (``cpu_op``, ``kernel``, ``cuda_runtime``) so later stages see one vocabulary.
"""

from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from dgtraces.errors import Code, DgtracesError, Failure
from dgtraces.importers.base import read_text
from dgtraces.io.bounded import gunzip, json_loads

EVAL = "autograd::engine::evaluate_function:"
MODULE = "nn.Module: "
STEP = re.compile(r"^ProfilerStep#\d+$")
CATEGORIES = {"operator": "cpu_op", "kernel": "kernel", "runtime": "cuda_runtime",
              "memset": "gpu_memset", "memcpy": "gpu_memcpy"}
GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")


@dataclass(frozen=True)
class Event:
    name: str
    cat: str
    tid: tuple
    ts: float
    dur: float  # kept as recorded: ts + dur - ts loses precision at trace-clock magnitudes
    args: dict = field(compare=False, hash=False)

    @property
    def end(self) -> float:
        return self.ts + self.dur


# The shipped reference traces (dgtraces/reference/) are parsed once per process: the V100
# traces take ~0.4 s each to decode, and the reconstruction, its evaluation and the tests read
# them again and again (issue #36). Keyed by the resolved path and the file's identity (size,
# mtime, inode): a file changed in place is parsed again. A user's own file is never kept.
_SHIPPED: dict[Path, tuple[tuple[int, int, int], tuple[list[Event], dict, str]]] = {}


def load_trace(path) -> tuple[list[Event], dict, str]:
    """Complete ('X') events of a .json or .json.gz Chrome trace, its metadata, sha256.

    Each call returns a new list and a new metadata dict (the events are frozen)."""
    import copy

    from dgtraces.reference import ROOT

    path = Path(path)
    if not path.is_file():
        raise DgtracesError(f"{path}: no such file", code=Code.NOT_FOUND)
    resolved = path.resolve()
    if not resolved.is_relative_to(ROOT):
        return _parse(path)
    st = resolved.stat()
    ident = (st.st_size, st.st_mtime_ns, st.st_ino)
    kept = _SHIPPED.get(resolved)
    if kept is None or kept[0] != ident:
        kept = _SHIPPED[resolved] = (ident, _parse(path))
    events, meta, digest = kept[1]
    return list(events), copy.deepcopy(meta), digest


def _parse(path: Path) -> tuple[list[Event], dict, str]:
    import hashlib

    from dgtraces.importers.base import read_input

    data = read_input(path)  # size-checked before reading (#29)
    digest = hashlib.sha256(data).hexdigest()
    try:
        if data[:2] == b"\x1f\x8b":
            data = gunzip(data, str(path))  # bounded: BAD_FILE past the size limit
        doc = json_loads(data.decode("utf-8"), str(path))  # too deep: BAD_FILE
    except (OSError, EOFError, UnicodeDecodeError, ValueError) as exc:
        raise DgtracesError(f"{path}: not a (gzipped) JSON Chrome trace ({exc})",
                            code=Code.BAD_FILE) from None
    raw = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(raw, list):
        raise DgtracesError(f"{path}: no traceEvents list", code=Code.BAD_FILE)
    events = []
    for i, e in enumerate(raw):
        if isinstance(e, dict) and e.get("ph") == "X" and "ts" in e and "dur" in e:
            try:
                ts, dur = float(e["ts"]), float(e["dur"])
            except (TypeError, ValueError, OverflowError):  # 10**400 overflows (#29)
                ts = dur = float("nan")
            if not (math.isfinite(ts) and math.isfinite(dur) and dur >= 0):
                raise DgtracesError(f"{path}: event {i} ({str(e.get('name'))[:60]!r}) has no "
                                    f"usable ts/dur", code=Code.BAD_FILE,
                                    failures=[Failure(Code.BAD_FILE, "ts/dur not finite numbers",
                                                      file=str(path), row=i,
                                                      found=repr((e["ts"], e["dur"]))[:80])])
            args = e.get("args")
            cat = str(e.get("cat", ""))
            events.append(Event(str(e.get("name", "")), CATEGORIES.get(cat.lower(), cat),
                                (e.get("pid"), e.get("tid")), ts, dur,
                                args if isinstance(args, dict) else {}))
    meta = doc if isinstance(doc, dict) else {}
    return events, {k: v for k, v in meta.items() if k != "traceEvents"}, digest


def read_map(path, layers: set[str], model: str) -> dict[str, str]:
    """MAP CSV (columns scope, layer) -> {scope: layer}; unknown layers are UNKNOWN_LAYER."""
    text, _ = read_text(path)
    reader = csv.DictReader(io.StringIO(text))
    if not reader.fieldnames or not {"scope", "layer"} <= set(reader.fieldnames):
        raise DgtracesError(f"{path}: need a CSV header 'scope,layer'", code=Code.BAD_FILE)
    out, failures = {}, []
    for i, row in enumerate(reader):
        scope, layer = (row["scope"] or "").strip(), (row["layer"] or "").strip()
        if layer not in layers:
            from dgtraces.names import did_you_mean, listing

            failures.append(Failure(Code.UNKNOWN_LAYER, f"not a layer of {model}"
                                    + did_you_mean(layer, layers), file=str(path), row=i,
                                    column="layer", expected=listing(layers),
                                    found=repr(layer)))
        out[scope] = layer
    if failures:
        raise DgtracesError(f"{path}: {len(failures)} map row(s) name unknown layers",
                            code=Code.UNKNOWN_LAYER, failures=failures)
    return out


