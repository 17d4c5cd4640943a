"""The strict edge order of a tree's edges, and the checks on an edge list.

The engine breaks ties by the strict order (weight, min(u, v), max(u, v));
the products follow it, so that equal heights come in one deterministic
order.  ``strict_order`` is ``emst_dask.engine.order.strict_edge_order``
(radix sorts for float32 weights, a lexsort otherwise) behind the checks,
with two radix sorts for float64 weights on the host.
"""
from __future__ import annotations

import numbers

import numpy as np

from ..arrays import array_module
from ..errors import InputError
from ..engine.order import strict_edge_order


def check_count(n) -> int:
    """``n`` as an int >= 0, or an ``InputError``."""
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, numbers.Integral) or n < 0:
        raise InputError(f"the number of points must be an integer >= 0; got {n!r}")
    return int(n)


def check_edges(source, target, weight, n=None):
    """Validate an edge list; return it on one array module, normalised.

    Parameters
    ----------
    source, target : (m,) integer arrays, the endpoints.
    weight : (m,) float (or integer) array, >= 0, no NaN.
    n : int, optional; when given, endpoints must lie in [0, n).

    Returns
    -------
    xp : numpy or cupy, the module of ``weight``.
    source, target : (m,) int64, C-contiguous.
    weight : (m,) float32 or float64, C-contiguous (other types become
        float64).

    Raises
    ------
    InputError
        Shapes, types or values that do not make an edge list.
    """
    xp = array_module(weight)
    arrays = []
    for name, a in (("source", source), ("target", target), ("weight", weight)):
        if array_module(a) is not xp:
            raise InputError("source, target and weight must be arrays of one kind "
                             "(all numpy or all cupy)")
        a = xp.asarray(a)
        if a.ndim != 1:
            raise InputError(f"{name} must be one-dimensional; got shape {a.shape}")
        arrays.append(a)
    s, t, w = arrays
    if not (s.shape == t.shape == w.shape):
        raise InputError(f"source, target and weight must have one length; got "
                         f"{s.shape[0]}, {t.shape[0]}, {w.shape[0]}")
    for name, a in (("source", s), ("target", t)):
        if a.dtype.kind not in "iu":
            raise InputError(f"{name} must hold integers; got {a.dtype}")
    if w.dtype.kind not in "iuf":
        raise InputError(f"weight must hold real numbers; got {w.dtype}")
    if w.dtype not in (np.float32, np.float64):
        w = w.astype(np.float64)
    s = xp.ascontiguousarray(s, dtype=xp.int64)
    t = xp.ascontiguousarray(t, dtype=xp.int64)
    w = xp.ascontiguousarray(w)
    if w.shape[0] and xp is not np:
        from ..kernels.cuda.input_checks import edges_ok

        if edges_ok(s, t, w, n):  # one pass; the reductions below only for the message
            return xp, s, t, w
    if w.shape[0]:
        if not bool(w.min() >= 0):  # also False for NaN
            raise InputError("edge weights must be >= 0 and not NaN")
        lo = min(int(s.min()), int(t.min()))
        hi = max(int(s.max()), int(t.max()))
        if lo < 0 or (n is not None and hi >= n):
            raise InputError(f"edge endpoints must lie in [0, {n}); got [{lo}, {hi}]")
    return xp, s, t, w


def strict_order(source, target, weight):
    """Indices of the edges in the strict order (weight, min(u, v), max(u, v)).

    Parameters
    ----------
    source, target : (m,) integer arrays (numpy or cupy), the endpoints, >= 0.
    weight : (m,) float array of the same module, >= 0 (weights or squared
        weights: the order is the same).

    Returns
    -------
    (m,) int64 array of the input's module: ``weight[order]`` is
    non-decreasing, ties broken by the smaller then the larger endpoint.  An
    edge listed twice (same pair, same weight) keeps no particular order
    between its copies.

    Raises
    ------
    InputError
        Shapes, types or values that do not make an edge list.
    """
    return sorted_edges(*check_edges(source, target, weight))


def sorted_edges(xp, s, t, w):
    """``strict_order`` on an edge list that ``check_edges`` returned.

    float64 weights on the host take two stable radix sorts (by the packed
    pair, then by the weight's bits) rather than ``strict_edge_order``'s
    three-key lexsort (about 4 times faster); the order is the same.
    """
    if w.shape[0] == 0:
        return xp.zeros(0, xp.int64)
    w = w + w.dtype.type(0)  # sorted by bit pattern: -0.0 must become +0.0
    if xp is np and w.dtype == np.float64 and max(int(s.max()), int(t.max())) < 1 << 32:
        from ..kernels.cpu.bvh import radix_argsort

        pair = np.minimum(s, t).astype(np.uint64) << np.uint64(32)
        pair |= np.maximum(s, t).astype(np.uint64)
        by_pair = radix_argsort(pair, 64)
        del pair
        return by_pair[radix_argsort(w.view(np.uint64)[by_pair], 64)]
    return strict_edge_order(xp, s, t, w).astype(xp.int64, copy=False)


def strict_sorted(xp, s, t, w, it):
    """The edges in the strict order (``sorted_edges``), their ends in the
    index dtype ``it``: (s, t) (m,) ``it`` and w (m,) of w's dtype.  The
    order's (m,) int64 indices are freed before the return, and the ends
    are gathered straight into ``it``, so that what the dendrogram holds
    through its rounds is 2 + 1 narrow arrays, not 2 int64 ones and the order.
    """
    order = sorted_edges(xp, s, t, w)
    w = w[order]
    if xp is not np:
        from ..kernels.cuda.edge_order import gather_as

        return gather_as(s, order, it), gather_as(t, order, it), w
    return s[order].astype(it), t[order].astype(it), w
