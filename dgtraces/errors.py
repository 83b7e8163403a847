"""Typed errors with stable reason codes. Tests and callers match ``.code``, never text.

Library code raises these; only the CLI prints them (``error.report()``) and picks exit codes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

# Reason codes. Add new ones here so they stay documented in one place.
CODES = {
    "BAD_INPUT": "an argument or value is out of its allowed range",
    "SCHEMA": "a table breaks its pandera schema (dtype, range, nulls, uniqueness)",
    "CROSS_TABLE": "a key that must exist in another table does not",
    "UNKNOWN_MODEL": "the model name is not one of the shipped architectures",
    "UNKNOWN_LAYER": "a layer name does not exist in the model's structure",
    "UNKNOWN_DEVICE": "the device is not in the devices table",
    "DEVICE_MISMATCH": "a row's device_kind differs from the kind its device is known as",
    "UNKNOWN_LINK": "the interconnect preset is not in the links table",
    "GRAD_MISMATCH": "a gradient/blob size disagrees with the model structure",
    "PLAUSIBILITY": "values are well-typed but implausible (negative, inconsistent totals)",
    "DUPLICATE": "the same content is already in the store or in staging",
    "UNSAFE_ARCHIVE": "an archive has unsafe members (traversal, links, bombs)",
    "BAD_FILE": "a file cannot be read (encoding, truncated, wrong format)",
    "IO_ERROR": "the operating system refused a read or write (missing folder, permissions, "
                "disk full)",
    "LOCKED": "another process holds a lock (the store lock or the measurement lock)",
    "METADATA": "contribution.yaml lacks a required field or has a bad value",
    "NOT_FOUND": "a release, table, run or file does not exist",
    "VERSION": "a release version is malformed, exists already, or is not newer",
    "INTEGRITY": "a stored file's bytes differ from its manifest",
    "EMPTY": "there is nothing to do (e.g. empty staging area)",
    "MISSING_DEPENDENCY": "an optional dependency is not installed",
    "SQL": "a query failed or was refused by the sandbox",
    "COLLECT": "a measurement failed or was inconsistent",
    "NO_CALIBRATION": "no calibration rows exist for the requested device",
    "INCOMPLETE_TRACE": "a layer trace lacks timings for layers of its model",
    "NO_LAYER_TIMINGS": "a run has whole-model figures only, no per-layer timings",
    "MODEL_MISMATCH": "an imported log or trace is of another network than the model named",
    "QUERY_LIMIT": "a query ran past its time limit or memory limit",
}


@dataclass(frozen=True)
class Failure:
    """One concrete problem, located as precisely as known."""

    code: str
    message: str
    file: str | None = None
    row: int | None = None
    column: str | None = None
    expected: str | None = None
    found: str | None = None

    def line(self) -> str:
        where = []
        if self.file is not None:
            where.append(f"file {self.file}")
        if self.row is not None:  # 0-based data row; in a CSV the header is line 1
            csv_line = self.file is not None and str(self.file).lower().endswith(".csv")
            where.append(f"row {self.row}" + (f" (line {self.row + 2})" if csv_line else ""))
        if self.column is not None:  # "--name": a command-line option (named by the CLI)
            where.append(f"option {self.column}" if self.column.startswith("--")
                         else f"column {self.column!r}")
        loc = ", ".join(where)
        text = f"[{self.code}] " + (f"{loc}: " if loc else "") + self.message
        sides = [f"{name} {value}" for name, value in (("expected", self.expected),
                                                        ("found", self.found))
                 if value is not None]
        if sides:
            text += f" ({', '.join(sides)})"
        return text


class DgtracesError(Exception):
    """Base class. ``code`` is a key of :data:`CODES`; ``failures`` lists located problems."""

    code = "BAD_INPUT"

    def __init__(self, message: str, *, code: str | None = None,
                 failures: Iterable[Failure] = (), hint: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code
        if self.code not in CODES:
            raise ValueError(f"unregistered reason code {self.code!r}")
        self.message = message
        self.failures: list[Failure] = list(failures)
        self.hint = hint

    @property
    def codes(self) -> set[str]:
        return {self.code} | {f.code for f in self.failures}

    def report(self, limit: int = 500) -> str:
        lines = [f"error [{self.code}]: {self.message}"]
        for f in self.failures[:limit]:
            lines.append("  - " + f.line())
        if len(self.failures) > limit:
            lines.append(f"  ... and {len(self.failures) - limit} more")
        if self.hint:
            lines.append(f"hint: {self.hint}")
        return "\n".join(lines)


class ValidationError(DgtracesError):
    code = "SCHEMA"


class UnknownModelError(DgtracesError):
    code = "UNKNOWN_MODEL"

    def __init__(self, name: str, known: Sequence[str]) -> None:
        super().__init__(f"unknown model {name!r}; known models: {', '.join(known)}",
                         failures=[Failure("UNKNOWN_MODEL", "unknown model", column="model",
                                           expected=" | ".join(known), found=repr(name))])


class StoreError(DgtracesError):
    code = "NOT_FOUND"


class IntegrityError(StoreError):
    code = "INTEGRITY"


class MissingDependencyError(DgtracesError):
    code = "MISSING_DEPENDENCY"

    def __init__(self, package: str, extra: str, purpose: str) -> None:
        hint = f"pip install 'dgtraces[{extra}]'"
        if package == "torch":
            hint += "   (or exactly: pip install torch==2.13.0 — the CPU wheel)"
        super().__init__(f"{purpose} needs the optional package {package!r}, which is not "
                         f"installed", hint=hint)
        self.package = package


def require(module: str, extra: str, purpose: str):
    """Import an optional heavy dependency or raise a typed error with an install hint."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:  # pragma: no cover - exercised by monkeypatched tests
        raise MissingDependencyError(module.split(".")[0], extra, purpose) from exc
