"""Integer searches the solvers share (fit's largest context and batch, vLLM's own searches,
roofline's critical batch).  Each is bounded: it always ends, in as many steps as bisection needs."""

from __future__ import annotations

from typing import Callable

# Regula falsi steps before plain bisection takes over: Illinois converges in a few steps on the
# near-affine memory and time curves it is used on; the bound only guarantees the end.
FALSE_POSITION_STEPS = 64


def last_true(pred: Callable[[int], bool], lo: int, hi: int) -> int:
    """Largest n in [lo, hi] with pred(n), for pred monotone (true then false) and pred(lo) true.
    Bisection: each step at least halves hi − lo, so bit_length(hi − lo) steps finish it."""
    for _ in range(max(0, hi - lo).bit_length()):
        if lo >= hi:
            break
        mid = (lo + hi + 1) // 2
        if pred(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def affine_last(fits: Callable[[int], bool], lo: int, hi: int, slack: float, slope: float) -> int:
    """Largest n in [lo, hi] with fits(n), for fits monotone (true then false) and fits(lo) true, where
    fits(n) is slack − (n − lo)·slope ≥ 0 up to float rounding (memory affine in n: slack = capacity −
    total(lo), slope = total(lo + 1) − total(lo)).  The closed form lo + ⌊slack / slope⌋, clamped to
    [lo, hi], then single steps that undo the rounding: on an affine total it asks fits twice (the
    answer and the one after); on any monotone fits the steps still end on the answer, asking no n twice."""
    n = hi if slope <= 0 else min(hi, lo + int(slack // slope))  # slack ≥ 0: fits(lo)
    if n > lo and not fits(n):  # rounded up: step down to the first that fits
        n -= 1
        while n > lo and not fits(n):
            n -= 1
        return n
    while n < hi and fits(n + 1):  # rounded down (or exact): step up while the next fits
        n += 1
    return n


def false_position(f: Callable[[int], float], lo: int, f_lo: float, hi: int, f_hi: float) -> int:
    """The smallest integer x in (lo, hi] with f(x) ≥ 0, given f(lo) < 0 ≤ f(hi) and f
    increasing: the Illinois variant of regula falsi, rounded to integers, then bisection."""
    side = 0
    for step in range(FALSE_POSITION_STEPS + (hi - lo).bit_length()):
        if hi - lo <= 1:
            break
        if step < FALSE_POSITION_STEPS:
            x = lo + (hi - lo) * -f_lo / (f_hi - f_lo)
            mid = min(hi - 1, max(lo + 1, round(x)))
        else:
            mid = (lo + hi) // 2
        f_mid = f(mid)
        if f_mid >= 0:
            hi, f_hi = mid, f_mid
            if side == 1:
                f_lo /= 2  # the same end moved twice: halve the other's weight
            side = 1
        else:
            lo, f_lo = mid, f_mid
            if side == -1:
                f_hi /= 2
            side = -1
    return hi
