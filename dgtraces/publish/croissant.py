"""Croissant 1.0 (MLCommons) metadata for a release, generated from the same schemas as the
card: one RecordSet per table, one Field per column (``dataType`` from the pandera dtype,
unit in the description), one FileObject per Parquet file with the manifest's sha256.

Built as plain JSON, so generating it needs no ``mlcroissant``; the tests validate it and
load its records with ``mlcroissant`` (extra ``[hf]``). Paths are relative to the folder
``croissant.json`` is written in (the Hub export's layout: ``data/<table>.parquet``).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from dgtraces.store.release import Release

CONFORMS_TO = "http://mlcommons.org/croissant/1.0"
# The standard Croissant 1.0 JSON-LD context (as published with the spec's examples).
CONTEXT = {
    "@language": "en",
    "@vocab": "https://schema.org/",
    "citeAs": "cr:citeAs",
    "column": "cr:column",
    "conformsTo": "dct:conformsTo",
    "cr": "http://mlcommons.org/croissant/",
    "rai": "http://mlcommons.org/croissant/RAI/",
    "data": {"@id": "cr:data", "@type": "@json"},
    "dataType": {"@id": "cr:dataType", "@type": "@vocab"},
    "dct": "http://purl.org/dc/terms/",
    "equivalentProperty": "cr:equivalentProperty",
    "examples": {"@id": "cr:examples", "@type": "@json"},
    "extract": "cr:extract",
    "field": "cr:field",
    "fileProperty": "cr:fileProperty",
    "fileObject": "cr:fileObject",
    "fileSet": "cr:fileSet",
    "format": "cr:format",
    "includes": "cr:includes",
    "isLiveDataset": "cr:isLiveDataset",
    "jsonPath": "cr:jsonPath",
    "key": "cr:key",
    "md5": "cr:md5",
    "parentField": "cr:parentField",
    "path": "cr:path",
    "recordSet": "cr:recordSet",
    "references": "cr:references",
    "regex": "cr:regex",
    "repeated": "cr:repeated",
    "replace": "cr:replace",
    "samplingRate": "cr:samplingRate",
    "sc": "https://schema.org/",
    "separator": "cr:separator",
    "source": "cr:source",
    "subField": "cr:subField",
    "transform": "cr:transform",
}
DATA_TYPES = {
    "int64": "sc:Integer",
    "Int64": "sc:Integer",
    "float64": "sc:Float",
    "bool": "sc:Boolean",
    "boolean": "sc:Boolean",
    "str": "sc:Text",
    "string": "sc:Text",
    "string[pyarrow]": "sc:Text",
    "object": "sc:Text",
}


def data_type(dtype: str) -> str:
    """The Croissant dataType of a pandera dtype string (``Int64`` -> ``sc:Integer``)."""
    return DATA_TYPES.get(dtype, "sc:Text")


def _field_description(col: dict) -> str:
    text = col["description"] or col["name"]
    if col.get("unit"):
        text += f" [{col['unit']}]"
    if col.get("nullable"):
        text += " (nullable)"
    return text


def build(release: Release, data_dir: str = "data", stats: dict | None = None) -> dict:
    """The Croissant document (a JSON-ready dict) of an open release (``stats``: its
    :func:`dgtraces.publish.card.provenance_stats`, when the caller has them already)."""
    from dgtraces.publish import card as c
    from dgtraces.publish import card_stats
    from dgtraces.store import manifest as store
    from dgtraces.tables.export import describe, file_columns

    manifest = dict(release.manifest)
    version = manifest["version"]
    files, record_sets = [], []
    for table, entry in sorted(manifest["tables"].items()):
        shards = store.export_names(table, entry)
        for i, (rel, s) in enumerate(shards):  # every shard, with its sha256
            files.append({
                "@type": "cr:FileObject",
                "@id": f"{table}-shard-{i}",
                "name": rel,
                "description": f"Parquet shard {i + 1} of {len(shards)} of the {table} table "
                               f"({s['rows']} rows).",
                "contentUrl": f"{data_dir}/{rel}" if data_dir else rel,
                "contentSize": f"{s['bytes']} B",
                "encodingFormat": "application/x-parquet",
                "sha256": s["sha256"],
            })
        file_id = f"{table}-parquet"
        files.append({  # the record set reads the table's shards together
            "@type": "cr:FileSet",
            "@id": file_id,
            "name": f"{table} shards",
            "description": f"The {len(shards)} Parquet shard(s) of the {table} table "
                           f"({entry['rows']} rows).",
            "encodingFormat": "application/x-parquet",
            "includes": (f"{data_dir}/" if data_dir else "") + (
                shards[0][0] if store.is_legacy(entry) else f"{table}/*.parquet"),
        })
        desc = describe(table)
        fields = [{
            "@type": "cr:Field",
            "@id": f"{table}/{col['name']}",
            "name": col["name"],
            "description": _field_description(col),
            "dataType": data_type(col["dtype"]),
            "source": {"fileSet": {"@id": file_id}, "extract": {"column": col["name"]}},
        } for col in file_columns(table, entry)]
        record_sets.append({
            "@type": "cr:RecordSet",
            "@id": table,
            "name": table,
            "description": desc["description"],
            "field": fields,
        })
    stats = c.provenance_stats(release) if stats is None else stats
    return {
        "@context": CONTEXT,
        "@type": "sc:Dataset",
        "conformsTo": CONFORMS_TO,
        "name": c.DATASET_NAME,
        "description": c.summary(c.release_models(release)),
        "license": [url for _, url in c.licenses(stats)],
        "isBasedOn": [{"@type": "sc:CreativeWork", "name": repo,
                       "url": f"https://github.com/{repo}", "license": url}
                      for _, repo, _, url in card_stats.THIRD_PARTY
                      if any(repo in s.get("third_party", {}) for s in stats.values())],
        "url": c.HOMEPAGE,
        "version": version,
        "datePublished": manifest.get("created_utc", "")[:10] or None,
        "citeAs": c.citation_bibtex(version),
        "keywords": list(c.TAGS),
        "creator": {"@type": "sc:Organization", "name": "dgtraces developers"},
        "distribution": files,
        "recordSet": record_sets,
    }


def render(release: Release, data_dir: str = "data", stats: dict | None = None) -> str:
    """:func:`build` as the ``croissant.json`` text."""
    doc = build(release, data_dir, stats)
    doc = {k: v for k, v in doc.items() if v is not None}
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
