"""The single-linkage dendrogram of a spanning tree, in parallel (whole-array).

Every dendrogram node (an edge, or a point) lies on a *chain*
(``chains.py``): a run of the root path of the dendrogram, named by the
edge it leads into and a side.  Sorted by rank, the items of one chain are
consecutive dendrogram nodes, each the parent of the one below, the top one
a child of the edge the chain names.  So a sort by (chain, rank) gives every
node its parent, and the cluster sizes are prefix sums along the chains,
taken round by round (a chain's total is known once the chains of its
items' own children are).  A point is alone on its chain (the chains of
round 1 hold one point each, and followers only join chains of later
rounds): it is its chain's top, a child of the edge the chain names, and
weighs 1, so only the edges are sorted; listed in rank order, a stable
sort by chain alone is their sort by (chain, rank).

The result equals Kruskal's union-find on the same order (``linkage.py``),
which the tests check, with scipy as the oracle of both.
"""
from __future__ import annotations

from itertools import pairwise

import numpy as np

from ..arrays import scatter_add, stable_argsort
from ..engine.boruvka import Timers
from .chains import boruvka_chains, index_dtype, point_children, record_chains
from .order import strict_sorted


def dendrogram(xp, s, t, n, timers=None, index_type=None, hierarchy=None, parents=False,
               weight=None):
    """Children (or parents) and sizes of Kruskal's merges, in parallel.

    Parameters
    ----------
    xp : numpy or cupy.
    s, t : (m,) integer arrays of ``xp``, the m = n - 1 edges of a spanning
        tree in the strict order (not written).
    n : int >= 1.
    timers : ``engine.boruvka.Timers``, optional
        Adds the seconds of the phases (``strict_order`` with ``weight``,
        ``dendrogram_rounds``, ``_chains``, ``_children``, ``_sizes``).
    index_type : numpy integer dtype, optional
        The index dtype of the work and the result (default
        ``index_dtype(m, n)``: int32 below 2**31 items).
    hierarchy : dict of arrays, optional
        The picks the EMST's Borůvka recorded (``SpanningTree.hierarchy``),
        the edges being in the engine's order: no rounds are run
        (``record_chains``).
    parents : bool
        Give every node's parent instead of every edge's children (what
        HDBSCAN* reads): one pass over the chains, none over the (m, 2)
        children.
    weight : (m,) float32 or float64 array of ``xp``, optional
        The edges' weights: the edges may then come in any order, and are
        sorted here first (``order.strict_sorted``); the sorted ends, in the
        index dtype, are freed once the rounds are done, so no later phase
        holds them.

    Returns
    -------
    children : (m, 2) of the index dtype, the two clusters merged by each
        edge (ids < n are points, n + j the cluster of edge j), the smaller
        first; with ``parents``, parent : (2n - 1,) of the index dtype, the
        cluster each node (point v < n, cluster n + j) merges into, -1 for
        the root (the last edge's).
    size : (m,) of the index dtype, the points in the cluster each edge
        forms.
    weight : (m,), with ``weight`` only: the weights in the strict order,
        the order of the edges numbered above.
    """
    m = s.shape[0]
    it = np.dtype(index_type or index_dtype(m, n)).type
    timers = timers or Timers(enabled=False)
    sort = weight is not None
    if sort:
        timers.start()
        s, t, weight = strict_sorted(xp, s, t, weight, it)  # held by this frame only
        timers.stop("strict_order")
    timers.start()
    if hierarchy is not None and m:
        key, points, edge_of, round_ends = record_chains(xp, hierarchy, n, it)
    else:
        key, points, edge_of, round_ends = boruvka_chains(xp, s, t, n, it)
    del s, t  # the sorted copies go: the later phases hold no edge ends
    timers.stop("dendrogram_rounds")
    if m == 0:
        if parents:
            out, size = xp.full(n, -1, it), xp.zeros(0, it)
        else:
            out, size = xp.zeros((0, 2), it), xp.zeros(0, it)
        return (out, size, weight) if sort else (out, size)
    # the edges in chain order (a stable sort by chain: they come in rank
    # order); the points, alone on their chains, need only their slots,
    # placed after the sort (its peak memory holds no children yet)
    order = stable_argsort(xp, key)
    order = order.astype(it, copy=False)
    skey = key[order]
    del key
    timers.stop("dendrogram_chains")
    if parents:
        out, weights = _parents(xp, skey, order, points, edge_of, m, n, it)
        del points
    else:
        out = point_children(xp, points, m, n, it)
        del points
        _children(xp, skey, order, out, edge_of, m, n)
        weights = (out < n).sum(axis=1, dtype=it)
    timers.stop("dendrogram_children")
    size = _sizes(xp, skey, order, weights, edge_of, round_ends, m)
    timers.stop("dendrogram_sizes")
    return (out, size, weight) if sort else (out, size)


def _chain_ends(xp, skey):
    """(len,) bool: the items last on their chain."""
    last = xp.ones(skey.shape[0], bool)
    last[:-1] = skey[1:] != skey[:-1]
    return last


def _parents(xp, skey, order, points, edge_of, m, n, it):
    """Every node's parent, (2n - 1,) ``it``, -1 for the root: an edge's is
    the next edge of its chain, a chain's last edge's the edge the chain
    names, a point's the edge of its slot; and (m,) ``it``, the points among
    every edge's children.  ``points``: the chain builders' (n,) slots, or
    the recorded (m, 2) children (points in their slots, -1 elsewhere)."""
    if xp is not np:  # a pass over the chains, one over the points
        from ..kernels.cuda.dendrogram import chain_parents

        return chain_parents(skey, order, points, edge_of, m, n)
    parent = xp.full(2 * n - 1, -1, it)
    last = _chain_ends(xp, skey)
    up = xp.empty(m, it)
    up[:-1] = order[1:] + n
    tops = xp.flatnonzero(last & (skey < 2 * m))
    up[tops] = edge_of[skey[tops] >> 1] + n
    up[last & (skey == 2 * m)] = -1
    parent[order + n] = up
    if points.ndim == 2:
        edge, side = xp.nonzero(points >= 0)
        parent[points[edge, side]] = edge + n
        weight = (points >= 0).sum(axis=1, dtype=it)
    else:
        parent[:n] = (points >> 1) + n
        weight = xp.bincount(points >> 1, minlength=m).astype(it)
    return parent, weight


def _children(xp, skey, order, children, edge_of, m, n):
    """Every edge's two clusters, the smaller first, in place in
    ``children`` ((m, 2) of the index dtype, the points in their slots and
    -1 elsewhere).  A chain's last edge hangs under the edge the chain
    names, on its key's side; any other edge under the next edge of its
    chain, in the slot left free."""
    if xp is not np:
        from ..kernels.cuda.dendrogram import chain_children

        chain_children(skey, order, children, edge_of, m, n)
        return
    last = _chain_ends(xp, skey)
    tops = xp.flatnonzero(last & (skey < 2 * m))
    children[edge_of[skey[tops] >> 1], skey[tops] & 1] = order[tops] + n
    below = xp.flatnonzero(~last)
    up = order[below + 1]  # the next edge of the chain
    slot = xp.where(children[up, 0] == -1, 0, 1)
    children[up, slot] = order[below] + n
    children.sort(axis=1)


def _sizes(xp, skey, order, weight, edge_of, round_ends, m):
    """(m,) of the index dtype: the points in the cluster of every edge,
    prefix sums along the chains of the edges, round by round (a chain's
    total is final once the chains of the rounds before are summed; the
    points' chains, round 1's, total 1 each).  ``weight`` ((m,) of the index
    dtype, the points among every edge's two children) is overwritten: an
    edge's chains' totals are added to it as they become final.
    """
    it = skey.dtype.type
    size = xp.empty(m, it)  # a round's chains hold disjoint points: sums < n
    bounds = [2 * e for e in [0] + round_ends] + [2 * m + 1]
    cut = xp.searchsorted(skey, xp.asarray(bounds, dtype=it)).tolist()
    if xp is not np and it is np.int32:  # a few fused passes a round
        from ..kernels.cuda.dendrogram import chain_sizes

        for lo, hi in pairwise(cut):
            chain_sizes(skey, order, edge_of, weight, size, lo, hi, m)
        return size
    last = _chain_ends(xp, skey)
    for lo, hi in pairwise(cut):
        if hi == lo:
            continue
        x = order[lo:hi]
        w = weight[x]
        total = xp.cumsum(w, dtype=it)
        first = xp.ones(hi - lo, bool)
        first[1:] = last[lo:hi - 1]
        start = xp.flatnonzero(first)
        base = (total[start] - w[start])[xp.cumsum(first) - 1]
        within = total - base
        size[x] = within
        ends = xp.flatnonzero(last[lo:hi] & (skey[lo:hi] < 2 * m))
        scatter_add(xp, weight, edge_of[skey[lo:hi][ends] >> 1], within[ends])
    return size
