"""Constraints: `--where "METRIC OP VALUE"`, a small grammar of our own (never eval).

    constraint := METRIC OP VALUE | METRIC         (a bare METRIC: fit.fits is true)
    OP         := <= | < | >= | > | == | !=
    VALUE      := NUMBER [UNIT] | true | false | info | warn | error

The unit must fit the metric's kind: bytes take B, KB, MB, GB, TB (10^3
steps) or KiB, MiB, GiB, TiB (2^10 steps); seconds take s, ms, us (µs), ns;
counts take K, M, B (billion), T; FLOPs take K, M, G, T, P (FLOP optional);
rates K, M.  `lint <= info` keeps candidates whose worst finding is an info.
"""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass

import numpy as np

from archcalc.errors import InputError
from archcalc.search.metrics import Metric, metric_named

OPS = {"<=": operator.le, "<": operator.lt, ">=": operator.ge, ">": operator.gt, "==": operator.eq,
       "!=": operator.ne}
CONSTRAINT = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_.]*)\s*(?:(<=|>=|==|!=|<|>)\s*([^<>=!\s].*?))?\s*$")
VALUE = re.compile(r"^([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*([A-Za-zµ/]*)$")
UNITS = {
    "bytes": {"": 1, "B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
              "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40},
    "seconds": {"": 1, "s": 1, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9},
    "count": {"": 1, "K": 1e3, "M": 1e6, "B": 1e9, "T": 1e12},
    "flops": {"": 1, **{p + f: m for p, m in (("", 1), ("K", 1e3), ("M", 1e6), ("G", 1e9), ("T", 1e12),
                                                 ("P", 1e15)) for f in ("", "FLOP") if p + f}},
    "per_second": {"": 1, "K": 1e3, "M": 1e6, "/s": 1, "K/s": 1e3, "M/s": 1e6},
    "ratio": {"": 1},
}
SEVERITY_LEVEL = {"none": 0, "info": 1, "warn": 2, "error": 3}


@dataclass(frozen=True)
class Constraint:
    text: str
    metric: Metric
    op: str
    value: float

    def holds(self, values):
        """Elementwise for arrays; NaN never holds."""
        return OPS[self.op](values, self.value)

    def describe(self) -> str:
        return self.text.strip()


def parse_where(text: str) -> Constraint:
    m = CONSTRAINT.match(text)
    if not m:
        raise InputError(None, "--where", f"{text!r}: write METRIC OP VALUE, e.g. \"params.total <= 8e9\"")
    name, op, raw = m.groups()
    metric = metric_named(name, "--where")
    if op is None:
        if metric.unit != "bool":
            raise InputError(None, "--where", f"{text!r}: {name} is a number; compare it (e.g. {name} <= ...)")
        return Constraint(text, metric, "==", 1.0)
    return Constraint(text, metric, op, _value(raw, metric, text))


def _value(raw: str, metric: Metric, text: str) -> float:
    raw = raw.strip()
    if metric.unit == "bool":
        if raw.lower() not in ("true", "false"):
            raise InputError(None, "--where", f"{text!r}: {metric.name} is true or false")
        return 1.0 if raw.lower() == "true" else 0.0
    if metric.unit == "severity":
        if raw not in SEVERITY_LEVEL:
            raise InputError(None, "--where", f"{text!r}: {metric.name} compares with {', '.join(SEVERITY_LEVEL)}")
        return float(SEVERITY_LEVEL[raw])
    m = VALUE.match(raw)
    if not m:
        raise InputError(None, "--where", f"{text!r}: {raw!r} is not a number with a unit")
    number, unit = float(m.group(1)), m.group(2)
    units = UNITS[metric.unit]
    if unit not in units:
        valid = ", ".join(u for u in units if u) or "none"
        raise InputError(None, "--where", f"{text!r}: {metric.name} is in {metric.unit}; unit {unit!r} is not "
                                          f"one of {valid}")
    value = number * units[unit]
    if not np.isfinite(value):
        raise InputError(None, "--where", f"{text!r}: {raw} is not finite")
    return value
