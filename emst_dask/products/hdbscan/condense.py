"""The condensed tree of HDBSCAN* (runt pruning of the level-set hierarchy).

Top-down from the root (cluster ``n``, born at lambda 0), breadth first,
the children of a node by increasing smallest row.  At a node of height
``w`` (lambda ``1/w``, inf for ``w = 0``) the children of size
``>= min_cluster_size`` are *big*:

- two or more big children: the cluster ends there and each big child is
  born as a new cluster (the next id) at that lambda;
- exactly one: the cluster continues into it;
- none: the cluster ends.

In every case the points of the small children fall out of the cluster at
that lambda.  On a binary hierarchy (distinct merge heights) this is
scikit-learn's ``_condense_tree`` and hdbscan's ``condense_tree``; a merge
of several parts at one height is one step, so the result depends on the
level sets only.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .checks import check_edges, check_min_cluster_size
from .levels import _hierarchy

#: hdbscan's condensed-tree record: a cluster (``child >= n``) or a point
#: (``child < n``, ``child_size`` 1) leaving cluster ``parent`` at ``lambda_val``
CONDENSED_DTYPE = np.dtype([("parent", np.int64), ("child", np.int64),
                            ("lambda_val", np.float64), ("child_size", np.int64)])


@njit(cache=True)
def _condense(n, height, offsets, kids, min_cluster_size):
    """Rows (parent, child, lambda, child_size) of the condensed tree, in
    the order they are found; the root is internal node ``len(height)-1``."""
    n_int = height.shape[0]
    cap = n + 2 * (n // min_cluster_size) + 2
    r_par = np.empty(cap, np.int64)
    r_chi = np.empty(cap, np.int64)
    r_lam = np.empty(cap, np.float64)
    r_siz = np.empty(cap, np.int64)
    pos = 0
    if n_int == 0:
        return r_par[:0], r_chi[:0], r_lam[:0], r_siz[:0]
    q_node = np.empty(n_int, np.int64)
    q_clu = np.empty(n_int, np.int64)
    stack = np.empty(n, np.int64)
    q_node[0] = n + n_int - 1
    q_clu[0] = n
    head = 0
    tail = 1
    next_label = n + 1
    while head < tail:
        x = q_node[head] - n
        c = q_clu[head]
        head += 1
        h = height[x]
        lam = 1.0 / h if h > 0.0 else np.inf
        n_big = 0
        for k in range(offsets[x], offsets[x + 1]):
            if kids[k, 1] >= min_cluster_size:
                n_big += 1
        for k in range(offsets[x], offsets[x + 1]):
            y = kids[k, 0]
            s = kids[k, 1]
            if s >= min_cluster_size:
                q_node[tail] = y
                if n_big >= 2:
                    r_par[pos] = c
                    r_chi[pos] = next_label
                    r_lam[pos] = lam
                    r_siz[pos] = s
                    pos += 1
                    q_clu[tail] = next_label
                    next_label += 1
                else:
                    q_clu[tail] = c
                tail += 1
            else:  # its points fall out, depth first
                stack[0] = y
                top = 1
                while top > 0:
                    top -= 1
                    z = stack[top]
                    if z < n:
                        r_par[pos] = c
                        r_chi[pos] = z
                        r_lam[pos] = lam
                        r_siz[pos] = 1
                        pos += 1
                    else:
                        for kk in range(offsets[z - n + 1] - 1, offsets[z - n] - 1, -1):
                            stack[top] = kids[kk, 0]
                            top += 1
    return r_par[:pos], r_chi[:pos], r_lam[:pos], r_siz[:pos]


def condensed_tree(source, target, weight, n, min_cluster_size) -> np.ndarray:
    """The condensed tree of a (mutual-reachability) spanning tree.

    Parameters
    ----------
    source, target : (n-1,) integer array-like (numpy or cupy), rows in [0, n).
    weight : (n-1,) float32/float64, finite and >= 0 (equal weights are
        compared exactly, in this type).
    n : int >= 1, number of points.
    min_cluster_size : int >= 2

    Returns
    -------
    (r,) structured array of ``CONDENSED_DTYPE`` (parent, child, lambda_val,
    child_size), hdbscan's layout: clusters are numbered from ``n`` (the
    root) in breadth-first order, so a cluster's id is above its parent's;
    each point is the child of exactly one row (``child_size`` 1) and each
    cluster but the root of exactly one.  ``lambda_val`` is ``1 / w``
    (inf for ``w = 0``).  Empty for ``n = 1``.
    """
    m = check_min_cluster_size(min_cluster_size)
    s, t, w = check_edges(source, target, weight, n)
    return _condensed_from_edges(s, t, w, int(n), m)


def _condensed_from_edges(s, t, w, n, m) -> np.ndarray:
    return as_structured(*_condensed_columns(s, t, w, n, m))


def _condensed_columns(s, t, w, n, m):
    """(parent, child, lambda_val, child_size) columns, each (r,)."""
    height, offsets, kids = _hierarchy(s, t, w, n)
    return _condense(n, height, offsets, kids, m)


def as_structured(par, chi, lam, siz) -> np.ndarray:
    """The ``CONDENSED_DTYPE`` array of four (r,) columns."""
    out = np.empty(par.shape[0], CONDENSED_DTYPE)
    out["parent"] = par
    out["child"] = chi
    out["lambda_val"] = lam
    out["child_size"] = siz
    return out
