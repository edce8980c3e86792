"""The shared integer searches, against counting: every answer is what a scan over the range finds,
and every search ends within bisection's step count whatever the predicate does."""

from __future__ import annotations

import random

import pytest

from archcalc.cost import solve
from archcalc.cost.solve import false_position, last_true


def test_last_true_is_the_last_true_value_of_a_scan():
    rng = random.Random(3)
    for _ in range(400):
        lo = rng.randrange(0, 50)
        hi = lo + rng.randrange(0, 300)
        cut = rng.randrange(lo, hi + 1)  # pred true up to cut
        calls = []

        def pred(n, cut=cut, calls=calls):
            calls.append(n)
            return n <= cut

        assert last_true(pred, lo, hi) == cut
        assert all(lo < n <= hi for n in calls)  # pred(lo) is given, never asked
        assert len(calls) <= max(0, hi - lo).bit_length()
    assert last_true(lambda n: True, 5, 5) == 5 and last_true(lambda n: True, 0, 2**40) == 2**40
    assert last_true(lambda n: n < 1, 0, 2**40) == 0


@pytest.mark.parametrize("steps", [solve.FALSE_POSITION_STEPS, 0, 1])
def test_false_position_ends_on_the_first_non_negative_integer(monkeypatch, steps):
    """With the regula-falsi steps cut to 0 or 1 the bisection that follows still finds it: the bound
    guarantees the end, never the answer."""
    monkeypatch.setattr(solve, "FALSE_POSITION_STEPS", steps)
    rng = random.Random(11)
    for _ in range(200):
        hi = rng.randrange(2, 10**6)
        root = rng.randrange(1, hi) + 1  # the first x with f(x) >= 0, in (1, hi]
        step = rng.choice([1.0, 1e-9, 1e9])  # nearly flat then a cliff, or steep
        calls = []

        def f(x, root=root, step=step, calls=calls):
            calls.append(x)
            return (x - root + 0.5) * (step if x >= root else 1.0)

        assert false_position(f, 1, f(1), hi, f(hi)) == root
        assert len(calls) - 2 <= steps + (hi - 1).bit_length()


@pytest.mark.parametrize("kind, most", [("affine", 2), ("square", 16), ("sqrt", 11)])
def test_false_position_needs_few_evaluations_on_smooth_curves(kind, most):
    """Why regula falsi and not bisection (≈ 20 evaluations over 10^6): on an affine function the first
    interpolation lands on the root's neighbourhood (two evaluations); on curved ones Illinois' halving
    of the stale end keeps it to a dozen or so.  Counted over 300 drawn roots each."""
    rng = random.Random(5)
    worst = 0
    for _ in range(300):
        hi = rng.randrange(2, 10**6)
        root = rng.randrange(1, hi) + 1
        f = {"affine": lambda x: x - root + 0.5, "square": lambda x: x * x - (root - 0.5) ** 2,
             "sqrt": lambda x: x ** 0.5 - (root - 0.5) ** 0.5}[kind]
        calls = []
        assert false_position(lambda x: calls.append(x) or f(x), 1, f(1), hi, f(hi)) == root
        worst = max(worst, len(calls))
    assert worst <= most


def test_sum_of_the_larger_of_two_lines_equals_the_sum_term_by_term():
    """roofline's closed form Σ_{i<n} max(f0 + i·df, m0 + i·dm) (each decode step's time is the larger
    of its math and memory times, both affine in the context) against adding the n terms."""
    from archcalc.cost.roofline import _sum_max_affine

    rng = random.Random(17)
    for _ in range(2000):
        n = rng.randrange(0, 40)
        f0, m0 = rng.randrange(-50, 50) / 4, rng.randrange(-50, 50) / 4
        df, dm = rng.randrange(-8, 8) / 4, rng.randrange(-8, 8) / 4
        expected = sum(max(f0 + i * df, m0 + i * dm) for i in range(n))
        assert _sum_max_affine(f0, df, m0, dm, n) == pytest.approx(expected, abs=1e-9)


def test_affine_last_solves_an_affine_total_asking_twice():
    """Memory affine in n, exactly (integers: no rounding): capacity 1,000, total(n) = 100 + 23·(n − 1).
    The last n with total ≤ 1,000 is 1 + ⌊900 / 23⌋ = 40 (total 997; 41 would be 1,020); fits is asked
    at 40 (does it fit?) and 41 (is it the last?), nothing else; past hi the clamp answers hi."""
    calls = []

    def fits(n):
        calls.append(n)
        return 100 + 23 * (n - 1) <= 1000

    assert solve.affine_last(fits, 1, 10**6, 1000 - 100, 23) == 40 and calls == [40, 41]
    calls.clear()
    assert solve.affine_last(fits, 1, 30, 900, 23) == 30 and calls == [30]
    assert solve.affine_last(lambda n: True, 5, 9, 0.0, 0.0) == 9  # a flat total: everything fits
    # less than a byte a step (0.5): 1 + ⌊900 / 0.5⌋ = 1,801 at once, asking 1,801 and 1,802 only
    calls.clear()

    def fits_slow(n):
        calls.append(n)
        return 100 + 0.5 * (n - 1) <= 1000

    assert solve.affine_last(fits_slow, 1, 10**6, 900, 0.5) == 1801 and calls == [1801, 1802]


@pytest.mark.parametrize("seed", range(3))
def test_affine_last_is_the_last_fit_of_a_scan_whatever_the_estimate(seed):
    """The closed form is only a first guess: for any monotone fits (true up to a cut), any slack and
    slope (a wrong estimate, a zero or negative slope, one beyond hi) the answer is the scan's, asking
    fits only inside (lo, hi], each n at most once."""
    rng = random.Random(seed)
    for _ in range(500):
        lo = rng.randrange(0, 40)
        hi = lo + rng.randrange(0, 200)
        cut = rng.randrange(lo, hi + 1)
        slope = rng.choice([0.0, -1.0, rng.uniform(0.01, 5.0)])
        slack = rng.uniform(0, 300)
        calls = []

        def fits(n, cut=cut, calls=calls):
            calls.append(n)
            return n <= cut

        assert solve.affine_last(fits, lo, hi, slack, slope) == cut
        assert len(calls) == len(set(calls)) and all(lo < n <= hi for n in calls)


def test_false_position_counts_a_zero_as_reached():
    """f(x) ≥ 0 includes equality: for f(x) = x − 10 on (0, 100] the answer is 10 itself, whichever
    end the first interpolation lands on (it lands on 10 exactly here: the line is the function)."""
    assert false_position(lambda x: x - 10, 0, -10, 100, 90) == 10
    assert false_position(lambda x: (x - 10) * abs(x - 10), 0, -100, 100, 8100) == 10
