"""Per-cluster quantities of a condensed tree: parent, birth, death,
size, stability (scikit-learn's ``_compute_stability`` and ``max_lambdas``).

Clusters are indexed ``k = id - n`` (``k = 0`` the root); a condensed tree
lists a cluster's parent before it, so ``cparent[k] < k``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

#: runs of equal lambda summed per block before the blocks are summed
RUN_BLOCK = 1024


@dataclass
class Fields:
    """The columns of a condensed tree as contiguous arrays, and ``n``."""

    parent: np.ndarray
    child: np.ndarray
    lam: np.ndarray
    size: np.ndarray
    n: int

    @classmethod
    def of(cls, condensed: np.ndarray) -> "Fields":
        par = np.ascontiguousarray(condensed["parent"], dtype=np.int64)
        chi = np.ascontiguousarray(condensed["child"], dtype=np.int64)
        n = int(par.min()) if par.shape[0] else 0
        return cls(par, chi, np.ascontiguousarray(condensed["lambda_val"], dtype=np.float64),
                   np.ascontiguousarray(condensed["child_size"], dtype=np.int64), n)


@dataclass
class ClusterTable:
    """Per cluster ``k`` (id ``n + k``), each (K,).

    cparent : int64, parent index (-1 for the root).
    birth : float64, lambda of its row (0 for the root).
    death : float64, largest lambda of the rows it is the parent of.
    size : int64, its ``child_size``; for the root the sum over its child
        clusters (scikit-learn's and hdbscan's convention).
    stability : float64, sum over its rows of ``(lambda - birth) * child_size``
        (rows of equal lambda taken together, by increasing lambda).
    """

    cparent: np.ndarray
    birth: np.ndarray
    death: np.ndarray
    size: np.ndarray
    stability: np.ndarray


@njit(cache=True)
def _table(par, chi, lam, siz, n):
    K = 1
    for i in range(par.shape[0]):
        if par[i] - n + 1 > K:
            K = par[i] - n + 1
    cparent = np.full(K, -1, np.int64)
    birth = np.zeros(K, np.float64)
    death = np.zeros(K, np.float64)
    size = np.zeros(K, np.int64)
    stab = np.zeros(K, np.float64)
    for i in range(par.shape[0]):
        c = chi[i]
        if c >= n:
            k = c - n
            cparent[k] = par[i] - n
            birth[k] = lam[i]
            size[k] = siz[i]
    # the points leaving together are counted, then (lambda - birth) * count
    # is summed by increasing lambda (the order a cluster's rows come in):
    # the sum depends on the tree, not on the numbering of the rows.  The
    # runs are summed RUN_BLOCK at a time, the block sums then in order: the
    # device does the blocks in parallel with the same roundings.
    run_lam = np.full(K, -1.0)
    run_cnt = np.zeros(K, np.int64)
    runs = np.zeros(K, np.int64)
    block = np.zeros(K, np.float64)
    for i in range(par.shape[0]):
        k = par[i] - n
        if lam[i] > death[k]:
            death[k] = lam[i]
        if lam[i] != run_lam[k]:
            if run_cnt[k]:
                block[k] += (run_lam[k] - birth[k]) * run_cnt[k]
                runs[k] += 1
                if runs[k] % RUN_BLOCK == 0:
                    stab[k] += block[k]
                    block[k] = 0.0
            run_lam[k] = lam[i]
            run_cnt[k] = 0
        run_cnt[k] += siz[i]
    for k in range(K):
        if run_cnt[k]:
            block[k] += (run_lam[k] - birth[k]) * run_cnt[k]
            runs[k] += 1
        if runs[k] % RUN_BLOCK:
            stab[k] += block[k]
    for k in range(1, K):
        if cparent[k] == 0:
            size[0] += size[k]
    return cparent, birth, death, size, stab


def cluster_table(f: Fields) -> ClusterTable:
    """The ``ClusterTable`` of a condensed tree's ``Fields``."""
    return ClusterTable(*_table(f.parent, f.child, f.lam, f.size, f.n))


def stabilities(condensed: np.ndarray) -> np.ndarray:
    """Stability of every cluster of a condensed tree.

    Parameters
    ----------
    condensed : (r,) ``CONDENSED_DTYPE`` array (``condensed_tree``), r >= 1.

    Returns
    -------
    (K,) float64: entry ``k`` is cluster ``n + k``'s
    ``sum((lambda - birth) * child_size)`` over the rows it is the parent
    of (scikit-learn's ``_compute_stability`` as an array).
    """
    return cluster_table(Fields.of(condensed)).stability
