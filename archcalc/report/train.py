"""Rendering of `archcalc train`: rich tables and the `archcalc.train/1` JSON
document.  Bytes per GPU (GiB = 2^30); times in seconds; FLOP/s per GPU."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from archcalc.report.units import binary, nbytes, seconds, si
from archcalc.training.layout import Layout, grad_accum
from archcalc.training.step import NODE_GPUS, StepTime, TrainResult

GROUPS = ("tp", "dp", "ep", "cp", "pp")


def _layout_json(layout: Layout) -> dict:
    return {"gpus": layout.gpus, "tp": layout.tp, "pp": layout.pp, "dp": layout.dp, "cp": layout.cp, "ep": layout.ep,
            "zero": layout.zero, "micro_batch": layout.micro_batch, "recompute": layout.recompute,
            "sequence_parallel": layout.sequence_parallel}


def _step_json(s: StepTime) -> dict:
    return {"rates": s.rates.label, "source": s.rates.source, "forward": s.forward, "backward": s.backward,
            "recompute": s.recompute, "micro_batches": s.micro_batches, "bubble": s.bubble,
            "exposed": {g: s.exposed(g) for g in GROUPS}, "optimizer": s.optimizer, "time": s.time,
            "tokens_per_s": s.tokens_per_s, "mfu": s.mfu}


def assumptions(r: TrainResult) -> list[str]:
    rec = r.recipe
    return [
        "activations: what torch's autograd keeps for backward (tests pin it to the reference model, exactly); "
        f"{rec.attention} attention; tensors the batch shares (RoPE tables, masks) are not counted.",
        f"model states: {rec.weight_dtype} weights" + (", fp32 master weights" if rec.master else "")
        + f", {rec.grad_dtype} gradients, fp32 {rec.optimizer} states (the ZeRO paper's and Megatron-LM's tables).",
        "step: roofline per op, backward 2× forward (flash attention's 2.5×); collectives on NVLink within "
        f"{NODE_GPUS} GPUs, 50 GB/s per GPU across nodes; DP reductions hide behind backward, FSDP gathers "
        "behind compute, TP/EP/PP traffic is exposed; 1F1B pipeline.",
        "MFU = 3 × forward matmul and attention FLOPs of the step ÷ (time × GPUs × the datasheet peak); peak rates "
        "are a lower bound on time.",
        "energy: the GPUs at TDP for the whole run, an upper bound for the GPUs alone (no host, network, cooling).",
    ]


def train_json(plan) -> dict:
    """The `archcalc train --json` document (README: train JSON schema)."""
    from archcalc.training.plan import TRAIN_SCHEMA

    r: TrainResult = plan.result
    mem = r.memory
    best = r.steps[-1]
    doc = {
        "schema": TRAIN_SCHEMA,
        "model": {"name": r.spec.name, "source": r.spec.source, "params": r.params},
        "hardware": {"name": r.hardware.name, "capacity_bytes": mem.capacity, "tdp_watts": r.hardware.tdp_watts},
        "layout": _layout_json(r.layout),
        "layout_given": plan.layout_given,
        "recipe": {"seq": r.recipe.seq, "global_batch": r.recipe.global_batch,
                   "tokens_per_step": r.recipe.global_batch * r.recipe.seq,
                   "grad_accum": grad_accum(r.layout, r.recipe), "optimizer": r.recipe.optimizer,
                   "precision": r.recipe.precision, "grad_dtype": r.recipe.grad_dtype,
                   "attention": r.recipe.attention, "dropout": r.recipe.dropout, "z_loss": r.recipe.z_loss},
        "memory": {
            "stages": [{"stage": s.stage, "terms": s.terms, "total": s.total, "in_flight": s.in_flight,
                        "params": s.params} for s in mem.stages],
            "capacity": mem.capacity, "total": mem.total, "fits": mem.fits, "binding": mem.binding,
        },
        "steps": [_step_json(s) for s in r.steps],
        "collectives": {"rates": best.rates.label, "items": [
            {"group": c.comm.group, "name": c.comm.op.name, "pattern": c.comm.op.dims.pattern,
             "phase": c.comm.phase, "count": c.comm.op.count, "ranks": c.comm.op.dims.ranks,
             "bytes_per_rank": c.bytes_sent, "seconds": c.seconds, "exposed": c.exposed,
             "inter_node": c.inter_node} for c in best.comms]},
        "run": [{"rates": s.rates.label, "tokens": run.tokens, "steps": run.steps, "seconds": run.seconds,
                 "gpu_hours": run.gpu_hours, "cost": run.cost, "energy_kwh": run.energy_kwh}
                for s, run in zip(r.steps, r.runs)],
        "solve": None,
        "assumptions": assumptions(r),
        "warnings": list(plan.warnings),
    }
    if plan.solved is not None:
        s = plan.solved
        doc["solve"] = {"goal": s.goal, "gpus": s.gpus, "tried": s.tried, "fitting": s.fitting,
                        "alternatives": [{"layout": _layout_json(c.layout), "time": c.time, "why": why}
                                         for c, why in s.alternatives]}
    return doc


def _memory_table(r: TrainResult) -> Table:
    mem = r.memory
    table = Table(title="Memory per GPU" + (" (worst pipeline stage: " + mem.worst.stage + ")"
                                            if len(mem.stages) > 1 else ""), title_justify="left", show_edge=False)
    for col in ("term", "bytes", "of capacity"):
        table.add_column(col, justify="left" if col == "term" else "right")
    stage = mem.worst
    for term, value in stage.terms.items():
        if value:
            table.add_row(term, nbytes(value), f"{value / mem.capacity:.1%}")
    act = stage.activations
    table.add_row("  per micro-batch in flight", nbytes(act.layers + act.dropout),
                  f"× {stage.in_flight}" if stage.in_flight > 1 else "")
    table.add_row("total", nbytes(stage.total), f"{stage.total / mem.capacity:.1%}", style="bold")
    table.add_row("capacity", nbytes(mem.capacity), "100.0%")
    return table


def _step_table(r: TrainResult) -> Table:
    table = Table(title="Step time (one optimizer step)", title_justify="left", show_edge=False)
    table.add_column("")
    for s in r.steps:
        table.add_column(s.rates.label, justify="right")
    m = r.steps[0].micro_batches
    rows = [(f"forward × {m} micro-batches", lambda s: seconds(s.forward * m)),
            ("backward", lambda s: seconds(s.backward * m)),
            ("recomputation", lambda s: seconds(s.recompute * m)),
            ("pipeline bubble", lambda s: seconds(s.bubble)),
            *[(f"exposed {g.upper()} comm", lambda s, g=g: seconds(s.exposed(g))) for g in GROUPS],
            ("optimizer", lambda s: seconds(s.optimizer)),
            ("step", lambda s: seconds(s.time)),
            ("tokens/s", lambda s: f"{s.tokens_per_s:,.0f}"),
            ("tokens/s per GPU", lambda s: f"{s.tokens_per_s / s.gpus:,.0f}"),
            ("MFU", lambda s: f"{s.mfu:.1%}")]
    for label, fn in rows:
        values = [fn(s) for s in r.steps]
        if label.startswith(("exposed", "recomputation", "pipeline")) and all(v.startswith("0 ") or v == "0 ns"
                                                                            for v in values):
            continue
        table.add_row(label, *values, style="bold" if label == "step" else None)
    return table


def _comm_table(r: TrainResult) -> Table:
    best = r.steps[-1]
    table = Table(title=f"Collectives per step, one rank ({best.rates.label} rates)", title_justify="left",
                  show_edge=False)
    for col in ("group", "collective", "count", "sent per rank", "time", "exposed", "link"):
        table.add_column(col, justify="right" if col in ("count", "sent per rank", "time", "exposed") else "left")
    for c in best.comms:
        op = c.comm.op
        table.add_row(c.comm.group, f"{op.name} ({op.dims.pattern}, {c.comm.phase})", f"{op.count:,}",
                      binary(c.bytes_sent), seconds(c.seconds), seconds(c.exposed),
                      "network" if c.inter_node else "NVLink")
    return table


def _run_table(r: TrainResult) -> Table:
    table = Table(title=f"The run: {si(r.runs[0].tokens, 'tokens')}", title_justify="left", show_edge=False)
    table.add_column("")
    for s in r.steps:
        table.add_column(s.rates.label, justify="right")
    table.add_row("steps", *[f"{run.steps:,}" for run in r.runs])
    table.add_row("wall-clock", *[f"{run.seconds / 86400:,.2f} days" for run in r.runs])
    table.add_row("GPU-hours", *[f"{run.gpu_hours:,.0f}" for run in r.runs])
    if r.runs[0].cost is not None:
        table.add_row("cost", *[f"{run.cost:,.0f}" for run in r.runs])
    if r.runs[0].energy_kwh is not None:
        table.add_row("energy (GPUs at TDP)", *[f"{run.energy_kwh / 1000:,.1f} MWh" for run in r.runs])
    return table


def _solve_table(plan) -> Table:
    s = plan.solved
    table = Table(title=f"Solver ({s.goal}): {s.fitting:,} of {s.tried:,} layouts fit on {s.gpus:,} GPUs; "
                        "the runners-up", title_justify="left", show_edge=False)
    for col in ("layout", "step", "why it loses"):
        table.add_column(col, justify="right" if col == "step" else "left")
    for c, why in s.alternatives:
        table.add_row(c.layout.describe(), seconds(c.time), why)
    return table


def train_tables(plan) -> Group:
    r: TrainResult = plan.result
    lay, rec, mem = r.layout, r.recipe, r.memory
    how = "as given" if plan.layout_given else f"found by the solver: {plan.solved.goal}"
    title = Text.assemble((r.spec.name, "bold"), f" on {lay.gpus:,} × {r.hardware.name} ({binary(mem.capacity)} "
                          f"each): {lay.describe()} ({how}); {rec.global_batch:,} sequences × {rec.seq:,} tokens = "
                          f"{rec.global_batch * rec.seq:,} tokens per step ({grad_accum(lay, rec)} accumulation "
                          f"steps); {rec.optimizer}, {rec.precision}")
    if mem.fits:
        verdict = Text(f"FITS: {binary(mem.capacity - mem.total)} headroom per GPU; largest term: {mem.binding}.",
                       style="bold green")
    else:
        verdict = Text(f"DOES NOT FIT: over by {binary(mem.total - mem.capacity)}; binding term: {mem.binding}.",
                       style="bold red")
    parts = [title, _memory_table(r), verdict, Text(""), _step_table(r), Text(""), _comm_table(r), Text(""),
             _run_table(r), Text("")]
    if plan.solved is not None and plan.solved.alternatives:
        parts += [_solve_table(plan), Text("")]
    parts.append(Text("\n".join(f"- {line}" for line in assumptions(r)) + "\n", style="dim"))
    return Group(*parts)
