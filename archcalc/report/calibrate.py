"""What `archcalc calibrate` prints: the measured ceilings beside the datasheet's."""

from __future__ import annotations

from pathlib import Path

from rich.console import Group
from rich.table import Table
from rich.text import Text

from archcalc.cost.rates import calibrated_rates
from archcalc.hardware.calibration import Calibration
from archcalc.hardware.profile import HardwareProfile
from archcalc.report.units import seconds, si


def calibration_view(cal: Calibration, hw: HardwareProfile, path: Path) -> Group:
    rates = calibrated_rates(hw, cal)
    datasheet = hw.vendor != "local"
    table = Table(title=f"Calibration of {cal.device.name} ({cal.dtype}, {cal.device.threads} threads, torch "
                        f"{cal.device.torch})", title_justify="left", show_edge=False)
    for col in ("ceiling", "measured", *(("datasheet", "share") if datasheet else ())):
        table.add_column(col, justify="left" if col == "ceiling" else "right")
    best_prefill = max((max(c.ys) for k, c in rates.attention.items() if k[0] == "prefill"), default=None)
    best_decode = max((max(c.ys) for k, c in rates.attention.items() if k[0] == "decode"), default=None)
    rows = [
        ("matmul, best of the grid", rates.matmul, hw.peak(cal.dtype), "FLOP/s"),
        ("attention prefill (SDPA), best", best_prefill, hw.peak(cal.dtype), "FLOP/s"),
        ("copy bandwidth (read + write)", cal.bandwidth.copy_bytes_per_s, hw.memory_bandwidth, "B/s"),
        ("read-only bandwidth", cal.bandwidth.read_bytes_per_s, hw.memory_bandwidth, "B/s"),
        ("attention decode (SDPA), best", best_decode, hw.peak(cal.dtype), "FLOP/s"),
        ("grouped GEMM (MoE experts), best", max((2 * p.groups * p.m * p.k * p.n / p.seconds for p in cal.grouped),
                                                  default=None), hw.peak(cal.dtype), "FLOP/s"),
    ]
    for label, value, sheet, unit in rows:
        if value is None:
            continue
        table.add_row(label, si(value, unit), *((si(sheet, unit), f"{value / sheet:.0%}") if datasheet else ()))
    table.add_row("launch (tiny elementwise kernel)", seconds(cal.launch_s), *(("", "") if datasheet else ()))
    if cal.dispatch_s is not None:
        table.add_row("eager dispatch per kernel", seconds(cal.dispatch_s), *(("", "") if datasheet else ()))
    if cal.step_host_s is not None:
        table.add_row("eager host time per step (fixed)", seconds(cal.step_host_s), *(("", "") if datasheet else ()))
    if cal.step_slowdown is not None:
        table.add_row("kernels inside a real-width step", f"+{cal.step_slowdown:.0%} time",
                      *(("", "") if datasheet else ()))
    curve = Table(title="Matmul FLOP/s by rows m (the efficiency curve)", title_justify="left", show_edge=False)
    shapes = sorted({(p.k, p.n) for p in cal.matmul})
    curve.add_column("m", justify="right")
    for k, n in shapes:
        curve.add_column(f"k {k} × n {n}", justify="right")
    for m in sorted({p.m for p in cal.matmul}):
        cells = {(p.k, p.n): si(2 * p.m * p.k * p.n / p.seconds, "FLOP/s") for p in cal.matmul if p.m == m}
        curve.add_row(str(m), *(cells.get(s, "") for s in shapes))
    notes = [*cal.notes, f"written to {path}",
             f"calibrates the bundled profile {cal.profile!r}" if cal.profile else
             "no bundled profile matches this device: use it as `--gpu local` or `--gpu FILE`"]
    return Group(table, Text(""), curve, Text(""), Text("\n".join(notes), style="dim"))
