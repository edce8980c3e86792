"""The lint machinery: severities, the Finding and Evidence records, the rule
registry, and the facts a rule may read.

A rule is a small function `check(facts) -> Verdict | None`, registered with
`@rule(id, summary=...)`; its evidence record (evidence.EVIDENCE[id]) is data,
so a test can recompute every value it quotes from the bundled specs.  Rules
read the spec and the totals (cost.totals over ops.layers.model_ops), never
re-derive a parameter count.  Nothing here imports rich, numpy or torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Callable, NamedTuple, Union

from archcalc.report.units import si

if TYPE_CHECKING:
    from archcalc.cost.totals import ParamCounts
    from archcalc.spec.model import ModelSpec

# Lowest to highest.  error: definitely broken or self-contradictory; warn: a
# likely mistake; info: a deliberate deviation from the convention, named.
SEVERITIES = ("info", "warn", "error")
RANK = {s: i for i, s in enumerate(SEVERITIES)}

Value = Union[int, float, str]


@dataclass(frozen=True)
class Evidence:
    """Where a convention comes from.  `sources` are keys of evidence.SOURCES;
    `models` maps a bundled spec (specs/NAME.yaml) to its value of `quantity`
    (tests/lint recomputes each one from the spec); `published` maps a model
    that is not bundled to its value and the paper or config that states it."""

    sources: tuple[str, ...]
    quantity: str | None = None
    models: tuple[tuple[str, Value], ...] = ()
    published: tuple[tuple[str, str], ...] = ()

    @property
    def label(self) -> str | None:
        """The quantity as a reader writes it ("hf:KEY" is the config.json key)."""
        q = self.quantity
        return f"config.json {q[3:]}" if q and q.startswith("hf:") else q

    def __str__(self) -> str:
        from archcalc.linter.evidence import SOURCES

        parts = []
        if self.models:
            parts.append(f"{self.label}: " + ", ".join(f"{m} {_short(v)}" for m, v in self.models))
        parts += [f"{m}: {text}" for m, text in self.published]
        parts += [SOURCES[s] for s in self.sources]
        return "; ".join(parts)


def _short(v: Value) -> str:
    if isinstance(v, bool):
        return "yes" if v else "no"
    return f"{v:.6g}" if isinstance(v, float) else f"{v:,}" if isinstance(v, int) else str(v)


@dataclass(frozen=True)
class Finding:
    rule: str  # "ffn.ratio": family.name
    severity: str  # one of SEVERITIES
    value: Value  # the spec's value the rule judged
    message: str  # one sentence: what the spec does
    convention: str  # the convention, in words
    evidence: Evidence

    @property
    def family(self) -> str:
        return self.rule.split(".")[0]


class Verdict(NamedTuple):
    """What a check returns; lint() adds the rule id and its evidence."""

    severity: str
    value: Value
    message: str
    convention: str


@dataclass(frozen=True)
class Rule:
    id: str
    summary: str  # one line for the README table
    severities: tuple[str, ...]  # the severities it can give
    check: Callable[[Facts], Verdict | None]
    evidence: Evidence

    @property
    def family(self) -> str:
        return self.id.split(".")[0]


RULES: dict[str, Rule] = {}


def rule(rule_id: str, *, summary: str, severities: tuple[str, ...] = ("info",)):
    """Register `check` under `rule_id` with its evidence record (evidence.EVIDENCE[rule_id])."""
    from archcalc.linter.evidence import EVIDENCE

    def register(check: Callable[[Facts], Verdict | None]):
        if rule_id in RULES:
            raise ValueError(f"lint rule {rule_id} registered twice")
        RULES[rule_id] = Rule(rule_id, summary, severities, check, EVIDENCE[rule_id])
        return check

    return register


class Facts:
    """The spec plus what rules read from the totals, computed once and only if asked."""

    def __init__(self, spec: ModelSpec):
        self.spec = spec

    @cached_property
    def ops(self):
        from archcalc.ops.layers import model_ops
        from archcalc.ops.workload import Workload

        return model_ops(self.spec, Workload.forward(1, 1))

    @cached_property
    def params(self) -> ParamCounts:
        from archcalc.cost.totals import param_counts

        return param_counts(self.ops)

    @cached_property
    def bf16_weight_bytes(self) -> float:
        from archcalc.cost.totals import weight_bytes

        return weight_bytes(self.ops, "bf16")

    @cached_property
    def dense_layers(self) -> int:
        return self.spec.ffn_layers["dense"]

    @cached_property
    def local_layers(self) -> int:
        return self.spec.attention_layers["local"]


def and_list(items) -> str:
    """'2, 4 and 8'."""
    items = [str(i) for i in items]
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def short_count(n: float) -> str:
    """A parameter (or token) count as people write it: 8.03B, 124.44M."""
    return si(n).replace(" G", "B").replace(" ", "")


def worst(findings) -> str | None:
    """The highest severity among `findings`, or None when there are none."""
    return max((f.severity for f in findings), key=RANK.__getitem__, default=None)


def at_least(findings, severity: str) -> list[Finding]:
    """The findings at `severity` or above."""
    return [f for f in findings if RANK[f.severity] >= RANK[severity]]


def fails(findings, fail_on: str) -> bool:
    """Whether a CI gate set to `fail_on` (a severity, or "never") fails on `findings`."""
    return fail_on != "never" and bool(at_least(findings, fail_on))
