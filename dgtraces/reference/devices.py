"""Device rows: the published datasheet figures and the key a GPU's name maps to (torch-free).

``known_rows()`` reads ``reference.device_rows()`` (the byte-exact ``devices.csv`` plus
``devices_datasheet.csv``; a key in both keeps the devices.csv row). ``device_key(name)``
derives a key from a GPU name as ``torch.cuda.get_device_name`` or an nccl-tests header
prints it: vendor words dropped, the rest lower-cased and joined by ``-`` (``NVIDIA H200`` ->
``h200``, ``Tesla V100-SXM2-16GB`` -> ``v100-sxm2-16gb``); the longest known key that the
derived one equals or starts with (followed by ``-``) wins (``v100-sxm2-16gb`` -> ``v100``),
unless the rest names another memory size than that row's. ``device_entry(name)`` is the
``devices`` row for a contribution: the datasheet figures of the matched key, or the name
and kind only for a GPU the package has no figures for.
"""

from __future__ import annotations

import re

VENDOR_WORDS = ("nvidia", "tesla", "geforce", "quadro", "corporation")
FIGURES = ("peak_fp32_tflops", "peak_fp16_tensor_tflops", "mem_bandwidth_gb_s", "memory_gb")


def known_rows() -> dict[str, dict[str, str]]:
    """device key -> its reference row (``reference.device_rows()``: devices.csv, then
    devices_datasheet.csv; the first row of a key wins)."""
    from dgtraces.reference import device_rows

    out: dict[str, dict[str, str]] = {}
    for row in device_rows():
        out.setdefault(row["device"], row)
    return out


def slug(gpu_name: str) -> str:
    """``NVIDIA GeForce RTX 3090`` -> ``rtx-3090`` (see the module doc)."""
    words = re.split(r"[^a-z0-9]+", gpu_name.lower())
    kept = [w for w in words if w and w not in VENDOR_WORDS]
    return "-".join(kept) or "gpu"


def device_key(gpu_name: str, known: dict[str, dict] | None = None) -> str:
    """The ``devices`` key for a GPU name: the longest known key matching its slug, else
    the slug itself. A prefix match whose rest names another memory size than the row
    (``a100-sxm4-40gb`` vs the 80 GB ``a100`` row) is no match: its figures differ."""
    known = known_rows() if known is None else known
    s = slug(gpu_name)
    hits = [k for k in known if s == k or (s.startswith(k + "-")
                                           and _same_memory(s[len(k) + 1:], known[k]))]
    return max(hits, key=len) if hits else s


def _same_memory(rest: str, row: dict) -> bool:
    sizes = re.findall(r"(\d+)gb", rest)
    mem = row.get("memory_gb") if isinstance(row, dict) else None
    return not sizes or not mem or all(float(x) == float(mem) for x in sizes)


def _number(text: str | None) -> float | None:
    return float(text) if text not in (None, "") else None


def device_entry(gpu_name: str, memory_gb: float | None = None) -> dict:
    """The ``devices`` row for a GPU: key, name, kind, and the datasheet figures and source
    where the package knows the device (``datasheet`` says which)."""
    known = known_rows()
    key = device_key(gpu_name, known)
    row = known.get(key)
    if row is None:
        return {"device": key, "name": gpu_name, "kind": "gpu", "datasheet": False,
                **{f: None for f in FIGURES}, "memory_gb": memory_gb,
                "source": f"name as reported by the driver ({gpu_name}); no datasheet "
                          "figures in dgtraces/reference"}
    return {"device": key, "name": row["name"], "kind": "gpu", "datasheet": True,
            **{f: _number(row.get(f)) for f in FIGURES}, "source": row["source"]}


HOST_LINK_FILE = "host_links.csv"
UNKNOWN_HOST_LINK = "pcie3"  # a GPU without a host_links.csv row (said so where used)


def host_link(device: str | None) -> tuple[str, str]:
    """``(link, why)``: the host link of a GPU's input copy, its row of ``host_links.csv``
    (the GPU's own host interface as its datasheet states it: a host of a lower PCIe
    generation copies slower, ``--h2d-link`` says so), else :data:`UNKNOWN_HOST_LINK`,
    stated as assumed."""
    from dgtraces.reference import rows

    for row in rows(HOST_LINK_FILE):
        if row["device"] == device:
            return row["h2d_link"], (f"{device}'s host interface, {row['stated']} "
                                     f"({HOST_LINK_FILE}): {row['source']}")
    return UNKNOWN_HOST_LINK, (f"no {HOST_LINK_FILE} row for {device}: "
                               f"{UNKNOWN_HOST_LINK} assumed")
