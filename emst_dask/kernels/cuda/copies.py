"""The CUDA kernel set's exact-duplicate passes (``copies.cu``): a cloud's
copies marked in one launch, and the distinct points compacted in one more
(``engine.duplicates`` says why the tree of the distinct points is exact)."""
from __future__ import annotations

import numpy as np

from .records import _i32


class CopiesPhases:
    """Duplicate passes of the CUDA kernel set (``cls._launch``, ``cls.xp``
    and ``cls.to_host`` come from the kernel set)."""

    @classmethod
    def mark_copies(cls, points, codes, perm):
        """The points equal to the one before them in tree order (``k_mark_copies``).

        Parameters
        ----------
        points : (n, d) float32/float64 cupy array, input order, n >= 1
        codes : (n,) uint64 cupy array, sorted ascending (tree order)
        perm : (n,) int32 cupy array, ``codes``' stable sort permutation

        Returns
        -------
        keep_tree : (n,) uint8 cupy array
            0 where a tree position is a copy of the one before it, else 1.
        counts : (copies, shared, mixed) ints
            The copies; the positions sharing the code of the one before;
            of those, the ones unequal to it (a run of equal codes holds
            distinct points).  One device-to-host read.
        """
        xp = cls.xp
        pts = xp.ascontiguousarray(points)
        n, d = pts.shape
        perm = perm if perm.dtype == np.int32 else perm.astype(np.int32)
        keep_tree = xp.empty(n, np.uint8)
        info = xp.zeros(3, np.int32)
        cls._launch(pts.dtype, d, "k_mark_copies", n,
                    (pts, perm, codes, _i32(n), keep_tree, info))
        counts = tuple(int(v) for v in cls.to_host(info))
        return keep_tree, counts

    @classmethod
    def compact_copies(cls, points, codes, perm, keep_tree, m):
        """The distinct points' rows and tree order, and each copy's
        representative, when every run of equal codes is one group
        (``k_keep_in``, two prefix sums and ``k_compact_copies``).

        Parameters
        ----------
        points, codes, perm : as for ``mark_copies`` (of the points, only
            the dtype and d: the module compiled for this cloud serves)
        keep_tree : from ``mark_copies`` (whose ``mixed`` count was 0)
        m : int
            The distinct points: n less the copies.

        Returns
        -------
        rows : (m,) int64 cupy array
            The representatives' input rows, ascending.
        codes : (m,) uint64 cupy array
            Their codes in tree order.
        perm : (m,) int32 cupy array
            Tree position -> local index (an index into ``rows``).
        copy : (n - m,) int32 cupy array
            The copies' rows, tree order.
        rep : (n - m,) int64 cupy array
            Each copy's representative (its group's smallest row).
        """
        xp = cls.xp
        n = codes.shape[0]
        perm = perm if perm.dtype == np.int32 else perm.astype(np.int32)
        dt, d = points.dtype, points.shape[1]  # the module compiled for this cloud
        keep_in = xp.empty(n, np.uint8)
        cls._launch(dt, d, "k_keep_in", n, (perm, keep_tree, _i32(n), keep_in))
        pos = xp.cumsum(keep_tree, dtype=np.int32)
        local = xp.cumsum(keep_in, dtype=np.int32)
        rows = xp.empty(m, np.int64)
        kcodes = xp.empty(m, np.uint64)
        kperm = xp.empty(m, np.int32)
        copy = xp.empty(n - m, np.int32)
        head = xp.empty(n - m, np.int32)
        cls._launch(dt, d, "k_compact_copies", n,
                    (codes, perm, keep_tree, keep_in, pos, local, _i32(n), rows, kcodes, kperm,
                     copy, head))
        del pos, local, keep_in
        rep = rows[kperm[head]]
        return rows, kcodes, kperm, copy, rep
