"""Portable JSON descriptions of the schemas (schemas/*.json), also used by cards/Croissant."""

from __future__ import annotations

import json
from pathlib import Path


def _check_text(check) -> str:
    stats = {k: v for k, v in (check.statistics or {}).items()}
    if not stats:
        return str(check.name or check.error)
    args = ", ".join(f"{k}={sorted(v) if isinstance(v, (set, frozenset)) else v!r}"
                     for k, v in sorted(stats.items()))
    return f"{check.name}({args})"


def describe(table: str) -> dict:
    """A JSON-ready description of one table: columns with dtype, unit, checks; keys."""
    from dgtraces.tables.schema import DESCRIPTIONS, FOREIGN_KEYS, KEYS, SCHEMA_VERSION, TABLES

    schema = TABLES[table].to_schema()
    cols = []
    for name, col in schema.columns.items():
        cols.append({
            "name": name,
            "dtype": str(col.dtype),
            "nullable": bool(col.nullable),
            "unique": bool(col.unique),
            "unit": (col.metadata or {}).get("unit"),
            "description": col.description,
            "checks": [_check_text(c) for c in col.checks],
        })
    return {
        "table": table,
        "schema_version": SCHEMA_VERSION,
        "description": DESCRIPTIONS[table],
        "strict": bool(schema.strict),
        "primary_key": list(KEYS[table]),
        "foreign_keys": [{"columns": list(fk.columns), "references": fk.parent,
                          "referenced_columns": list(fk.parent_columns),
                          **({"via": [{"column": c, "through": own, "of": f"{p}.{pk}"}
                                      for c, own, p, pk in fk.via]} if fk.via else {}),
                          "code": fk.code}
                         for fk in FOREIGN_KEYS if fk.table == table],
        "dataframe_checks": [str(c.error) for c in schema.checks],
        "columns": cols,
    }


def file_columns(table: str, entry: dict) -> list[dict]:
    """The described columns of ``table`` that its release file has, in the file's order
    (manifest ``columns``; schema order when the manifest does not list them)."""
    cols = {c["name"]: c for c in describe(table)["columns"]}
    order = entry.get("columns") or list(cols)
    return [cols[name] for name in order if name in cols]


def render(table: str) -> str:
    return json.dumps(describe(table), indent=2, sort_keys=False) + "\n"


def export(out: str | Path = "schemas") -> list[Path]:
    from dgtraces.io.files import atomic_write_all
    from dgtraces.tables.schema import TABLES

    out = Path(out)
    return atomic_write_all({out / f"{table}.json": render(table).encode() for table in TABLES})


def stale(out: str | Path = "schemas") -> list[str]:
    """Tables whose exported JSON is missing or differs from the code."""
    from dgtraces.tables.schema import TABLES

    out = Path(out)
    bad = []
    for table in TABLES:
        path = out / f"{table}.json"
        if not path.is_file() or path.read_text(encoding="utf-8") != render(table):
            bad.append(table)
    return bad
