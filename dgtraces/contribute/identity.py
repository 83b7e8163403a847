"""What makes contributed content "the same": run fingerprints, row keys and digests.

A run's *fingerprint* is a sha256 over its descriptive columns and its per-layer timing
rows sorted by layer (floats rounded to 1e-6 ms), so a renamed copy of a stored or staged
run is still recognised. A contribution's *digest* combines one sha256 per table over its
normalised rows (sorted columns, rows in key order, rounded floats); a per-run table
(``layer_timings``) is hashed run by run (:func:`run_hashes`), in any order of runs.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

RUN_DESCRIPTORS = ("model", "device", "framework", "precision", "batch_size", "threads")
TIMING_COLUMNS = ("layer", "fwd_ms", "bwd_ms", "fwd_p10_ms", "fwd_p90_ms", "bwd_p10_ms",
                  "bwd_p90_ms", "comm_ms", "n")
SEP = "\x1f"


def rounded(df: "pd.DataFrame") -> "pd.DataFrame":
    import numpy as np

    out = df.copy()
    with np.errstate(over="ignore", invalid="ignore"):  # huge values round to themselves
        for col in out.columns:
            if out[col].dtype.kind == "f":
                out[col] = out[col].round(6)
    return out


def joined(df: "pd.DataFrame", cols) -> list[str]:
    """Row keys: the columns' text joined by a separator (missing values as <NA>)."""
    parts = [df[c].astype("string").fillna("<NA>") for c in cols]
    return list(parts[0].str.cat(parts[1:], sep=SEP)) if len(parts) > 1 else list(parts[0])


def run_hashes(runs: "pd.DataFrame", lt: "pd.DataFrame", *, digests: bool = False
               ) -> tuple[dict[str, str], dict[str, str]]:
    """Per run of ``lt`` (which holds every row of each of its runs), from one sort by
    (run_id, layer): its fingerprint, the sha256 of (descriptors from ``runs``, timing rows;
    order- and name-independent), and with ``digests`` its digest, the sha256 of its rows
    (every column, sorted; floats rounded to 1e-6)."""
    import numpy as np
    import pandas as pd

    if lt.empty:
        return {}, {}
    lt = lt.sort_values(["run_id", "layer"], kind="stable")
    uniq, start = np.unique(lt["run_id"].astype(str).to_numpy(), return_index=True)
    spans = list(zip(uniq, start, [*start[1:], len(lt)], strict=True))
    timing = [c for c in TIMING_COLUMNS if c in lt.columns]
    rows = pd.util.hash_pandas_object(rounded(lt[timing]), index=False).to_numpy()
    desc_cols = [c for c in RUN_DESCRIPTORS if c in runs.columns]
    desc = dict(zip(runs["run_id"].astype(str), joined(runs, desc_cols), strict=True))
    prints = {str(r): hashlib.sha256(desc.get(r, "").encode() + rows[a:b].tobytes()).hexdigest()
              for r, a, b in spans}
    if not digests:
        return prints, {}
    rows = pd.util.hash_pandas_object(rounded(lt[sorted(lt.columns)]), index=False).to_numpy()
    return prints, {str(r): hashlib.sha256(rows[a:b].tobytes()).hexdigest()
                    for r, a, b in spans}


def run_fingerprints(runs: "pd.DataFrame", lt: "pd.DataFrame") -> dict[str, str]:
    """run_id -> fingerprint (:func:`run_hashes`)."""
    return run_hashes(runs, lt)[0]


def comm_keys(comm: "pd.DataFrame") -> list[str]:
    from dgtraces.tables.schema import KEYS

    return joined(comm, KEYS["comm"])


def runs_digest(name: str, columns: Iterable[str], digests: Mapping[str, str]) -> str:
    """sha256 of a per-run table from its runs' digests (:func:`run_hashes`; runs in id
    order)."""
    h = hashlib.sha256(name.encode() + b"\0" + SEP.join(sorted(columns)).encode() + b"\0")
    for run_id in sorted(digests):
        h.update(f"{run_id}{SEP}{digests[run_id]}\n".encode())
    return h.hexdigest()


def table_digest(name: str, columns: Iterable[str], chunks: Iterable["pd.DataFrame"]) -> str:
    """sha256 of one table: its name, sorted column names, then its rows' hashes (sorted
    columns, floats rounded to 1e-6); ``chunks`` are frames already in key order."""
    import pandas as pd

    cols = sorted(columns)
    h = hashlib.sha256(name.encode() + b"\0" + SEP.join(cols).encode() + b"\0")
    for df in chunks:
        h.update(pd.util.hash_pandas_object(rounded(df[cols]), index=False)
                 .to_numpy().tobytes())
    return h.hexdigest()


def frame_digest(name: str, df: "pd.DataFrame") -> str:
    """:func:`table_digest` of a table held in memory (sorted by its key here)."""
    from dgtraces.tables.schema import KEYS

    return table_digest(name, df.columns, [df.sort_values(list(KEYS[name]), kind="stable")])


def combined_digest(parts: Mapping[str, str]) -> str:
    """The contribution's digest from its tables' digests (names in sorted order)."""
    return hashlib.sha256("".join(f"{n}\0{parts[n]}\n" for n in sorted(parts)).encode()
                          ).hexdigest()


def content_digest(frames: Mapping[str, "pd.DataFrame"]) -> str:
    """The digest of tables held in memory."""
    return combined_digest({name: frame_digest(name, df) for name, df in frames.items()})
