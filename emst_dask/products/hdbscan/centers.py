"""Per-cluster summaries of a flat clustering and its points or tree:
scikit-learn's ``centroids_`` and ``medoids_`` (``store_centers``) and
hdbscan's ``relative_validity_`` (DBCV on the mutual-reachability tree)."""
from __future__ import annotations

import numpy as np
from numba import njit, prange


@njit(cache=True, parallel=True)
def _weighted_sums(pts, w):
    m, d = pts.shape
    out = np.zeros(m, np.float64)
    for i in prange(m):
        s = 0.0
        for j in range(m):
            r = 0.0
            for c in range(d):
                t = pts[i, c] - pts[j, c]
                r += t * t
            s += np.sqrt(r) * w[j]
        out[i] = s
    return out


def _medoid(pts, w):
    """The member minimising sum_j w_j |x_i - x_j|; of tied ones the
    lexicographically smallest point (not the first row: the result does
    not depend on the order of the rows)."""
    sums = _weighted_sums(np.ascontiguousarray(pts), np.ascontiguousarray(w))
    best = np.flatnonzero(sums == sums.min())
    if best.shape[0] > 1:
        cand = pts[best]
        best = best[np.lexsort(cand.T[::-1])]
    return pts[best[0]]


def centers(points, labels, probabilities, *, centroids=True, medoids=True):
    """scikit-learn's cluster centres (``HDBSCAN(store_centers=...)``).

    Parameters
    ----------
    points : (n, d) float64
    labels : (n,) int64, -1 for noise (clusters 0 .. k-1)
    probabilities : (n,) float64, the membership strengths (the weights)
    centroids, medoids : bool, which to compute

    Returns
    -------
    centroids : (k, d) float64 or None
        ``np.average(members, weights=probabilities, axis=0)`` per cluster.
    medoids : (k, d) float64 or None
        Per cluster, the member ``x_i`` minimising
        ``sum_j probabilities_j * |x_i - x_j|`` (O(m^2) time for m members,
        O(m) memory); ties go to the lexicographically smallest point.
    """
    points = np.asarray(points, dtype=np.float64)
    labels = np.asarray(labels)
    w = np.asarray(probabilities, dtype=np.float64)
    k = int(labels.max()) + 1 if labels.size and labels.max() >= 0 else 0
    d = points.shape[1]
    cen = np.empty((k, d)) if centroids else None
    med = np.empty((k, d)) if medoids else None
    order = np.argsort(labels, kind="stable")
    bounds = np.searchsorted(labels[order], np.arange(k + 1))
    for c in range(k):
        rows = order[bounds[c]:bounds[c + 1]]
        pts, wc = points[rows], w[rows]
        if centroids:
            cen[c] = np.average(pts, weights=wc, axis=0)
        if medoids:
            med[c] = _medoid(pts, wc)
    return cen, med


def relative_validity(source, target, weight, labels) -> float:
    """hdbscan's ``relative_validity_``: the DBCV index computed on the
    mutual-reachability minimum spanning tree instead of all points'.

    Per cluster ``i``: ``DSC_i`` the largest tree edge inside it,
    ``DSPC_i`` the smallest tree edge from it to another cluster (where
    none: twice the largest edge with several clusters, else twice the
    smallest edge between noise and a cluster, or the largest edge);
    ``V_i = (DSPC_i - DSC_i) / max(DSPC_i, DSC_i)``; the result is
    ``sum_i |C_i| V_i / n``, noise counted in n.

    Parameters
    ----------
    source, target : (n-1,) int64, the tree's edges.
    weight : (n-1,) float, their mutual-reachability weights.
    labels : (n,) int64, -1 for noise.

    Returns
    -------
    float (0.0 without clusters)
    """
    labels = np.asarray(labels, dtype=np.int64)
    s = np.asarray(source, dtype=np.int64)
    t = np.asarray(target, dtype=np.int64)
    w = np.asarray(weight, dtype=np.float64)
    sizes = np.bincount(labels + 1)
    noise, csize = sizes[0], sizes[1:]
    total = noise + csize.sum()
    k = csize.shape[0]
    if k == 0:
        return 0.0
    dsc = np.zeros(k)
    dspc = np.full(k, np.inf)
    l1, l2 = labels[s], labels[t]
    max_distance = w.max() if w.shape[0] else 0.0
    one = (l1 == -1) ^ (l2 == -1)
    neither = (l1 >= 0) & (l2 >= 0)
    min_outlier_sep = w[one].min() if one.any() else np.inf
    same = neither & (l1 == l2)
    diff = neither & (l1 != l2)
    np.maximum.at(dsc, l1[same], w[same])
    np.minimum.at(dspc, l1[diff], w[diff])
    np.minimum.at(dspc, l2[diff], w[diff])
    if min_outlier_sep == np.inf:
        min_outlier_sep = max_distance
    dspc[dspc == np.inf] = 2 * (max_distance if k > 1 else min_outlier_sep)
    v = (dspc - dsc) / np.maximum(dspc, dsc)
    return float(np.sum(csize * v / total))
