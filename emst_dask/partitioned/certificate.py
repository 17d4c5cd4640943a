"""The local certificate of a box: which edges of the box's own MST are
edges of the global MST.

With b(x) the distance from x to the nearest face its box shares with
another box, nothing outside the box is closer to x than b(x).  An edge
that a component C of the box's MST edges leaves by, with weight w <
min over x in C of b(x), is a global MST edge (cut property; restriction:
the global MST's edges inside the box are edges of the box's MST).
Two formulations: Kruskal's replay (numba, sequential) on the CPU and
Borůvka rounds of whole-array operations on the GPU.
"""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def _find(parent, x):
    r = x
    while parent[r] != r:
        r = parent[r]
    while parent[x] != r:  # path compression
        t = parent[x]
        parent[x] = r
        x = t
    return r


@njit(cache=True)
def kruskal_certificate(order, a, b, w2, face2):
    """Which edges of a box's MST are edges of the global MST, and the
    super-vertices they leave.

    Replays Kruskal over the box's MST edges (``order``: strict edge order)
    keeping, per component, the smallest squared face distance of its points.
    When edge e of weight w joins components A and B of the edges before it,
    A is closed under edges before e inside the box (restriction) and no
    foreign point lies within min_A b(x) of A; so if w < min_A b(x) (or the
    same for B) nothing outside can undercut e on the cut around A, and e is
    in the global MST (cut property).  This certifies every edge the
    Borůvka-time certificate (``docs/architecture.md``, the partitioned
    algorithm) would, and more.

    order : (m,) int64, a, b : (m,) int64 local point indices of the edges,
    w2 : (m,) float64 squared weights, face2 : (n,) float64 squared (safe)
    face distances.  Returns ``certified`` (m,) bool and ``super_labels``
    (n,) int64, the smallest local index of each point's component under the
    certified edges.
    """
    n = face2.shape[0]
    parent = np.arange(n)
    low = face2.copy()
    certified = np.zeros(order.shape[0], np.bool_)
    for t in range(order.shape[0]):
        e = order[t]
        x = _find(parent, a[e])
        y = _find(parent, b[e])
        if w2[e] < low[x] or w2[e] < low[y]:
            certified[e] = True
        lo, hi = min(x, y), max(x, y)
        parent[hi] = lo
        low[lo] = min(low[x], low[y])
    for i in range(n):
        parent[i] = i
    for e in range(a.shape[0]):
        if certified[e]:
            x = _find(parent, a[e])
            y = _find(parent, b[e])
            parent[max(x, y)] = min(x, y)
    labels = np.empty(n, np.int64)
    for i in range(n):
        labels[i] = _find(parent, i)
    return certified, labels


def boruvka_certificate(xp, s, t, rank, w2, face2, n, scatter_min, max_rounds=256):
    """The local certificate by Borůvka rounds over a box's MST edges, with
    whole-array operations (CuPy on the GPU: no sequential pass).

    Every round, each component takes its minimum incident tree edge in the
    strict order (``rank``; the minimum edge leaving a component is a tree
    edge, so this is its minimum outgoing edge among all the box's pairs) and
    keeps it if its squared weight is below the component's smallest squared
    face distance: then no foreign point can undercut it and it is a global
    MST edge.  Kept edges merge their components (hooks plus pointer
    jumping); rounds stop when no component can keep its edge.  It certifies
    a subset of what ``kruskal_certificate`` does; every edge it leaves is a
    phase-2 candidate, so stopping early (``max_rounds``) costs no exactness.

    s, t : (m,) int64 local indices; rank : (m,) int64 strict-order rank;
    w2, face2 : (m,) and (n,) float64 squared (scaled) weights and safe face
    distances, both >= 0; ``scatter_min(a, idx, v)`` is ``np.minimum.at``
    (``cupyx.scatter_min``).  Returns ``certified`` (m,) bool and ``labels``
    (n,) int64 (a component's root index).
    """
    m = s.shape[0]
    certified = xp.zeros(m, xp.bool_)
    labels = xp.arange(n, dtype=xp.int64)
    face_key = face2.astype(xp.float64).view(xp.int64)  # order-preserving for >= 0
    # round 1 takes every edge as it is (each point its own component):
    # no gathered copies of the box's m edges at the memory peak
    live = None                                          # edges between components
    big = xp.iinfo(xp.int64).max
    for _ in range(max_rounds):
        if live is None:
            lu, lv, r = s, t, rank
            wk = w2.astype(xp.float64, copy=False).view(xp.int64)
        else:
            lu, lv = labels[s[live]], labels[t[live]]
            between = lu != lv
            live, lu, lv = live[between], lu[between], lv[between]
            del between
            if live.shape[0] == 0:
                break
            r = rank[live]
            wk = w2[live].astype(xp.float64).view(xp.int64)
        best = xp.full(n, big, xp.int64)
        scatter_min(best, lu, r)
        scatter_min(best, lv, r)
        low = xp.full(n, big, xp.int64)
        scatter_min(low, labels, face_key)
        by_u = (best[lu] == r) & (wk < low[lu])
        by_v = (best[lv] == r) & (wk < low[lv])
        del best, wk, r
        keep = by_u | by_v
        if not bool(keep.any()):
            break
        certified[keep if live is None else live[keep]] = True
        parent = xp.arange(n, dtype=xp.int64)
        # a component hooks along its own kept edge; an edge kept by both
        # sides hooks the larger root under the smaller (no 2-cycles)
        hu = by_u & ~(by_v & (lu < lv))
        hv = by_v & ~(by_u & (lv < lu))
        parent[lu[hu]] = lv[hu]
        parent[lv[hv]] = lu[hv]
        while True:
            nxt = parent[parent]
            if not bool((nxt != parent).any()):
                break
            parent = nxt
        labels = parent[labels]
        del parent, keep, by_u, by_v, hu, hv, lu, lv
        if live is None:  # certified edges are inside a component from now on
            live = xp.flatnonzero(~certified)
    return certified, labels


def _scatter_min(xp):
    if xp is np:
        return np.minimum.at
    import cupyx

    return cupyx.scatter_min
