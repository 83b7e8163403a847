"""Validating scalar arguments: the one whole-number check every library entry point and CLI
option uses (batch sizes, workers, repeats, limits, alignments), and the one check that a
modelled result is a finite number (:func:`finite_results`).

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


FINITE_HINT = ("a rate or time given is out of any physical range (e.g. a bandwidth of 1e-300 "
               "GB/s, or a time of 1e308 ms); give values a real system could have")


def finite_results(what: str, values: dict) -> None:
    """PLAUSIBILITY when a modelled result is not a finite number: finite but absurd inputs
    (a bandwidth of 1e-320 GB/s) overflow to ``inf`` and ``inf - inf`` to NaN, which were
    printed as results (``inf ms``, JSON ``Infinity``; #36 low). ``values``: name -> a
    number or an array of numbers."""
    import math

    bad = []
    for name, value in values.items():
        if hasattr(value, "__len__"):
            import numpy as np

            arr = np.asarray(value, dtype=float)
            if arr.size and not np.isfinite(arr).all():
                bad.append((name, float(arr[~np.isfinite(arr)][0])))
        elif not math.isfinite(float(value)):
            bad.append((name, float(value)))
    if bad:
        raise DgtracesError(f"{what}: {', '.join(f'{n} = {v}' for n, v in bad)} is not a "
                            "finite number", code=Code.PLAUSIBILITY, hint=FINITE_HINT,
                            failures=[Failure(Code.PLAUSIBILITY, "not a finite number",
                                              column=n, expected="finite", found=repr(v))
                                      for n, v in bad])
