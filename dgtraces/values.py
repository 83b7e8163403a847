"""Validating scalar arguments: the one whole-number check every library entry point and CLI
option uses (batch sizes, workers, repeats, limits, alignments).

Accepts Python and numpy integers, and with ``text_ok`` decimal text such as ``"8"`` (log
headers, CSV cells); refuses bools, fractions (``8.7``), NaN and values beyond 2**62 with
BAD_INPUT naming the argument.
"""

from __future__ import annotations

from numbers import Integral
from typing import Any

from .errors import DgtracesError, Failure

LARGEST = 2 ** 62


def whole_number(name: str, value: Any, *, least: int = 1, text_ok: bool = False) -> int:
    """``value`` as an ``int`` >= ``least``, else BAD_INPUT (with a failure naming ``name``)."""
    number: Any = value
    if text_ok and isinstance(value, str):
        text = value.strip()
        number = int(text) if text.lstrip("+-").isdigit() else None
    ok = (isinstance(number, Integral) and not isinstance(number, bool)
          and least <= number <= LARGEST)
    if not ok:
        raise DgtracesError(f"{name} must be a whole number >= {least}, got {value!r}",
                            code="BAD_INPUT",
                            failures=[Failure("BAD_INPUT", "not a whole number in range",
                                              column=name, expected=f">= {least}",
                                              found=repr(value)[:80])])
    return int(number)


def positive_int(name: str, value: Any, *, text_ok: bool = False) -> int:
    """A whole number > 0 (batch size, workers, repeats...)."""
    return whole_number(name, value, least=1, text_ok=text_ok)


def nonneg_int(name: str, value: Any) -> int:
    """A whole number >= 0 (warm-up iterations...)."""
    return whole_number(name, value, least=0)
