"""The plain sql grid (pipes and files, without importing rich) is rich's grid byte for
byte, and falls back to rich where it could differ (issue #24, cold start of ``sql``)."""

import io
import random

import pytest

from dgtraces.cli.grid import plain_grid


def _rich(columns, types, rows, right) -> str:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    widths = [max([len(c), len(t)] + [len(r[i]) for r in rows])
              for i, (c, t) in enumerate(zip(columns, types, strict=True))]
    buf = io.StringIO()
    console = Console(file=buf, width=max(sum(widths) + 3 * len(widths) + 1, 80))
    table = Table()
    for c, t, r in zip(columns, types, right, strict=True):
        table.add_column(Text.assemble(c, "\n", (t, "dim")), justify="right" if r else "left",
                         overflow="fold")
    for row in rows:
        table.add_row(*(Text(c) for c in row))
    console.print(table)
    return buf.getvalue()


ALPHABET = "abcxyz0129 .-_[]()/:'\"|"
SEEDS_DRAWN = 200


@pytest.mark.parametrize("seed", range(SEEDS_DRAWN))
def test_plain_grid_equals_rich(seed):
    rng = random.Random(seed)
    ncol = rng.randint(1, 6)
    word = lambda lo, hi: "".join(rng.choice(ALPHABET) for _ in range(rng.randint(lo, hi)))  # noqa: E731
    columns = [word(1, 12).strip() or "c" for _ in range(ncol)]
    types = [rng.choice(["varchar", "bigint", "double", '"null"', "boolean", "integer[]"])
             for _ in range(ncol)]
    right = [rng.random() < 0.5 for _ in range(ncol)]
    rows = [[word(0, 30) for _ in range(ncol)] for _ in range(rng.randint(1, 12))]
    got = plain_grid(columns, types, rows, right)
    if got is None:  # a cell with blanks at its edges: rich draws it
        assert any(c != c.strip() for row in rows for c in row)
    else:
        assert got == _rich(columns, types, rows, right)


def test_wide_grid_equals_rich_past_80_columns():
    columns, types = ["model", "n"], ["varchar", "bigint"]
    rows = [["x" * 150, "7"], ["y", "123456"]]
    assert plain_grid(columns, types, rows, [False, True]) == \
        _rich(columns, types, rows, [False, True])


@pytest.mark.parametrize("rows", [[], [["é"]], [["a\tb"]], [["\u4e2d"]], [[" a"]], [["a "]]])
def test_plain_grid_leaves_what_could_differ_to_rich(rows):
    assert plain_grid(["c"], ["varchar"], rows, [False]) is None
