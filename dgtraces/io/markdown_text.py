"""Contributor text as inert Markdown (the CHANGELOG, the dataset card, the Hub README).

A contributor names themselves, their license and each run's ``source``; all of it ends up
in Markdown that a browser renders (GitHub, the Hugging Face Hub). :func:`md_inline` makes
such text one inert line: control characters (ESC included) and line breaks become spaces,
and every Markdown/HTML special character is backslash-escaped, so no text can start a
heading, a link or an image (``[x](javascript:...)``), raw HTML (``<img onerror=...>``), an
HTML comment, an entity, or end a table cell or list item. With ``[``, ``]``, ``(``, ``)``
and ``<``, ``>`` escaped nothing the text says becomes a link, whatever its scheme (bare
``http(s)://`` URLs may still be auto-linked by GitHub-flavoured Markdown; those are the
only links).
"""

from __future__ import annotations

import re

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#|<>~&])")  # mid-line: - . + ! are inert


def md_inline(text: object) -> str:
    """``text`` as one inert Markdown line (module doc)."""
    flat = " ".join("".join(c if c.isprintable() else " " for c in str(text)).split())
    return _MD_SPECIAL.sub(r"\\\1", flat)
