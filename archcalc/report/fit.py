"""Rendering of `archcalc fit`: rich tables and the `archcalc.fit/1` JSON
document.  Units come from report/units.py (GiB = 2^30, GB = 10^9)."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from archcalc.hardware.profile import HardwareProfile
from archcalc.report.units import binary, nbytes
from archcalc.serving.engines import engine_named
from archcalc.serving.planner import FIT_SCHEMA, FitPlan, Solution

TERM_LABELS = {"reserve": "runtime reserve", "weights": "weights", "activations": "activation peak",
               "kv_cache": "KV cache", "model max context": "model max context"}


def _pct(part: float, whole: float) -> str:
    return f"{part / whole:.1%}" if whole else ""


def _solution_json(s: Solution) -> dict:
    return {"value": s.value, "binding": s.binding, "method": s.method, "capped": s.capped, **s.detail}


def assumptions(plan: FitPlan) -> list[str]:
    a, dep = plan.activations, plan.deployment
    out = [
        f"engine {plan.engine.name}: {plan.engine.description}; rules from {plan.engine.rules(dep)}.",
        f"activation peak: {a.chunk.description}; residual stream + the largest op's input and output "
        f"({a.largest_op}) on one GPU + fp32 logits; flash attention (no S×S scores); an estimate.",
        (f"weights as a {dep.weights} checkpoint stores them: each tensor at its own type (ops/checkpoints.py)."
         if dep.weights else
         f"weights at {dep.weight_dtype}; below 16 bits, embeddings, lm_head, norms, routers, biases and weights "
         "that are not linear layers stay bf16."),
        f"capacity = the driver's total memory of {plan.hardware.name} where known, else the datasheet size.",
    ]
    if plan.deployment.replicas > 1:
        out.append(f"{dep.gpus} GPUs = {dep.replicas} data-parallel copies of {layout(dep)}; "
                   f"each serves {plan.batch_per_gpu:,} of the {plan.batch:,} sequences.")
    if plan.stage_plans:
        out.append(f"layers split over {len(plan.stage_plans)} stages ({plan.engine.name}'s rule, "
                   f"parallel/pipeline.py); the table is the binding stage's ({plan.stage.label()}); "
                   + ("a vision tower sits on the first stage; " if plan.spec.vision else "")
                   + "every stage's plan is in 'Per stage'.")
    return out


def layout(dep) -> str:
    """TP 2, or TP 2 × PP 4."""
    return f"TP {dep.tensor_parallel}" + (f" × PP {dep.pp}" if dep.pp > 1 else "")


def _stage_json(p: FitPlan) -> dict:
    s = p.stage
    return {"index": s.index, "first_layer": s.first, "layers": s.layers, "embedding": s.input, "output": s.output,
            "weights": p.weights.bytes, "kv_cache": p.kv_bytes, "activations": p.activations.bytes,
            "reserve": p.reserve_bytes, "total": p.total, "headroom": p.headroom, "fits": p.fits,
            "startup": p.startup.to_dict() if p.startup else None}


def fit_json(plan: FitPlan, solutions: dict[str, Solution], warnings: list[str] = ()) -> dict:
    """The `archcalc fit --json` document (README: fit JSON schema).  Bytes in bytes, per GPU."""
    spec, hw, act = plan.spec, plan.hardware, plan.activations
    doc = {
        "schema": FIT_SCHEMA,
        "model": {"name": spec.name, "source": spec.source, "max_context": spec.max_context},
        "hardware": _hardware_json(hw),
        "deployment": _deployment_json(plan),
        "plan": {
            "capacity": plan.capacity,
            "weights": {"bytes": plan.weights.bytes, "split": plan.weights.split,
                        "replicated": plan.weights.replicated, "vision": plan.weights.vision,
                        "mtp": plan.weights.mtp},
            "kv_cache": {
                "bytes": plan.kv_bytes,
                "by_layer_kind": [{"kind": k.kind, "layers": k.layers, "charged_layers": k.charged_layers,
                                   "window": k.window, "cells": k.cells, "bytes_per_token": k.token_bytes,
                                   "state_bytes": k.state_bytes, "tokens_per_cell": k.stride, "bytes": k.bytes}
                                  for k in plan.kv],
            },
            "activations": {"bytes": act.bytes, "chunk_tokens": act.chunk.tokens, "dtype": act.chunk.act_dtype,
                            "residual": act.residual, "largest_op": act.largest_op,
                            "largest_op_bytes": act.largest_op_bytes, "logit_tokens": act.chunk.logit_tokens,
                            "logits": act.logits},
            "reserve": {"bytes": plan.reserve_bytes, "parts": plan.reserve},
            "total": plan.total,
            "headroom": plan.headroom,
            "fits": plan.fits,
            "binding": plan.binding,
            # with a layer split, every stage (the plan above is the binding one's)
            "stage": plan.stage.index if plan.stage else None,
            "stages": [_stage_json(p) for p in plan.stage_plans],
        },
        "startup": plan.startup.to_dict() if plan.startup else None,
        "solve": {name: _solution_json(s) for name, s in solutions.items()},
        "assumptions": assumptions(plan),
        "warnings": list(warnings),
    }
    return doc


def _hardware_json(hw: HardwareProfile) -> dict:
    return {"name": hw.name, "kind": hw.kind, "memory_bytes": hw.memory_bytes, "capacity_bytes": hw.capacity}


def _deployment_json(plan: FitPlan) -> dict:
    dep = plan.deployment
    out = {"engine": dep.engine, "engine_rules_from": engine_named(dep.engine).rules(dep), "gpus": dep.gpus,
           "tp": dep.tensor_parallel, "pp": dep.pp, "tensor_split": list(dep.tensor_split or ()) or None,
           "replicas": dep.replicas,
           "context": plan.context, "batch": plan.batch, "batch_per_gpu": plan.batch_per_gpu,
           "dtype": dep.weight_dtype, "weights": dep.weights, "kv_dtype": plan.kv_type, "kv_bytes_per_value": plan.kv_bytes_per_value,
           "reserve_override": dep.reserve}
    return out | plan.engine.settings(dep)


def fit_tables(plan: FitPlan, solutions: dict[str, Solution]) -> Group:
    dep, hw, cap = plan.deployment, plan.hardware, plan.capacity
    title = Text.assemble(
        (plan.spec.name, "bold"), f" on {dep.gpus} × {hw.name} ({binary(cap)} each), engine {dep.engine}, "
        f"{layout(dep)}, context {plan.context:,} × batch {plan.batch:,}, weights {dep.weights or dep.weight_dtype}, "
        f"KV {plan.kv_type}" + (f", split {','.join(f'{x:g}' for x in dep.tensor_split)}" if dep.tensor_split else ""))
    table = Table(title="Memory per GPU" + (f" (the binding stage: {plan.stage.label()})" if plan.stage else ""),
                  title_justify="left", show_edge=False)
    for col in ("term", "bytes", "of capacity", "how"):
        table.add_column(col, justify="right" if col in ("bytes", "of capacity") else "left")
    w = plan.weights
    how = f"TP {dep.tensor_parallel}" + (f": split {binary(w.split)}, replicated {binary(w.replicated)}"
                                         if dep.tensor_parallel > 1 else "")
    if w.vision:
        how += f"; with the vision tower + projector, {binary(w.vision)}"
    if w.mtp:
        how += f"; with the MTP modules, {binary(w.mtp)}"
    table.add_row("weights", nbytes(w.bytes), _pct(w.bytes, cap), how)
    per_value = "" if plan.kv_type.startswith("K ") else f", {plan.kv_bytes_per_value:g} B per value"
    table.add_row("KV cache", nbytes(plan.kv_bytes), _pct(plan.kv_bytes, cap), f"{plan.kv_type}{per_value}")
    for k in plan.kv:
        padded = f" (+{k.charged_layers - k.layers} padding)" if k.charged_layers != k.layers else ""
        window = f", window {k.window:,}" if k.window else ""
        how = (f"{k.layers} layers × {binary(k.state_bytes)} of fixed state each (all sequences)" if k.state_bytes
               else f"{k.layers} layers{padded} × {k.cells:,} cells × {k.token_bytes:g} B{window}")
        table.add_row(f"  {k.kind}", nbytes(k.bytes), _pct(k.bytes, cap), how)
    a = plan.activations
    table.add_row("activation peak", nbytes(a.bytes), _pct(a.bytes, cap),
                  f"{a.chunk.tokens:,} tokens, {a.chunk.act_dtype}")
    table.add_row("  residual stream", nbytes(a.residual), "", "")
    table.add_row("  largest op", nbytes(a.largest_op_bytes), "", a.largest_op)
    table.add_row("  logits (fp32)", nbytes(a.logits), "", f"{a.chunk.logit_tokens:,} tokens")
    table.add_row("runtime reserve", nbytes(plan.reserve_bytes), _pct(plan.reserve_bytes, cap), "")
    for name, b in plan.reserve.items():
        table.add_row(f"  {name}", nbytes(b), "", "")
    table.add_row("total", nbytes(plan.total), _pct(plan.total, cap), "", style="bold")
    table.add_row("capacity", nbytes(cap), "100.0%", hw.name)
    if plan.fits:
        verdict = Text(f"FITS: {binary(plan.headroom)} headroom per GPU; the KV cache is the term that grows.",
                       style="bold green")
    else:
        over = f"over by {binary(-plan.headroom)}; " if plan.headroom < 0 else ""
        verdict = Text(f"DOES NOT FIT: {over}binding term: {TERM_LABELS.get(plan.binding, plan.binding)}.",
                       style="bold red")
    parts = [title, table, verdict, Text("")]
    if plan.stage_plans:
        parts += [stage_table(plan), Text("")]
    if plan.startup:
        parts += [Text(plan.startup.title, style="bold"), Text("\n".join(plan.startup.lines), style="cyan"),
                  Text(plan.startup.note + "\n", style="dim")]
    notes = plan.engine.notes(plan.kv, plan.batch_per_gpu, dep, plan.spec.tie_embeddings)
    if notes:
        parts += [Text(f"{dep.engine}:", style="bold"), Text("\n".join(notes) + "\n", style="cyan")]
    parts += [solve_table(solutions, plan), Text("")]
    parts.append(Text("\n".join(f"- {line}" for line in assumptions(plan)) + "\n", style="dim"))
    return Group(*parts)


def stage_table(plan: FitPlan) -> Table:
    """One row per stage of a layer split: what each GPU holds."""
    table = Table(title="Per stage (one GPU of each)", title_justify="left", show_edge=False)
    for col in ("stage", "holds", "weights", "KV cache", "activations", "total", "headroom", "fits"):
        table.add_column(col, justify="left" if col in ("stage", "holds", "fits") else "right")
    for p in plan.stage_plans:
        table.add_row(str(p.stage.index), p.stage.label(), binary(p.weights.bytes), binary(p.kv_bytes),
                      binary(p.activations.bytes), binary(p.total), binary(p.headroom), "yes" if p.fits else "no",
                      style="bold" if p.stage == plan.stage else None)
    return table


def context_text(s: Solution) -> str:
    """A largest context; when the model's maximum caps it, what memory alone would allow too."""
    if not s.capped:
        return f"{s.value:,}"
    alone = s.detail.get("memory_max_context")
    if alone is None:
        return f"{s.value:,} (model max)"
    more = "≥ " if s.detail.get("memory_binding") == "search limit" else ""
    return f"{s.value:,} (model max; memory alone: {more}{alone:,})"


def solve_table(solutions: dict[str, Solution], plan: FitPlan) -> Table:
    table = Table(title="Solvers", title_justify="left", show_edge=False)
    for col in ("question", "answer", "stopped by", "method"):
        table.add_column(col, justify="right" if col == "answer" else "left")
    labels = {"max_context": f"largest context at batch {plan.batch:,}",
              "max_batch": f"largest batch at context {plan.context:,}",
              "min_gpus": f"fewest GPUs (TP {', '.join(map(str, (1, 2, 4, 8)))}"
                          + (f" × PP {plan.deployment.pp})" if plan.deployment.pp > 1 else ")")}
    for name, s in solutions.items():
        value = "none" if s.value is None else context_text(s)
        table.add_row(labels.get(name, name), value, TERM_LABELS.get(s.binding, s.binding), s.method)
    return table


def fit_all_json(rows: list[tuple[HardwareProfile, FitPlan, Solution]]) -> dict:
    plan0 = rows[0][1]  # the deployment is the same on every device
    return {
        "schema": FIT_SCHEMA,
        "model": {"name": plan0.spec.name, "source": plan0.spec.source, "max_context": plan0.spec.max_context},
        "deployment": _deployment_json(plan0),
        "devices": [{**_hardware_json(hw), "fits": p.fits, "total": p.total, "headroom": p.headroom,
                     "binding": p.binding, "max_context": s.value, "max_context_capped": s.capped,
                     "memory_max_context": s.detail.get("memory_max_context"),
                     "max_context_binding": s.binding} for hw, p, s in rows],
    }


def fit_all_table(rows: list[tuple[HardwareProfile, FitPlan, Solution]]) -> Table:
    plan0 = rows[0][1]
    dep = plan0.deployment
    table = Table(title=f"{plan0.spec.name}: {dep.gpus} × each device, engine {dep.engine}, "
                        f"{layout(dep)}, context {plan0.context:,} × batch {plan0.batch:,}, weights "
                        f"{dep.weights or dep.weight_dtype}, KV {plan0.kv_type}", title_justify="left", show_edge=False)
    for col in ("device", "memory", f"fits {plan0.context:,}?", "per GPU", "max context", "binding term"):
        table.add_column(col, justify="right" if col in ("memory", "per GPU", "max context") else "left")
    for hw, p, s in rows:
        max_ctx = context_text(s)
        table.add_row(hw.name, binary(hw.capacity), "yes" if p.fits else "no", binary(p.total), max_ctx,
                      TERM_LABELS.get(s.binding, s.binding))
    return table
