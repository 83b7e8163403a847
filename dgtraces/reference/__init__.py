"""Paths to the shipped copies of the published reference figures (see README.md here)."""

from functools import cache
from pathlib import Path

from dgtraces.errors import Code

ROOT = Path(__file__).resolve().parent
BCAFFE = ROOT / "bcaffe"


def path(name: str) -> Path:
    """Path of a reference file, e.g. ``path("calibration.csv")`` or
    ``path("bcaffe/tmpcomm.log")``."""
    p = ROOT / name
    if not p.is_file():
        from ..errors import StoreError

        raise StoreError(f"reference file {name!r} not found under {ROOT}")
    return p


DEVICE_FILES = ("devices.csv", "devices_datasheet.csv")


def device_rows() -> list[dict[str, str]]:
    """Every shipped device row: ``devices.csv`` (byte-exact copy of the shared figures)
    then ``devices_datasheet.csv`` (datasheet rows added here, a source on each row).
    A key in both files is an error (code INTEGRITY)."""
    out = [r for name in DEVICE_FILES for r in rows(name)]
    keys = [r["device"] for r in out]
    dup = sorted({k for k in keys if keys.count(k) > 1})
    if dup:
        from ..errors import DgtracesError

        raise DgtracesError(f"device keys listed twice in {DEVICE_FILES}: {dup}",
                            code=Code.INTEGRITY)
    return out


def gpu_devices() -> set[str]:
    """Device keys of the published GPU figures (:func:`device_rows`)."""
    return {row["device"] for row in device_rows()}


def rows(name: str) -> list[dict[str, str]]:
    """Rows of a shipped CSV (``csv.DictReader``), read once per process; fresh dicts."""
    return [dict(r) for r in _csv_rows(name)]


@cache
def _csv_rows(name: str) -> tuple[dict[str, str], ...]:
    import csv

    with open(path(name), encoding="utf-8", newline="") as fh:
        return tuple(csv.DictReader(fh))

