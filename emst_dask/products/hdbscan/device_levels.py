"""Steps 1 to 3 of HDBSCAN* where the tree is (``device``): the binary
dendrogram, its level sets and the runt pruning, whole-array (CuPy on the
device; numpy in the tests).

Memory is what bounds the largest cloud one GPU clusters, so the work holds
few whole arrays: node ``v < n`` is point ``v`` and node ``n + i`` the merge
of edge ``i``, whose height is ``w[i]`` (no copy); per-merge arrays have
``n - 1`` entries, in the dendrogram's index dtype (int32 below 2**31
nodes); and everything per cluster is kept per *holder* (a big merge or the
root), of which there are usually far fewer than points.
"""
from __future__ import annotations

import numpy as np

from ...arrays import jump_to_roots, scatter_add, tally
from ...engine.boruvka import Timers
from ..dendrogram import dendrogram


def _lam(xp, h):
    """lambda = 1 / height (float64; inf at height 0)."""
    h = h.astype(xp.float64, copy=False)
    return xp.where(h > 0, 1.0 / xp.where(h > 0, h, 1.0), np.inf)


def _lam_at(xp, w, at):
    """``_lam(xp, w[at])``: (c,) float64 (on CuPy one pass, no temporaries)."""
    if xp is not np:
        from ...kernels.cuda.clusters import lambdas_at

        return lambdas_at(w, at)
    return _lam(xp, w[at])


def _level_sets(xp, parent, w, n):
    """Step 2: (2n - 1,) every node's level-set parent (the top of the run
    of equal heights holding its parent, a node id; -1 for the root), in
    place of ``parent`` (the binary dendrogram's, (2n - 1,) node ids, -1 for
    the root), and (m,) bool, the merges that are level-set nodes."""
    if xp is not np:  # one pass a step
        from ...kernels.cuda.clusters import level_set_parents

        return level_set_parents(parent, w, n)
    it = parent.dtype.type
    m, R = n - 1, 2 * n - 2
    # every merge to the top of its run of equal heights (a point is never
    # part of its parent's merge); indices of merges i = v - n
    up = xp.arange(m, dtype=it)
    pm = parent[n:R] - n
    xp.copyto(up[:-1], pm, where=w[pm] == w[:-1])
    del pm
    top = jump_to_roots(xp, up)
    del up
    level = top == xp.arange(m, dtype=it)  # the merges that are nodes of the level sets
    top += n
    for lo, hi in ((0, n), (n, R)):  # level-set parents, in place of the parents
        if hi > lo:
            xp.take(top, parent[lo:hi] - n, out=parent[lo:hi])
    return parent, level


def _holders_and_births(xp, mparent, level, size, n, mcs):
    """(m,) bool: the holders (big merges, level-set nodes of at least
    ``mcs`` points, and the root) and the births (the big children of a
    merge with two or more, and the root)."""
    if xp is not np:
        from ...kernels.cuda.clusters import holders_and_births

        return holders_and_births(mparent, level, size, n, mcs)
    m = n - 1
    it = mparent.dtype.type
    big = level & (size >= mcs)
    big[-1] = False
    big_ids = xp.flatnonzero(big)
    up_big = mparent[big_ids + n] - n
    n_big = xp.zeros(m, it)
    scatter_add(xp, n_big, up_big, xp.ones(big_ids.shape[0], it))
    birth = xp.zeros(m, bool)
    birth[big_ids] = n_big[up_big] >= 2
    birth[-1] = True
    big[-1] = True
    return big, birth


def _highest_small(xp, mparent, level, size, n, mcs):
    """(m,): small level-set merges climb while their level-set parent is
    small; the top of every merge's climb (merge indices)."""
    if xp is not np:
        from ...kernels.cuda.clusters import highest_small

        return highest_small(mparent, level, size, n, mcs)
    R = 2 * n - 2
    climb = xp.arange(n - 1, dtype=mparent.dtype)
    mp = mparent[n:R]  # the merges below the root
    goes = (mp != R) & (size[mp - n] < mcs) & level[:-1] & (size[:-1] < mcs)
    xp.copyto(climb[:-1], mp - n, where=goes)
    del mp, goes
    return jump_to_roots(xp, climb)


def _points_leave(xp, top, mparent, size, w, where, holders, holder_birth, n, mcs, B):
    """Every point's birth and lambda where it leaves: at the parent of the
    top of its climb (the lowest big merge, or the root, above it; a point
    climbs to its level-set parent when that is small, then on as the
    merges do, to ``top``); the points leaving at each holder; the smallest
    row leaving each birth."""
    if xp is not np:  # one pass over the points
        from ...kernels.cuda.clusters import points_leave

        return points_leave(top, mparent, size, w, where, holders, holder_birth, n, mcs, B)
    leave_at = mparent[:n] - n  # merge indices
    goes = (leave_at != n - 2) & (size[leave_at] < mcs)
    leave_at[goes] = mparent[n + top[leave_at[goes]]] - n
    del goes
    point_lambda = _lam(xp, w[leave_at])
    leave_holder = where[leave_at]
    del leave_at
    point_cluster = holder_birth[leave_holder]
    holder_count, _ = tally(xp, leave_holder, holders.shape[0])
    _, min_row = tally(xp, point_cluster, B, first=True)  # n for none
    return point_cluster, point_lambda, holder_count, min_row


def level_set_clusters(xp, s, t, w, n, min_cluster_size, timers=None, hierarchy=None):
    """Steps 1 to 3: the clusters (births) and where every point leaves.

    Parameters
    ----------
    xp : numpy or cupy.
    s, t : (n-1,) int64; w : (n-1,) float32/float64, a spanning tree of n >= 2
        points (checked).
    n : int; min_cluster_size : int >= 2.
    timers : ``engine.boruvka.Timers``, optional, for the phases' seconds.
    hierarchy : dict of arrays, optional; the tree's recorded Borůvka picks
        (``SpanningTree.hierarchy``): the edges are in the engine's order
        already, and the dendrogram runs no rounds.  The level sets do not
        depend on the order of equal heights, so the clusters are the same.

    Returns
    -------
    dict of arrays of ``xp``, ``it`` the dendrogram's index dtype (int32 or
    int64):

    - per point (n,): ``point_cluster`` it, the birth each point leaves (an
      index into the births); ``point_lambda`` float64, where it leaves;
    - per birth (B,), the root last: ``parent`` int64 (-1 for the root),
      ``birth_lambda`` float64, ``size`` int64, ``min_row`` int64 (the
      smallest row leaving it), ``death`` float64 (the largest lambda of a
      point leaving it), ``spine`` int64 (its big nodes: its birth node, the
      nodes with one big child below it, the node it ends at);
    - per holder (h,), by increasing lambda (ties adjacent): ``holder_birth``
      it, the birth holding it; ``holder_lambda`` float64;
      ``holder_count`` int64, the points leaving there plus the sizes of
      the clusters born just below it (the rows of the stabilities).
    """
    timers = timers or Timers(enabled=False)
    if hierarchy is None:  # sorted first, then the dendrogram
        parent, size, w = dendrogram(xp, s, t, n, timers, parents=True, weight=w)
    else:
        parent, size = dendrogram(xp, s, t, n, timers, hierarchy=hierarchy, parents=True)
    del s, t
    it = parent.dtype.type
    timers.start()
    m = n - 1
    mcs = min_cluster_size
    mparent, level = _level_sets(xp, parent, w, n)  # node ids, -1 for the root
    del parent
    timers.stop("level_sets")

    # 3. big merges, births, and the cluster every point leaves
    holder, birth = _holders_and_births(xp, mparent, level, size, n, mcs)
    top = _highest_small(xp, mparent, level, size, n, mcs)
    del level
    holders = xp.flatnonzero(holder).astype(it)  # by node id (flatnonzero's are int64)
    del holder
    h = holders.shape[0]
    where = xp.full(m, -1, it)
    where[holders] = xp.arange(h, dtype=it)
    above = where[xp.maximum(mparent[holders + n], n) - n]  # the root's is not read
    to = xp.where(birth[holders], xp.arange(h, dtype=it), above)
    holder_birth = jump_to_roots(xp, to)  # the holder of the nearest birth at or above
    del to, above
    births = xp.flatnonzero(birth)  # by node id: a birth's parent comes later
    del birth
    B = int(births.shape[0])
    holder_birth = xp.searchsorted(births, holders[holder_birth]).astype(it)
    point_cluster, point_lambda, holder_count, min_row = _points_leave(
        xp, top, mparent, size, w, where, holders, holder_birth, n, mcs, B)
    del top
    spine, _ = tally(xp, holder_birth, B)  # the big nodes of each cluster's spine
    # a birth's death, the largest lambda of a point leaving it: at its
    # lowest holder with points (heights grow with node ids)
    _, first = tally(xp, xp.where(holder_count > 0, holder_birth, -1), B, first=True)
    death = xp.where(first < h, _lam_at(xp, w, holders[xp.minimum(first, h - 1)]), 0.0)
    del first
    b_parent = xp.full(B, -1, it)
    b_lambda = xp.zeros(B, xp.float64)
    b_size = size[births].astype(xp.int64)
    if B > 1:
        above = mparent[births[:-1] + n] - n
        b_parent[:-1] = holder_birth[where[above]]
        b_lambda[:-1] = _lam_at(xp, w, above)
        scatter_add(xp, holder_count, where[above], b_size[:-1])
        del above
    del mparent, size, where
    holder_lambda = _lam_at(xp, w, holders)  # (h,) float64: made last, the peak is earlier
    del holders
    timers.stop("runt_pruning")
    i64 = xp.int64
    return {"point_cluster": point_cluster, "point_lambda": point_lambda,
            "parent": b_parent.astype(i64), "birth_lambda": b_lambda, "size": b_size,
            "min_row": min_row.astype(i64), "death": death, "spine": spine,
            "holder_birth": holder_birth[::-1], "holder_lambda": holder_lambda[::-1],
            "holder_count": holder_count[::-1]}
