"""Friends-of-friends groups: cuts of the single-linkage hierarchy.

The groups at linking length b are the connected components of the tree's
edges of weight <= b; on a Euclidean minimum spanning tree they are the
components of the radius graph (pairs at distance <= b).  Weights are
compared with b exactly (float32 weights promoted to float64); a float32
tree's weights are its distances computed in float32, so a pair within
float32's rounding of b (about 1e-7 relative) may fall on the other side
of b than a float64 computation puts it.

Host (numba): the edges are bucketed once by the first cut they belong to
(a counting sort by cut, which is all the weight order the cuts need); the
lengths are processed in increasing order, each adding its bucket to an
incremental union-find whose roots are the smallest rows, then a parallel
pass over the points writes the labels.  Device (CuPy): the same order of
lengths with a lock-free union-find kernel (``kernels.cuda.union_find``)
whose links remember the length they were made at: one pass over the edges
gives each its first length (a byte), each length then hooks the edges of
its byte (a scan of the bytes), and one pass over the points reads the
groups of all the lengths together.  ``fof_labels_xp`` is a whole-array
formulation (any array module; the tests run it with numpy).
"""
from __future__ import annotations

import numpy as np

from ..arrays import jump_to_roots, scatter_min
from ..errors import InputError
from ._uf import edge_buckets, group_by_bucket, union_min_root, write_labels
from .order import check_count, check_edges


def check_lengths(lengths):
    """Validate linking lengths before any work.

    Parameters
    ----------
    lengths : float, or sequence / 1-D array of K floats, each >= 0 (inf
        allowed).

    Returns
    -------
    values : (K,) float64 numpy array (K = 1 for a single float).
    single : bool, whether a single float was given.

    Raises
    ------
    InputError
        Not a real number (a string, a bool, None, a complex), NaN, negative,
        or more than one dimension.
    """
    if hasattr(lengths, "__cuda_array_interface__") and not isinstance(lengths, np.ndarray):
        lengths = lengths.get()
    try:
        a = np.asarray(lengths)
    except (TypeError, ValueError) as e:
        raise InputError(f"linking lengths must be real numbers; got {lengths!r}") from e
    if a.dtype.kind not in "iuf" or a.ndim > 1:
        raise InputError(f"linking length must be a real number >= 0 or a sequence of "
                         f"them; got {lengths!r}")
    a = a.astype(np.float64)
    if np.isnan(a).any() or (a < 0).any():
        raise InputError(f"linking lengths must be >= 0 and not NaN; got {lengths!r}")
    return a.reshape(-1), a.ndim == 0


def fof_labels(source, target, weight, n, lengths):
    """Friends-of-friends group labels at one or several linking lengths.

    Parameters
    ----------
    source, target : (m,) integer arrays (numpy or cupy), edge endpoints in
        [0, n) (usually the n - 1 edges of a minimum spanning tree; any
        edge list works).
    weight : (m,) float32 or float64 array, the edge lengths, >= 0.
    n : int, the number of points.
    lengths : float, or sequence of K floats, each >= 0
        The linking lengths b: points joined by a path of edges of weight
        <= b are one group.

    Returns
    -------
    (n,) int64 for a float, (K, n) int64 for a sequence (rows in the order
    given); numpy or cupy as the input.  Groups are numbered by their
    smallest row: the group of row 0 is 0, the group with the next smallest
    row is 1, and so on, so equal partitions give equal labels.

    Raises
    ------
    InputError
        Bad lengths (negative, NaN, not a number) or a bad edge list, before
        any work.
    """
    values, single = check_lengths(lengths)
    n = check_count(n)
    xp, s, t, w = check_edges(source, target, weight, n)
    if xp is np:
        out = _fof_host(s, t, w, n, values)
    else:
        out = _fof_cuda(s, t, w, n, values)
    return out[0] if single else out


def _fof_cuda(s, t, w, n, values):
    """The GPU version: (K, n) int64 cupy labels."""
    import cupy

    from ..kernels.cuda.union_find import fof_cuts

    cuts, rows = _cut_order(values)
    out = cupy.empty((cuts.shape[0], n), cupy.int64)
    if cuts.shape[0] == 0 or n == 0:
        return out
    first = np.ones(cuts.shape[0], bool)  # equal lengths are read once
    first[1:] = cuts[1:] != cuts[:-1]
    fof_cuts(s, t, w, n, cuts[first], rows[first], out)
    for j in np.flatnonzero(~first):
        out[rows[j]] = out[rows[j - 1]]
    return out


def _cut_order(values):
    """Cuts in increasing order: (sorted values, their rows in the output)."""
    order = np.argsort(values, kind="stable")
    return np.ascontiguousarray(values[order]), order


def _fof_host(s, t, w, n, values):
    """The numba version: (K, n) int64 labels."""
    cuts, rows = _cut_order(values)
    k = cuts.shape[0]
    out = np.empty((k, n), np.int64)
    if k == 0 or n == 0:
        return out
    es, et, offsets = group_by_bucket(s, t, edge_buckets(w, cuts), k)
    parent = np.arange(n, dtype=np.int64)
    scratch = np.empty(n, np.int64)
    for j in range(k):
        if j and cuts[j] == cuts[j - 1]:
            out[rows[j]] = out[rows[j - 1]]
            continue
        union_min_root(parent, es, et, offsets[j], offsets[j + 1])
        write_labels(parent, out[rows[j]], scratch)
    return out


def fof_labels_xp(xp, source, target, weight, n, lengths):
    """``fof_labels`` with whole-array operations of an array module.

    The device algorithm (what ``fof_labels`` runs on CuPy input), written
    against ``xp`` so that it also runs with numpy.  ``label`` holds for
    each point a smaller-or-equal row of its group; it starts as
    ``arange(n)`` and is carried across the increasing cuts.  Per cut, the
    new edges (weight in (previous b, b]) hook the larger of their
    endpoints' labels under the smaller (a scatter-min), then pointer
    jumping (``label = label[label]``) runs until no label changes; rounds
    repeat, dropping the edges whose endpoints agree, until none is left.
    Every label is then its group's smallest row (a root, ``label[r] ==
    r``), and a cumulative sum over the roots numbers the groups.

    Parameters
    ----------
    xp : numpy or cupy.
    source, target, weight, n, lengths : as ``fof_labels``, arrays of
        module ``xp``.

    Returns
    -------
    (n,) or (K, n) int64 array of module ``xp``, equal to ``fof_labels``.
    """
    values, single = check_lengths(lengths)
    n = check_count(n)
    _, s, t, w = check_edges(source, target, weight, n)
    out = _fof_whole_array(xp, s, t, w, n, values)
    return out[0] if single else out


def _fof_whole_array(xp, s, t, w, n, values):
    """The whole-array version on checked edges: (K, n) int64 labels."""
    cuts, rows = _cut_order(values)
    k = cuts.shape[0]
    out = xp.empty((k, n), xp.int64)
    if k and n:
        bucket = xp.searchsorted(xp.asarray(cuts), w.astype(xp.float64), side="left")
        by_bucket = xp.argsort(bucket)
        bounds = xp.searchsorted(bucket[by_bucket], xp.arange(k + 1), side="left")
        bounds = [int(b) for b in bounds.tolist()]
        label = xp.arange(n, dtype=xp.int64)
        point = xp.arange(n, dtype=xp.int64)
        for j in range(k):
            if j and cuts[j] == cuts[j - 1]:
                out[rows[j]] = out[rows[j - 1]]
                continue
            new = by_bucket[bounds[j]:bounds[j + 1]]
            u, v = s[new], t[new]
            while u.shape[0]:
                lu, lv = label[u], label[v]
                apart = lu != lv
                if not bool(apart.any()):
                    break
                u, v, lu, lv = u[apart], v[apart], lu[apart], lv[apart]
                scatter_min(xp, label, xp.maximum(lu, lv), xp.minimum(lu, lv))
                label = jump_to_roots(xp, label)  # every label becomes a root
            number = xp.cumsum(label == point, dtype=xp.int64) - 1
            out[rows[j]] = number[label]
    return out
