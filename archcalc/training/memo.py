"""One cache for the pieces a layout search asks for again and again.

Specs and hardware profiles hold lists, so they cannot be dict keys: an entry
is keyed by their ids and kept only while they are the very same objects.
"""

from __future__ import annotations

LIMIT = 1 << 14  # entries before the cache starts over (a search of 1,024 GPUs needs about 3,000)
_CACHE: dict[tuple, tuple[tuple, object]] = {}


def memo(owners: tuple, key: tuple, make):
    """make() once per (owners, key); owners are compared by identity."""
    full = (tuple(id(o) for o in owners), key)
    hit = _CACHE.get(full)
    if hit is not None and all(a is b for a, b in zip(hit[0], owners)):
        return hit[1]
    if len(_CACHE) >= LIMIT:
        _CACHE.clear()
    value = make()
    _CACHE[full] = (owners, value)
    return value
