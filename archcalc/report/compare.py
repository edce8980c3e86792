"""Rendering of `archcalc compare`: rich table, Markdown, CSV and JSON.

The first model is the baseline; the others show their value and the
difference from it."""

from __future__ import annotations

import csv
import io

from rich.table import Table

from archcalc.cost.compare import Comparison, Metric
from archcalc.report.units import binary, seconds, si

COMPARE_SCHEMA = "archcalc.compare/1"


def fmt(value, unit: str) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return {
        "count": lambda v: si(v).replace(" G", " B"),
        "bytes": binary,
        "flops": lambda v: si(v, "FLOP"),
        "seconds": seconds,
        "per_s": lambda v: f"{v:,.1f}",
        "tokens": lambda v: f"{v:,}",
    }.get(unit, str)(value)


def diff(metric: Metric, i: int) -> str:
    base, value = metric.values[0], metric.values[i]
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not isinstance(base, (int, float)) or not base:
        return ""
    change = value / base - 1
    return "=" if change == 0 else f"{change:+.1%}"


def _cells(c: Comparison, m: Metric) -> list[str]:
    out = [fmt(m.values[0], m.unit)]
    for i in range(1, len(c.names)):
        d = diff(m, i)
        out.append(fmt(m.values[i], m.unit) + (f" ({d})" if d else ""))
    return out


def compare_table(c: Comparison) -> Table:
    title = f"Comparison at context {c.context:,} × batch {c.batch}" + (f" on {c.hardware}" if c.hardware else "")
    table = Table(title=title, title_justify="left", show_edge=False)
    table.add_column("")
    for i, name in enumerate(c.names):
        table.add_column(name + (" (baseline)" if i == 0 else ""), justify="right")
    for m in c.metrics:
        table.add_row(m.label, *_cells(c, m))
    return table


def compare_markdown(c: Comparison) -> str:
    header = ["metric"] + [n + (" (baseline)" if i == 0 else "") for i, n in enumerate(c.names)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join([m.label] + _cells(c, m)) + " |" for m in c.metrics]
    return "\n".join(lines) + "\n"


def _num(v):
    """Whole floats as ints (bytes and FLOPs are whole numbers)."""
    return int(v) if isinstance(v, float) and v.is_integer() else v


def compare_csv(c: Comparison) -> str:
    """Raw values in SI units (bytes, FLOPs, seconds), one row per metric."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["metric", "unit", *c.names])
    for m in c.metrics:
        writer.writerow([m.key, m.unit, *("" if v is None else _num(v) for v in m.values)])
    return buf.getvalue()


def compare_json(c: Comparison) -> dict:
    return {"schema": COMPARE_SCHEMA, "models": c.names, "baseline": c.names[0], "context": c.context,
            "batch": c.batch, "hardware": c.hardware,
            "metrics": [{"key": m.key, "label": m.label, "unit": m.unit, "values": [_num(v) for v in m.values]}
                        for m in c.metrics], "warnings": list(c.warnings)}
