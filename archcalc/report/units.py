"""Unit formatting for every view: the only place numbers become text.

GiB = 2^30 bytes and GB = 10^9 bytes; views show both where they differ.
"""

from __future__ import annotations

GiB, GB = 2**30, 10**9


def si(value: float, unit: str = "") -> str:
    """1.23 K/M/G/T/P with the unit glued on: si(8.03e9, "FLOP") -> '8.03 GFLOP'."""
    for factor, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "K")):
        if abs(value) >= factor:
            return f"{value / factor:.2f} {prefix}{unit}"
    return f"{value:.4g} {unit}".rstrip()


def count(n: float) -> str:
    """Exact integer with separators, and a short form: '8,030,261,248 (8.03 B)'."""
    short = si(n).replace(" G", " B").replace(" K", " K")
    return f"{int(round(n)):,}" + (f" ({short})" if n >= 1e3 else "")


def binary(n: float) -> str:
    if n < 0:  # a headroom below zero: over by that much
        return "-" + binary(-n)
    for factor, unit in ((2**40, "TiB"), (GiB, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
        if n >= factor:
            return f"{n / factor:.2f} {unit}"
    return f"{n:.0f} B"


def nbytes(n: float) -> str:
    """'1.00 GiB = 1.07 GB'; small values as exact bytes too."""
    text = f"{binary(n)} = {si(n, 'B')}" if n >= 1e3 else f"{n:.0f} B"
    return text


def seconds(t: float) -> str:
    for factor, unit in ((1, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if t >= factor:
            return f"{t / factor:.3g} {unit}"
    return f"{t * 1e9:.3g} ns"
