"""Validating scalar arguments: the one whole-number check every library entry point and CLI
option uses (batch sizes, workers, repeats, limits, alignments).

Accepts Python and numpy integers, and with ``text_ok`` decimal text such as ``"8"`` (log
headers, CSV cells); refuses bools, fractions (``8.7``), NaN and values beyond 2**62 with
BAD_INPUT naming the argument.
"""

from __future__ import annotations

from numbers import Integral
from typing import Any

from .errors import Code, DgtracesError, Failure

LARGEST = 2 ** 62


def whole_number(name: str, value: Any, *, least: int = 1, most: int = LARGEST,
                 text_ok: bool = False, float_ok: bool = False) -> int:
    """``value`` as an ``int`` in [least, most], else BAD_INPUT (with a failure naming
    ``name``). ``text_ok`` accepts decimal text, ``float_ok`` whole floats (``8.0``, as a
    CSV column with nulls stores them)."""
    number: Any = value
    if text_ok and isinstance(value, str):
        text = value.strip()
        digits = text.lstrip("+-")  # ASCII only: "٣٢".isdigit(), "²".isdigit() (#29)
        number = int(text) if digits.isascii() and digits.isdigit() and len(digits) <= 30 \
            else None
    if float_ok and isinstance(value, float) and value.is_integer():
        number = int(value)
    ok = (isinstance(number, Integral) and not isinstance(number, bool)
          and least <= int(number) <= most)
    if not ok:
        span = f">= {least}" if most == LARGEST else f"in [{least}, {most}]"
        raise DgtracesError(f"{name} must be a whole number {span}, got {value!r}",
                            code=Code.BAD_INPUT,
                            failures=[Failure(Code.BAD_INPUT, f"must be a whole number {span}",
                                              column=name, expected=span,
                                              found=repr(value)[:80])])
    return int(number)


def positive_int(name: str, value: Any, *, text_ok: bool = False) -> int:
    """A whole number > 0 (batch size, workers, repeats...)."""
    return whole_number(name, value, least=1, text_ok=text_ok)


def nonneg_int(name: str, value: Any) -> int:
    """A whole number >= 0 (warm-up iterations...)."""
    return whole_number(name, value, least=0)


def bad_value(field_name: str, message: str, expected: str, found,
              code: Code = Code.BAD_INPUT) -> DgtracesError:
    """A typed error naming the offending field (``code`` default BAD_INPUT)."""
    return DgtracesError(f"{field_name}: {message}", code=code,
                         failures=[Failure(code, message, column=field_name,
                                           expected=expected, found=repr(found))])
