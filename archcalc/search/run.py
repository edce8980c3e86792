"""The sweep: candidates -> valid -> feasible -> ordered -> the shown rows.

1. search/space.py makes the candidates (a grid or samples), grouped by their choices.
2. Per chunk of CHUNK candidates: one array-valued spec; the spec's NUMERIC_RULES
   drop invalid candidates (counted per rule); the vector metrics of the
   constraints, the objective and the table are computed for all of them at
   once (search/metrics.py) and the vector constraints keep the feasible ones.
3. Order: by the objective, or the Pareto front of two metrics (each towards
   its better side), or the grid's own order when neither is given.
4. Per-candidate metrics (fit.*, lint) are evaluated in that order, on one
   validated ModelSpec each, until --top candidates pass (0: all of them).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from archcalc.errors import InputError
from archcalc.spec.model import ModelSpec
from archcalc.search import space
from archcalc.search.metrics import METRICS, Evaluation, Metric, Settings, vector_values
from archcalc.search.where import Constraint

CHUNK = 1 << 18  # candidates per array batch: bounds memory (a few hundred MB at most) and paces the progress bar
MAX_LAZY = 20_000  # per-candidate evaluations (fit, lint) a sweep may spend before it gives up
DEFAULT_COLUMNS = ("params.total", "kv_cache.bytes_per_token")
TIMED_COLUMNS = ("tpot",)


@dataclass(frozen=True)
class Objective:
    metric: Metric
    direction: str  # "min" | "max"


def pareto_axis(text: str) -> Objective:
    """A Pareto axis: METRIC towards its better side, or max:METRIC / min:METRIC."""
    from archcalc.search.metrics import metric_named

    side, _, name = text.rpartition(":")
    if side not in ("", "max", "min"):
        raise InputError(None, "--pareto", f"{text!r}: prefix a metric with max: or min:, or nothing")
    metric = metric_named(name, "--pareto")
    return Objective(metric, side or ("max" if metric.better == "higher" else "min"))


@dataclass(frozen=True)
class Request:
    spec: ModelSpec
    varies: list
    settings: Settings
    where: list[Constraint] = field(default_factory=list)
    objective: Objective | None = None
    pareto: tuple[Objective, Objective] | None = None
    top: int = 20
    samples: int | None = None
    seed: int = 0
    columns: tuple[str, ...] = ()  # extra metrics to show


@dataclass(frozen=True)
class Row:
    fields: dict  # the varied fields' values
    metrics: dict  # metric name -> value (Python numbers)


@dataclass
class Result:
    request: Request
    candidates: int = 0
    invalid: dict[str, int] = field(default_factory=dict)  # rule -> candidates dropped
    infeasible: int = 0  # valid, failing a vector constraint
    feasible: int = 0  # passing every vector constraint
    lazy_checked: int = 0  # candidates whose per-candidate metrics were evaluated
    lazy_rejected: int = 0
    passing: dict[str, int] = field(default_factory=dict)  # vector constraint -> valid candidates it admits alone
    rows: list[Row] = field(default_factory=list)
    front: int | None = None  # size of the Pareto front (before --top)
    seconds: float = 0.0
    metric_names: tuple[str, ...] = ()
    scatter: dict[str, np.ndarray] = field(default_factory=dict)  # up to PLOT_POINTS feasible points, for --plot

    def to_dict(self) -> dict:
        """The archcalc.sweep/1 JSON document (README: JSON schema)."""
        from archcalc.report.sweep import sweep_json

        return sweep_json(self)

    def why_empty(self) -> str:
        """Why no candidate is shown, in one line."""
        valid = self.candidates - self.invalid_total
        if not valid:
            rules = ", ".join(f"{rule} ({n:,})" for rule, n in self.invalid.items())
            return f"all {self.candidates:,} candidates are invalid: {rules}"
        never = [text for text, n in self.passing.items() if n == 0]
        if never:
            return (f"no valid candidate (of {valid:,}) satisfies {' or '.join(repr(t) for t in never)}, even "
                    "alone")
        if self.feasible:
            return (f"all {self.lazy_checked:,} candidates checked one by one fail "
                    + " and ".join(repr(c.text) for c in self.request.where if c.metric.needs == "candidate"))
        alone = ", ".join(f"{t!r} admits {n:,}" for t, n in self.passing.items())
        return f"no valid candidate (of {valid:,}) satisfies every --where together ({alone})"

    @property
    def invalid_total(self) -> int:
        return sum(self.invalid.values())

    @property
    def order(self) -> str:
        r = self.request
        if r.pareto:
            return "Pareto front of " + " and ".join(f"{a.direction} {a.metric.name}" for a in r.pareto)
        if r.objective:
            return f"{r.objective.direction}imize {r.objective.metric.name}"
        return "grid order (no --minimize, --maximize or --pareto)"


PLOT_POINTS = 20_000


def metric_names(req: Request) -> tuple[list[str], list[str]]:
    """(vector metrics to compute, per-candidate metrics to evaluate), in display order."""
    timed = req.settings.rates is not None
    wanted = [*DEFAULT_COLUMNS, *(TIMED_COLUMNS if timed else ()), *req.columns,
              *(c.metric.name for c in req.where)]
    if req.objective:
        wanted.append(req.objective.metric.name)
    if req.pareto:
        wanted += [a.metric.name for a in req.pareto]
    names = list(dict.fromkeys(wanted))
    for name in names:
        m = METRICS[name]
        if m.needs in ("decode", "prefill") and not timed:
            raise InputError(None, "--where", f"{name} needs a --gpu (and its rate set)")
        if m.needs == "candidate" and name.startswith("fit.") and req.settings.hardware is None:
            raise InputError(None, "--where", f"{name} needs a --gpu")
    vector = [n for n in names if METRICS[n].needs != "candidate"]
    lazy = [n for n in names if METRICS[n].needs == "candidate"]
    return vector, lazy


def run(req: Request, progress: Callable[[int, int], None] | None = None) -> Result:
    for m in [a.metric for a in ([req.objective] if req.objective else []) + list(req.pareto or ())]:
        if m.needs == "candidate":
            raise InputError(None, "--minimize" if req.objective else "--pareto",
                             f"{m.name} is evaluated per candidate; use it in --where")
    vector, lazy = metric_names(req)
    start = time.perf_counter()
    groups = space.groups(req.spec, req.varies, req.samples, req.seed)
    res = Result(req, metric_names=tuple(vector + lazy))
    total = sum(g.size for g in groups)
    kept: dict[str, list] = {name: [] for name in vector}
    kept_group, kept_row = [], []
    done = 0
    for gi, g in enumerate(groups):
        res.candidates += g.size
        if g.base is None:
            res.invalid[g.invalid_reason] = res.invalid.get(g.invalid_reason, 0) + g.size
            done += g.size
            continue
        probed = False
        for lo in range(0, g.size, CHUNK):
            cols = {p: c[lo:lo + CHUNK] for p, c in g.columns.items()}
            n = min(CHUNK, g.size - lo)
            ok, dropped = space.validity(space.with_values(g.base, cols), n, req.settings.tp)
            for rule, k in dropped.items():
                res.invalid[rule] = res.invalid.get(rule, 0) + k
            rows = np.flatnonzero(ok)
            if rows.size and not probed:
                # The rules between numbers passed; what is left to fail is which fields are set at all
                # (q_lora_rank on an MHA spec, a window pattern without a window): one candidate tells.
                probed, reason = True, _structural_error(g, int(rows[0]) + lo)
                if reason is not None:
                    g.base, g.invalid_reason = None, reason
                    res.invalid[reason] = res.invalid.get(reason, 0) + (g.size - lo) - (n - rows.size)
                    done = done - lo + g.size
                    break
            if rows.size:
                ev = Evaluation(space.with_values(g.base, {p: c[rows] for p, c in cols.items()}), req.settings)
                values = vector_values(ev, vector, rows.size)
                feasible = np.ones(rows.size, dtype=bool)
                for c in req.where:
                    if c.metric.needs != "candidate":
                        holds = np.asarray(c.holds(values[c.metric.name]), dtype=bool)
                        res.passing[c.text] = res.passing.get(c.text, 0) + int(holds.sum())
                        feasible &= holds
                res.infeasible += int((~feasible).sum())
                for name in vector:
                    kept[name].append(values[name][feasible])
                kept_group.append(np.full(int(feasible.sum()), gi))
                kept_row.append(rows[feasible] + lo)
            done += n
            if progress:
                progress(done, total)
    values = {name: np.concatenate(v) if v else np.empty(0) for name, v in kept.items()}
    group_of = np.concatenate(kept_group) if kept_group else np.empty(0, dtype=int)
    row_of = np.concatenate(kept_row) if kept_row else np.empty(0, dtype=int)
    res.feasible = int(group_of.size)
    res.scatter = _sample(values, res.feasible, req.seed)
    order = _order(req, values, res)
    lazy_constraints = [c for c in req.where if c.metric.needs == "candidate"]
    chosen = _walk(req, groups, group_of, row_of, order, values, lazy, lazy_constraints, res)
    res.rows = chosen
    res.seconds = time.perf_counter() - start
    return res


def _structural_error(g: space.Group, index: int) -> str | None:
    from pydantic import ValidationError

    try:
        space.candidate_spec(g, index)
    except ValidationError as e:
        return e.errors()[0]["msg"].removeprefix("Value error, ")
    return None


def _sample(values: dict[str, np.ndarray], n: int, seed: int) -> dict[str, np.ndarray]:
    if n <= PLOT_POINTS:
        return dict(values)
    pick = np.random.default_rng(seed).choice(n, PLOT_POINTS, replace=False)
    return {k: v[pick] for k, v in values.items()}


def _key(axis: Objective, values: np.ndarray) -> np.ndarray:
    """Values as "smaller is better"."""
    return -values.astype(np.float64) if axis.direction == "max" else values.astype(np.float64)


def _order(req: Request, values: dict[str, np.ndarray], res: Result) -> np.ndarray:
    n = res.feasible  # a Pareto front is found in _walk instead (per-candidate checks can change it)
    if req.objective and not req.pareto:
        v = values[req.objective.metric.name].astype(np.float64)
        return np.argsort(-v if req.objective.direction == "max" else v, kind="stable")
    return np.arange(n)


def pareto_front(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Indices of the points no other point beats in both a and b (smaller is better),
    sorted by a; of points equal in both, the first."""
    order = np.lexsort((b, a))  # by a, then b
    best = np.minimum.accumulate(b[order])
    keep = np.ones(order.size, dtype=bool)
    keep[1:] = b[order][1:] < best[:-1]
    return order[keep]


def _walk(req, groups, group_of, row_of, order, values, lazy, lazy_constraints, res) -> list[Row]:
    """The rows to show: in order, each passing the per-candidate constraints, until --top."""
    top = req.top or res.feasible
    cache: dict[int, dict] = {}

    def lazy_values(i: int) -> dict | None:
        if i not in cache:
            if res.lazy_checked >= MAX_LAZY:
                raise InputError(None, "--where", f"more than {MAX_LAZY:,} candidates needed per-candidate checks "
                                                  "(fit, lint); tighten the other constraints")
            res.lazy_checked += 1
            spec = space.candidate_spec(groups[group_of[i]], int(row_of[i]))
            got = {name: _lazy_metric(name, spec, req.settings) for name in lazy}
            passes = all(c.holds(got[c.metric.name]) for c in lazy_constraints)
            res.lazy_rejected += not passes
            cache[i] = got if passes else None
        return cache[i]

    if req.pareto:
        a, b = (_key(axis, values[axis.metric.name]) for axis in req.pareto)
        alive = np.ones(res.feasible, dtype=bool)
        while True:
            idx = np.flatnonzero(alive)
            front = idx[pareto_front(a[idx], b[idx])]
            # Only the rows shown need to pass: a failing one leaves the front, which may let a point it hid in.
            failing = [i for i in front[:top] if lazy and lazy_values(int(i)) is None]
            if not failing:
                break
            alive[failing] = False
        res.front = int(front.size)
        picked = [int(i) for i in front[:top]]
    else:
        picked = []
        for i in order:
            if len(picked) >= top:
                break
            if not lazy or lazy_values(int(i)) is not None:
                picked.append(int(i))
    rows = []
    for i in picked:
        g = groups[group_of[i]]
        fields = {**g.choices, **{p: c[row_of[i]].item() for p, c in g.columns.items()}}
        metrics = {name: _number(values[name][i].item(), METRICS[name].unit) for name in values}
        if lazy:
            metrics.update(lazy_values(i))
        rows.append(Row({v.path: fields[v.path] for v in req.varies}, metrics))
    return rows


def _number(v: float, unit: str):
    """Counts as ints (the arrays are float64: exact below 2^53), the rest as they are."""
    return int(v) if unit == "count" and float(v).is_integer() else v


def _lazy_metric(name: str, spec: ModelSpec, s: Settings):
    if name == "lint":
        from archcalc.linter import SEVERITIES, worst
        from archcalc.linter import lint as run_lint

        level = worst(run_lint(spec))
        return 0 if level is None else SEVERITIES.index(level) + 1
    from archcalc.serving.deployment import Deployment
    from archcalc.serving.planner import Planner

    planner = Planner(spec, s.hardware, Deployment(gpus=s.tp, weight_dtype=s.dtype, kv_dtype=s.kv_dtype))
    if name == "fit.fits":
        return int(planner.plan(s.context, s.batch).fits)
    return planner.max_context(s.batch).value or 0
