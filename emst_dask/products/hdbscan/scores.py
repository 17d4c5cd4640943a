"""Per-point results of a flat HDBSCAN* clustering: labels and membership
probabilities (scikit-learn's ``_do_labelling`` and ``get_probabilities``),
GLOSH outlier scores and cluster persistence (hdbscan's ``outlier_scores``
and ``get_stability_scores``)."""
from __future__ import annotations

import numpy as np
from numba import njit, prange

from ...errors import InputError
from .checks import check_allow_single_cluster, check_epsilon
from .tables import ClusterTable, Fields, cluster_table


@njit(cache=True)
def _nearest_selected(cparent, selected_mask):
    K = cparent.shape[0]
    anc = np.full(K, -1, np.int64)
    for k in range(K):  # parents first
        if selected_mask[k]:
            anc[k] = k
        elif k > 0:
            anc[k] = anc[cparent[k]]
    return anc


@njit(cache=True, parallel=True)
def _label_points(par, chi, lam, n, anc, rank, death, single_root, threshold):
    labels = np.full(n, -1, np.int64)
    prob = np.zeros(n, np.float64)
    for i in prange(par.shape[0]):
        p = chi[i]
        if p >= n:
            continue
        s = anc[par[i] - n]
        if s < 0:
            continue
        if s == 0 and not (single_root and lam[i] >= threshold):
            continue
        labels[p] = rank[s]
        d = death[s]
        if d == 0.0 or np.isinf(lam[i]):
            prob[p] = 1.0
        else:
            prob[p] = min(lam[i], d) / d
    return labels, prob


def _labels(f: Fields, t: ClusterTable, selected, allow_single, eps):
    K = t.cparent.shape[0]
    mask = np.zeros(K, np.bool_)
    rank = np.full(K, -1, np.int64)
    k_sel = np.asarray(selected, dtype=np.int64) - f.n
    mask[k_sel] = True
    rank[k_sel] = np.arange(k_sel.shape[0])
    anc = _nearest_selected(t.cparent, mask)
    single_root = bool(allow_single and k_sel.shape[0] == 1 and mask[0])
    threshold = 1.0 / eps if eps != 0.0 else float(t.death[0])
    return _label_points(f.parent, f.child, f.lam, f.n, anc, rank, t.death,
                         single_root, threshold)


def labels_and_probabilities(condensed, selected, allow_single_cluster=False,
                             cluster_selection_epsilon=0.0):
    """Labels and membership probabilities of the points.

    A point takes the label of the nearest selected cluster at or above the
    cluster it leaves (label ``i`` for ``selected[i]``), else -1.  Points
    that reach the root when the root is the only selected cluster
    (``allow_single_cluster``) keep label 0 only if they leave at a lambda
    ``>= 1 / cluster_selection_epsilon`` (epsilon > 0) or ``>=`` the root's
    largest lambda.  The probability of a labelled point is
    ``min(lambda, death) / death`` with ``death`` its cluster's largest
    lambda (1 where ``death`` is 0 or ``lambda`` inf); 0 for noise.

    Parameters
    ----------
    condensed : (r,) ``CONDENSED_DTYPE`` array, r >= 1.
    selected : (k,) int64 increasing cluster ids (``select_clusters``).
    allow_single_cluster : bool
    cluster_selection_epsilon : float >= 0

    Returns
    -------
    labels : (n,) int64, -1 for noise.
    probabilities : (n,) float64 in [0, 1].
    """
    allow = check_allow_single_cluster(allow_single_cluster)
    eps = check_epsilon(cluster_selection_epsilon)
    f = Fields.of(condensed)
    t = cluster_table(f)
    sel = np.asarray(selected, dtype=np.int64)
    K = t.cparent.shape[0]
    if sel.ndim != 1 or (sel.size and (sel.min() < f.n or sel.max() >= f.n + K
                                       or (np.diff(sel) <= 0).any())):
        raise InputError(f"selected must be increasing cluster ids in [{f.n}, {f.n + K})")
    return _labels(f, t, sel, allow, eps)


@njit(cache=True, parallel=True)
def _glosh(par, chi, lam, n, cparent, death):
    K = cparent.shape[0]
    top = death.copy()
    for k in range(K - 1, 0, -1):  # children first: the largest lambda below
        if top[k] > top[cparent[k]]:
            top[cparent[k]] = top[k]
    out = np.zeros(n, np.float64)
    for i in prange(par.shape[0]):
        p = chi[i]
        if p >= n:
            continue
        m = top[par[i] - n]
        if m == 0.0 or not np.isfinite(lam[i]):
            out[p] = 0.0
        elif np.isinf(m):
            out[p] = 1.0
        else:
            out[p] = (m - lam[i]) / m
    return out


def _outlier_scores(f: Fields, t: ClusterTable):
    return _glosh(f.parent, f.child, f.lam, f.n, t.cparent, t.death)


def outlier_scores(condensed) -> np.ndarray:
    """GLOSH outlier scores (hdbscan's ``outlier_scores``).

    The score of a point leaving cluster ``c`` at ``lambda`` is
    ``(lmax - lambda) / lmax``, ``lmax`` the largest lambda in ``c``'s
    subtree; 0 where ``lmax`` is 0 or ``lambda`` inf; 1 where ``lmax`` is
    inf and ``lambda`` finite (the limit; hdbscan gives NaN there).

    Parameters
    ----------
    condensed : (r,) ``CONDENSED_DTYPE`` array, r >= 1.

    Returns
    -------
    (n,) float64 in [0, 1].
    """
    f = Fields.of(condensed)
    return _outlier_scores(f, cluster_table(f))


def cluster_persistence(condensed, labels, selected, eom_stability) -> np.ndarray:
    """Persistence of the selected clusters (hdbscan's
    ``cluster_persistence_``, ``get_stability_scores``).

    ``stability / (size * lambda_max)`` with ``size`` the points labelled
    with the cluster and ``lambda_max`` the largest lambda of the tree; 1
    where ``lambda_max`` is 0 or inf or the cluster has no point.

    Parameters
    ----------
    condensed : (r,) ``CONDENSED_DTYPE`` array, r >= 1.
    labels : (n,) int64, -1 for noise.
    selected : (k,) int64, the selected cluster ids.
    eom_stability : (K,) float64 (``select_clusters``' second result).

    Returns
    -------
    (k,) float64, in label order.
    """
    lam_max = float(condensed["lambda_val"].max()) if len(condensed) else 0.0
    n = int(condensed["parent"].min()) if len(condensed) else 0
    return _persistence(labels, selected, eom_stability, lam_max, n)


def _persistence(labels, selected, eom_stability, lam_max, n):
    k = len(selected)
    sizes = np.bincount(labels[labels >= 0], minlength=k)[:k]
    return persistence_of_sizes(sizes, selected, eom_stability, lam_max, n)


def persistence_of_sizes(sizes, selected, eom_stability, lam_max, n):
    """``cluster_persistence`` from the selected clusters' point counts
    ((k,) int64, in label order)."""
    k = len(selected)
    sizes = np.asarray(sizes)[:k]
    out = np.ones(k, np.float64)
    if k == 0 or lam_max == 0.0 or np.isinf(lam_max):
        return out
    stab = np.asarray(eom_stability, np.float64)[np.asarray(selected, np.int64) - n]
    ok = sizes > 0
    out[ok] = stab[ok] / (sizes[ok] * lam_max)
    return out
