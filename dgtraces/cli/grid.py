"""The ``dgtraces sql`` result grid as plain text, for a pipe or a file.

Rich draws the grid on a terminal. Written to a pipe or a file (no colours, no width to wrap
at) rich's grid is plain box-drawing text, which :func:`plain_grid` writes without importing
rich (about 30 ms of a cold ``dgtraces sql``; issue #24). It returns None where it could
differ from rich (no rows; text that is not printable ASCII, whose cell widths rich measures
its own way, or that has blanks at its edges, which rich trims; an environment that makes
rich treat the output as a terminal), and the caller then uses rich.
``tests/cli/test_sql_grid.py`` holds the two byte for byte equal.
"""

from __future__ import annotations

import os
import sys

# rich's HEAVY_HEAD box: heavy around the header, light around the body
_TOP, _HEAD, _MID, _BODY, _BOTTOM = "┏━┳┓", "┃", "┡━╇┩", "│", "└─┴┘"
RICH_TERMINAL_ENV = ("COLUMNS", "FORCE_COLOR", "TTY_COMPATIBLE")


def plain_output() -> bool:
    """Whether stdout is what rich would render as plain text at a width we choose."""
    return not sys.stdout.isatty() and not any(k in os.environ for k in RICH_TERMINAL_ENV)


def _simple(text: str) -> bool:
    """Printable ASCII without edge blanks (rich trims those in justified cells)."""
    return text.isascii() and text.isprintable() and text == text.strip()


def _rule(chars: str, widths: list[int]) -> str:
    left, fill, cross, right = chars[0], chars[1], chars[2], chars[3]
    return left + cross.join(fill * (w + 2) for w in widths) + right


def _line(edge: str, texts: list[str], widths: list[int], right: list[bool]) -> str:
    cells = (t.rjust(w) if r else t.ljust(w)
             for t, w, r in zip(texts, widths, right, strict=True))
    return edge + " " + f" {edge} ".join(cells) + " " + edge


def plain_grid(columns: list[str], types: list[str], rows: list[list[str]],
               right: list[bool]) -> str | None:
    """The grid rich prints for ``columns`` (each with its type below it) and ``rows``
    (cells already as text), numeric columns right-justified; None where rich could differ."""
    texts = [*columns, *types, *(c for row in rows for c in row)]
    if not rows or not all(_simple(t) for t in texts):
        return None
    widths = [max([len(c), len(t)] + [len(r[i]) for r in rows])
              for i, (c, t) in enumerate(zip(columns, types, strict=True))]
    lines = [_rule(_TOP, widths), _line(_HEAD, columns, widths, right),
             _line(_HEAD, types, widths, right), _rule(_MID, widths)]
    lines += [_line(_BODY, row, widths, right) for row in rows]
    lines.append(_rule(_BOTTOM, widths))
    return "\n".join(lines) + "\n"
