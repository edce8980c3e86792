"""Views of a sweep: the rich table, the JSON document, CSV, and the scatter plot of the front."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from archcalc.report.units import binary, count, seconds, si

SCHEMA = "archcalc.sweep/1"
SEVERITY_NAMES = ("none", "info", "warn", "error")
UNIT_NAMES = {"count": "1", "bytes": "bytes", "flops": "FLOP", "seconds": "s", "per_second": "1/s", "ratio": "1",
              "bool": "0/1", "severity": "0 none, 1 info, 2 warn, 3 error"}


def fmt(unit: str, v) -> str:
    if unit == "bytes":
        return binary(v)
    if unit == "seconds":
        return seconds(v)
    if unit == "flops":
        return si(v, "FLOP")
    if unit == "per_second":
        return si(v, "tok/s")
    if unit == "bool":
        return "yes" if v else "no"
    if unit == "severity":
        return SEVERITY_NAMES[int(v)]
    if unit == "ratio":
        return f"{v:.4g}"
    return count(v).split(" (")[0] if v < 1e6 else si(v).replace(" G", " B")


def summary(result) -> list[str]:
    from archcalc.search.metrics import METRICS

    r, s = result.request, result.request.settings
    mode = f"{r.samples:,} samples (seed {r.seed})" if r.samples else "the full grid"
    lines = [f"{result.candidates:,} candidates ({mode}) in {result.seconds:.2f} s "
             f"({result.candidates / max(result.seconds, 1e-9):,.0f}/s)"]
    if result.invalid:
        why = "; ".join(f"{n:,} {rule}" for rule, n in sorted(result.invalid.items(), key=lambda kv: -kv[1]))
        lines.append(f"dropped as invalid: {result.invalid_total:,} ({why})")
    lines.append(f"failing --where: {result.infeasible:,}; feasible: {result.feasible:,}"
                 + (f"; checked one by one (fit, lint): {result.lazy_checked:,}, of which {result.lazy_rejected:,} "
                    "failed" if result.lazy_checked else ""))
    lines.append(f"order: {result.order}" + (f" ({result.front:,} on the front)" if result.front is not None else ""))
    at = f"context {s.context:,} × batch {s.batch}, weights {s.dtype}, KV {s.kv_dtype}, FLOPs {s.convention}"
    if s.rates is not None:
        at += f"; times: {s.rates.label} rates ({s.rates.source}), " + (
            f"one of {s.tp} tensor-parallel ranks" if s.tp > 1 else "one GPU")
    lines.append(at)
    used = [METRICS[n] for n in result.metric_names]
    lines.append("metrics: " + "; ".join(f"{m.name}: {m.doc}" for m in used))
    return lines


def sweep_table(result):
    from rich.table import Table

    from archcalc.search.metrics import METRICS

    r = result.request
    t = Table(title=f"sweep of {r.spec.name}", title_justify="left")
    t.add_column("#", justify="right")
    for v in r.varies:
        t.add_column(v.path, justify="right")
    for name in result.metric_names:
        t.add_column(name, justify="right")
    for i, row in enumerate(result.rows, 1):
        t.add_row(str(i), *(str(row.fields[v.path]) for v in r.varies),
                  *(fmt(METRICS[n].unit, row.metrics[n]) for n in result.metric_names))
    return t


def sweep_json(result) -> dict:
    from archcalc.search.metrics import METRICS

    r, s = result.request, result.request.settings
    return {
        "schema": SCHEMA,
        "model": r.spec.name,
        "vary": {v.path: list(v.values) for v in r.varies},
        "mode": "samples" if r.samples else "grid",
        "samples": r.samples,
        "seed": r.seed if r.samples else None,
        "workload": {"context": s.context, "batch": s.batch, "dtype": s.dtype, "kv_dtype": s.kv_dtype,
                     "flops_convention": s.convention},
        "gpu": s.hardware.name if s.hardware is not None else None,
        "tp": s.tp,
        "rates": s.rates.describe() if s.rates is not None else None,
        "where": [c.describe() for c in r.where],
        "objective": {"metric": r.objective.metric.name, "direction": r.objective.direction} if r.objective else None,
        "pareto": [{"metric": a.metric.name, "direction": a.direction} for a in r.pareto] if r.pareto else None,
        "counts": {"candidates": result.candidates, "invalid": result.invalid_total, "invalid_by_rule": result.invalid,
                   "infeasible": result.infeasible, "feasible": result.feasible, "checked": result.lazy_checked,
                   "rejected_by_checks": result.lazy_rejected, "front": result.front, "shown": len(result.rows)},
        "seconds": result.seconds,
        "units": {n: UNIT_NAMES[METRICS[n].unit] for n in result.metric_names},
        "results": [{"fields": row.fields, "metrics": row.metrics} for row in result.rows],
    }


def sweep_csv(result) -> str:
    r = result.request
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow([v.path for v in r.varies] + list(result.metric_names))
    for row in result.rows:
        w.writerow([row.fields[v.path] for v in r.varies] + [row.metrics[n] for n in result.metric_names])
    return buf.getvalue()


def sweep_plot(result, path: str) -> bytes:
    """A scatter of (up to 20,000 of) the feasible candidates and the shown rows: the
    two Pareto metrics, else the objective against the first varied field's metric
    axis (params.total when nothing else fits).  Returns the image's bytes."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from archcalc.search.metrics import METRICS

    r = result.request
    if r.pareto:
        x, y = r.pareto[0].metric.name, r.pareto[1].metric.name
    else:
        y = r.objective.metric.name if r.objective else result.metric_names[-1]
        x = next((n for n in result.metric_names if n != y), "params.total")
    fig = Figure(figsize=(7, 5))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.scatter(result.scatter[x], result.scatter[y], s=4, c="tab:gray", alpha=0.4, label="feasible candidates")
    ax.plot([row.metrics[x] for row in result.rows], [row.metrics[y] for row in result.rows], "o-",
            c="tab:red", ms=5, label="Pareto front (shown rows)" if r.pareto else "shown rows")
    ax.set_xlabel(f"{x} [{UNIT_NAMES[METRICS[x].unit]}]")
    ax.set_ylabel(f"{y} [{UNIT_NAMES[METRICS[y].unit]}]")
    if all(v > 0 for v in result.scatter[x]) and len(result.scatter[x]):
        ax.set_xscale("log")
    if all(v > 0 for v in result.scatter[y]) and len(result.scatter[y]):
        ax.set_yscale("log")
    ax.set_title(f"sweep of {r.spec.name}: {result.feasible:,} feasible of {result.candidates:,}")
    ax.legend(loc="best", fontsize="small")
    fig.tight_layout()
    out = io.BytesIO()
    fig.savefig(out, format=Path(path).suffix.lower()[1:], dpi=100)
    return out.getvalue()
