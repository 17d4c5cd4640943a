"""Flat cluster selection from a condensed tree (scikit-learn's
``_get_clusters`` up to the labelling): excess of mass or leaves,
``max_cluster_size``, ``cluster_selection_epsilon`` and
``allow_single_cluster``.

Excess of mass visits the clusters by decreasing id (children first): a
cluster is kept unless the sum of its children's stabilities is larger
than its own or it holds more than ``max_cluster_size`` points, in which
case its stability becomes that sum; the selected clusters are the kept
ones with no kept ancestor.  The root takes part only with
``allow_single_cluster``.  With ``cluster_selection_epsilon`` each
selected cluster born below that distance is replaced by its first
ancestor born above it (``epsilon_search`` / ``traverse_upwards``; never the
root unless ``allow_single_cluster``).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ...errors import InputError
from .checks import (check_allow_single_cluster, check_epsilon, check_max_cluster_size,
                     check_method)
from .tables import ClusterTable, Fields, cluster_table


@njit(cache=True)
def _eom(cparent, stability, size, allow_single, max_size):
    K = cparent.shape[0]
    stab = stability.copy()
    keep = np.zeros(K, np.bool_)
    # the children of each cluster (CSR); their stabilities are summed in
    # increasing order, so the sum does not depend on the cluster numbering
    offsets = np.zeros(K + 1, np.int64)
    for k in range(1, K):
        offsets[cparent[k] + 1] += 1
    for k in range(K):
        offsets[k + 1] += offsets[k]
    fill = offsets[:K].copy()
    kids = np.empty(max(K - 1, 0), np.int64)
    for k in range(1, K):
        kids[fill[cparent[k]]] = k
        fill[cparent[k]] += 1
    for k in range(K - 1, -1, -1):  # children first
        if k > 0 or allow_single:
            lo, hi = offsets[k], offsets[k + 1]
            sub = 0.0
            if hi - lo == 1:
                sub += stab[kids[lo]]
            elif hi - lo == 2:  # most clusters: no sort (and no allocation)
                a, b = stab[kids[lo]], stab[kids[lo + 1]]
                sub += min(a, b)
                sub += max(a, b)
            elif hi > lo:
                for v in np.sort(stab[kids[lo:hi]]):
                    sub += v
            if sub > stab[k] or size[k] > max_size:
                stab[k] = sub
            else:
                keep[k] = True
    selected = np.zeros(K, np.bool_)
    kept_above = np.zeros(K, np.bool_)
    for k in range(K):
        if k > 0:
            p = cparent[k]
            kept_above[k] = kept_above[p] or keep[p]
        selected[k] = keep[k] and not kept_above[k]
    return selected, stab


@njit(cache=True)
def _leaves(cparent):
    K = cparent.shape[0]
    leaf = np.ones(K, np.bool_)
    leaf[0] = False
    for k in range(1, K):
        leaf[cparent[k]] = False
    return leaf


@njit(cache=True)
def _epsilon_search(candidates, cparent, birth, eps, allow_single):
    K = cparent.shape[0]
    out = np.zeros(K, np.bool_)
    up = np.full(K, -1, np.int64)  # memo of traverse_upwards(node)
    path = np.empty(K, np.int64)
    for s in range(1, K):
        if not candidates[s]:
            continue
        if not (1.0 / birth[s] < eps):
            out[s] = True
            continue
        node = s
        depth = 0
        res = -1
        while True:
            if up[node] >= 0:
                res = up[node]
                break
            path[depth] = node
            depth += 1
            p = cparent[node]
            if p == 0:
                res = 0 if allow_single else node
                break
            if 1.0 / birth[p] > eps:
                res = p
                break
            node = p
        for i in range(depth):
            up[path[i]] = res
        out[res] = True
    return out


def _select(t: ClusterTable, n, method, allow_single, eps, max_size):
    K = t.cparent.shape[0]
    stab = t.stability
    if method == "eom":
        limit = n + 1 if max_size is None else max_size
        selected, stab = _eom(t.cparent, t.stability, t.size, allow_single, limit)
        if eps != 0.0 and K > 1:
            if selected[0]:  # the root alone: no epsilon search
                pass
            else:
                selected = _epsilon_search(selected, t.cparent, t.birth, eps, allow_single)
    else:
        selected = _leaves(t.cparent) if K > 1 else np.zeros(K, np.bool_)
        if eps != 0.0 and selected.any():
            selected = _epsilon_search(selected, t.cparent, t.birth, eps, allow_single)
    return np.flatnonzero(selected).astype(np.int64) + n, stab


def select_clusters(condensed, stability=None, method="eom", allow_single_cluster=False,
                    cluster_selection_epsilon=0.0, max_cluster_size=None):
    """The selected clusters of a condensed tree.

    Parameters
    ----------
    condensed : (r,) ``CONDENSED_DTYPE`` array, r >= 1.
    stability : (K,) float64, optional
        Per cluster ``n + k`` (``stabilities(condensed)``, the default).
    method : {"eom", "leaf"}
    allow_single_cluster : bool
    cluster_selection_epsilon : float >= 0
    max_cluster_size : int >= 1 or None (eom only, as in scikit-learn).

    Returns
    -------
    selected : (k,) int64, the selected cluster ids, increasing; label ``i``
        is ``selected[i]``.
    eom_stability : (K,) float64, the stabilities after excess of mass: a
        cluster it did not keep holds the sum over its children (the value
        hdbscan's ``cluster_persistence_`` divides); ``stability`` for "leaf".
    """
    method = check_method(method)
    allow = check_allow_single_cluster(allow_single_cluster)
    eps = check_epsilon(cluster_selection_epsilon)
    max_size = check_max_cluster_size(max_cluster_size)
    f = Fields.of(condensed)
    t = cluster_table(f)
    if stability is not None:
        stability = np.ascontiguousarray(stability, dtype=np.float64)
        if stability.shape != t.stability.shape:
            raise InputError(f"stability must have shape {t.stability.shape} (one value per "
                             f"cluster of the tree), got {stability.shape}")
        t.stability = stability
    return _select(t, f.n, method, allow, eps, max_size)
