"""Regenerate the Results tables of docs/predictor-overheads.md (issue #26) by running the
pre-registered evaluation (``dgtraces.evaluation.overheads``): the text between the
``<!-- terms:begin -->`` and ``<!-- terms:end -->`` markers is replaced, nothing is typed.

    PYTHONPATH=. python scripts/overheads_tables.py [--check]

``--check`` exits 1 when the docs differ from a fresh run (for CI or a reviewer).
"""

from __future__ import annotations

import sys
from pathlib import Path

from dgtraces.evaluation.overheads import evaluate_terms

DOC = Path(__file__).resolve().parents[1] / "docs" / "predictor-overheads.md"
BEGIN, END = "<!-- terms:begin -->", "<!-- terms:end -->"


def main(argv: list[str]) -> int:
    text = DOC.read_text()
    if BEGIN not in text or END not in text:
        print(f"{DOC}: markers {BEGIN} / {END} missing", file=sys.stderr)
        return 2
    table = evaluate_terms().to_markdown()
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    new = f"{head}{BEGIN}\n{table}\n{END}{tail}"
    if "--check" in argv:
        return 0 if new == text else 1
    DOC.write_text(new)
    print(f"wrote the tables of {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
