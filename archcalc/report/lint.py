"""The `lint` view: a rich table of findings and the archcalc.lint/1 JSON document."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Group
from rich.table import Table
from rich.text import Text

from archcalc.linter import SEVERITIES, SOURCES, Evidence, Finding, worst
from archcalc.linter.core import short_count

if TYPE_CHECKING:
    from archcalc.spec.model import ModelSpec

LINT_SCHEMA = "archcalc.lint/1"
STYLE = {"error": "bold red", "warn": "yellow", "info": "cyan"}


def counts(findings: list[Finding]) -> dict[str, int]:
    return {s: sum(f.severity == s for f in findings) for s in SEVERITIES}


def lint_json(spec: ModelSpec, findings: list[Finding], shown: list[Finding], min_severity: str = "info") -> dict:
    """The stable `archcalc lint --json` document (README: lint).  `counts` and
    `worst` cover every finding; `findings` lists those at min_severity or above."""
    return {
        "schema": LINT_SCHEMA,
        "model": spec.name,
        "source": spec.source,
        "worst": worst(findings),
        "counts": counts(findings),
        "min_severity": min_severity,
        "findings": [finding_json(f) for f in shown],
    }


def finding_json(f: Finding) -> dict:
    return {"rule": f.rule, "family": f.family, "severity": f.severity, "value": f.value, "message": f.message,
            "convention": f.convention, "evidence": evidence_json(f.evidence)}


def evidence_json(e: Evidence) -> dict:
    return {"quantity": e.quantity, "models": dict(e.models), "published": dict(e.published),
            "sources": [{"key": k, "citation": SOURCES[k]} for k in e.sources]}


def value_text(v, digits: int = 4) -> str:
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return short_count(v) if v >= 10**9 else f"{v:,}"  # parameter counts: 8.54B
    if isinstance(v, float):
        return f"{v:.{digits}g}"
    return str(v)


def _evidence_text(e: Evidence) -> str:
    """Model values, then published ones, then the source keys the footnote expands."""
    parts = []
    if e.models:
        parts.append(f"{e.label}: " + ", ".join(f"{m} {value_text(v, 6)}" for m, v in e.models))
    parts += [f"{m}: {text}" for m, text in e.published]
    parts.append("[" + "] [".join(e.sources) + "]")
    return "; ".join(parts)


def lint_table(spec: ModelSpec, findings: list[Finding], shown: list[Finding], min_severity: str = "info") -> Group:
    n = counts(findings)
    summary = ", ".join(f"{n[s]} {s}" for s in reversed(SEVERITIES))
    hidden = len(findings) - len(shown)
    title = Text.assemble((spec.name, "bold"), f"  {len(findings)} finding{'s' * (len(findings) != 1)}: {summary}",
                          (f" ({hidden} below {min_severity} not shown)" if hidden else "", "dim"))
    if not shown:
        note = (f"No findings at {min_severity} or above." if findings else
                "No findings: the spec follows every convention lint checks.")
        return Group(title, Text(note))
    table = Table(show_edge=False, show_lines=True, expand=False)
    table.add_column("severity", no_wrap=True)
    table.add_column("rule", no_wrap=True)
    table.add_column("value", justify="right", max_width=14)
    table.add_column("finding", ratio=2)
    table.add_column("convention and evidence", ratio=3)
    for f in shown:
        table.add_row(Text(f.severity, style=STYLE[f.severity]), f.rule, value_text(f.value), f.message,
                      Text.assemble(f.convention + "\n", (_evidence_text(f.evidence), "dim")))
    cited = sorted({k for f in shown for k in f.evidence.sources})
    sources = Text("\n".join(f"[{k}] {SOURCES[k]}" for k in cited), style="dim")
    return Group(title, table, Text(""), Text("Sources", style="bold"), sources)
