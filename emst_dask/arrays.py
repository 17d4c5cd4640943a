"""Where an array lives: one helper for the whole package."""
from __future__ import annotations

import numpy as np


def to_host(a):
    """``a`` on the host: a cupy array copied to a numpy one; anything else
    (numpy, None, a list) as it is."""
    return a.get() if is_device_array(a) else a


def array_module(a):
    """The array module of ``a``: numpy for numpy arrays (and anything that
    is not a CuPy array), else cupy."""
    if isinstance(a, np.ndarray):
        return np
    try:
        import cupy
    except ImportError:  # pragma: no cover - no CuPy: everything is host
        return np
    return cupy.get_array_module(a)


def is_device_array(a) -> bool:
    """Whether ``a`` is a GPU array (CuPy, or anything with the CUDA array
    interface) rather than a numpy one."""
    return not isinstance(a, np.ndarray) and hasattr(a, "__cuda_array_interface__")


def stable_argsort(xp, a):
    """Indices that sort ``a`` stably (equal keys keep their order): numpy's
    ``kind="stable"``; CuPy's sort is always stable (a radix sort)."""
    return xp.argsort(a, kind="stable") if xp is np else xp.argsort(a)


def jump_to_roots(xp, ptr):
    """Every node's root in the forest ``ptr`` ((k,) int32 or int64 of
    ``xp``, roots where ``ptr[x] == x``; left as it is), of ``ptr``'s dtype:
    pointer jumping, the depth halving each pass (on CuPy: in-place passes
    over a copy, one thread a node walking several steps up)."""
    if xp is not np:
        from .kernels.cuda.dendrogram import forest_roots

        return forest_roots(ptr)
    while True:
        up = ptr[ptr]
        if bool((up == ptr).all()):
            return ptr
        ptr = up


def tally(xp, key, k, first=False):
    """Per value in [0, k) of ``key`` ((c,) int32 or int64 of ``xp``;
    negative entries skipped): how many items hold it ((k,) int64) and,
    with ``first``, the lowest item holding it ((k,) of key's dtype, c for
    none; else None).  On CuPy one pass with an atomic per warp and value."""
    if xp is not np:
        from .kernels.cuda.dendrogram import tally as device_tally

        return device_tally(xp.ascontiguousarray(key), int(k), first)
    items = np.flatnonzero(key >= 0)
    total = np.bincount(key[items], minlength=k).astype(np.int64, copy=False)
    if not first:
        return total, None
    low = np.full(k, key.shape[0], key.dtype)
    np.minimum.at(low, key[items], items.astype(key.dtype))
    return total, low


def scatter_min(xp, a, idx, values):
    """``a[idx] = min(a[idx], values)`` with repeated indices, in place.

    ``a`` and ``values`` are int32, int64 or float64 arrays of ``xp`` (numpy
    or cupy) of one dtype, all >= 0: they are compared as their unsigned bit
    patterns (the same order for such numbers, and what CuPy's atomic
    minimum takes)."""
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
    bits = xp.uint32 if a.dtype.itemsize == 4 else xp.uint64
    a, values = a.view(bits), xp.asarray(values, dtype=a.dtype).view(bits)
    if hasattr(getattr(xp, op), "at"):
        getattr(xp, op).at(a, idx, values)
    else:  # CuPy < 13
        import cupyx

        getattr(cupyx, "scatter_min" if op == "minimum" else "scatter_max")(a, idx, values)
