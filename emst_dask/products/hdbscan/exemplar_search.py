"""The distance from each point to the nearest exemplar of every cluster,
exact, on the CPU: the distance part of hdbscan's soft memberships
(``membership``).

Every (point, cluster) pair needs its value, so the work is at least
points x clusters.  Each cluster's exemplars get a small balanced KD-tree
(``ExemplarIndex``: leaves of about ``LEAF`` exemplars, boxes per node,
one flat layout for all clusters).  The points are visited in Morton
order, a tile of ``TILE`` points against one cluster at a time: the tile
walks the cluster's tree once, entering a node when the box is nearer
than the best so far of some point of the tile (each point's bound
computed in vector lanes), and starts from the nearest exemplar of the
previous tile's last point (a spatial neighbour: its distance is nearly
the answer, so most of the tree is pruned at once).

Exact, and the same bits as a brute-force search: every distance is the
squares of the coordinate differences summed in coordinate order, then
the square root of the smallest (as ``kernels/cuda/queries.cu`` and the
device's exemplar kernel sum them); a node is skipped only when its box's
squared distance, computed with the same operations in the same order, is
at least the best so far.  Rounding is monotone, so that bound is below
the computed distance of every exemplar in the box: a skipped exemplar
could at most tie the minimum, which leaves its value unchanged.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit, prange

#: exemplars per leaf of a cluster's tree (at most; at least about half)
LEAF = 8

#: points per tile: a tile meets one cluster's tree at a time
TILE = 64


@dataclass
class ExemplarIndex:
    """KD-trees over each cluster's exemplars, in one flat layout.

    Attributes
    ----------
    points : (E, d) float64, the exemplars, cluster by cluster, each
        cluster's in its tree's order.
    offsets : (k + 1,) int64, cluster j's exemplars are
        ``points[offsets[j]:offsets[j + 1]]``.
    height : (k,) int64, cluster j's tree has ``2**height[j]`` leaves.
    node_offsets : (k + 1,) int64, cluster j's nodes (heap order: node i's
        children are 2i + 1 and 2i + 2) are rows ``node_offsets[j]`` on of
    lo, hi : (N, d) float64, the nodes' bounding boxes.
    """

    points: np.ndarray
    offsets: np.ndarray
    height: np.ndarray
    node_offsets: np.ndarray
    lo: np.ndarray
    hi: np.ndarray

    @property
    def n_clusters(self) -> int:
        return int(self.height.shape[0])


def _height(n: int) -> int:
    # the fewest halvings that leave at most LEAF points a leaf
    h = 0
    while -(-n >> h) > LEAF:
        h += 1
    return h


@njit(cache=True)
def _leaf_start(t, n, h):
    # leaf t of a tree of n points and 2**h leaves starts at this point
    return (t * n) >> h


@njit(cache=True, parallel=True)
def _build(pts, offsets, height, node_offsets, lo, hi):
    """In place: each cluster's exemplars into KD order (a node's range
    split at its middle leaf, along its box's widest side) and the boxes."""
    k = offsets.shape[0] - 1
    d = pts.shape[1]
    for j in prange(k):
        a, n, h, no = offsets[j], offsets[j + 1] - offsets[j], height[j], node_offsets[j]
        P = pts[a:a + n]
        for lev in range(h):
            span = 1 << (h - lev)  # leaves under a node of this level
            for p in range(1 << lev):
                s, e = _leaf_start(p * span, n, h), _leaf_start((p + 1) * span, n, h)
                if e - s < 2:
                    continue
                best, dim = -1.0, 0
                for c in range(d):
                    w = P[s:e, c].max() - P[s:e, c].min()
                    if w > best:
                        best, dim = w, c
                # sorted along it, the node's lower half (up to its middle
                # leaf) lies below its upper half
                order = np.argsort(P[s:e, dim])
                P[s:e] = P[s:e][order]
        first_leaf = (1 << h) - 1
        for t in range(1 << h):
            s, e = _leaf_start(t, n, h), _leaf_start(t + 1, n, h)
            r = no + first_leaf + t
            for c in range(d):
                if e > s:
                    lo[r, c] = P[s:e, c].min()
                    hi[r, c] = P[s:e, c].max()
                else:  # an empty leaf: a box that never wins
                    lo[r, c] = np.inf
                    hi[r, c] = -np.inf
        for i in range(first_leaf - 1, -1, -1):
            for c in range(d):
                lo[no + i, c] = min(lo[no + 2 * i + 1, c], lo[no + 2 * i + 2, c])
                hi[no + i, c] = max(hi[no + 2 * i + 1, c], hi[no + 2 * i + 2, c])


def build_index(exemplars) -> ExemplarIndex:
    """An ``ExemplarIndex`` of the clusters' exemplars.

    Parameters
    ----------
    exemplars : list of k (m_j, d) float arrays, m_j >= 1

    Returns
    -------
    ExemplarIndex
    """
    k = len(exemplars)
    d = exemplars[0].shape[1] if k else 0
    sizes = np.array([e.shape[0] for e in exemplars], np.int64)
    if k and sizes.min() < 1:
        raise ValueError("every cluster needs at least one exemplar")
    offsets = np.zeros(k + 1, np.int64)
    offsets[1:] = np.cumsum(sizes)
    height = np.array([_height(int(s)) for s in sizes], np.int64)
    node_offsets = np.zeros(k + 1, np.int64)
    node_offsets[1:] = np.cumsum((np.int64(2) << height) - 1)
    pts = (np.ascontiguousarray(np.concatenate(exemplars), dtype=np.float64) if k
           else np.empty((0, d)))
    lo = np.empty((int(node_offsets[-1]), d))
    hi = np.empty_like(lo)
    if k:
        _build(pts, offsets, height, node_offsets, lo, hi)
    return ExemplarIndex(pts, offsets, height, node_offsets, lo, hi)


@njit(cache=True)
def _tile_box(xs, T, lo, hi, r, lb):
    """lb[p] = squared distance from tile point p to box r (per coordinate
    the gap formed as the points' differences are: the same magnitude);
    returns the smallest.  Branch-free over p, so that it vectorises."""
    d = xs.shape[0]
    for p in range(T):
        lb[p] = 0.0
    for c in range(d):
        a, b = lo[r, c], hi[r, c]
        for p in range(T):
            v = xs[c, p]
            t = max(a - v, 0.0) + max(v - b, 0.0)  # one of the two is 0
            lb[p] += t * t
    m = np.inf
    for p in range(T):
        m = min(m, lb[p])
    return m


@njit(cache=True)
def _tile_point(xs, T, P, e, s):
    """s[p] = squared distance from tile point p to point e."""
    d = xs.shape[0]
    v = P[e, 0]
    for p in range(T):
        t = xs[0, p] - v
        s[p] = t * t
    for c in range(1, d):
        v = P[e, c]
        for p in range(T):
            t = xs[c, p] - v
            s[p] += t * t


@njit(cache=True)
def _needed(lb, best, T):
    k = 0
    for p in range(T):
        k += lb[p] < best[p]
    return k > 0


@njit(cache=True)
def _tile_nearest(xs, T, P, a, n, h, no, lo, hi, best, arg, stack, lb, lb2, s):
    """best[p] = the smallest squared distance from tile point p to the
    points ``P[a:a + n]`` (a tree of 2**h leaves, nodes from row ``no``),
    lowering the given ``best``; the tree's nodes visited once for the whole
    tile, a node only when some point's bound is below its best.  Returns
    the nearest point of the tile's last point (``arg`` if none nearer)."""
    first_leaf = (1 << h) - 1
    top = 0
    _tile_box(xs, T, lo, hi, no, lb)
    if _needed(lb, best, T):
        stack[0] = 0
        top = 1
    while top > 0:
        top -= 1
        i = stack[top]
        if i >= first_leaf:
            t = i - first_leaf
            if i != 0:  # tested again: the bests may have fallen since the push
                _tile_box(xs, T, lo, hi, no + i, lb)
                if not _needed(lb, best, T):
                    continue
            for e in range(a + _leaf_start(t, n, h), a + _leaf_start(t + 1, n, h)):
                _tile_point(xs, T, P, e, s)
                if s[T - 1] < best[T - 1]:
                    arg = e
                for p in range(T):
                    best[p] = min(best[p], s[p])
            continue
        l, r = 2 * i + 1, 2 * i + 2
        ml = _tile_box(xs, T, lo, hi, no + l, lb)
        nl = _needed(lb, best, T)
        mr = _tile_box(xs, T, lo, hi, no + r, lb2)
        nr = _needed(lb2, best, T)
        if nl and nr:  # the nearer child on top of the stack
            if ml <= mr:
                stack[top], stack[top + 1] = r, l
            else:
                stack[top], stack[top + 1] = l, r
            top += 2
        elif nl:
            stack[top] = l
            top += 1
        elif nr:
            stack[top] = r
            top += 1
    return arg


@njit(cache=True, parallel=True)
def _search(X, order, P, offsets, height, node_offsets, lo, hi, out, chunks):
    m, k, d = order.shape[0], offsets.shape[0] - 1, X.shape[1]
    for ch in prange(chunks):
        a_, b_ = ch * m // chunks, (ch + 1) * m // chunks
        last = offsets[:-1].copy()  # per cluster: the previous tile's last nearest
        stack = np.empty(128, np.int64)
        xs = np.empty((d, TILE))
        best = np.empty(TILE)
        lb = np.empty(TILE)
        lb2 = np.empty(TILE)
        s = np.empty(TILE)
        for t0 in range(a_, b_, TILE):
            T = min(b_, t0 + TILE) - t0
            for p in range(T):
                for c in range(d):
                    xs[c, p] = X[order[t0 + p], c]
            for j in range(k):
                a, n, h, no = offsets[j], offsets[j + 1] - offsets[j], height[j], node_offsets[j]
                _tile_point(xs, T, P, last[j], best)
                last[j] = _tile_nearest(xs, T, P, a, n, h, no, lo, hi, best, last[j],
                                        stack, lb, lb2, s)
                for p in range(T):
                    out[order[t0 + p], j] = np.sqrt(best[p])


@njit(cache=True, parallel=True)
def _morton_keys(X, lo, scale, bits):
    m, d = X.shape
    keys = np.empty(m, np.uint64)
    top = (1 << bits) - 1
    for i in prange(m):
        key = np.uint64(0)
        for c in range(d):
            q = int((X[i, c] - lo[c]) * scale[c])
            q = min(max(q, 0), top)
            for b in range(bits):
                if (q >> b) & 1:
                    key |= np.uint64(1) << np.uint64(b * d + c)
        keys[i] = key
    return keys


def morton_order(X):
    """(m,) int64: the rows of X in Morton (Z-curve) order, so that
    consecutive rows are near each other."""
    m, d = X.shape
    if m < 2 or d == 0:
        return np.arange(m, dtype=np.int64)
    lo = X.min(axis=0)
    span = X.max(axis=0) - lo
    bits = max(1, min(21, 64 // d))
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.where(span > 0, ((1 << bits) - 1) / span, 0.0)
    if not np.all(np.isfinite(scale)):
        scale = np.where(np.isfinite(scale), scale, 0.0)
    return np.argsort(_morton_keys(X, lo, scale, bits), kind="stable").astype(np.int64)


def nearest_exemplar_distances(index: ExemplarIndex, X, out=None):
    """Distance from each point to the nearest exemplar of each cluster.

    Parameters
    ----------
    index : ExemplarIndex
    X : (m, d) float64
    out : (m, k) float64, optional, written in place

    Returns
    -------
    (m, k) float64: ``out[i, j] = min_e |X[i] - e|`` over cluster j's
    exemplars, equal to the brute-force minimum bit for bit.
    """
    import numba

    X = np.ascontiguousarray(X, dtype=np.float64)
    m, k = X.shape[0], index.n_clusters
    if out is None:
        out = np.empty((m, k))
    if m == 0 or k == 0:
        return out
    order = morton_order(X)
    chunks = max(1, min(numba.get_num_threads() * 8, (m + TILE - 1) // TILE))
    _search(X, order, index.points, index.offsets, index.height, index.node_offsets,
            index.lo, index.hi, out, chunks)
    return out
