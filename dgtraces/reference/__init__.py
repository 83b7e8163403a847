"""Paths to the shipped copies of the published reference figures (see README.md here)."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent
BCAFFE = ROOT / "bcaffe"


def path(name: str) -> Path:
    """Path of a reference file, e.g. ``path("calibration.csv")`` or ``path("bcaffe/tmpcomm.log")``."""
    p = ROOT / name
    if not p.is_file():
        from ..errors import StoreError

        raise StoreError(f"reference file {name!r} not found under {ROOT}")
    return p
