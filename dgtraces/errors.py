"""Typed errors with stable reason codes. Tests and callers match ``.code``, never text.

Library code raises these; only the CLI prints them (``error.report()``) and picks exit codes.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class Code(StrEnum):
    """Reason codes. A member compares equal to its name as text (``Code.SCHEMA ==
    "SCHEMA"``). Add new ones at the end, with their line in :data:`CODES`."""

    BAD_INPUT = "BAD_INPUT"
    SCHEMA = "SCHEMA"
    CROSS_TABLE = "CROSS_TABLE"
    UNKNOWN_MODEL = "UNKNOWN_MODEL"
    UNKNOWN_LAYER = "UNKNOWN_LAYER"
    UNKNOWN_DEVICE = "UNKNOWN_DEVICE"
    DEVICE_MISMATCH = "DEVICE_MISMATCH"
    UNKNOWN_LINK = "UNKNOWN_LINK"
    GRAD_MISMATCH = "GRAD_MISMATCH"
    PLAUSIBILITY = "PLAUSIBILITY"
    DUPLICATE = "DUPLICATE"
    UNSAFE_ARCHIVE = "UNSAFE_ARCHIVE"
    BAD_FILE = "BAD_FILE"
    IO_ERROR = "IO_ERROR"
    LOCKED = "LOCKED"
    METADATA = "METADATA"
    NOT_FOUND = "NOT_FOUND"
    VERSION = "VERSION"
    INTEGRITY = "INTEGRITY"
    EMPTY = "EMPTY"
    MISSING_DEPENDENCY = "MISSING_DEPENDENCY"
    SQL = "SQL"
    COLLECT = "COLLECT"
    NO_CALIBRATION = "NO_CALIBRATION"
    INCOMPLETE_TRACE = "INCOMPLETE_TRACE"
    NO_LAYER_TIMINGS = "NO_LAYER_TIMINGS"
    NO_CUDA = "NO_CUDA"
    MODEL_MISMATCH = "MODEL_MISMATCH"
    QUERY_LIMIT = "QUERY_LIMIT"
    UNKNOWN_FRAMEWORK = "UNKNOWN_FRAMEWORK"
    MISSING_MEASUREMENT = "MISSING_MEASUREMENT"
    UNKNOWN_NCCL = "UNKNOWN_NCCL"
    UNSUPPORTED_HARDWARE = "UNSUPPORTED_HARDWARE"


# What each code means (documentation, the CLI's `info` and the docs read it).
CODES: dict[Code, str] = {
    Code.BAD_INPUT: "an argument or value is out of its allowed range",
    Code.SCHEMA: "a table breaks its pandera schema (dtype, range, nulls, uniqueness)",
    Code.CROSS_TABLE: "a key that must exist in another table does not",
    Code.UNKNOWN_MODEL: "the model name is not one of the shipped architectures",
    Code.UNKNOWN_LAYER: "a layer name does not exist in the model's structure",
    Code.UNKNOWN_DEVICE: "the device is not in the devices table",
    Code.DEVICE_MISMATCH: "a row's device_kind differs from the kind its device is known as",
    Code.UNKNOWN_LINK: "the interconnect preset is not in the links table",
    Code.GRAD_MISMATCH: "a gradient/blob size disagrees with the model structure",
    Code.PLAUSIBILITY: "values are well-typed but implausible (negative, inconsistent totals)",
    Code.DUPLICATE: "the same content is already in the store or in staging",
    Code.UNSAFE_ARCHIVE: "an archive has unsafe members (traversal, links, bombs)",
    Code.BAD_FILE: "a file cannot be read (encoding, truncated, wrong format)",
    Code.IO_ERROR: "the operating system refused a read or write (missing folder, permissions, "
                "disk full)",
    Code.LOCKED: "another process holds a lock (the store lock or the measurement lock)",
    Code.METADATA: "contribution.yaml lacks a required field or has a bad value",
    Code.NOT_FOUND: "a release, table, run or file does not exist",
    Code.VERSION: "a release version is malformed, exists already, or is not newer",
    Code.INTEGRITY: "a stored file's bytes differ from its manifest",
    Code.EMPTY: "there is nothing to do (e.g. empty staging area)",
    Code.MISSING_DEPENDENCY: "an optional dependency is not installed",
    Code.SQL: "a query failed or was refused by the sandbox",
    Code.COLLECT: "a measurement failed or was inconsistent",
    Code.NO_CALIBRATION: "no calibration rows exist for the requested device",
    Code.INCOMPLETE_TRACE: "a layer trace lacks timings for layers of its model",
    Code.NO_LAYER_TIMINGS: "a run has whole-model figures only, no per-layer timings",
    Code.NO_CUDA: "a CUDA device or the NCCL backend was asked for but this machine (or its "
                  "torch build) has none",
    Code.MODEL_MISMATCH: "an imported log or trace is of another network than the model named",
    Code.QUERY_LIMIT: "a query ran past its time limit or memory limit",
    Code.UNKNOWN_FRAMEWORK: "the framework profile is not one of the declared profiles",
    Code.MISSING_MEASUREMENT: "an overhead term was asked for without the measurement it needs",
    Code.UNKNOWN_NCCL: "the NCCL version is not one of the modelled releases",
    Code.UNSUPPORTED_HARDWARE: "the hardware or NCCL release cannot run what was asked (SHARP "
                               "without InfiniBand, NVLS without NVSwitch on Hopper)",
}
assert set(CODES) == set(Code), "every Code needs its CODES line"


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
                         else f"argument {self.column}" if self.column.isupper()
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
    """Base class. ``code`` is a :class:`Code` (plain text of a member is accepted);
    ``failures`` lists located problems. Each subclass's default ``code`` is the code it is
    raised with; the base class is raised with an explicit code where no subclass fits.
    Every error survives pickling (multiprocessing workers send them to the parent)."""

    code: Code = Code.BAD_INPUT

    def __init__(self, message: str, *, code: str | None = None,
                 failures: Iterable[Failure] = (), hint: str | None = None) -> None:
        super().__init__(message)
        try:
            self.code = Code(self.code if code is None else code)
        except ValueError:
            raise ValueError(f"unregistered reason code {code!r}") from None
        self.message = message
        self.failures: list[Failure] = list(failures)
        self.hint = hint

    def __reduce__(self) -> tuple[Any, ...]:
        # rebuild without calling __init__: subclasses take other constructor arguments
        return (_rebuild, (type(self), self.args, dict(self.__dict__)))

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


def _rebuild(cls: type[DgtracesError], args: tuple, state: dict) -> DgtracesError:
    err = cls.__new__(cls)
    Exception.__init__(err, *args)
    err.__dict__.update(state)
    return err


class ValidationError(DgtracesError):
    """A table or its keys break the schema."""

    code = Code.SCHEMA


class BadFileError(ValidationError):
    """An input file cannot be read (encoding, truncation, format)."""

    code = Code.BAD_FILE

    @classmethod
    def at(cls, name: str, message: str, expected: object = None,
           found: object = None) -> BadFileError:
        """BAD_FILE located in file ``name``, saying what was expected and what was found."""
        return cls(f"{name}: {message}",
                   failures=[Failure(Code.BAD_FILE, message, file=name,
                                     expected=None if expected is None else str(expected),
                                     found=None if found is None else str(found))])


class MissingFileError(ValidationError):
    """An input file named by the caller does not exist."""

    code = Code.NOT_FOUND


class NoCudaError(DgtracesError):
    """CUDA (or NCCL) was asked for where the machine or the torch build has none."""

    code = Code.NO_CUDA


def suggestions(value: str, known: Iterable[str], n: int = 3) -> list[str]:
    """Up to ``n`` known names close to ``value`` (case-insensitive, best first)."""
    names = sorted(set(known))
    same = [x for x in names if x.casefold() == str(value).casefold()]
    if same:  # differs only by case: that is the suggestion
        return same[:n]
    by_fold: dict[str, str] = {}
    for name in names:
        by_fold.setdefault(name.casefold(), name)
    close = difflib.get_close_matches(str(value).casefold(), list(by_fold), n=n, cutoff=0.6)
    return [by_fold[c] for c in close]


def did_you_mean(value: str, known: Iterable[str]) -> str:
    """``"; did you mean 'alexnet'?"`` (or ``'a' or 'b'``), or "" when nothing is close."""
    close = suggestions(value, known)
    return f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""


class UnknownModelError(DgtracesError):
    code = Code.UNKNOWN_MODEL

    def __init__(self, name: str, known: Sequence[str]) -> None:
        super().__init__(f"unknown model {name!r}{did_you_mean(name, known)}; known models: "
                         f"{', '.join(known)}",
                         failures=[Failure(Code.UNKNOWN_MODEL, "unknown model", column="model",
                                           expected=" | ".join(known), found=repr(name))])


class StoreError(DgtracesError):
    """A release, table or run does not exist in the store."""

    code = Code.NOT_FOUND


class VersionError(StoreError):
    """A release version is malformed, exists already, or is not newer."""

    code = Code.VERSION


class IntegrityError(StoreError):
    code = Code.INTEGRITY


class MissingDependencyError(DgtracesError):
    code = Code.MISSING_DEPENDENCY

    def __init__(self, package: str, extra: str, purpose: str) -> None:
        hint = f"pip install 'dgtraces[{extra}]'"
        if package == "torch":
            hint += ("   (exactly torch==2.13.0: the CPU wheel, or for a GPU the CUDA build from "
                     "the PyTorch index first, see CONTRIBUTING.md)")
        super().__init__(f"{purpose} needs the optional package {package!r}, which is not "
                         f"installed", hint=hint)
        self.package = package


# The pip distribution of an optional module whose import name is not its distribution's
# name (``google.protobuf`` is ``protobuf``: the error said 'google'; #36 trial).
DISTRIBUTIONS = {"google.protobuf": "protobuf"}


def require(module: str, extra: str, purpose: str):
    """Import an optional heavy dependency or raise a typed error with an install hint."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:  # pragma: no cover - exercised by monkeypatched tests
        package = DISTRIBUTIONS.get(module, module.split(".")[0])
        raise MissingDependencyError(package, extra, purpose) from exc
