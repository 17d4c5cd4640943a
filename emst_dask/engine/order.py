"""The engine's strict edge order: (squared length, min row, max row).

Borůvka breaks ties between equal squared lengths by the smaller, then the
larger input row, so that the tree is unique; the partitioned algorithm and
the recorded hierarchy (``core.spanning_tree(..., hierarchy=True)``) sort
edges by that order, on the host or on the device.
"""
from __future__ import annotations

import numpy as np


def strict_edge_order(xp, s, t, w2):
    """Indices of the edges in the strict order (w2, min(s, t), max(s, t)).

    s, t : (m,) int64 endpoints; w2 : (m,) float >= 0.  With float32
    weights and endpoints below 2**32: on the host two radix sorts of
    uint64 keys (the pair packed in one word, then the weight's bits,
    order-preserving for values >= 0, above the pair's rank); on the device
    with float32 weights one radix sort of (weight bits, min) packed in a
    uint64, the rare runs of equal keys then ordered by max apart
    (``_by_max_within_ties``); with float64 weights one radix sort of the
    weight's bits, the runs of equal weights then ordered by (min, max)
    apart (``_by_rows_within_ties``).  Otherwise a three-key lexsort.
    A pair listed twice (the same candidate from two sources) is one edge:
    its copies are equal in every field, so their relative order does not
    matter.
    """
    m = s.shape[0]
    if (xp is not np and w2.dtype in (np.float32, np.float64) and m
            and max(int(s.max()), int(t.max())) < 1 << 32):
        if w2.dtype == np.float32:
            # one 64-bit radix sort instead of three 32-bit ones (measured 34
            # -> about 20 ms for 1e8 edges on an H100)
            key = packed_key(xp, w2, s, t)
            order = xp.argsort(key)
            return _by_max_within_ties(xp, order, key, s, t)
        # float64: one 64-bit radix sort of the weight's bits (half the
        # digit passes of the three stable sorts by max, min and weight it
        # replaces), the runs of equal weights then ordered by (min, max)
        key = xp.ascontiguousarray(w2).view(xp.uint64)
        order = xp.argsort(key)
        return _by_rows_within_ties(xp, order, key, s, t)
    lo, hi = xp.minimum(s, t), xp.maximum(s, t)
    if w2.dtype != np.float32 or m == 0 or int(hi.max()) >= 1 << 32:
        return xp.lexsort(xp.stack([hi.astype(xp.float64), lo.astype(xp.float64),
                                    w2.astype(xp.float64)]))
    from ..kernels.cpu.bvh import radix_argsort

    pair = (lo.astype(xp.uint64) << xp.uint64(32)) | hi.astype(xp.uint64)
    by_pair = radix_argsort(pair, 64)
    del pair
    rank = xp.empty(m, xp.uint64)
    rank[by_pair] = xp.arange(m, dtype=xp.uint64)
    del by_pair
    key = (xp.ascontiguousarray(w2).view(xp.uint32).astype(xp.uint64) << xp.uint64(32)) | rank
    return radix_argsort(key, 64)


def packed_key(xp, w2, s, t):
    """(m,) uint64: float32 w2's bits above min(s, t) (one pass on the
    device); below 2**63 for w2 >= 0 (not NaN), ids below 2**32."""
    if isinstance(w2, np.ndarray):  # the device branch run on the host (tests)
        key = xp.ascontiguousarray(w2).view(xp.uint32).astype(xp.uint64) << xp.uint64(32)
        key |= xp.minimum(s, t).astype(xp.uint64)
        return key
    from ..kernels.cuda.edge_order import strict_key

    return strict_key(w2, s, t)


def _tied(xp, order, key):
    """(m,) bool of ``xp``: the places of ``order`` (sorting ``key``) whose
    key equals a neighbour's."""
    if isinstance(key, np.ndarray):  # the device branch run on the host (tests)
        k = key[order]
        tied = xp.zeros(k.shape[0], bool)
        same = k[1:] == k[:-1]
        tied[1:] |= same
        tied[:-1] |= same
        return tied
    from ..kernels.cuda.edge_order import tied_runs  # one pass

    return tied_runs(key[order])


def _by_max_within_ties(xp, order, key, s, t):
    """``order`` (sorting ``key`` stably) with every run of equal keys
    ordered by max(s, t): the items of all such runs are sorted together by
    (key, max) and written back to the runs' places, which hold them in key
    order already.  Runs are rare (one row the smaller end of two edges of
    equal weight) but every tied item of a lattice takes part."""
    where = xp.flatnonzero(_tied(xp, order, key))
    if where.shape[0] == 0:
        return order
    items = order[where]
    items = items[xp.argsort(xp.maximum(s[items], t[items]).astype(xp.uint64))]
    order[where] = items[xp.argsort(key[items])]
    return order


def _by_rows_within_ties(xp, order, key, s, t):
    """``order`` (sorting the weights' bits ``key``) with every run of equal
    weights ordered by (min(s, t), max(s, t)), as ``_by_max_within_ties``:
    the tied items sorted together by (key, min, max), three stable sorts
    over those items only.  Equal float64 squared lengths are rare in a
    cloud of measured positions; in a lattice most items are tied and this
    costs about what three sorts of every edge cost."""
    where = xp.flatnonzero(_tied(xp, order, key))
    if where.shape[0] == 0:
        return order
    items = order[where]
    # ends below 2**32 (the caller's condition): 32-bit keys, half the passes
    items = items[xp.argsort(xp.maximum(s[items], t[items]).astype(xp.uint32))]
    items = items[xp.argsort(xp.minimum(s[items], t[items]).astype(xp.uint32))]
    order[where] = items[xp.argsort(key[items])]
    return order
