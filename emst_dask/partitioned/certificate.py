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

from ..arrays import jump_to_roots, scatter_min
from ..engine.order import packed_key, strict_edge_order

#: the certificate's later rounds renumber the components their edges touch
#: when these are fewer than 1 / RENUMBER_AT of the current numbering's
RENUMBER_AT = 4


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


def boruvka_certificate(xp, s, t, w2, face2, n, max_rounds=256):
    """The local certificate by Borůvka rounds over a box's MST edges, with
    whole-array operations (CuPy on the GPU: no sequential pass).

    Every round, each component takes its minimum incident tree edge in the
    strict order (w2, min(s, t), max(s, t)) (the minimum edge leaving a
    component is a tree edge, so this is its minimum outgoing edge among all
    the box's pairs) and keeps it if its squared weight is below the
    component's smallest squared face distance: then no foreign point can
    undercut it and it is a global MST edge.  Kept edges merge their
    components (hooks plus pointer jumping); rounds stop when no component
    can keep its edge.  It certifies a subset of what
    ``kruskal_certificate`` does; every edge it leaves is a phase-2
    candidate, so stopping early (``max_rounds``) costs no exactness.

    No round sorts the edges: with float32 weights and fewer than 2**32
    points a point's minimum in round 1 is a scatter-min of (weight bits,
    other end) packed in a word (``_point_choices``), a later component's a
    scatter-min of (weight bits, min), the rare ties of that word then by
    max (``_choices``); otherwise by a rank from the strict order (one
    sort).  Round 1 (every point its own component) runs over the whole
    box and certifies nearly every edge away from the shared faces; it
    leaves the edges that are neither end's minimum, about a third.  The
    later rounds run on those and on the components they touch, renumbered
    ``0..k-1`` in the order of their roots by a prefix sum (so every
    comparison of roots, and so every hook, is the one the whole box would
    make), and renumbered so again whenever the edges left touch fewer than
    1 / ``RENUMBER_AT`` of them; the roots are mapped back down the
    renumberings to the points once at the end.

    s, t : (m,) int64 local indices; w2 : (m,) float32 or float64 squared
    (scaled) weights, face2 : (n,) float64 squared safe face distances, both
    >= 0 (every scatter-min here is ``arrays.scatter_min``: ``minimum.at``
    over the bits of int64 values >= 0).  Returns ``certified`` (m,) bool and ``labels``
    (n,) int64, the root of each point's component under the certified
    edges (a root labels itself).
    """
    face_key = face2.astype(xp.float64, copy=False).view(xp.int64)  # ordered as >= 0
    wkey = w2.astype(xp.float64, copy=False).view(xp.int64)
    if s.shape[0] == 0:
        return xp.zeros(0, xp.bool_), xp.arange(n, dtype=xp.int64)
    packed = w2.dtype == np.float32 and n <= 1 << 32
    # round 1: each point alone, its smallest face distance its own
    if packed:
        by_u, by_v = _point_choices(xp, s, t, w2, wkey, face_key, n)
    else:
        by_u, by_v = _choices(xp, s, t, _order_keys(xp, s, t, w2, packed), wkey, face_key, n)
    certified, labels = _hook(xp, s, t, by_u, by_v, n, None)
    del by_u, by_v
    if certified is None:
        return xp.zeros(s.shape[0], xp.bool_), labels
    live = xp.flatnonzero(~certified)                    # phase 2's candidates
    if live.shape[0] == 0 or max_rounds <= 1:
        return certified, labels
    lu, lv = labels[s[live]], labels[t[live]]
    between = lu != lv
    live, lu, lv = live[between], lu[between], lv[between]
    del between
    if live.shape[0] == 0:
        return certified, labels
    # the components the remaining rounds can merge, renumbered in root order
    comp, cu, cv = _renumber(xp, lu, lv, n)
    del lu, lv
    low = xp.full(n, xp.iinfo(xp.int64).max, xp.int64)
    scatter_min(xp, low, labels, face_key)               # each component's minimum
    low_c = low[comp]
    del low
    keys = _order_keys(xp, s[live], t[live], w2[live], packed)
    wk = wkey[live]
    levels = []        # the renumberings (comp, labels_c) above the current one
    labels_c = xp.arange(comp.shape[0], dtype=xp.int64)
    for _ in range(max_rounds - 1):
        k = labels_c.shape[0]
        ru, rv = labels_c[cu], labels_c[cv]
        low = xp.full(k, xp.iinfo(xp.int64).max, xp.int64)
        scatter_min(xp, low, labels_c, low_c)
        by_u, by_v = _choices(xp, ru, rv, list(keys), wk, low, k)
        del low
        keep, labels_c = _hook(xp, ru, rv, by_u, by_v, k, labels_c)
        del ru, rv, by_u, by_v
        if keep is None:
            break
        certified[live[keep]] = True
        still = (labels_c[cu] != labels_c[cv]) & ~keep
        live, cu, cv, wk = live[still], cu[still], cv[still], wk[still]
        keys = [a[still] for a in keys]
        del still, keep
        if live.shape[0] == 0:
            break
        if RENUMBER_AT * live.shape[0] < k:
            # the edges left touch few of the components: renumber the roots
            # they touch (in root order again), so that a round costs what
            # its edges do, not a pass over every component of round 1
            low = xp.full(k, xp.iinfo(xp.int64).max, xp.int64)
            scatter_min(xp, low, labels_c, low_c)        # each root's minimum
            levels.append((comp, labels_c))
            comp, cu, cv = _renumber(xp, labels_c[cu], labels_c[cv], k)
            low_c = low[comp]
            del low
            labels_c = xp.arange(comp.shape[0], dtype=xp.int64)
    # back down the renumberings: a renumbered component's members take its
    # new root, then the points
    while levels:
        to_root = xp.arange(levels[-1][1].shape[0], dtype=xp.int64)
        to_root[comp] = comp[labels_c]
        comp, labels_c = levels.pop()
        labels_c = to_root[labels_c]
        del to_root
    to_root = xp.arange(n, dtype=xp.int64)
    to_root[comp] = comp[labels_c]
    return certified, to_root[labels]


def _renumber(xp, lu, lv, n):
    """The roots in ``lu``/``lv`` ((m,) int64 < n) as ``0..k-1`` in their
    order: (comp (k,) int64 the roots ascending, cu, cv (m,) int64 their
    new numbers).  A flag per point and a prefix sum: no sort."""
    flag = xp.zeros(n, xp.int32)
    flag[lu] = 1
    flag[lv] = 1
    comp = xp.flatnonzero(flag)
    ids = xp.cumsum(flag, dtype=xp.int64)
    del flag
    ids -= 1
    return comp.astype(xp.int64, copy=False), ids[lu], ids[lv]


def _order_keys(xp, s, t, w2, packed):
    """The edges' place in the strict order (w2, min(s, t), max(s, t)) as
    scatter-min keys, a list of (m,) int64: with ``packed`` (float32
    weights, ids below 2**32) the word of (weight bits, min) and max, which
    need no sort; else the rank (one sort)."""
    if packed:
        return [packed_key(xp, w2, s, t).view(xp.int64), xp.maximum(s, t)]
    return [_ranks(xp, s, t, w2)]


def _ranks(xp, s, t, w2):
    """(m,) int64 rank of each edge in the strict order (w2, min, max)."""
    order = strict_edge_order(xp, s, t, w2)
    rank = xp.empty(s.shape[0], xp.int64)
    rank[order] = xp.arange(s.shape[0], dtype=xp.int64)
    return rank


def _choices(xp, lu, lv, keys, wk, low, n):
    """One Borůvka round's kept edges by end: (by_u, by_v) (m,) bool, the
    edge is its end's (``lu``'s, ``lv``'s) minimum incident edge in the
    strict order and lighter than that end's face distance.

    lu, lv : (m,) int64 the edges' components (< n); keys : a list from
    ``_order_keys``, emptied here (each word freed once used); wk : (m,)
    int64 the squared weights' float64 bits; low : (n,) int64 each component's smallest
    squared face distance's bits.  With a rank, the minimum is one
    scatter-min; with the packed word, the edges of a component that tie
    with its minimum word are told apart by max(s, t) (two edges equal in
    weight, min and max are one edge)."""
    big = xp.iinfo(xp.int64).max
    first, hi = keys.pop(0), (keys.pop(0) if keys else None)
    best = xp.full(n, big, xp.int64)
    scatter_min(xp, best, lu, first)
    scatter_min(xp, best, lv, first)
    on_u = best[lu] == first
    on_v = best[lv] == first
    del best, first
    if hi is not None:
        top = xp.full(n, big, xp.int64)
        scatter_min(xp, top, lu, xp.where(on_u, hi, big))
        scatter_min(xp, top, lv, xp.where(on_v, hi, big))
        on_u &= top[lu] == hi
        on_v &= top[lv] == hi
        del top
    return on_u & (wk < low[lu]), on_v & (wk < low[lv])


def _point_choices(xp, s, t, w2, wk, face_key, n):
    """Round 1's kept edges by end, ``_choices`` for components of one point
    each with float32 weights and ids below 2**32: (by_u, by_v) (m,) bool.

    Among the edges of one point x the strict order (w2, min, max) is the
    order of (w2, the other end) (both ends below x, both above, or one on
    each side: the same comparison), and an edge is the only one of x with
    its other end: so each point's minimum is one scatter-min of the word
    (w2's bits, the other end) a side, and no ties are left to tell apart.

    s, t : (m,) int64; w2 : (m,) float32 >= 0; wk : (m,) int64 the squared
    weights' float64 bits; face_key : (n,) int64 each point's squared face
    distance's float64 bits."""
    high = xp.ascontiguousarray(w2).view(xp.uint32).astype(xp.int64)
    high <<= 32                                 # below 2**63: w2 >= 0
    best = xp.full(n, xp.iinfo(xp.int64).max, xp.int64)
    scatter_min(xp, best, s, high | t)
    scatter_min(xp, best, t, high | s)
    by_u = best[s] == (high | t)
    by_v = best[t] == (high | s)
    del best, high
    by_u &= wk < face_key[s]
    by_v &= wk < face_key[t]
    return by_u, by_v


def _hook(xp, lu, lv, by_u, by_v, n, labels):
    """Merge the components along their kept edges: (kept (m,) bool, the new
    labels (n,)), or (None, labels) when nothing is kept (``labels`` None:
    each its own)."""
    keep = by_u | by_v
    if not bool(keep.any()):
        return None, (xp.arange(n, dtype=xp.int64) if labels is None else labels)
    parent = xp.arange(n, dtype=xp.int64)
    # a component hooks along its own kept edge; an edge kept by both sides
    # hooks the larger root under the smaller (no 2-cycles)
    hu = by_u & ~(by_v & (lu < lv))
    hv = by_v & ~(by_u & (lv < lu))
    parent[lu[hu]] = lv[hu]
    parent[lv[hv]] = lu[hv]
    del hu, hv
    parent = jump_to_roots(xp, parent)
    return keep, (parent if labels is None else parent[labels])
