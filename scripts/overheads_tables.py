"""Regenerate the generated tables of docs/predictor-published.md (the published evaluation
at the defaults and before them, with issue #35 item 4's targets) and of
docs/predictor-overheads.md (the issue #26 terms against their pre-registered rule), from ONE
run of the evaluation (``dgtraces.evaluation.overheads.docs_tables``, the same text as
``dgtraces validate-predictor --published --markdown``): the text between each pair of
markers is replaced, nothing is typed.

    PYTHONPATH=. python scripts/overheads_tables.py [--check]

``--check`` exits 1 when a doc differs from a fresh run (for CI or a reviewer).
"""

from __future__ import annotations

import sys
from pathlib import Path

from dgtraces.evaluation.overheads import docs_tables

DOCS = Path(__file__).resolve().parents[1] / "docs"
BLOCKS = {"results": (DOCS / "predictor-published.md", "<!-- results:begin -->",
                      "<!-- results:end -->"),
          "terms": (DOCS / "predictor-overheads.md", "<!-- terms:begin -->",
                    "<!-- terms:end -->")}


def main(argv: list[str]) -> int:
    tables = docs_tables(None)  # the latest release
    changed = []
    for key, (doc, begin, end) in BLOCKS.items():
        text = doc.read_text()
        if begin not in text or end not in text:
            print(f"{doc}: markers {begin} / {end} missing", file=sys.stderr)
            return 2
        head, rest = text.split(begin, 1)
        _, tail = rest.split(end, 1)
        new = f"{head}{begin}\n{tables[key]}\n{end}{tail}"
        if new != text:
            changed.append(doc)
            if "--check" not in argv:
                doc.write_text(new)
    if "--check" in argv:
        return 1 if changed else 0
    print("wrote the tables of " + (", ".join(map(str, changed)) or "no doc (unchanged)"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
