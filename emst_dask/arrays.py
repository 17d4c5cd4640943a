"""Where an array lives: one helper for the whole package."""
from __future__ import annotations

import numpy as np


def to_host(a):
    """A numpy array of ``a`` (numpy as it is, cupy copied to the host;
    None stays None)."""
    if a is None or isinstance(a, np.ndarray):
        return a
    return a.get()  # cupy


def scatter_min(xp, a, idx, values):
    """``a[idx] = min(a[idx], values)`` with repeated indices, in place.

    ``a`` and ``values`` are int64 or float64 arrays of ``xp`` (numpy or
    cupy), all >= 0: they are compared as their uint64 bit patterns (the same
    order for such numbers, and what CuPy's atomic minimum takes)."""
    _scatter(xp, "minimum", a, idx, values)


def scatter_max(xp, a, idx, values):
    """``a[idx] = max(a[idx], values)``, as ``scatter_min``."""
    _scatter(xp, "maximum", a, idx, values)


def scatter_add(xp, a, idx, values):
    """``a[idx] += values`` with repeated indices, in place."""
    if hasattr(xp.add, "at"):
        xp.add.at(a, idx, values)
    else:  # CuPy < 13
        import cupyx

        cupyx.scatter_add(a, idx, values)


def _scatter(xp, op, a, idx, values):
    a, values = a.view(xp.uint64), values.view(xp.uint64)
    if hasattr(getattr(xp, op), "at"):
        getattr(xp, op).at(a, idx, values)
    else:  # CuPy < 13
        import cupyx

        getattr(cupyx, "scatter_min" if op == "minimum" else "scatter_max")(a, idx, values)
