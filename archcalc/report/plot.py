"""Roofline chart (png or svg): the ceilings, the ridge point, one point per op.

matplotlib is optional (`pip install 'archcalc[plot]'`) and imported here only.
"""

from __future__ import annotations

from pathlib import Path

from archcalc.cost.roofline import Step
from archcalc.errors import InputError


def roofline_chart(steps: dict[str, Step], path: str, title: str) -> None:
    """Each op at (FLOP/byte, FLOP/s it achieves in the prediction)."""
    target = Path(path)
    if target.suffix not in (".png", ".svg"):
        raise InputError(path, None, "--plot writes .png or .svg")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise InputError(path, None, "--plot needs matplotlib: pip install 'archcalc[plot]'") from None
    rates = next(iter(steps.values())).rates
    points = [(o.intensity, o.flops / o.time, o.op.name, phase)
              for phase, s in steps.items() for o in s.ops if o.flops and o.bytes and o.time]
    lo = min(p[0] for p in points) / 2
    hi = max(max(p[0] for p in points), rates.ridge) * 2
    fig, ax = plt.subplots(figsize=(8, 5.5))
    xs = [lo, rates.ridge, hi]
    ax.plot(xs, [min(rates.matmul, x * rates.bandwidth) for x in xs], color="black", lw=1.5,
            label=f"roofline: {rates.matmul / 1e12:.0f} TFLOP/s, {rates.bandwidth / 1e12:.2f} TB/s")
    ax.axvline(rates.ridge, color="grey", ls=":", lw=1)
    ax.annotate(f"ridge {rates.ridge:.0f} FLOP/B", (rates.ridge, rates.matmul), textcoords="offset points",
                xytext=(4, -14), fontsize=8, color="grey")
    for phase, marker in zip(steps, "os^"):
        mine = [p for p in points if p[3] == phase]
        ax.scatter([p[0] for p in mine], [p[1] for p in mine], marker=marker, s=22, label=phase)
        for x, y, name, _ in mine:
            ax.annotate(name.removeprefix("layers."), (x, y), fontsize=6, xytext=(3, 2), textcoords="offset points")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("predicted FLOP/s")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(target)
    plt.close(fig)
