"""CUDA helpers of the engine's strict edge order (``engine.order``): the
packed sort key and the flags of its tied runs, each one elementwise pass
where the whole-array form takes five or six; and the ends gathered into
that order in a narrower index type."""
from __future__ import annotations

import functools


@functools.cache
def _kernels():
    import cupy

    key = cupy.ElementwiseKernel(
        "float32 w2, int64 s, int64 t", "uint64 key",
        "key = ((unsigned long long)__float_as_uint(w2) << 32)"
        " | (unsigned long long)(s < t ? s : t);", "emst_strict_key")
    tied = cupy.ElementwiseKernel(
        "raw uint64 k, int64 count", "bool tied",
        "unsigned long long x = k[i];"
        "tied = (i > 0 && k[i - 1] == x) || (i + 1 < count && k[i + 1] == x);",
        "emst_tied_runs")
    gather = cupy.ElementwiseKernel("raw S src, int64 at", "I out", "out = (I)src[at];",
                                    "emst_gather_as")
    return key, tied, gather


def strict_key(w2, s, t):
    """(m,) uint64 cupy: a float32 squared length's bits above the smaller
    end, the order of (w2, min(s, t)) for w2 >= 0.

    Parameters
    ----------
    w2 : (m,) float32 cupy array, >= 0.
    s, t : (m,) int64 cupy arrays, the ends (< 2**32).
    """
    import cupy

    return _kernels()[0](w2, s.astype(cupy.int64, copy=False), t.astype(cupy.int64, copy=False))


def tied_runs(sorted_key):
    """(m,) bool cupy: the items of ``sorted_key`` (uint64, sorted) equal
    to a neighbour."""
    import cupy

    m = sorted_key.shape[0]
    return _kernels()[1](sorted_key, m, size=m) if m else cupy.zeros(0, bool)


def gather_as(src, at, dtype):
    """(len(at),) cupy array of ``dtype``: ``src[at]`` cast in the same pass
    (no temporary of ``src``'s wider type).

    Parameters
    ----------
    src : (m,) integer cupy array, values that fit ``dtype``.
    at : (c,) int64 cupy array, indices into ``src``.
    dtype : numpy integer dtype.
    """
    import cupy

    out = cupy.empty(at.shape[0], dtype)
    if out.shape[0]:
        _kernels()[2](src, at.astype(cupy.int64, copy=False), out)
    return out
