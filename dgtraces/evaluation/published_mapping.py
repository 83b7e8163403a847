"""The reviewed mapping from each published scaling row to predictor options (issue #35 item 2).

``scaling_mapping.yaml`` (beside this module) declares one *setup* per published table: which
rows it matches (exact column values), whether they are scored or not representable (with the
reason), and the options they become (model, device, framework profile, policy, bucket,
algorithm, links, NCCL release, input loader), each with the evidence it was read from. It was
written before any of its rows was scored (docs/predictor-published.md); the NCCL entries were
revised, before any re-score, when the predictor gained several NCCL releases (issue #34):
:func:`nccl_model` derives each setup's modelled release by the rules R1-R5 written there. This
module reads it,
checks that every option it names exists in the predictor (an unknown one is a typed error
naming the setup: the evaluation fails loudly, never falls back) and that every row of both
reference files is matched by exactly one setup.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dgtraces.errors import Code, DgtracesError, Failure

if TYPE_CHECKING:  # pragma: no cover
    from dgtraces.comm.nccl_versions import NcclVersion

MAPPING_FILE = Path(__file__).with_name("scaling_mapping.yaml")
NEW_FILE = "scaling/published_scaling.csv"
OLD_FILE = "scaling_published.csv"
FILES = (OLD_FILE, NEW_FILE)
SCORED, NOT_REPRESENTABLE = "scored", "not representable"
NCCL = "nccl"  # predict's default algorithm for the GPU (NCCL's own choice)
FROM_ROW = "from-row"  # the row's own model / device column
GPU_PAIRS = "gpu-pairs"  # ceil(P / 2) parameter servers: one host uplink per two GPUs
ONE_NODE = "none"  # no inter-node link: the intra link stands in
FIELDS = ("id", "file", "match", "rows", "status", "reason", "model", "device", "precision",
          "profile", "policy", "bucket_mib", "algorithm", "servers", "intra", "inter",
          "nics_per_node", "nccl_version", "nccl_date", "loader", "evidence")


@dataclass(frozen=True)
class Setup:
    """One published table's mapping (the fields of scaling_mapping.yaml)."""

    id: str
    file: str
    match: dict[str, tuple[str, ...]]
    rows: int
    status: str
    reason: str | None = None
    model: str | None = None
    device: str | None = None
    precision: str = "fp32"
    profile: str | None = None
    policy: str | None = None
    bucket_mib: float | None = None
    algorithm: str | None = None
    servers: int | str = 1
    intra: str | None = None
    inter: str | None = None
    nics_per_node: int = 1
    nccl_version: str | None = None  # the NCCL release stated / cited for the setup
    nccl_date: str | None = None  # YYYY-MM-DD when no release is found (rule R3)
    loader: str = "unknown"
    evidence: dict[str, str] = field(default_factory=dict)

    @property
    def scored(self) -> bool:
        return self.status == SCORED

    def matches(self, file: str, row: dict[str, str]) -> bool:
        return file == self.file and all(row.get(k) in v for k, v in self.match.items())


def _bad(setup: str, what: str, message: str, found: Any, code: Code = Code.BAD_INPUT,
         expected: str = "") -> DgtracesError:
    text = f"{MAPPING_FILE.name} setup {setup!r}: {what}: {message}"
    return DgtracesError(text, code=code, failures=[Failure(
        code, message, column=what, expected=expected, found=repr(found)[:120])])


@cache
def load_mapping(path: Path = MAPPING_FILE) -> tuple[Setup, ...]:
    """Every setup of the mapping file, each option checked (:func:`check_setup`)."""
    import yaml

    raw = yaml.safe_load(path.read_text(encoding="utf-8"))  # shipped with the package
    if not isinstance(raw, list):
        raise _bad("-", "file", "must be a list of setups", type(raw).__name__)
    out, seen = [], set()
    for item in raw:
        sid = str(item.get("id", "?")) if isinstance(item, dict) else "?"
        if not isinstance(item, dict) or set(item) - set(FIELDS):
            extra = sorted(set(item) - set(FIELDS)) if isinstance(item, dict) else item
            raise _bad(sid, "fields", "unknown field(s)", extra, expected=" | ".join(FIELDS))
        if sid in seen:
            raise _bad(sid, "id", "listed twice", sid, code=Code.DUPLICATE)
        seen.add(sid)
        match = {str(k): tuple(str(x) for x in (v if isinstance(v, list) else [v]))
                 for k, v in (item.get("match") or {}).items()}
        nccl = {k: str(item[k]) for k in ("nccl_version", "nccl_date") if item.get(k) is not None}
        setup = Setup(**{**item, **nccl, "match": match,
                         "evidence": dict(item.get("evidence") or {})})
        check_setup(setup)
        out.append(setup)
    return tuple(out)


def check_setup(s: Setup) -> None:
    """Typed error (naming the setup and the field) for an option the predictor lacks."""
    if s.file not in FILES:
        raise _bad(s.id, "file", "not a shipped reference file", s.file, code=Code.NOT_FOUND,
                   expected=" | ".join(FILES))
    if not s.match or not isinstance(s.rows, int) or s.rows < 1:
        raise _bad(s.id, "match", "needs match columns and a row count >= 1", s.rows)
    if s.status == NOT_REPRESENTABLE:
        if not s.reason:
            raise _bad(s.id, "reason", "a row that is not representable says why", s.reason)
        return
    if s.status != SCORED:
        raise _bad(s.id, "status", "unknown status", s.status,
                   expected=f"{SCORED} | {NOT_REPRESENTABLE}")
    _check_options(s)


def _check_options(s: Setup) -> None:
    from dgtraces.comm.collectives import ALGORITHMS
    from dgtraces.comm.links import known_links
    from dgtraces.models.registry import REGISTRY
    from dgtraces.predict.overheads import LOADERS
    from dgtraces.predict.policy_registry import POLICY_NAMES
    from dgtraces.reference import gpu_devices
    from dgtraces.reference.frameworks import KEYS
    from dgtraces.tables.schema import PRECISIONS

    checks: tuple[tuple[str, Any, tuple, Code], ...] = (
        ("model", s.model, (FROM_ROW,) + tuple(e.key for e in REGISTRY), Code.UNKNOWN_MODEL),
        ("device", s.device, tuple(sorted(gpu_devices())), Code.UNKNOWN_DEVICE),
        ("precision", s.precision, tuple(PRECISIONS), Code.BAD_INPUT),
        ("profile", s.profile, ("none",) + KEYS, Code.UNKNOWN_FRAMEWORK),
        ("algorithm", s.algorithm, (NCCL,) + tuple(ALGORITHMS), Code.BAD_INPUT),
        ("intra", s.intra, tuple(known_links(use_store=False)), Code.UNKNOWN_LINK),
        ("inter", s.inter, (ONE_NODE,) + tuple(known_links(use_store=False)), Code.UNKNOWN_LINK),
        ("loader", s.loader, tuple(LOADERS), Code.BAD_INPUT),
    )
    for what, value, known, code in checks:
        if value not in known:
            raise _bad(s.id, what, "the predictor has no such option", value, code=code,
                       expected=" | ".join(map(str, known)))
    if s.policy is not None and s.policy not in POLICY_NAMES:
        raise _bad(s.id, "policy", "the predictor has no such option", s.policy,
                   expected=" | ".join(POLICY_NAMES))
    if s.bucket_mib is not None and not 0 < float(s.bucket_mib) < 1 << 20:
        raise _bad(s.id, "bucket_mib", "must be a number of MiB > 0", s.bucket_mib)
    if not (s.servers == GPU_PAIRS or (isinstance(s.servers, int) and s.servers >= 1)):
        raise _bad(s.id, "servers", "an integer >= 1 or gpu-pairs", s.servers)
    if not isinstance(s.nics_per_node, int) or s.nics_per_node < 1:
        raise _bad(s.id, "nics_per_node", "an integer >= 1", s.nics_per_node)
    given = [k for k in ("nccl_version", "nccl_date") if getattr(s, k) is not None]
    if (s.algorithm == NCCL) != (len(given) == 1) or len(given) > 1:
        raise _bad(s.id, "nccl_version", "exactly one of nccl_version / nccl_date, given "
                   "exactly when the algorithm is nccl", given)
    if given:
        nccl_model(s)  # UNKNOWN_NCCL / BAD_INPUT naming the setup: no such model


def nccl_model(s: Setup) -> tuple[NcclVersion, str]:
    """The modelled NCCL release of setup ``s`` and how it was derived (rules of
    docs/predictor-published.md): R1 a stated release -> the newest modelled release not newer
    (``comm.nccl_versions.version_for_release``); R3 a date -> the newest modelled release tagged
    by then (``version_for_date``); R4 an NCCL 2 release older than every modelled one (2.0-2.3)
    or a date before the oldest modelled tag -> the oldest model. Anything else (NCCL 1, a
    major release other than 2, an unparsable value) is UNKNOWN_NCCL naming the setup."""
    import re

    from dgtraces.comm.nccl_versions import VERSIONS, version_for_date, version_for_release

    def minor(key: str) -> tuple[int, ...]:
        return tuple(int(x) for x in key.split("."))

    oldest = min(VERSIONS.values(), key=lambda v: minor(v.key))
    older = f"older than every modelled release: the oldest model, {oldest.key} (R4)"
    if s.nccl_version is not None:
        text = s.nccl_version
        m = re.fullmatch(r"2\.(\d+)(?:\.\d+)?", text)
        if m is None:
            raise _bad(s.id, "nccl_version", "not an NCCL 2 release the predictor can model",
                       text, code=Code.UNKNOWN_NCCL, expected="2.MINOR[.PATCH]")
        if (2, int(m[1])) < minor(oldest.key):
            return oldest, f"{text}: {older}"
        v = version_for_release(text)
        return v, f"{text} -> {v.key} (R1: the newest modelled release not newer)"
    date = str(s.nccl_date)
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", date) is None:
        raise _bad(s.id, "nccl_date", "a date YYYY-MM-DD", date)
    if date < oldest.released:
        return oldest, f"{date}: {older}"
    v = version_for_date(date)
    return v, f"{date} -> {v.key} (R3: the newest modelled release tagged by then; inferred)"


def match_rows(setups: tuple[Setup, ...], file: str,
               rows: list[dict[str, str]]) -> list[Setup]:
    """The one setup of each row of ``file`` (in row order); a row matched by none or by
    several, or a setup matching another number of rows than it declares, is an error."""
    out = []
    for i, row in enumerate(rows):
        hits = [s for s in setups if s.matches(file, row)]
        if len(hits) != 1:
            raise _bad(",".join(s.id for s in hits) or "-", "match",
                       f"row {i + 1} of {file} is matched by {len(hits)} setups", i + 1,
                       code=Code.INTEGRITY, expected="exactly one")
        out.append(hits[0])
    for s in setups:
        n = sum(1 for h in out if h is s)
        if s.file == file and n != s.rows:
            raise _bad(s.id, "rows", f"matches {n} rows of {file}", n, code=Code.INTEGRITY,
                       expected=str(s.rows))
    return out


def mapped_rows(setups: tuple[Setup, ...] | None = None) -> list[tuple[str, dict, Setup]]:
    """(file, row, setup) for every row of both shipped reference files."""
    from dgtraces.reference import rows as ref_rows

    setups = load_mapping() if setups is None else setups
    out = []
    for file in FILES:
        rows = ref_rows(file)
        out += [(file, r, s) for r, s in zip(rows, match_rows(setups, file, rows), strict=True)]
    return out


def mapping_markdown(setups: tuple[Setup, ...] | None = None) -> str:
    """The mapping as the docs' table (docs/predictor-published.md), one line per setup."""
    setups = load_mapping() if setups is None else setups
    lines = ["| setup | file | rows | status | profile | policy / bucket | algorithm (NCCL) | "
             "links | loader | reason |", "|" + " --- |" * 10]
    for s in setups:
        pol = " / ".join(x for x in (s.policy or "", f"{s.bucket_mib:g} MiB"
                                     if s.bucket_mib is not None else "") if x) or "-"
        algo = "-" if s.algorithm is None else (
            f"nccl ({s.nccl_version or s.nccl_date} -> {nccl_model(s)[0].key})"
            if s.algorithm == NCCL else
            f"{s.algorithm}" + (f", {s.servers} servers" if s.servers != 1 else ""))
        links = "-" if s.intra is None else (f"{s.intra}" if s.inter == ONE_NODE
                                             else f"{s.intra} / {s.inter} x{s.nics_per_node}")
        cells = [f"`{s.id}`", s.file, str(s.rows), s.status, s.profile or "-", pol, algo, links,
                 s.loader if s.scored else "-", (s.reason or "").replace("|", "/")]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
