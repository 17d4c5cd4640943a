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

    Round 1 (every point its own component) runs over the whole box and
    certifies nearly every edge away from the shared faces.  It needs no
    order of the box's edges: each point's minimum incident edge is found
    by a scatter-min of (weight bits, min) packed in a word, the rare ties
    of that word then by max (float32 weights and fewer than 2**32 points;
    otherwise by a rank from the strict order).  The later rounds rank only
    the edges left, and run on the few components they touch, renumbered
    ``0..k-1`` in the order of their roots (so every comparison of roots,
    and so every hook, is the one the whole box would make); their roots
    are mapped back to the points once at the end.

    s, t : (m,) int64 local indices; w2 : (m,) float32 or float64 squared
    (scaled) weights, face2 : (n,) float64 squared safe face distances, both
    >= 0 (every scatter-min here is ``arrays.scatter_min``: ``minimum.at``
    over the bits of int64 values >= 0).  Returns ``certified`` (m,) bool and ``labels``
    (n,) int64, the root of each point's component under the certified
    edges (a root labels itself).
    """
    face_key = face2.astype(xp.float64).view(xp.int64)  # order-preserving for >= 0
    wkey = w2.astype(xp.float64).view(xp.int64)
    if s.shape[0] == 0:
        return xp.zeros(0, xp.bool_), xp.arange(n, dtype=xp.int64)
    # round 1: each point alone, its smallest face distance its own
    if w2.dtype == np.float32 and n <= 1 << 32:
        by_u, by_v = _first_choices(xp, s, t, w2, wkey, face_key, n)
        certified, labels = _hook(xp, s, t, by_u, by_v, n, None)
        del by_u, by_v
    else:
        certified, labels = _round(xp, s, t, _ranks(xp, s, t, w2), wkey, face_key, n)
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
    comp = xp.unique(xp.concatenate([lu, lv]))
    k = comp.shape[0]
    low = xp.full(n, xp.iinfo(xp.int64).max, xp.int64)
    scatter_min(xp, low, labels, face_key)               # each component's minimum
    low_c = low[comp]
    del low
    cu, cv = xp.searchsorted(comp, lu), xp.searchsorted(comp, lv)
    del lu, lv
    r, wk = _ranks(xp, s[live], t[live], w2[live]), wkey[live]
    labels_c = xp.arange(k, dtype=xp.int64)
    for _ in range(max_rounds - 1):
        keep, labels_c = _round(xp, labels_c[cu], labels_c[cv], r, wk, low_c, k, labels_c)
        if keep is None:
            break
        certified[live[keep]] = True
        still = (labels_c[cu] != labels_c[cv]) & ~keep
        live, cu, cv, r, wk = live[still], cu[still], cv[still], r[still], wk[still]
        del still, keep
        if live.shape[0] == 0:
            break
    # back to the points: a renumbered component's points take its new root
    to_root = xp.arange(n, dtype=xp.int64)
    to_root[comp] = comp[labels_c]
    return certified, to_root[labels]


def _ranks(xp, s, t, w2):
    """(m,) int64 rank of each edge in the strict order (w2, min, max)."""
    order = strict_edge_order(xp, s, t, w2)
    rank = xp.empty(s.shape[0], xp.int64)
    rank[order] = xp.arange(s.shape[0], dtype=xp.int64)
    return rank


def _first_choices(xp, s, t, w2, wkey, face_key, n):
    """Round 1's kept edges by end, without an order of the edges: (by_u,
    by_v) (m,) bool, the edge is its end's (s's, t's) minimum incident edge
    in the strict order and lighter than that end's face distance.

    The minimum of (w2's float32 bits, min(s, t)) packed in one int64 (the
    bits of a float >= 0 order as the float) is taken per end; the edges of
    a point that tie with it in that word are told apart by max(s, t) (two
    edges equal in weight, min and max are one edge)."""
    big = xp.iinfo(xp.int64).max
    key = packed_key(xp, w2, s, t).view(xp.int64)
    best = xp.full(n, big, xp.int64)
    scatter_min(xp, best, s, key)
    scatter_min(xp, best, t, key)
    on_u = best[s] == key
    on_v = best[t] == key
    del best, key
    hi = xp.maximum(s, t)
    top = xp.full(n, big, xp.int64)
    scatter_min(xp, top, s, xp.where(on_u, hi, big))
    scatter_min(xp, top, t, xp.where(on_v, hi, big))
    by_u = on_u & (top[s] == hi) & (wkey < face_key[s])
    by_v = on_v & (top[t] == hi) & (wkey < face_key[t])
    return by_u, by_v


def _round(xp, lu, lv, r, wk, face_key, n, labels=None):
    """One Borůvka round of the certificate over ``n`` components.

    lu, lv : (m,) int64 the edges' current components (roots, < n); r, wk :
    (m,) int64 their strict-order ranks and weight keys; face_key : (n,)
    int64 per component's point the squared face distance's bits (round 1:
    per point; later: per renumbered component of round 1); labels : (n,)
    int64 the current root of each, or None (each its own).  Returns (kept
    (m,) bool, the new labels (n,)), or (None, labels) when nothing is kept.
    """
    big = xp.iinfo(xp.int64).max
    best = xp.full(n, big, xp.int64)
    scatter_min(xp, best, lu, r)
    scatter_min(xp, best, lv, r)
    if labels is None:
        low = face_key                                   # each point its own component
    else:
        low = xp.full(n, big, xp.int64)
        scatter_min(xp, low, labels, face_key)
    by_u = (best[lu] == r) & (wk < low[lu])
    by_v = (best[lv] == r) & (wk < low[lv])
    del best, low
    return _hook(xp, lu, lv, by_u, by_v, n, labels)


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
