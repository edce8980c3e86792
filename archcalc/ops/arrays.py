"""Scalar-or-array arithmetic, so that one set of formulas serves one spec and a sweep.

The op constructors, the spec's derived values and the time rule run on Python
numbers (one spec: `archcalc size`, `roofline`) and on numpy arrays with one
element per candidate (`archcalc sweep`) alike.  Python's `min`, `max`, `if`
and `int()` do not take arrays; these do, and with scalar arguments they are
the builtins, so the scalar path keeps Python ints (exact, JSON-ready) and
never imports numpy.
"""

from __future__ import annotations


def is_array(x) -> bool:
    return hasattr(x, "shape")


def lesser(a, b):
    """min(a, b), elementwise for arrays."""
    if is_array(a) or is_array(b):
        import numpy as np

        return np.minimum(a, b)
    return min(a, b)


def greater(a, b):
    """max(a, b), elementwise for arrays."""
    if is_array(a) or is_array(b):
        import numpy as np

        return np.maximum(a, b)
    return max(a, b)


def ceil_div(a, b):
    """⌈a / b⌉ for non-negative integers (exact: no float division)."""
    return -(-a // b)


def floor_int(x):
    """⌊x⌋ as an integer, for x ≥ 0 (Python's int() truncates, the same there)."""
    if is_array(x):
        import numpy as np

        return np.floor(x).astype(np.int64)
    return int(x)


def round_int(x):
    """x rounded to the nearest integer, halves to even (Python's round(); numpy's rint)."""
    if is_array(x):
        import numpy as np

        return np.rint(x).astype(np.int64)
    return round(x)


def isqrt(x):
    """⌊√x⌋ for integers x ≥ 0 (arrays: float64's square root, exact below 2^52, then a step back where it
    rounded up)."""
    if is_array(x):
        import numpy as np

        r = np.floor(np.sqrt(np.asarray(x, dtype=np.float64))).astype(np.int64)
        return r - (r * r > x)
    import math

    return math.isqrt(x)


def pow2_at_least(x):
    """The smallest power of two ≥ x, for integers x ≥ 1."""
    if is_array(x):
        import numpy as np

        return np.left_shift(1, np.ceil(np.log2(np.asarray(x, dtype=np.float64))).astype(np.int64))
    return 1 << (x - 1).bit_length()


def nonzero(x) -> bool:
    """Whether a count is non-zero (for an array: for any candidate)."""
    if is_array(x):
        return bool(x.any())
    return bool(x)


def select(condition, if_true, if_false):
    """`if_true if condition else if_false`, elementwise for arrays (both sides are evaluated)."""
    if is_array(condition):
        import numpy as np

        return np.where(condition, if_true, if_false)
    return if_true if condition else if_false
