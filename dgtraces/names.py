"""Names typed by people (models, devices, layers, links): matched case-insensitively where
that is unambiguous (``V100`` -> ``v100``, ``AlexNet`` -> ``alexnet``); otherwise an
unknown name gets a did-you-mean (``difflib``) and one listing of the known names.
Plain Python: no heavy imports."""

from __future__ import annotations

from collections.abc import Iterable

from dgtraces.errors import Code, DgtracesError, Failure, did_you_mean

MAX_LISTED = 40  # names listed in one message; the rest are counted


def canonical(value: str, known: Iterable[str]) -> str | None:
    """``value`` itself when known, else the one known name equal to it ignoring case, else
    None (unknown, or several names differ only by case)."""
    names = set(known)
    if value in names:
        return value
    folded = [n for n in names if n.casefold() == str(value).casefold()]
    return folded[0] if len(folded) == 1 else None


def listing(known: Iterable[str], limit: int = MAX_LISTED) -> str:
    """The known names, sorted, comma-separated; past ``limit``, ``... (N more)``."""
    names = sorted(set(known))
    head = ", ".join(names[:limit])
    return head + (f", ... ({len(names) - limit} more)" if len(names) > limit else "")


def match(value: str, known: Iterable[str], *, what: str, code: str = Code.BAD_INPUT,
          column: str | None = None) -> str:
    """The known name ``value`` means (:func:`canonical`), or a DgtracesError with ``code``
    whose failure lists the known names once and suggests the closest."""
    names = sorted(set(known))
    hit = canonical(value, names)
    if hit is not None:
        return hit
    message = f"unknown {what} {value!r}{did_you_mean(value, names)}"
    raise DgtracesError(message, code=code, failures=[Failure(
        code, message, column=column, expected=listing(names), found=repr(value))])


def unknown_failure(code: str, message: str, value, known: Iterable[str], **where) -> Failure:
    """A located failure for an unknown name: the did-you-mean appended to ``message``, the
    known names listed once (``expected``)."""
    return Failure(code, message + did_you_mean(str(value), known), expected=listing(known),
                   found=repr(value), **where)


def allowed_names(check) -> list[str]:
    """The allowed names of a pandera ``isin`` check on text (empty for any other check)."""
    if getattr(check, "name", None) != "isin":
        return []
    values = (getattr(check, "statistics", None) or {}).get("allowed_values") or ()
    return [str(v) for v in values] if all(isinstance(v, str) for v in values) else []


def reference_names(key_columns: tuple[str, ...], parents):
    """For a failed reference to ``parents`` (a DataFrame, or None) by ``key_columns``:
    scope values (all but the last key column) -> the names of the last column there (text
    only), computed once per scope."""
    cache: dict[tuple, list[str]] = {}

    def names(scope: tuple) -> list[str]:
        if parents is None or scope in cache:
            return cache.get(scope, [])
        rows = parents
        for col, v in zip(key_columns[:-1], scope, strict=True):
            rows = rows[rows[col] == v]
        values = rows[key_columns[-1]].dropna().unique().tolist()
        cache[scope] = [str(x) for x in values] if all(isinstance(x, str) for x in values) \
            else []
        return cache[scope]

    return names
