"""Text from contributors, made inert before it reaches a terminal (issue #29 M7).

A contributor's name, a run's ``source`` or a query's result can carry terminal control
sequences (``\\x1b]0;title\\a``, ``\\x1b[2J``, a C1 ``\\x9b`` CSI) or bidirectional overrides
that make text read differently than it is. :func:`inert` replaces every character that is
not printable text -- Unicode categories Cc (C0 and C1 controls, DEL), Cf (format: bidi
overrides and isolates, zero-width characters), Cs (surrogates), Co/Cn (private and
unassigned), Zl/Zp (line and paragraph separators) -- with a visible escape (``\\x1b``,
``\\u202e``), so what is shown is what is stored, and nothing is executed by the terminal.
``keep_newlines`` keeps ``\\n`` (multi-line reports); a tab is kept.
"""

from __future__ import annotations

import unicodedata

_UNSAFE = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}
_KEEP = frozenset("\t")


def _escape(ch: str) -> str:
    n = ord(ch)
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}"


def inert(text: object, keep_newlines: bool = False) -> str:
    """``str(text)`` with every non-printable character escaped (module doc)."""
    s = str(text)
    if s.isascii() and s.isprintable():  # the common case, fast
        return s
    keep = _KEEP | {"\n"} if keep_newlines else _KEEP
    return "".join(ch if ch in keep or unicodedata.category(ch) not in _UNSAFE
                   else _escape(ch) for ch in s)
