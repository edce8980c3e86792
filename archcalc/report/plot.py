"""Roofline chart (png or svg): the roofs, the ridge point, one point per op.

x is arithmetic intensity (FLOP/byte), y FLOP/s, both log.  Every rate set
draws its roof (peak solid, the others dashed); the points are the ops of the
last rate set (the most realistic one) at the FLOP/s the prediction implies,
and, with --measure, hollow markers at the FLOP/s the kernels achieved, each
joined to its prediction.

Op names would print on top of each other (a step's norms and adds sit at one
point), so each op gets a number, the same in both phases, and a key in a side
panel says which op each number is.  Points that fall on one spot share a
label ("3,8,12"); labels are placed one by one, each at the nearest spot
around its point whose rendered box overlaps no other label, no marker and no
other text (and crosses no roof where it can), with a leader line when it had
to move away.  The layout is fixed before placement and never moves after.

matplotlib is optional (`pip install 'archcalc[plot]'`) and imported inside
the functions only; the figure is drawn by the Agg canvas, without pyplot.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from math import cos, pi, sin
from pathlib import Path

from archcalc.errors import InputError
from archcalc.files import check_output, write_atomic
from archcalc.report.units import si

SUFFIXES = (".png", ".svg")
OP_LABEL = "op-label"  # gid of every op label Text is "op-label:<phase>" (the tests find them by it)
PHASE_STYLE = {"prefill": ("tab:blue", "o"), "decode": ("tab:orange", "^")}
ROOF_COLOURS = ("black", "tab:green", "tab:purple", "tab:red")
MARKER_PT = 5.0  # marker diameter in points (scatter s = MARKER_PT²)
CLUSTER_PT = 4.0  # points of one phase closer than this share a label
PER_LINE = 5  # numbers per line of a shared label
RADII_PT = (2, 6, 11, 17, 24, 32, 42, 54, 68, 84, 102, 124, 150, 180, 215)  # label offsets tried, nearest first
ANGLES = 16  # directions tried at each radius
LEADER_PT = 7  # a label moved farther than this gets a leader line
DPI = 100


def check_plot_path(path: str) -> None:
    """Fail early: a suffix we cannot write, a place we cannot write to, or no matplotlib."""
    if Path(path).suffix.lower() not in SUFFIXES:
        raise InputError(path, None, "--plot writes .png or .svg")
    check_output(path, option="--plot")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise InputError(path, None, "--plot needs matplotlib: pip install 'archcalc[plot]'") from None


def roofline_chart(result, phases, path: str) -> None:
    """Write the chart of `result` (a RooflineResult) for `phases` to `path` (.png or .svg)."""
    check_plot_path(path)
    fig = build_figure(result, phases)
    image = io.BytesIO()
    fig.savefig(image, format=Path(path).suffix.lower()[1:], dpi=DPI)
    write_atomic(Path(path), image.getvalue())  # nothing half-written


@dataclass
class _Point:
    phase: str
    number: int
    name: str
    x: float  # FLOP/byte
    y: float  # FLOP/s predicted
    measured: float | None = None  # FLOP/s measured


def chart_points(result, phases) -> list[_Point]:
    """Every op with FLOPs in `phases`, numbered by name in order of first appearance."""
    last = result.predictions[-1]
    measured = {m.phase: m.by_name() for m in result.measured}
    numbers: dict[str, int] = {}
    points = []
    for phase in phases:
        got = measured.get(phase, {})
        for o in getattr(last, phase).ops:
            if not (o.flops > 0 and o.bytes > 0 and o.time > 0):
                continue
            number = numbers.setdefault(o.op.name, len(numbers) + 1)
            m = got.get(o.op.name)
            achieved = o.flops / m.seconds if m is not None and m.seconds else None
            points.append(_Point(phase, number, o.op.name, o.intensity, o.flops / o.time, achieved))
    return points


def chart_title(result) -> str:
    where = result.hardware.name + (f", TP {result.tp}" if result.tp > 1 else "")
    return (f"{result.spec.name} on {where}\n"
            f"batch {result.batch:,}, prompt {result.prompt:,}, decode context {result.context:,}")


def build_figure(result, phases):
    """The chart as a matplotlib Figure (Agg canvas), its labels already placed."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    phases = tuple(phases)
    points = chart_points(result, phases)
    preds = result.predictions
    peak, last = preds[0].rates, preds[-1].rates
    names = {p.number: p.name for p in points}
    measured_phases = [m.phase for m in result.measured if m.phase in phases]

    # Sizes fixed up front: labels are placed in the final layout, which must not move afterwards.
    legend_rows = len(preds) + 1 + len(phases) + len(measured_phases)
    key_pt = (legend_rows * 13 + 30 + len(names) * 10.5) * 1.05
    height = max(6.0, key_pt / 72 + 1.3)
    width = 10.5
    fig = Figure(figsize=(width, height), dpi=DPI)
    FigureCanvasAgg(fig)
    left, bottom, top = 0.8 / width, 0.6 / height, 0.75 / height
    ax = fig.add_axes((left, bottom, 7.0 / width, 1 - bottom - top))
    side = fig.add_axes((left + 7.25 / width, bottom, 1 - left - 7.35 / width, 1 - bottom - top))
    side.set_axis_off()

    xs = [p.x for p in points] or [1.0]
    ys = [p.y for p in points] + [p.measured for p in points if p.measured]
    roofs = [(p.rates, p.rates.matmul * p.rates.gemm_efficiency) for p in preds]
    x_lo = min(xs) / 4
    x_hi = max(max(xs), *(m / r.bandwidth for r, m in roofs)) * 4
    y_lo = min(ys + [r.bandwidth * x_lo for r, _ in roofs]) / 3
    y_hi = max(m for _, m in roofs) * 3
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(y_lo, y_hi)

    handles = []
    for i, (rates, top_rate) in enumerate(roofs):
        ridge = top_rate / rates.bandwidth
        line = ax.plot([x_lo, ridge, x_hi], [x_lo * rates.bandwidth, top_rate, top_rate],
                       color=ROOF_COLOURS[i % len(ROOF_COLOURS)], lw=1.6 if i == 0 else 1.2,
                       ls="-" if i == 0 else "--", zorder=2,
                       label=f"{rates.label} roof: {si(top_rate, 'FLOP/s')}, {si(rates.bandwidth, 'B/s')}")[0]
        handles.append(line)
    ridge_line = ax.axvline(peak.ridge, color="grey", ls=":", lw=1, zorder=1,
                            label=f"{peak.label} ridge: {peak.ridge:.0f} FLOP/byte")
    handles.append(ridge_line)
    ridge_text = ax.annotate(f"ridge {peak.ridge:.0f}", (peak.ridge, y_lo), textcoords="offset points",
                             xytext=(3, 3), fontsize=7, color="grey")

    for phase in phases:
        colour, marker = PHASE_STYLE.get(phase, ("tab:grey", "s"))
        mine = [p for p in points if p.phase == phase]
        handles.append(ax.scatter([p.x for p in mine], [p.y for p in mine], s=MARKER_PT ** 2, marker=marker,
                                  color=colour, zorder=3, gid=f"predicted:{phase}",
                                  label=f"{phase}, predicted ({last.label} rates)"))
        if phase in measured_phases:
            done = [p for p in mine if p.measured]
            for p in done:
                ax.plot([p.x, p.x], [p.y, p.measured], color=colour, lw=0.6, alpha=0.7, zorder=2)
            device = next((getattr(m, "device", None) for m in result.measured if m.phase == phase), None)
            handles.append(ax.scatter([p.x for p in done], [p.measured for p in done], s=MARKER_PT ** 2,
                                      marker=marker, facecolors="none", edgecolors=colour, linewidths=1,
                                      zorder=3, gid=f"measured:{phase}",
                                      label=f"{phase}, measured" + (f" ({device})" if device else "")))

    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("FLOP/s")
    ax.set_title(chart_title(result), fontsize=10)
    ax.set_axisbelow(True)
    ax.grid(True, which="major", color="0.92", lw=0.6)

    legend = side.legend(handles=handles, loc="upper left", fontsize=7, frameon=False, borderaxespad=0)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    key_top = side.transAxes.inverted().transform(legend.get_window_extent(renderer).p0)[1]
    line_pt = 10.5
    header = "ops (label: name" + (", the same in both phases)" if len(phases) > 1 else ")")
    side.text(0, key_top, header, transform=_shift(side.transAxes, fig, 0, -18), fontsize=7, fontweight="bold",
              va="top")
    for i, (number, name) in enumerate(sorted(names.items())):
        side.text(0, key_top, f"{number:>3}  {name}", transform=_shift(side.transAxes, fig, 0, -30 - i * line_pt),
                  fontsize=7, va="top", family="monospace", gid="op-key")

    _place_labels(fig, ax, points, [ridge_text], handles[:len(roofs) + 1], renderer)
    return fig


def _shift(transform, fig, dx_pt: float, dy_pt: float):
    from matplotlib.transforms import offset_copy

    return offset_copy(transform, fig=fig, x=dx_pt, y=dy_pt, units="points")


def _clusters(points: list[_Point], to_px, near_px: float) -> list[list[_Point]]:
    """Points of one phase whose markers (nearly) coincide, single linkage."""
    groups: list[list[_Point]] = []
    for p in points:
        px = to_px(p)
        joined = [g for g in groups if g[0].phase == p.phase
                  and any(abs(px[0] - q[0]) < near_px and abs(px[1] - q[1]) < near_px for q in map(to_px, g))]
        merged = [p] + [q for g in joined for q in g]
        groups = [g for g in groups if g not in joined] + [merged]
    for g in groups:
        g.sort(key=lambda q: q.number)
    return groups


def _place_labels(fig, ax, points, fixed_texts, lines, renderer) -> None:
    """Greedy placement: each label at the nearest spot around its point where
    its rendered box stays inside the axes and overlaps no label, marker or
    other text, crossing none of `lines` (the roofs and the ridge) if it can;
    where there is none, the spot with the fewest overlaps, then crossings."""
    from matplotlib.lines import Line2D
    from matplotlib.transforms import Bbox

    px_per_pt = fig.dpi / 72
    to_px = lambda p: tuple(ax.transData.transform((p.x, p.y)))  # noqa: E731
    half = (MARKER_PT / 2 + 1) * px_per_pt
    centres = [to_px(p) for p in points] + [tuple(ax.transData.transform((p.x, p.measured)))
                                           for p in points if p.measured]
    taken = [Bbox.from_extents(x - half, y - half, x + half, y + half) for x, y in centres]
    taken += [t.get_window_extent(renderer) for t in fixed_texts]
    paths = [ln.get_transform().transform_path(ln.get_path()) for ln in lines]
    frame = ax.get_window_extent(renderer)
    spots = [(r * cos(a), r * sin(a)) for r in RADII_PT
             for a in (pi / 4 + 2 * pi * k / ANGLES for k in range(ANGLES))]  # nearest first, upper right first

    def crowd(g):  # the most crowded first: they have the fewest free spots
        x, y = to_px(g[0])
        return -sum(abs(x - a) < 60 and abs(y - b) < 60 for a, b in centres)

    def clashes(box) -> tuple[int, int]:
        inside = frame.contains(box.x0, box.y0) and frame.contains(box.x1, box.y1)
        hard = sum(box.overlaps(t) for t in taken) + (0 if inside else len(taken) + 1)
        return hard, sum(path.intersects_bbox(box, filled=False) for path in paths)

    for g in sorted(_clusters(points, to_px, CLUSTER_PT * px_per_pt), key=crowd):
        colour = PHASE_STYLE.get(g[0].phase, ("tab:grey",))[0]
        numbers = [str(p.number) for p in g]
        label = "\n".join(",".join(numbers[i:i + PER_LINE]) for i in range(0, len(numbers), PER_LINE))
        cx, cy = g[0].x, g[0].y
        text = ax.text(cx, cy, label, fontsize=7, color=colour, zorder=4, gid=f"{OP_LABEL}:{g[0].phase}",
                       linespacing=1.0)
        best = None  # (clashes, spot)
        for spot in spots:
            n = clashes(_set_at(text, ax, fig, renderer, *spot))
            if best is None or n < best[0]:
                best = (n, spot)
            if n == (0, 0):
                break
        dx, dy = best[1]
        box = _set_at(text, ax, fig, renderer, dx, dy)
        taken.append(box)
        if (dx * dx + dy * dy) ** 0.5 > LEADER_PT:  # a line from the point to the nearest edge of its label
            px, py = ax.transData.transform((cx, cy))
            end = ax.transData.inverted().transform((min(max(px, box.x0), box.x1), min(max(py, box.y0), box.y1)))
            ax.add_line(Line2D([cx, end[0]], [cy, end[1]], color=colour, lw=0.6, alpha=0.8, zorder=2,
                               gid="leader"))


def _set_at(text, ax, fig, renderer, dx: float, dy: float):
    """Put `text` (dx, dy) points from its anchor, aligned away from it; its rendered box, padded."""
    r = (dx * dx + dy * dy) ** 0.5
    text.set_transform(_shift(ax.transData, fig, dx, dy))
    text.set_ha("left" if dx > 0.3 * r else "right" if dx < -0.3 * r else "center")
    text.set_va("bottom" if dy > 0.3 * r else "top" if dy < -0.3 * r else "center")
    return text.get_window_extent(renderer).padded(1)
