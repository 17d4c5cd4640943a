"""hdbscan's prediction API on a fitted ``emst_dask.HDBSCAN(prediction_data=True)``:
the prediction data and ``approximate_predict`` here, ``membership_vector``
and ``all_points_membership_vectors`` in ``membership``; spelled and
defined as hdbscan's (``hdbscan.prediction``), vectorised (numba and
scipy's KD-tree).

Definitions (hdbscan's, with two differences that make them exact and
order-free):

- A new point x joins the tree through its nearest training point in
  mutual reachability, ``argmin_j max(core_x, core_j, |x - x_j|)`` with
  ``core_j`` the fit's core distances and ``core_x`` the distance from x to
  its ``(min_samples - 1)``-th nearest training point (its core distance
  were it added, counting itself); ``lambda = 1 / that distance``.  hdbscan
  searches only the ``2 min_samples`` nearest neighbours and recomputes the
  training core distances with one neighbour fewer; here the minimum is
  exact (a radius search completes the k-NN where it could be beaten) and
  uses the fit's own core distances.  Of several training points at the
  same distance the lexicographically smallest point is taken, so results
  do not depend on the order of the rows.
- ``approximate_predict``: from the neighbour's cluster, walk up while the
  cluster was born at a lambda >= the new point's (when the neighbour left
  at a larger lambda); the label is the selected cluster at or above it,
  the probability ``min(lambda, max_lambda) / max_lambda`` with
  ``max_lambda`` the selected cluster's largest lambda.
- ``membership_vector`` / ``all_points_membership_vectors``: hdbscan's
  product of a distance vector (inverse distance to each cluster's
  exemplars, normalised) and an outlier vector (a softmax of the merge
  heights of the point's cluster with each selected cluster), times the
  probability of being in some cluster; the formulas, their constants
  (1e-8) and their different exponents in the two functions are hdbscan's.
  hdbscan rounds the new point's lambda to float32 in
  ``membership_vector``'s outlier vector; here it stays float64.

The condensed tree may merge more than two clusters at one height (ties);
the merge height of two clusters is then the height at which their lowest
common ancestor splits, as for two.
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

from .fitted import _DBL_MAX, PredictionData, _new_points
from .tables import Fields, cluster_table

#: rows per block: each block holds a few (rows, k) float64 arrays
BLOCK_ROWS = 65536


def prediction_data(points, core_distances, min_samples, condensed, selected):
    """Build ``PredictionData`` from a fit.

    Parameters
    ----------
    points : (n, d) float array, the fitted points (copied as float64).
    core_distances : (n,) float or None (min_samples 1: zeros).
    min_samples : int, k_pts.
    condensed : (r,) ``CONDENSED_DTYPE`` condensed tree.
    selected : (k,) int64, the selected cluster ids (``n + c``), increasing.

    Returns
    -------
    PredictionData
    """
    pts = np.array(points, dtype=np.float64, copy=True)
    n = pts.shape[0]
    core = (np.zeros(n) if core_distances is None
            else np.asarray(core_distances, dtype=np.float64).copy())
    if len(condensed) == 0:  # one point: no tree
        z = np.zeros(1)
        return PredictionData(pts, core, int(min_samples), np.full(1, -1, np.int64), z,
                              z.copy(), np.zeros(n, np.int64), np.zeros(n), np.empty(0, np.int64),
                              np.full(1, -1, np.int64), np.zeros(1), [])
    f = Fields.of(condensed)
    t = cluster_table(f)
    K = t.cparent.shape[0]
    is_point = f.child < n
    point_cluster = np.empty(n, np.int64)
    point_lambda = np.empty(n, np.float64)
    point_cluster[f.child[is_point]] = f.parent[is_point] - n
    point_lambda[f.child[is_point]] = f.lam[is_point]
    sel = np.asarray(selected, dtype=np.int64) - n
    label = np.full(K, -1, np.int64)
    label[sel] = np.arange(sel.shape[0])
    for c in range(1, K):  # parents first: a cluster takes its selected ancestor's
        if label[c] < 0:
            label[c] = label[t.cparent[c]]
    lml = np.zeros(K)
    ok = label >= 0
    lml[ok] = t.death[sel[label[ok]]]
    has_child = np.zeros(K, np.bool_)
    has_child[t.cparent[1:]] = True
    exemplars = []
    lab = label[point_cluster]
    rows = np.flatnonzero(~has_child[point_cluster] & (point_lambda == t.death[point_cluster])
                          & (lab >= 0))
    rows = rows[np.argsort(lab[rows], kind="stable")]  # grouped by label, in one sort
    bounds = np.searchsorted(lab[rows], np.arange(sel.shape[0] + 1))
    for j in range(sel.shape[0]):
        e = pts[rows[bounds[j]:bounds[j + 1]]]
        exemplars.append(e[np.lexsort(e.T[::-1])] if e.shape[0] > 1 else e)
    return PredictionData(pts, core, int(min_samples), t.cparent, t.birth, t.death,
                          point_cluster, point_lambda, sel, label, lml, exemplars)


def _data(clusterer) -> PredictionData:
    pd = getattr(clusterer, "prediction_data_", None)
    if pd is None:
        raise ValueError("Clusterer does not have prediction data! Fit it with "
                         "HDBSCAN(prediction_data=True)")
    return pd


def _lex_smallest(pts, rows):
    """The lexicographically smallest of the points ``rows``; of equal points
    the smallest row (they are interchangeable)."""
    cand = pts[rows]
    return rows[np.lexsort((rows,) + tuple(cand.T[::-1]))[0]]


def nearest_mutual_reachability(pd: PredictionData, X, block_rows: int = BLOCK_ROWS):
    """Each new point's nearest training point in mutual reachability and
    the lambda it joins at (exact; ties to the lexicographically smallest
    training point).

    Parameters
    ----------
    pd : PredictionData
    X : (m, d) float64

    Returns
    -------
    neighbours : (m,) int64
    lambdas : (m,) float64 (``finfo.max`` at distance 0, as hdbscan)
    """
    nbr = np.empty(X.shape[0], np.int64)
    best = np.empty(X.shape[0])
    for start in range(0, X.shape[0], block_rows):
        stop = min(X.shape[0], start + block_rows)
        nbr[start:stop], best[start:stop] = _nearest_block(pd, X[start:stop])
    with np.errstate(divide="ignore"):
        lam = np.where(best > 0.0, 1.0 / best, _DBL_MAX)
    return nbr, lam


def _distances(pts, rows, x):
    """|pts[rows] - x| with one formula everywhere (the k-NN's own distances
    may differ in the last bit), so that equal distances compare equal: the
    squares summed coordinate by coordinate, in order, as the device's
    queries sum them (``kernels/cuda/queries.cu``), so both get the same bits."""
    diff = pts[rows] - x[..., None, :]
    s = diff[..., 0] * diff[..., 0]
    for c in range(1, diff.shape[-1]):
        s = s + diff[..., c] * diff[..., c]
    return np.sqrt(s)


def _nearest_block(pd: PredictionData, X):
    n = pd.raw_data.shape[0]
    k = pd.min_samples
    q = min(n, max(2 * k, 2))
    tree = pd.tree()
    m = X.shape[0]
    _, Ind = tree.query(X, k=q, workers=-1)
    Ind = Ind.reshape(m, q).astype(np.int64)
    D = _distances(pd.raw_data, Ind, X)
    order = np.argsort(D, axis=1, kind="stable")
    D = np.take_along_axis(D, order, axis=1)
    Ind = np.take_along_axis(Ind, order, axis=1)
    core_x = D[:, k - 2] if k >= 2 else np.zeros(m)
    mr = np.maximum(np.maximum(pd.core_distances[Ind], core_x[:, None]), D)
    best = mr.min(axis=1)
    hit = mr == best[:, None]
    nbr = Ind[np.arange(m), hit.argmax(axis=1)]
    # a point beyond the q nearest is at least D[:, -1] away (to within a
    # rounding): it can tie or beat ``best`` only where best >= D[:, -1]
    unsure = (best >= D[:, -1] * (1 - 1e-12)) if q < n else np.zeros(m, np.bool_)
    for i in np.flatnonzero(unsure | (hit.sum(axis=1) > 1)):
        if unsure[i]:
            rows = np.asarray(tree.query_ball_point(X[i], best[i] * (1 + 1e-9)),
                              dtype=np.int64)
            rows = np.union1d(rows, Ind[i])
            mi = np.maximum(np.maximum(pd.core_distances[rows], core_x[i]),
                            _distances(pd.raw_data, rows, X[i]))
            best[i] = mi.min()
            tied = rows[mi == best[i]]
        else:
            tied = Ind[i][hit[i]]
        nbr[i] = _lex_smallest(pd.raw_data, tied) if tied.shape[0] > 1 else tied[0]
    return nbr, best


@njit(cache=True, parallel=True)
def _walk_up(start, lam, plam, cparent, birth):
    out = start.copy()
    for i in prange(start.shape[0]):
        c = start[i]
        if plam[i] > lam[i]:
            while c > 0 and birth[c] >= lam[i]:
                c = cparent[c]
        out[i] = c
    return out


def approximate_predict(clusterer, points_to_predict, return_connecting_points=False):
    """The labels and probabilities new points would take in a fitted
    clustering (hdbscan's ``approximate_predict``).

    Parameters
    ----------
    clusterer : ``emst_dask.HDBSCAN`` fitted with ``prediction_data=True``
    points_to_predict : (m, d) array-like
    return_connecting_points : bool
        Also return each point's training neighbour (row).

    Returns
    -------
    labels : (m,) int64, -1 for noise
    probabilities : (m,) float64
    neighbors : (m,) int64, with ``return_connecting_points``

    numpy arrays, or CuPy arrays computed on the device for a model fitted
    on CuPy points (``points_to_predict`` numpy or CuPy either way).
    """
    pd = _data(clusterer)
    if pd.on_device:
        from . import device_prediction

        return device_prediction.approximate_predict(pd, points_to_predict,
                                                     return_connecting_points)
    X = _new_points(pd, points_to_predict)
    m = X.shape[0]
    if pd.cparent.shape[0] <= 1:  # no cluster below the root: noise (hdbscan)
        out = (np.full(m, -1, np.int64), np.zeros(m))
        return out + (np.full(m, -1, np.int64),) if return_connecting_points else out
    nbr, lam = nearest_mutual_reachability(pd, X)
    c = _walk_up(pd.point_cluster[nbr], lam, pd.point_lambda[nbr], pd.cparent, pd.birth)
    labels = pd.cluster_label[c]
    ml = pd.label_max_lambda[c]
    with np.errstate(divide="ignore", invalid="ignore"):
        prob = np.where(ml > 0.0, np.minimum(ml, lam) / ml, 1.0)
    prob = np.where(labels >= 0, prob, 0.0)
    if return_connecting_points:
        return labels, prob, nbr
    return labels, prob
