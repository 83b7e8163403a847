"""Evaluation of the issue #26 terms (framework profiles, ``sync``, ``input``) against the
published multi-GPU rows and the measured CPU rows, by the pre-registered rule
(docs/predictor-overheads.md): a variant is adopted only if it lowers the published MAPE,
worsens no source's MAPE by more than 1 point and the measured CPU MAPE by no more than 1
point. ``validate-predictor --published --markdown`` and ``scripts/overheads_tables.py``
print the tables of the docs from here (never typed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from dgtraces.predict.overheads import DEFAULT, Overheads
from dgtraces.reference.frameworks import AUTO, NONE

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from dgtraces.evaluation.published_report import PublishedValidation
    from dgtraces.store.release import Release

FRAMEWORK_CHOICES = ("none", "auto")
OVERHEAD_CHOICES = ("none", "sync", "input", "sync,input")
TOLERANCE_POINTS = 1.0  # the "by more than 1 point"
GOAL_RATIO = 0.6  # the goal: predictor MAPE <= 0.6 x linear, same rows


@dataclass(frozen=True)
class Variant:
    framework: str
    overheads: str
    published_mape_pct: float
    linear_rows_mape_pct: float  # predictor on the rows that have a linear baseline
    linear_mape_pct: float
    cpu_mape_pct: float
    by_source: dict[str, float]  # source -> predictor MAPE
    linear_by_source: dict[str, float | None]
    validation: PublishedValidation | None = field(default=None, repr=False, compare=False)

    @property
    def label(self) -> str:
        return f"--framework {self.framework} --overheads {self.overheads}"

    @property
    def ratio(self) -> float:
        return self.linear_rows_mape_pct / self.linear_mape_pct


@dataclass(frozen=True)
class TermsEvaluation:
    variants: tuple[Variant, ...]

    @property
    def baseline(self) -> Variant:
        return self.variants[0]

    def parent(self, v: Variant) -> Variant:
        """What ``v`` adds its one change to: the same framework without overheads, or
        (for a framework alone) today's predictor."""
        fw = v.framework if v.overheads != "none" else "none"
        return next(p for p in self.variants if p.framework == fw and p.overheads == "none")

    def verdict(self, v: Variant) -> tuple[bool, str]:
        """Adopted? and why, by the pre-registered rule against :meth:`parent`."""
        b = self.parent(v)
        if v is b:
            return False, "today's predictor (the reference)"
        why = []
        if not v.published_mape_pct < b.published_mape_pct - 1e-9:
            why.append("published MAPE not lower")
        worse = [s for s, m in v.by_source.items()
                 if m > b.by_source.get(s, m) + TOLERANCE_POINTS]
        if worse:
            why.append(f"{len(worse)} source(s) worse by > {TOLERANCE_POINTS:g} point")
        if v.cpu_mape_pct > b.cpu_mape_pct + TOLERANCE_POINTS:
            why.append(f"measured CPU MAPE worse by > {TOLERANCE_POINTS:g} point")
        against = f"vs `{b.framework}`/`{b.overheads}`"
        return (not why, f"meets the rule {against}" if not why
                else "; ".join(why) + f" {against}")

    def to_markdown(self) -> str:
        b = self.baseline
        lines = ["| variant | published MAPE | on the linear rows | linear baseline | ratio "
                 f"(goal <= {GOAL_RATIO}) | measured CPU MAPE | adopted? |",
                 "| --- | --- | --- | --- | --- | --- | --- |"]
        for v in self.variants:
            ok, why = self.verdict(v)
            lines.append(f"| `{v.label}` | {v.published_mape_pct:.2f}% | "
                         f"{v.linear_rows_mape_pct:.2f}% | {v.linear_mape_pct:.2f}% | "
                         f"{v.ratio:.2f} | {v.cpu_mape_pct:.2f}% | "
                         f"{'yes' if ok else 'no'}: {why} |")
        lines += ["", "Per source (predictor MAPE; the linear baseline where the source gives "
                  "a 1-GPU figure):", ""]
        heads = [f"`{v.framework}`/`{v.overheads}`" for v in self.variants]
        lines.append("| source | linear | " + " | ".join(heads) + " |")
        lines.append("| --- | --- | " + " | ".join("---" for _ in heads) + " |")
        for src in b.by_source:
            lin = b.linear_by_source.get(src)
            cells = [f"{v.by_source.get(src, float('nan')):.2f}%" for v in self.variants]
            lines.append(f"| {src} | {'-' if lin is None else f'{lin:.2f}%'} | "
                         + " | ".join(cells) + " |")
        return "\n".join(lines)


def _variant(framework: str, overheads: str, release: Release | str | None,
             cpu: dict, nccl: tuple[str | None, str] = (None, "run")) -> Variant:
    import math

    from dgtraces.evaluation.published import validate_published
    from dgtraces.evaluation.validation import validate

    spec = Overheads.parse(overheads)
    pub = validate_published(release, framework, spec, nccl=nccl[0], nccl_time=nccl[1])
    h = pub.headline()
    if overheads not in cpu:
        cpu[overheads] = validate(release, spec).headline()["measured"]["mape_pct"]
    src = pub.by_source()
    lin = {s: (None if m is None or (isinstance(m, float) and math.isnan(m)) else float(m))
           for s, m in zip(src["source"], src["linear_mape_pct"], strict=True)}
    return Variant(framework, overheads, h["mape_pct"], h["predictor_mape_on_linear_rows_pct"],
                   h["linear_mape_pct"], cpu[overheads],
                   dict(zip(src["source"], src["mape_pct"].astype(float), strict=True)), lin,
                   pub)


def evaluate_terms(release: Release | str | None = None, on_step=None,
                   nccl: str | None = None, nccl_time: str = "run") -> TermsEvaluation:
    """Every variant (framework none/auto x overheads none/sync/input/sync,input), the
    first being today's predictor; ``release`` (a Release or a version, default latest) is
    opened once for all of them (its tables read once); ``nccl``/``nccl_time`` as in
    :func:`.published.validate_published` (None: each setup's own release)."""
    from dgtraces.store.release import open_if_any

    rel = open_if_any(release)
    cpu: dict[str, float] = {}
    out = []
    for fw in FRAMEWORK_CHOICES:
        for ov in OVERHEAD_CHOICES:
            out.append(_variant(fw, ov, rel, cpu, (nccl, nccl_time)))
            if on_step:
                on_step(1)
    return TermsEvaluation(tuple(out))


# The commands' defaults (--framework auto --overheads measured), from their declarations
DEFAULTS = (AUTO, Overheads.parse(DEFAULT).label)
BEFORE = (NONE, Overheads.parse(NONE).label)  # the predictor before issue #35's defaults


def docs_tables(release: Release | str | None, on_step=None,
                ev: TermsEvaluation | None = None, nccl: str | None = None,
                nccl_time: str = "run") -> dict[str, str]:
    """The docs' generated blocks, from one run of :func:`evaluate_terms` (or ``ev``):
    ``results`` (the published evaluation at the defaults and before them;
    docs/predictor-published.md) and ``terms`` (docs/predictor-overheads.md)."""
    ev = evaluate_terms(release, on_step, nccl, nccl_time) if ev is None else ev
    pubs = {(v.framework, v.overheads): v.validation for v in ev.variants}
    parts = []
    for title, key in (("The defaults (`--framework auto --overheads measured`)", DEFAULTS),
                       ("Before issue #35 (`--framework none --overheads none`)", BEFORE)):
        pv = pubs[key]
        assert pv is not None
        parts += [f"#### {title}", "", pv.to_markdown(), ""]
    return {"results": "\n".join(parts).rstrip(),
            "terms": ev.to_markdown() + "\n\n" + input_verdict(pubs)}


def input_verdict(pubs: dict) -> str:
    """Revision I2's pre-registered rule (docs/predictor-overheads.md), clause (a) first: how
    many scored rows the input term changes at the defaults."""
    base, with_input = pubs[DEFAULTS], pubs[("auto", "sync,input")]
    a, b = base.scored(), with_input.scored()
    changed = int((a["predicted"] - b["predicted"]).abs().gt(1e-9 * a["predicted"]).sum())
    verdict = ("not adopted: clause (a) fails, it changes no scored row (every scored loader "
               "either puts no decode work on the host or has no sourced decode rate)"
               if changed == 0 else "judge by clauses (b) and (c) against `auto`/`sync`")
    return (f"Revision I2 of the input term: it changes {changed} of {len(a)} scored rows "
            f"against `auto`/`sync`; {verdict}.")


def frame(ev: TermsEvaluation) -> pd.DataFrame:
    """The variants as a DataFrame (for --json/--out)."""
    import pandas as pd

    return pd.DataFrame([{"framework": v.framework, "overheads": v.overheads,
                          "published_mape_pct": v.published_mape_pct,
                          "linear_rows_mape_pct": v.linear_rows_mape_pct,
                          "linear_mape_pct": v.linear_mape_pct, "ratio": v.ratio,
                          "cpu_mape_pct": v.cpu_mape_pct, "adopted": ev.verdict(v)[0],
                          "why": ev.verdict(v)[1]} for v in ev.variants])
