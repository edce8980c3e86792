"""Rendering of roofline predictions and hardware profiles (tables, JSON)."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from archcalc.cost.roofline import Prediction, RooflineResult, Step
from archcalc.hardware.profile import HardwareProfile
from archcalc.report.units import nbytes, seconds, si

ROOFLINE_SCHEMA = "archcalc.roofline/2"
NO_COMPUTE_BOUND = "never (≤ 65,536)"


def _steps(r: RooflineResult, phase: str) -> list[Step]:
    return [getattr(p, phase) for p in r.predictions]


def _measured(r: RooflineResult, phase: str):
    return next((m for m in r.measured if m.phase == phase), None)


def error(predicted: float, measured: float) -> float:
    """Signed relative error of a prediction: (predicted − measured) / measured."""
    return (predicted - measured) / measured


def step_table(r: RooflineResult, phase: str, title: str) -> Table:
    """Where the time goes: one row per op; its time under every rate set and,
    with --measure, the measured time, the error of the last rate set, the
    rates the kernel achieved and the measured time share beside the FLOP share."""
    steps, measured = _steps(r, phase), _measured(r, phase)
    first, labels = steps[0], [s.rates.label for s in steps]
    if measured:
        title += f"; err: {labels[-1]} vs measured; FLOP/s and B/s: what the measured kernel achieved"
    table = Table(title=title, title_justify="left", show_edge=False)
    # With measurements the table trades the FLOP and byte totals (in --json) for the measured columns.
    cols = ["op", "count", *(() if measured else ("FLOPs", "bytes")), "FLOP/byte", "bound", *labels]
    if measured:
        cols += ["measured", "err", "FLOP/s", "B/s"]
    cols += ["time %", "FLOP %"]
    for col in cols:
        table.add_column(col, justify="left" if col in ("op", "bound") else "right", no_wrap=True)
    total_f = first.flops or 1
    share_of = measured.time if measured else steps[-1].time
    by_name = measured.by_name() if measured else {}
    for i, o in enumerate(first.ops):
        times = [s.ops[i].time for s in steps]
        totals = () if measured else (si(o.flops, "FLOP") if o.flops else "0", _b(o.bytes))
        row = [o.op.name, str(o.op.count), *totals, f"{o.intensity:.3g}", o.bound, *(seconds(t) for t in times)]
        m = by_name.get(o.op.name)
        shown = times[-1]
        if measured:
            if m is None or m.seconds is None:
                row += ["—", "—", "—", "—"]
            else:
                shown = m.seconds
                row += [seconds(m.seconds), f"{error(times[-1], m.seconds):+.0%}",
                        si(o.flops / m.seconds, "FLOP/s") if o.flops else "—", si(o.bytes / m.seconds, "B/s")]
        row += [f"{shown / (share_of or 1):.1%}", f"{o.flops / total_f:.1%}"]
        table.add_row(*row)
    if any(st.overhead for st in steps):  # not an op: the framework's time between kernels
        blank = [""] * (2 if measured else 4)
        table.add_row("framework overhead (eager)", "", *blank,
                      *(seconds(st.overhead) if st.overhead else "0" for st in steps),
                      *(("—", "", "", "") if measured else ()), f"{steps[-1].overhead / (share_of or 1):.1%}", "0%",
                      style="dim")
    totals = () if measured else (si(first.flops, "FLOP"), _b(first.bytes))
    total = ["step", "", *totals, f"{first.flops / first.bytes:.3g}", "", *(seconds(s.time) for s in steps)]
    if measured:
        total += [seconds(measured.time), f"{error(steps[-1].time, measured.time):+.0%}",
                  si(first.flops / measured.time, "FLOP/s"), si(first.bytes / measured.time, "B/s")]
    table.add_row(*total, "100%", "100%", style="bold")
    return table


def _b(n: float) -> str:
    return nbytes(n).split(" = ")[0] if n else "0"


def rates_table(preds: list[Prediction]) -> Table:
    """Which rates each column used, and where they come from."""
    table = Table(title="Rates", title_justify="left", show_edge=False)
    for col in ("rates", "matmul", "bandwidth", "launch / kernel", "attention counted as", "source"):
        table.add_column(col, justify="left" if col in ("rates", "source", "attention counted as") else "right")
    for p in preds:
        r = p.rates
        matmul = si(r.matmul, "FLOP/s") + (f" × {r.gemm_efficiency:.0%}" if r.gemm_efficiency < 1 else "")
        table.add_row(r.label, matmul + (" (best of the grid)" if r.matmul_surface else ""),
                      si(r.bandwidth, "B/s"), seconds(r.launch) if r.launch else "0", r.convention, r.source)
    return table


def summary_table(r: RooflineResult) -> Table:
    preds, hw, measured = r.predictions, r.hardware, {m.phase: m for m in r.measured}
    where = f"{hw.name}" + (f", TP {r.tp} (one rank's ops + collectives)" if r.tp > 1 else "")
    table = Table(title=f"Predictions on {where}", title_justify="left", show_edge=False)
    table.add_column("")
    for p in preds:
        table.add_column(f"{p.rates.label} rates", justify="right")
    if measured:
        table.add_column(f"measured ({r.measured[0].device}, {r.measured[0].dtype})", justify="right")
    rows = [
        (f"time to first token (prefill {r.prompt:,} × {r.batch})", lambda p: seconds(p.ttft),
         lambda m: seconds(m["prefill"].time)),
        ("  prefill MFU / MBU", lambda p: f"{p.prefill.mfu:.0%} / {p.prefill.mbu:.0%}", None),
        (f"time per output token (context {r.context:,})", lambda p: seconds(p.tpot),
         lambda m: seconds(m["decode"].time)),
        (f"decode tokens/s (batch {r.batch})", lambda p: f"{p.decode_tokens_per_s:,.1f}",
         lambda m: f"{r.batch / m['decode'].time:,.1f}"),
        ("  decode MFU / MBU", lambda p: f"{p.decode.mfu:.1%} / {p.decode.mbu:.0%}", None),
        (f"decode of {preds[0].gen:,} tokens (context grows)", lambda p: seconds(p.decode_total), None),
        ("  mean time per output token", lambda p: seconds(p.mean_tpot), None),
        ("critical batch (weight matmuls compute-bound)", lambda p: _opt(p.critical_batch, p.rates), None),
        ("batch where the whole decode step is compute-bound", lambda p: _opt(p.step_critical_batch, p.rates),
         None),
        ("ridge point (FLOP/byte)", lambda p: f"{p.rates.ridge:.0f}", None),
    ]
    if r.replicas > 1:
        rows.insert(4, (f"  × {r.replicas} data-parallel replicas ({r.gpus} GPUs)",
                        lambda p: f"{r.replicas * p.decode_tokens_per_s:,.1f}", None))
    for label, fn, mfn in rows:
        cells = [fn(p) for p in preds]
        if measured:
            cells.append(mfn(measured) if mfn and {"prefill", "decode"} <= set(measured) else "")
        table.add_row(label, *cells)
    return table


def _opt(v, rates=None) -> str:
    if rates is not None and rates.label != "peak":
        return "—"  # a peak-rate (ridge point) figure
    return f"{v:,}" if v else NO_COMPUTE_BOUND


def roofline_view(r: RooflineResult, phases: tuple[str, ...]) -> Group:
    parts = [summary_table(r), Text(""), rates_table(r.predictions), Text("")]
    titles = {"prefill": f"Prefill: {r.prompt:,} tokens × {r.batch}",
              "decode": f"Decode step at context {r.context:,} × {r.batch}"}
    for phase in phases:
        parts += [step_table(r, phase, titles[phase] + " (time per rate set)"), Text("")]
    parts.append(Text(
        "Each op takes launch + max(FLOPs / compute rate, bytes / memory rate); ops run one after another. Peak: "
        "datasheet dense matrix peak, elementwise at the fp32 rate, no launch cost (a lower bound on time). Typical: "
        "the datasheet × sourced efficiencies (hardware/SOURCES.md). Calibrated: archcalc calibrate's measurements. "
        "Causal attention, windows capped (sdpa: a window mask computes the whole rectangle); prefill computes "
        "logits for the last token only." + (" Collectives: one link latency each (a one-shot all-reduce, "
                                             "any TP) + a ring's bytes sent per rank." if r.tp > 1 else "")
        + (" Measured: every op run as a torch kernel with its own dims (median of repeats; SDPA applies no soft-cap"
           " or sinks; collectives are not run)." if r.measured else ""), style="dim"))
    return Group(*parts)


def _step_json(s: Step) -> dict:
    return {"time_s": s.time, "kernel_time_s": s.kernel_time, "overhead_s": s.overhead, "flops": s.flops,
            "bytes": s.bytes, "mfu": s.mfu, "mbu": s.mbu,
            "ops": [{"name": o.op.name, "kind": o.op.kind, "count": o.op.count, "flops": o.flops,
                     "weight_bytes": o.op.count * o.op.weight_bytes, "act_bytes": o.op.count * o.op.act_bytes,
                     "kv_bytes": o.op.count * o.op.kv_bytes, "comm_bytes": o.op.count * o.op.comm_bytes,
                     "intensity": o.intensity, "bound": o.bound, "fixed_s": o.t_fixed, "time_s": o.time}
                    for o in s.ops]}


def _measured_json(r: RooflineResult) -> dict | None:
    if not r.measured:
        return None
    doc = {"device": r.measured[0].device, "dtype": r.measured[0].dtype}
    for m in r.measured:
        steps = {s.rates.label: s for s in _steps(r, m.phase)}
        doc[m.phase] = {
            "time_s": m.time,
            "error": {label: error(s.time, m.time) for label, s in steps.items()},
            "ops": [{"name": o.name, "count": o.count, "time_s": o.seconds, "note": o.note,
                     "error": {label: error(s.ops[i].time, o.seconds) for label, s in steps.items()}
                     if o.seconds else None}
                    for i, o in enumerate(m.ops)],
        }
    return doc


def roofline_json(r: RooflineResult) -> dict:
    preds = r.predictions
    return {
        "schema": ROOFLINE_SCHEMA,
        "model": r.spec.name, "hardware": r.hardware.name,
        "workload": {"prompt": r.prompt, "context": r.context, "batch": r.batch, "gen": r.gen, "tp": r.tp,
                     "gpus": r.gpus,
                     **{k: getattr(preds[0].decode.workload, k) for k in ("weight_dtype", "act_dtype", "kv_dtype")}},
        "predictions": [{
            "rates": p.rates.describe(),
            "ttft_s": p.ttft, "tpot_s": p.tpot, "decode_tokens_per_s": p.decode_tokens_per_s,
            "decode_total_s": p.decode_total, "mean_tpot_s": p.mean_tpot,
            "critical_batch": p.critical_batch, "step_critical_batch": p.step_critical_batch,
            "prefill": _step_json(p.prefill), "decode": _step_json(p.decode),
        } for p in preds],
        "measured": _measured_json(r),
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
    if hw.typical:
        t = hw.typical
        table.add_row("typical", f"GEMM {t.gemm_efficiency:.0%} of peak, bandwidth {t.bandwidth_efficiency:.0%}, "
                                 f"launch {seconds(t.launch_s)}, link {t.link_efficiency:.0%} + "
                                 f"{seconds(t.link_latency_s)} (hardware/SOURCES.md)")
    if hw.calibration:
        c = hw.calibration
        table.add_row("calibration", f"{c.device.name}, {c.dtype}, {c.device.date}")
    table.add_row("source", hw.source)
    return Group(table, Text(hw.notes or "", style="dim"))
