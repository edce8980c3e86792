"""Rendering of roofline predictions and hardware profiles (tables, JSON)."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from archcalc.cost.roofline import Prediction, RooflineResult, Step
from archcalc.hardware.profile import HardwareProfile
from archcalc.report.units import nbytes, seconds, si

ROOFLINE_SCHEMA = "archcalc.roofline/1"


def step_table(step: Step, title: str) -> Table:
    """Where the time goes: one row per op, FLOP share beside time share."""
    table = Table(title=title, title_justify="left", show_edge=False)
    for col in ("op", "count", "FLOPs", "weights", "activations", "KV", "FLOP/byte", "bound", "time", "time %",
                "FLOP %"):
        table.add_column(col, justify="left" if col in ("op", "bound") else "right", no_wrap=True)
    total_t, total_f = step.time or 1, step.flops or 1
    for o in step.ops:
        n = o.op.count
        table.add_row(o.op.name, str(n), si(o.flops, "FLOP") if o.flops else "0",
                      _b(n * o.op.weight_bytes), _b(n * o.op.act_bytes), _b(n * o.op.kv_bytes),
                      f"{o.intensity:.3g}", o.bound, seconds(o.time), f"{o.time / total_t:.1%}",
                      f"{o.flops / total_f:.1%}")
    table.add_row("step", "", si(step.flops, "FLOP"), "", "", "", f"{step.flops / step.bytes:.3g}", "",
                  seconds(step.time), "100%", "100%", style="bold")
    return table


def _b(n: float) -> str:
    return nbytes(n).split(" = ")[0] if n else "0"


def summary_table(preds: list[Prediction], hw: HardwareProfile, prompt: int, context: int, batch: int) -> Table:
    table = Table(title=f"Predictions on {hw.name}", title_justify="left", show_edge=False)
    table.add_column("")
    for p in preds:
        table.add_column(f"{p.rates.label} rates", justify="right")
    rows = [
        (f"time to first token (prefill {prompt:,} × {batch})", lambda p: seconds(p.ttft)),
        ("  prefill MFU / MBU", lambda p: f"{p.prefill.mfu:.0%} / {p.prefill.mbu:.0%}"),
        (f"time per output token (context {context:,})", lambda p: seconds(p.tpot)),
        (f"decode tokens/s (batch {batch})", lambda p: f"{p.decode_tokens_per_s:,.1f}"),
        ("  decode MFU / MBU", lambda p: f"{p.decode.mfu:.1%} / {p.decode.mbu:.0%}"),
        (f"decode of {preds[0].gen:,} tokens (context grows)", lambda p: seconds(p.decode_total)),
        ("  mean time per output token", lambda p: seconds(p.mean_tpot)),
        ("critical batch (weight matmuls compute-bound)", lambda p: _opt(p.critical_batch)),
        ("batch where the whole decode step is compute-bound", lambda p: _opt(p.step_critical_batch)),
        ("ridge point (FLOP/byte)", lambda p: f"{p.rates.ridge:.0f}"),
    ]
    for label, fn in rows:
        table.add_row(label, *(fn(p) for p in preds))
    return table


def _opt(v) -> str:
    return f"{v:,}" if v else "never (≤ 65,536)"


def roofline_view(preds: list[Prediction], hw: HardwareProfile, phases: tuple[str, ...], prompt: int,
                  context: int, batch: int) -> Group:
    first = preds[0]
    parts = [summary_table(preds, hw, prompt, context, batch), Text("")]
    if "prefill" in phases:
        parts += [step_table(first.prefill, f"Prefill: {prompt:,} tokens × {batch} ({first.rates.label} rates)"),
                  Text("")]
    if "decode" in phases:
        parts += [step_table(first.decode, f"Decode step at context {context:,} × {batch} ({first.rates.label} rates)")]
    parts.append(Text("Each op takes max(FLOPs / peak, bytes / bandwidth); ops run one after another. Matmul and "
                      "attention FLOPs at the dense matrix peak, elementwise at the fp32 rate. Causal attention, "
                      "windows capped; prefill computes logits for the last token only.", style="dim"))
    return Group(*parts)


def _step_json(s: Step) -> dict:
    return {"time_s": s.time, "flops": s.flops, "bytes": s.bytes, "mfu": s.mfu, "mbu": s.mbu,
            "ops": [{"name": o.op.name, "kind": o.op.kind, "count": o.op.count, "flops": o.flops,
                     "weight_bytes": o.op.count * o.op.weight_bytes, "act_bytes": o.op.count * o.op.act_bytes,
                     "kv_bytes": o.op.count * o.op.kv_bytes, "intensity": o.intensity, "bound": o.bound,
                     "time_s": o.time} for o in s.ops]}


def roofline_json(r: RooflineResult) -> dict:
    preds = r.predictions
    return {
        "schema": ROOFLINE_SCHEMA,
        "model": r.spec.name, "hardware": r.hardware.name,
        "workload": {"prompt": r.prompt, "context": r.context, "batch": r.batch, "gen": r.gen,
                     **{k: getattr(preds[0].decode.workload, k) for k in ("weight_dtype", "act_dtype", "kv_dtype")}},
        "predictions": [{
            "rates": {"label": p.rates.label, "matmul_flops_per_s": p.rates.matmul,
                      "vector_flops_per_s": p.rates.vector, "bandwidth_bytes_per_s": p.rates.bandwidth,
                      "ridge_flops_per_byte": p.rates.ridge},
            "ttft_s": p.ttft, "tpot_s": p.tpot, "decode_tokens_per_s": p.decode_tokens_per_s,
            "decode_total_s": p.decode_total, "mean_tpot_s": p.mean_tpot,
            "critical_batch": p.critical_batch, "step_critical_batch": p.step_critical_batch,
            "prefill": _step_json(p.prefill), "decode": _step_json(p.decode),
        } for p in preds],
        "warnings": list(r.warnings),
    }


# ---- hardware ------------------------------------------------------------------------------


def hardware_list(profiles: list[HardwareProfile]) -> Table:
    table = Table(title="Bundled hardware (dense peaks)", title_justify="left", show_edge=False)
    for col in ("name", "aliases", "memory", "bandwidth", "bf16", "fp8", "ridge bf16"):
        table.add_column(col, justify="left" if col in ("name", "aliases") else "right")
    for hw in profiles:
        table.add_row(hw.name, ", ".join(hw.aliases[:3]), nbytes(hw.memory_bytes).split(" = ")[0],
                      si(hw.memory_bandwidth, "B/s"), si(hw.peak("bf16"), "FLOP/s"),
                      si(hw.peak_flops["fp8"], "FLOP/s") if "fp8" in hw.peak_flops else "—",
                      f"{hw.ridge('bf16'):.0f}")
    return table


def hardware_detail(hw: HardwareProfile) -> Group:
    table = Table(title=hw.name, title_justify="left", show_edge=False, show_header=False)
    table.add_column("")
    table.add_column("")
    table.add_row("aliases", ", ".join(hw.aliases))
    table.add_row("memory", nbytes(hw.memory_bytes) + (f" (driver reports {nbytes(hw.usable_memory_bytes)})"
                                                       if hw.usable_memory_bytes else ""))
    table.add_row("bandwidth", si(hw.memory_bandwidth, "B/s"))
    for dtype, rate in hw.peak_flops.items():
        table.add_row(f"peak {dtype}", f"{si(rate, 'FLOP/s')}  (ridge {rate / hw.memory_bandwidth:.0f} FLOP/byte)")
    if hw.interconnect:
        bw = si(hw.interconnect.bandwidth, "B/s") if hw.interconnect.bandwidth else "—"
        table.add_row("interconnect", f"{hw.interconnect.name}, {bw}")
    if hw.calibration:
        table.add_row("calibration", str(hw.calibration.model_dump()))
    table.add_row("source", hw.source)
    return Group(table, Text(hw.notes or "", style="dim"))
