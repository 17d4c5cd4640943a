"""Single linkage: the hierarchy of a minimum spanning tree.

Merging the points along the tree's edges in the strict edge order
(weight, min(u, v), max(u, v)) is Kruskal's algorithm on the tree, and
gives the single-linkage dendrogram of the points as a scipy linkage
matrix.  On the host: a sort, then one union-find pass (path halving, union
by size).  On the device (CuPy edges): the same dendrogram from Borůvka
rounds on the tree (``dendrogram.py``), whole-array, with no copy to the host;
a tree whose Borůvka recorded its picks (``SpanningTree.hierarchy``) needs
neither the sort nor the rounds: its edges come in the engine's order, which
is the strict order of the squared lengths, and its merges in that order.
"""
from __future__ import annotations

import numpy as np

from ..errors import InputError
from ._uf import linkage_merges
from .dendrogram import dendrogram
from .order import check_count, check_edges, sorted_edges


def single_linkage(source, target, weight, n, hierarchy=None):
    """The single-linkage hierarchy of a spanning tree (scipy's format).

    Parameters
    ----------
    source, target : (m,) integer arrays (numpy or cupy), edge endpoints in
        [0, n); m >= n - 1.  Usually the n - 1 edges of a minimum spanning
        tree; any edge list that connects the n points is accepted (edges
        that join points already joined are skipped, as in Kruskal's
        algorithm).
    weight : (m,) float32 or float64 array, the edge lengths, >= 0.
    n : int, the number of points.
    hierarchy : dict of arrays, optional
        ``SpanningTree.hierarchy`` of a CUDA tree computed with
        ``hierarchy=True``, given with its own edges: the merges come in
        the order the edges are listed, the engine's strict order of the
        squared lengths (squared length, min row, max row), without a sort
        and without Borůvka rounds.  That differs from the order above
        only where two float squared lengths have one square root: such
        equal heights merge in the squared lengths' order.  The hierarchy
        (the clusters at every height) is the same.

    Returns
    -------
    Z : (n-1, 4) float64 array (numpy, or cupy for cupy edges), a linkage
        matrix for ``scipy.cluster.hierarchy``: row k merges clusters
        ``Z[k, 0] < Z[k, 1]`` (ids < n are points, id n + i is the cluster of
        row i) at height ``Z[k, 2]`` (the edge's weight) into a cluster of
        ``Z[k, 3]`` points.  Merges come in the strict edge order (weight,
        min row, max row), so equal heights come in a deterministic order.
        (0, 4) for n < 2.

    Raises
    ------
    InputError
        A bad edge list, or edges that do not connect all n points.

    Notes
    -----
    CuPy edges are computed on the device when they are exactly n - 1 (a
    spanning tree, the usual case); a longer CuPy edge list goes to the host.
    Both give the same matrix.
    """
    n = check_count(n)
    xp, s, t, w = check_edges(source, target, weight, n)
    if n < 2:
        return xp.empty((0, 4), xp.float64)
    if s.shape[0] < n - 1:
        raise InputError(f"a spanning tree of {n} points needs at least {n - 1} edges; "
                         f"got {s.shape[0]}")
    if xp is not np and s.shape[0] == n - 1:
        return device_linkage(xp, s, t, w, n, hierarchy)
    if xp is not np:
        s, t, w = s.get(), t.get(), w.get()
    order = sorted_edges(np, s, t, w)
    Z, merges = linkage_merges(s, t, w, order, n)
    if merges < n - 1:
        raise InputError(f"the edges do not connect the {n} points: they leave "
                         f"{n - merges} components")
    return Z


def device_linkage(xp, s, t, w, n, hierarchy=None):
    """``single_linkage`` of n - 1 checked edges, whole-array (``xp``: cupy,
    or numpy in tests): (n-1, 4) float64 of ``xp``.  ``hierarchy``: the
    recorded picks of these edges, in the order they are listed."""
    if hierarchy is not None and _recorded_order(xp, w, hierarchy):
        children, size = dendrogram(xp, s, t, n, hierarchy=hierarchy)
    else:
        children, size, w = dendrogram(xp, s, t, n, weight=w)
    if xp is not np:  # one pass writes the rows
        from ..kernels.cuda.dendrogram import linkage_rows

        return linkage_rows(children, w, size)
    Z = xp.empty((n - 1, 4), xp.float64)
    Z[:, :2] = children
    Z[:, 2] = w
    Z[:, 3] = size
    return Z


def _recorded_order(xp, w, hierarchy):
    """Whether the recorded picks give the dendrogram of edges listed with
    weights ``w``: they must be the picks of these m edges, listed by weight
    (the engine's order: squared lengths, then rows)."""
    if hierarchy["alpha"].shape[0] != w.shape[0]:
        raise InputError(f"the recorded hierarchy holds {hierarchy['alpha'].shape[0]} edges, "
                         f"the tree {w.shape[0]}: it is not this tree's")
    return bool((w[1:] >= w[:-1]).all())
