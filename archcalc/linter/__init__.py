"""`archcalc lint`: a spec against the conventions of published models.

    from archcalc.linter import lint, worst
    findings = lint(spec)            # sorted: error, warn, info; then by rule id
    worst(findings)                  # "warn", or None when the spec follows every convention
    findings[0].rule, .severity, .value, .message, .convention, .evidence

Rules are data plus small functions: core.rule registers each check with its
id and its evidence record (evidence.EVIDENCE); rules.py (FFN, heads, shape,
vocabulary), norms.py, positions.py and training.py (the optional `training:`
section) hold the rules.
To add one: an EVIDENCE entry, a decorated function, a row in
the README (Lint), and tests in tests/lint.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from archcalc.linter import norms as _norms  # noqa: F401  (importing a rule module registers its rules)
from archcalc.linter import positions as _positions  # noqa: F401
from archcalc.linter import rules as _rules  # noqa: F401
from archcalc.linter import training as _training  # noqa: F401
from archcalc.linter.core import RANK, RULES, SEVERITIES, Evidence, Facts, Finding, Rule, at_least, fails, worst
from archcalc.linter.evidence import EVIDENCE, SOURCES

if TYPE_CHECKING:
    from archcalc.spec.model import ModelSpec

__all__ = ["EVIDENCE", "RULES", "SEVERITIES", "SOURCES", "Evidence", "Finding", "LintResult", "Rule", "at_least",
           "fails", "lint", "worst"]


@dataclass(frozen=True)
class LintResult:
    """What `archcalc lint` reports (archcalc.api.lint): the spec, its findings, load warnings."""

    spec: ModelSpec
    findings: list[Finding]
    warnings: tuple[str, ...] = ()

    @property
    def worst(self) -> str | None:
        return worst(self.findings)

    def to_dict(self, min_severity: str = "info") -> dict:
        """The archcalc.lint/1 JSON document (README: Lint)."""
        from archcalc.report.lint import lint_json

        return lint_json(self.spec, self.findings, at_least(self.findings, min_severity), min_severity)


# The rules about softmax attention's heads, logits and positions: they have nothing to judge in a model without
# an attention layer (xLSTM, Mamba: every layer linear), whose attention.n_heads is a placeholder and whose order
# comes from its recurrence.
ATTENTION_RULES = ("heads.", "norm.qk", "norm.softcap", "pos.")


def lint(spec: ModelSpec) -> list[Finding]:
    """Every finding of every rule on `spec`, the most severe first, then by rule id."""
    facts = Facts(spec)
    attends = bool(set(spec.layer_attention) - {"linear", "none"}) or spec.shared_block is not None
    findings = []
    for r in RULES.values():
        if not attends and r.id.startswith(ATTENTION_RULES):
            continue
        verdict = r.check(facts)
        if verdict is not None:
            findings.append(Finding(r.id, verdict.severity, verdict.value, verdict.message, verdict.convention,
                                    r.evidence))
    findings.sort(key=lambda f: (-RANK[f.severity], f.rule))
    return findings
