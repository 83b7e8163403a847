"""What an install of dgtraces brings (the README's figures): the distributions its
requirements pull in, for the core package and for each extra given, and their size on disk,
from the installed metadata of the current environment (``importlib.metadata``: the files
each distribution's RECORD lists). Nothing is downloaded or installed.

    python scripts/install_footprint.py [EXTRA ...]      # e.g.: all

The counts leave dgtraces itself out. Run it in an environment where the extras are
installed (``pip install -e '.[all]'``); a requirement that is not installed is reported.
"""

from __future__ import annotations

import os
import sys
from importlib.metadata import PackageNotFoundError, distribution


def closure(extras: frozenset[str]) -> tuple[dict[str, frozenset[str]], list[str]]:
    """Distribution name -> extras requested of it, over dgtraces' requirements with
    ``extras``, followed through every installed dependency; and what is missing."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    seen: dict[str, frozenset[str]] = {}
    missing: list[str] = []
    todo = [("dgtraces", extras)]
    while todo:
        name, wanted = todo.pop()
        key = canonicalize_name(name)
        try:
            dist = distribution(name)
        except PackageNotFoundError:
            missing.append(name)
            continue
        if key in seen and wanted <= seen[key]:
            continue
        seen[key] = seen.get(key, frozenset()) | wanted
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is None or any(req.marker.evaluate({"extra": e})
                                         for e in ("", *seen[key])):
                todo.append((req.name, frozenset(req.extras)))
    return seen, sorted(set(missing))


def size_on_disk(name: str) -> int:
    dist = distribution(name)
    total = 0
    for f in dist.files or []:
        try:
            total += os.path.getsize(dist.locate_file(f))
        except OSError:
            pass
    return total


def main(argv: list[str]) -> int:
    for extras in ([], *([e] for e in argv)):
        dists, missing = closure(frozenset(extras))
        dists.pop("dgtraces", None)
        sizes = {n: size_on_disk(n) for n in dists}
        top = sorted(sizes.items(), key=lambda kv: -kv[1])[:6]
        label = "core" if not extras else f"[{','.join(extras)}]"
        print(f"{label}: {len(dists)} distributions, {sum(sizes.values()) / 1e6:.0f} MB; "
              "largest " + ", ".join(f"{n} {s / 1e6:.0f} MB" for n, s in top)
              + (f"; not installed: {', '.join(missing)}" if missing else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
