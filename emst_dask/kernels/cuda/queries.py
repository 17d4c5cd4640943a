"""The CUDA kernel set's queries of outside points against a cloud's LBVH
(``queries.cu``): for HDBSCAN*'s prediction of new points."""
from __future__ import annotations

import numpy as np

from .backend import KNN_KMAX
from .records import _i32


class QueryPhases:
    """Queries of the CUDA kernel set (``cls._launch`` and ``cls.xp`` come
    from the kernel set)."""

    @classmethod
    def query_knn2(cls, bvh, X, k):
        """Squared distance from each query to its k-th nearest cloud point.

        Parameters
        ----------
        bvh : CudaBVH of the cloud (not periodic), its dtype that of ``X``
        X : (m, d) cupy array, the queries
        k : int, 1 <= k <= n

        Returns
        -------
        (m,) cupy array of X's dtype
        """
        xp = cls.xp
        X = xp.ascontiguousarray(X)
        m, d = X.shape
        out = xp.empty(m, X.dtype)
        kmax = next((km for km in KNN_KMAX if k <= km), 0)
        scratch = xp.empty(m * k if not kmax else 1, X.dtype)
        cls._launch(X.dtype, d, "k_query_knn", m,
                    (bvh.P, bvh.nodes, bvh.tab, _i32(bvh.n_leaves), X, _i32(m), _i32(k), out,
                     scratch), kmax)
        return out

    @classmethod
    def query_mr_nearest(cls, bvh, core, X, corex):
        """Each query's nearest cloud point in mutual reachability.

        ``argmin_j max(core[j], corex[i], |X[i] - x_j|)``, ties to the
        lexicographically smallest point, then the smallest input row.

        Parameters
        ----------
        bvh : CudaBVH of the cloud (not periodic)
        core : (n,) cupy array of X's dtype, the core distances (not
            squared), tree order
        X : (m, d) cupy array
        corex : (m,) cupy array of X's dtype, the queries' core distances

        Returns
        -------
        nbr : (m,) int64 cupy array, input rows
        best : (m,) cupy array of X's dtype, the distances
        """
        xp = cls.xp
        X = xp.ascontiguousarray(X)
        m, d = X.shape
        nbr = xp.empty(m, np.int64)
        best = xp.empty(m, X.dtype)
        cls._launch(X.dtype, d, "k_query_mr", m,
                    (bvh.P, bvh.nodes, bvh.tab, bvh.orig, xp.ascontiguousarray(core),
                     _i32(bvh.n_leaves), X,
                     xp.ascontiguousarray(corex), _i32(m), nbr, best))
        return nbr, best
