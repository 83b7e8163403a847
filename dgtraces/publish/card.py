"""The dataset card: README.md with Hugging Face YAML front matter, generated from the schemas
and the release's manifest, plus every ``cards/fragments/*.md`` (sorted) that other parts of
the project contribute (published data, reconstruction method and error).

Numbers in the card (rows, provenance counts, sources) are computed from the release's Parquet
shards once their hashes match the manifest (:mod:`dgtraces.publish.card_stats`, per shard and
cached by its sha256), so the card cannot disagree with the data.
``dgtraces.publish.write_card`` writes ``README.md`` and ``croissant.json``; the same text
is the README of the Hub export (:mod:`dgtraces.publish.hf`), whose layout
(``data/<table>/<sha256>.parquet``) the YAML ``configs`` and Croissant ``contentUrl``
refer to.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from dgtraces.io.markdown_text import md_inline
from dgtraces.models.registry import MODELS, entry
from dgtraces.publish.card_stats import THIRD_PARTY

if TYPE_CHECKING:  # pragma: no cover
    from dgtraces.store.release import Release

DATASET_NAME = "dgtraces"


def _joined(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def pretty_name(models: tuple[str, ...] = MODELS) -> str:
    """The card's title for a release whose ``layers`` table holds ``models``."""
    return f"dgtraces: layer-wise DL training traces ({', '.join(entry(m).name for m in models)})"


def summary(models: tuple[str, ...] = MODELS) -> str:
    """The card's (and croissant's) description for a release holding ``models``."""
    return ("Layer-wise deep-learning training traces (per-layer forward/backward time, "
            "gradient size, FLOPs, communication time) for "
            f"{_joined([entry(m).name for m in models])}, with "
            "end-to-end S-SGD iteration times and collective-communication timings, for "
            "predicting synchronous data-parallel SGD iteration time with a DAG model. Rows "
            "carry their provenance (measured, reconstructed or published) and source: in "
            "runs, iterations, comm, comm_fits and devices directly, in layer_timings through "
            "their run; the layers table is computed from the cited architecture definitions.")


def release_models(release: Release) -> tuple[str, ...]:
    """The registry models in a release's ``layers`` table, in registry order (every
    dataset model when the release has no ``layers`` table)."""
    if "layers" not in release.entries:
        return MODELS
    present = set(release.table("layers")["model"])
    return tuple(m for m in MODELS if m in present) or MODELS


def _models_section(models: tuple[str, ...]) -> list[str]:
    lines = ["## Models", "", "The `layers` table's models (`dgtraces.models.registry`):", "",
             "| model | architecture | definition cited |", "| --- | --- | --- |"]
    lines += [f"| `{m}` | {_md(entry(m).title)} | {_md(entry(m).citation)} |" for m in models]
    return lines + [""]


HOMEPAGE = None  # no public URL yet; fill in when the dataset is published on the Hub
LICENSE = "cc-by-4.0"
LICENSE_URL = "https://creativecommons.org/licenses/by/4.0/"
BSD_LICENSE = "bsd-2-clause"  # rows derived from the B-Caffe logs
BSD_LICENSE_URL = "https://opensource.org/license/bsd-2-clause"
TAGS = ("distributed-training", "deep-learning", "performance-modeling", "sgd",
        "layer-wise-traces", "benchmark")
REQUIRES = re.compile(r"<!--\s*requires provenance:\s*([a-z, ]+?)\s*-->")
REPO = Path(__file__).resolve().parents[2]
FRAGMENTS = REPO / "cards" / "fragments"  # a checkout's; a wheel ships a copy (setup.py)


def fragments_folder() -> Path:
    """Where the card fragments are: the installed package's copy
    (``dgtraces/_data/fragments``, put there by ``setup.py``), else the checkout's
    ``cards/fragments``."""
    from dgtraces.store.locate import packaged_root

    packaged = packaged_root()
    if packaged is not None and (packaged / "fragments").is_dir():
        return packaged / "fragments"
    return FRAGMENTS

PAPER_BIBTEX = """@inproceedings{shi2018dag,
  title     = {A DAG Model of Synchronous Stochastic Gradient Descent in Distributed Deep Learning},
  author    = {Shi, Shaohuai and Wang, Qiang and Chu, Xiaowen and Li, Bo},
  booktitle = {2018 IEEE 24th International Conference on Parallel and Distributed Systems (ICPADS)},
  year      = {2018},
  note      = {arXiv:1805.03812},
  url       = {https://arxiv.org/abs/1805.03812}
}"""  # noqa: E501 (the BibTeX booktitle stays on one line)
LICENSES = f"""The dataset is released under **CC-BY-4.0** ({LICENSE_URL}) for the rows we
produced: the `layers` table (computed from the cited architecture definitions) and the rows
with provenance `measured` or `reconstructed`, except those derived from B-Caffe below.

Rows with provenance `published` restate figures from the source named in their `source`
column; cite that source when you use them. Rows whose source names the B-Caffe repository
(`shyhuai/B-Caffe`, `logdata/`; counted in the last column above, whatever their provenance)
are derived from its logs, which are distributed under Caffe's **BSD 2-Clause** license; the
repository's copyright notice and license (its `LICENSE` file) apply to those rows."""


def project_url() -> str | None:
    """The project's home page as the installed package's metadata declares it
    (``[project.urls]`` Homepage, Repository or Source of pyproject.toml), else None: cite
    prints a url only where one is declared, never a made-up one."""
    from importlib.metadata import PackageNotFoundError, metadata

    try:
        urls = metadata("dgtraces").get_all("Project-URL") or []
    except PackageNotFoundError:
        return None
    for item in urls:
        label, _, url = item.partition(",")
        if label.strip().lower() in ("homepage", "repository", "source") and url.strip():
            return url.strip()
    return None


def package_bibtex() -> str:
    """BibTeX of the package (its version from ``dgtraces._version``), as in CITATION.cff;
    it names no dataset release (the one you read has its own entry: ``dgtraces cite
    --release X``; a hard-coded "e.g. 0.4.0" went stale; #36 trial)."""
    from dgtraces._version import __version__

    url = project_url()
    return (f"@software{{dgtraces,\n  title   = {{dgtraces: layer-wise deep-learning training "
            f"traces and a DAG predictor of S-SGD iteration time}},\n  author  = "
            f"{{{{dgtraces developers}}}},\n  year    = {{2026}},\n  version = "
            f"{{{__version__}}},\n  note    = {{Cite with the entry of the dataset release "
            f"you read: `dgtraces cite --release X'}}"
            + (f",\n  url     = {{{url}}}" if url else "") + "\n}")


def citation_bibtex(version: str | None = None) -> str:
    """The package and the paper it follows (the same two entries as CITATION.cff and the
    README); ``version``, a dataset release, is named in a comment line above them."""
    head = f"% dataset release {version}\n" if version else ""
    return f"{head}{package_bibtex()}\n\n{PAPER_BIBTEX}"


def size_category(rows: int) -> str:
    bounds = [(1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"),
              (1_000_000, "100K<n<1M"), (10_000_000, "1M<n<10M")]
    return next((label for bound, label in bounds if rows < bound), "10M<n<100M")


def provenance_stats(release: Release) -> dict[str, dict]:
    """Per table: rows, provenance counts, (provenance, source, rows) and B-Caffe rows
    (computed per shard and cached by its sha256: :mod:`dgtraces.publish.card_stats`)."""
    from dgtraces.publish.card_stats import provenance_stats as stats

    return stats(release)


def licenses(stats: dict) -> list[tuple[str, str]]:
    """(Hub licence id, URL) of every licence that applies to some row of the release:
    CC-BY-4.0, plus BSD-2-Clause when B-Caffe-derived rows are present, plus the licence of
    each :data:`THIRD_PARTY` source some row cites (MIT, BSD-3-Clause)."""
    out = [(LICENSE, LICENSE_URL)]
    if any(s["bcaffe"] for s in stats.values()):
        out.append((BSD_LICENSE, BSD_LICENSE_URL))
    present = {repo for s in stats.values() for repo in s.get("third_party", {})}
    for _, repo, key, url in THIRD_PARTY:
        if repo in present and (key, url) not in out:
            out.append((key, url))
    return out


def third_party_lines(stats: dict) -> list[str]:
    """Card table: rows per third-party source and the licence that applies to them."""
    counts: dict[str, list[str]] = {}
    for table, s in stats.items():
        for repo, n in s.get("third_party", {}).items():
            counts.setdefault(repo, []).append(f"{n} `{table}`")
    if not counts:
        return []
    out = ["", "Rows citing these repositories (in `source`) are also under the repository's "
           "own licence; its copyright notice applies to them:", "",
           "| repository | licence | rows |", "| --- | --- | --- |"]
    for _, repo, key, url in THIRD_PARTY:
        if repo in counts:
            out.append(f"| `{repo}` | [{key}]({url}) | {', '.join(counts[repo])} |")
    return out


def default_config(tables) -> str:
    """The Hub viewer's default config: the per-layer traces when present."""
    tables = sorted(tables)
    return "layer_timings" if "layer_timings" in tables else tables[0]


def _yaml_header(manifest: dict, stats: dict, data_dir: str, models: tuple[str, ...]
                 ) -> str:
    import yaml

    from dgtraces.store.manifest import export_names

    tables = sorted(manifest["tables"])
    default = default_config(tables)
    configs = []
    for t in tables:
        paths = [f"{data_dir}/{rel}" if data_dir else rel
                 for rel, _ in export_names(t, manifest["tables"][t])]
        cfg = {"config_name": t, "data_files": [{"split": "train", "path": paths}]}
        if t == default:
            cfg["default"] = True
        configs.append(cfg)
    total = sum(s["rows"] for s in stats.values())
    ids = [key for key, _ in licenses(stats)]
    meta = {"license": ids[0] if len(ids) == 1 else ids, "pretty_name": pretty_name(models),
            "language": ["en"], "tags": list(TAGS), "size_categories": [size_category(total)],
            "configs": configs}
    return "---\n" + yaml.safe_dump(meta, sort_keys=False, allow_unicode=True) + "---\n"


def _md(text) -> str:
    """The package's own text in a table cell (contributor text goes through
    :func:`dgtraces.io.markdown_text.md_inline`)."""
    return "" if text is None else str(text).replace("|", "\\|").replace("\n", " ")


def _provenance_table(stats: dict) -> list[str]:
    lines = ["| table | rows | measured | reconstructed | published | derived from B-Caffe "
             "logs (BSD-2-Clause) |", "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for t, s in stats.items():
        if not s["sources"]:
            what = "computed from the architecture specs" if t == "layers" else "not recorded"
            lines.append(f"| `{t}` | {s['rows']} | {what} (no provenance column) | | | |")
            continue
        p = s["provenance"]
        other = {k: v for k, v in p.items() if k not in ("measured", "reconstructed",
                                                           "published")}
        name = f"`{t}`" + (f" (provenance of its `{s['via']}` row)" if s["via"] else "")
        name += "".join(f"; {v} {md_inline(k)}" for k, v in sorted(other.items()))
        lines.append(f"| {name} | {s['rows']} | {p.get('measured', 0)} | "
                     f"{p.get('reconstructed', 0)} | {p.get('published', 0)} | {s['bcaffe']} |")
    return lines


def _table_section(table: str, stat: dict, entry: dict, max_sources: int = 25) -> list[str]:
    from dgtraces.store.manifest import export_names
    from dgtraces.tables.export import describe, file_columns

    desc = describe(table)
    out = [f"### `{table}`", "", desc["description"], "",
           f"{stat['rows']} rows; primary key ({', '.join(desc['primary_key'])}); "
           f"{len(export_names(table, entry))} Parquet shard(s), listed under Files.", ""]
    out += ["| column | dtype | unit | nullable | description |", "| --- | --- | --- | --- | --- |"]
    for col in file_columns(table, entry):
        dtype = "string" if col["dtype"].startswith("str") else col["dtype"]
        out.append(f"| `{col['name']}` | {dtype} | {_md(col['unit']) or ''} | "
                   f"{'yes' if col['nullable'] else 'no'} | {_md(col['description'])} |")
    if stat["sources"]:
        out += ["", "Sources:", "", "| provenance | source | rows |", "| --- | --- | ---: |"]
        for prov, source, n in stat["sources"][:max_sources]:  # contributor text (#29 M8)
            out.append(f"| {md_inline(prov)} | {md_inline(source)} | {n} |")
        if len(stat["sources"]) > max_sources:
            rest = stat["sources"][max_sources:]
            out.append(f"| | ... and {len(rest)} more sources | {sum(r[2] for r in rest)} |")
    return out + [""]


def linked_figures(folder: str | Path | None = None, stats: dict | None = None
                   ) -> list[Path]:
    """The non-Markdown files (figures) of the fragments folder that the card of a release
    (its ``stats``) links to as ``fragments/<name>``: what a card's folder must hold beside
    its README.md (``card --out``, ``export-hf``)."""
    folder = fragments_folder() if folder is None else Path(folder)
    used = "\n".join(text for _, text in fragments(folder, stats))
    return [p for p in sorted(folder.glob("*")) if p.is_file() and p.suffix != ".md"
            and f"fragments/{p.name}" in used] if folder.is_dir() else []


def fragments(folder: str | Path | None = None, stats: dict | None = None
              ) -> list[tuple[str, str]]:
    """(file name, text) of every ``*.md`` in the fragments folder, sorted by name.

    A fragment whose first line is ``<!-- requires provenance: p[, q] -->`` describes rows
    of those provenances: with ``stats`` (:func:`provenance_stats` of a release) it is left
    out of a release that has none of them. The marker line is never part of the text."""
    folder = fragments_folder() if folder is None else Path(folder)
    if not folder.is_dir():
        return []
    out = []
    for p in sorted(folder.glob("*.md")):
        if not p.is_file():
            continue
        text = p.read_text(encoding="utf-8").strip()
        m = REQUIRES.match(text)
        if m:
            text = text[m.end():].strip()
            needed = {x.strip() for x in m.group(1).split(",")}
            if stats is not None and not any(s["provenance"].get(n) for s in stats.values()
                                             for n in needed):
                continue
        out.append((p.name, text))
    return out


def render_card(release: Release, *, data_dir: str = "data",
                fragments_dir: str | Path | None = None, stats: dict | None = None) -> str:
    """The card text of an open release. Deterministic for a given release.
    ``stats``: its :func:`provenance_stats`, when the caller has them already."""
    from dgtraces.store.manifest import export_names

    manifest = dict(release.manifest)
    version = manifest["version"]
    stats = provenance_stats(release) if stats is None else stats
    models = release_models(release)
    lines = [_yaml_header(manifest, stats, data_dir, models), f"# {pretty_name(models)}", "",
             f"Release **{version}** (schema version {manifest['schema_version']}, created "
             f"{manifest['created_utc']}). {summary(models)}", ""]
    if manifest.get("notes"):
        lines += [f"Release notes: {md_inline(manifest['notes'])}", ""]
    first = default_config(manifest["tables"])
    lines += ["## Loading", "", "```python", "from datasets import load_dataset",
              f'ds = load_dataset("<this folder or Hub id>", "{first}", split="train")', "",
              "import dgtraces                          # the package that built this release",
              f'df = dgtraces.load("{first}", "{version}")   # pandas DataFrame',
              f'con = dgtraces.connect("{version}")           # sandboxed DuckDB, a view per table',
              "```", "", "## Provenance of rows", ""]
    lines += _provenance_table(stats) + ["", "## License", "", LICENSES]
    lines += third_party_lines(stats) + [""]
    lines += _models_section(models) + ["## Tables", ""]
    for table in sorted(manifest["tables"]):
        lines += _table_section(table, stats[table], manifest["tables"][table])
    for name, text in fragments(fragments_dir, stats):
        lines += [f"<!-- from cards/fragments/{name} -->", "", text, ""]
    lines += ["## Files (manifest)", "", "| file | rows | bytes | sha256 |",
              "| --- | ---: | ---: | --- |"]
    for table, e in sorted(manifest["tables"].items()):
        for rel, s in export_names(table, e):
            lines.append(f"| `{data_dir + '/' if data_dir else ''}{rel}` | {s['rows']} | "
                         f"{s['bytes']} | `{s['sha256']}` |")
    lines += ["", f"Manifest digest: `{manifest['digest']}`. `dgtraces verify` re-checks every "
              f"file against it.", "", "## Citation", "",
              (f"Cite the package, naming dataset release {version}, and the paper whose DAG "
                "model it follows (the same entries as the repository's CITATION.cff):"), "",
              "```bibtex", citation_bibtex(version), "```", ""]
    return "\n".join(lines)
