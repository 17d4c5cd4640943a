"""Duplicates are one point: exact duplicates collapsed before the tree.

A cloud of m distinct sites with k copies each should cost what m points
cost plus a pass over n.  For the Euclidean tree (``min_samples == 1``, no
core distances) the engine builds the tree of the distinct points only and
adds the weight-0 edges of every group of identical points, and the result
is the very tree the engine computes on the whole cloud.

Why this is exact.  The engine's tree is the unique MST under the strict
edge order (w2, min row, max row) (``order.strict_edge_order``), where w2 is
the squared distance as the kernels compute it from the (exactly scaled)
coordinates, a function of the two points' values only.  It is therefore
what Kruskal's algorithm returns when it takes the edges in that order.

* A weight is 0 exactly when the two points are equal as values, coordinate
  by coordinate (``-0.0 == 0.0``): ``scaling`` picks the scale so that no
  squared distance between distinct points underflows to 0, also under the
  minimum image of a periodic box, where every coordinate lies in [0, L)
  and x and x + L are never both rows.  So "duplicate" means equal as
  values, and the weight-0 edges are exactly the pairs within a group of
  identical points.
* Kruskal takes the weight-0 edges first, by (min, max).  In a group
  g0 < g1 < ... < gk (rows) the edges (g0, g1), ..., (g0, gk) come before any
  other edge of the group (their min row g0 is the group's smallest) and
  each joins a new point: the group's tree is the *star* from its smallest
  row, and the other edges of the group close cycles.  Groups do not
  interact (no weight-0 edge joins two of them).
* After them the components are the groups.  Every edge between groups A
  and B has one weight w (their points are equal).  Say a0 < b0 are the
  smallest rows: the first of these edges in the strict order has min row
  a0, hence is (a0, b0).  Kruskal accepts at most that one (the later ones
  join A and B again), so the rest of the tree is Kruskal's tree of the
  *representatives* (each group's smallest row; a distinct point represents
  itself) under (w2, min rep row, max rep row).
* The engine run on the representatives in ascending row order breaks ties
  by their local indices 0 .. m - 1, an order-preserving renumbering of
  their rows, so it returns that tree; mapped back to rows and joined with
  the stars, it is the whole cloud's tree edge for edge, with the same w2
  (computed from the same values).

Not for mutual reachability: a duplicate is one of its copies' k nearest
points, so the core distances (and every weight) depend on the copies.

Detection (``set_aside``) is one pass of the kernel set (``mark_copies``)
that compares each point, in tree order, with the one before it: equal
points have equal codes (the same arithmetic on the same values, ±0
alike), so every group lies in one run of equal codes, by ascending row
(the sort is stable).  When every run's points each equal the one before
them, each run is one group whose first point is its smallest row
(lattices, k copies of each site, quantised tracks whose code cells are
finer than the quantum), and one more pass (``compact_copies``) writes the
distinct points and the copies.  Only when a run holds distinct points (a
clump in one cell) are the crowded points grouped by their coordinates'
bits (``find_duplicates``, ``collapse``); the sorts are stable, so each
group's first point is again its smallest row.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

#: dask.config key: collapse when at least this fraction of the points are
#: copies of an earlier row (0: whenever there is one; above 1: never)
MIN_FRACTION_KEY = "emst_dask.engine.duplicates-min-fraction"
#: its default: below it the gathered copy of the distinct points and the
#: row maps (about 20 bytes a point) outweigh what the tree saves
MIN_FRACTION = 1.0 / 16


def min_fraction() -> float:
    """The configured ``MIN_FRACTION_KEY`` (a float >= 0)."""
    import dask.config

    value = float(dask.config.get(MIN_FRACTION_KEY, MIN_FRACTION))
    if not value >= 0:
        raise ValueError(f"dask config {MIN_FRACTION_KEY} must be a number >= 0, got {value!r}")
    return value


@dataclass
class Duplicates:
    """The groups of identical points of a cloud.

    Attributes
    ----------
    copy : (c,) int64 (int32 from the CUDA set's ``compact_copies``) array of ``xp``
        Rows that equal an earlier row (every group member but its first).
    rep : (c,) int64 array of ``xp``
        The smallest row of each ``copy``'s group.
    """

    copy: Any
    rep: Any


@dataclass
class Collapsed:
    """The distinct points, ready for the tree.

    Attributes
    ----------
    rows : (m,) int64 array of ``xp``
        The representatives' rows, ascending: local index -> input row.
    codes : (m,) uint64 array of ``xp``
        Their Morton codes, sorted (the whole cloud's, filtered).
    perm : (m,) integer array of ``xp``
        Tree position -> local index (``codes``' stable sort permutation).
    """

    rows: Any
    codes: Any
    perm: Any

    def take_order(self):
        """(codes, perm), dropping this object's references to them."""
        order = (self.codes, self.perm)
        self.codes = self.perm = None
        return order


def _coordinate_keys(xp, x):
    """uint64 keys of (c, d) float ``x`` (d >= 1) that are equal for two rows
    exactly when the rows are equal as values, most significant first.

    ``+ 0.0`` turns -0.0 into +0.0 (round to nearest), so equal values have
    equal bits; float32 coordinates are packed two to a key."""
    x = x + x.dtype.type(0.0)
    if x.dtype == np.float64:
        bits = x.view(np.uint64)
        return [bits[:, a] for a in range(x.shape[1])]
    bits = x.view(np.uint32).astype(np.uint64)
    keys = []
    for a in range(0, x.shape[1], 2):
        k = bits[:, a] << np.uint64(32)
        if a + 1 < x.shape[1]:
            k |= bits[:, a + 1]
        keys.append(k)
    return keys


#: crowded points up to this many are handled with numpy on the host: a
#: few dozen array operations on a few points cost a launch each on a GPU
HOST_ROWS = 1 << 16


def crowded_points(xp, codes):
    """The points that share their code cell with another, in tree order.

    Parameters
    ----------
    xp : numpy or cupy
    codes : (n,) uint64 array of ``xp``, sorted ascending (n >= 2)

    Returns
    -------
    at : (c,) int64 array of ``xp`` or None
        Their tree positions, ascending; None when every cell holds one point.
    first : (c,) bool array of ``xp``
        Where a run of equal codes starts.
    """
    same = codes[1:] == codes[:-1]
    if not bool(same.any()):
        return None, None
    crowded = xp.zeros(codes.shape[0], dtype=bool)
    crowded[1:] |= same
    crowded[:-1] |= same
    at = xp.flatnonzero(crowded)
    del crowded
    first = xp.ones(at.shape[0], dtype=bool)  # each run's first point
    first[1:] = ~same[at[1:] - 1]
    return at, first


def stable_argsort(keys):
    """numpy's stable argsort (the host's ``sort_by_code``)."""
    return np.argsort(keys, kind="stable")


def find_duplicates(K, points, codes, perm):
    """The groups of identical points, from the Morton order.

    Parameters
    ----------
    K : kernel set
    points : (n, d) float array of ``K.xp``, input order
    codes : (n,) uint64 array of ``K.xp``, sorted ascending (tree order)
    perm : (n,) integer array of ``K.xp``, ``codes``' stable sort permutation

    Returns
    -------
    Duplicates or None
        None when no two points are equal.  Up to ``HOST_ROWS`` crowded
        points are grouped with numpy on the host.
    """
    xp = K.xp
    n = points.shape[0]
    if n < 2:
        return None
    at, first = crowded_points(xp, codes)
    if at is None:
        return None
    it = np.int32 if n < 2**31 else np.int64  # indices: half the bytes on a GPU
    rows = perm[at].astype(it, copy=False)  # ascending within each run
    del at
    held = [rows, points[rows], first]
    del rows, first
    if held[0].shape[0] <= HOST_ROWS:
        found = _groups(np, stable_argsort, [K.to_host(a) for a in held], it)
        del held
        found = None if found is None else Duplicates(xp.asarray(found.copy),
                                                      xp.asarray(found.rep))
    else:
        found = _groups(xp, K.sort_by_code, held, it)
    return found


def _groups(xp, sort, held, it):
    """The groups among the crowded points (``find_duplicates``' body).

    Parameters
    ----------
    xp : numpy or cupy
    sort : stable argsort of a uint64 array of ``xp``
    held : list of (rows, x, first), emptied here (each array is freed
        as soon as it is done with): the crowded points' rows ((c,) int
        array of ``xp``, tree order), their coordinates ((c, d) float) and
        where a run of equal codes starts ((c,) bool)
    it : the index dtype

    Returns
    -------
    Duplicates (arrays of ``xp``) or None
    """
    rows, x, first = held
    held.clear()
    # a run is one group when each point equals the one before it (values:
    # -0.0 == 0.0)
    differs = ~(x[1:] == x[:-1]).all(axis=1) & ~first[1:]
    rid = xp.cumsum(first, dtype=it) - 1
    starts = xp.flatnonzero(first).astype(it, copy=False)
    mixed = xp.zeros(starts.shape[0], dtype=bool)
    mixed[rid[1:][differs]] = True  # runs of distinct points (a clump in one cell)
    del differs
    in_mixed = mixed[rid]
    del mixed
    # pure runs: one group each, whose first point is its smallest row
    take = ~first & ~in_mixed
    copy = [rows[take]]
    rep = [rows[starts[rid[take]]]]
    del take, starts, rid, first
    if bool(in_mixed.any()):
        mrows, mx = rows[in_mixed], x[in_mixed]
        order = xp.arange(mrows.shape[0])
        for key in reversed(_coordinate_keys(xp, mx)):  # least significant first
            order = order[sort(xp.ascontiguousarray(key[order]))]
        mrows, mx = mrows[order], mx[order]
        del order
        dup = xp.zeros(mrows.shape[0], dtype=bool)
        dup[1:] = (mx[1:] == mx[:-1]).all(axis=1)
        gid = xp.cumsum(~dup, dtype=it) - 1
        heads = mrows[~dup]
        copy.append(mrows[dup])
        rep.append(heads[gid[dup]])
        del dup, gid, heads, mrows, mx
    del x, rows, in_mixed
    copy = xp.concatenate(copy) if len(copy) > 1 else copy[0]
    rep = xp.concatenate(rep) if len(rep) > 1 else rep[0]
    if copy.shape[0] == 0:
        return None
    return Duplicates(copy.astype(np.int64), rep.astype(np.int64))


def collapse(K, dup: Duplicates, codes, perm, n: int) -> Collapsed:
    """The representatives' rows and their part of the Morton order.

    Parameters
    ----------
    K : kernel set
    dup : Duplicates of a cloud of ``n`` points
    codes, perm : the cloud's sorted codes and their permutation (as for
        ``find_duplicates``)
    n : int

    Returns
    -------
    Collapsed
        A subsequence of a stable sort is the stable sort of the
        subsequence, so the representatives need no sort of their own.
    """
    xp = K.xp
    keep = xp.ones(n, dtype=bool)
    keep[dup.copy] = False
    rows = xp.flatnonzero(keep)
    local = xp.cumsum(keep, dtype=perm.dtype) - 1  # input row -> local index
    kept = keep[perm]  # tree order
    del keep
    codes = codes[kept]
    perm = local[perm[kept]]
    return Collapsed(rows, codes, perm)


def set_aside(K, points, codes, perm, fraction):
    """The distinct points and the copies, when enough rows are copies.

    Parameters
    ----------
    K : kernel set
    points : (n, d) float array of ``K.xp``, input order
    codes : (n,) uint64 array of ``K.xp``, sorted ascending (tree order)
    perm : (n,) integer array of ``K.xp``, ``codes``' stable sort permutation
    fraction : float
        Collapse when at least ``fraction * n`` rows (and at least one)
        are copies of an earlier row.

    Returns
    -------
    kept : Collapsed or None
        None when the cloud is not collapsed.
    dup : Duplicates or None
    mixed : bool
        Whether a code cell holds two distinct points (a clump inside one
        cell): only then does the tree need finer codes
        (``boruvka.refine_crowded_cells``).
    """
    n = points.shape[0]
    if n < 2:
        return None, None, False
    keep_tree, (copies, _, mixed) = K.mark_copies(points, codes, perm)
    if mixed:  # a clump inside one cell: group the crowded points by coordinates
        del keep_tree
        dup = find_duplicates(K, points, codes, perm)
        if dup is None or dup.copy.shape[0] < fraction * n:
            return None, None, True
        return collapse(K, dup, codes, perm, n), dup, True
    if copies == 0 or copies < fraction * n:
        return None, None, False
    rows, kcodes, kperm, copy, rep = K.compact_copies(points, codes, perm, keep_tree, n - copies)
    return Collapsed(rows, kcodes, kperm), Duplicates(copy, rep), False
