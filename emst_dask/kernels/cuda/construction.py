"""The CUDA kernel set's construction phases: bounds, Morton codes, the
sort, the LBVH, and the core distances of mutual reachability (one launch a
phase; ``kernel_set`` binds them with the Borůvka phases)."""
from __future__ import annotations

import numpy as np

from .backend import KNN_KMAX, record_sizes
from .records import BOUNDS_THREADS, CudaBVH, _i32, _ordered_to_float


class ConstructionPhases:
    """Construction phases of the CUDA kernel set (``cls._launch``, ``cls.xp``
    and ``cls._be`` come from the kernel set)."""

    # -- construction --------------------------------------------------------
    @classmethod
    def bounds(cls, points):
        """Per-axis (min, max) of the points (float64 (d,) host arrays) and
        the smallest nonzero magnitude of any coordinate (float, +inf when
        all are zero).

        One grid-stride kernel with integer atomics on order-preserving
        encodings, one device-to-host read.

        Parameters
        ----------
        points : (n, d) float32/float64 cupy array, input order, n >= 1

        Returns
        -------
        lo, hi : (d,) float64 numpy arrays
        smallest : float
        """
        xp = cls.xp
        pts = xp.ascontiguousarray(points)
        n, d = pts.shape
        dt = pts.dtype
        u = np.uint32 if dt == np.float32 else np.uint64
        top = np.iinfo(u).max
        out = xp.asarray(np.concatenate([np.full(d, top, u), np.zeros(d, u), [top]]).astype(u))
        cls._launch(dt, d, "k_minmax", min(n, BOUNDS_THREADS), (pts, _i32(n), out))
        raw = np.asarray(cls.to_host(out))
        h = _ordered_to_float(raw[:2 * d], dt).astype(np.float64)
        small = np.inf if raw[2 * d] == top else float(_ordered_to_float(raw[2 * d:], dt)[0])
        return h[:d], h[d:], small

    @classmethod
    def morton_codes(cls, points, lo, scale, bits):
        """64-bit Morton codes, one thread per point (``k_morton``).

        Each coordinate is mapped by ``(x - lo) * scale`` in float64, truncated,
        clamped to [0, 2**bits - 1], and the axes' bits interleaved, axis 0 most
        significant.

        Parameters
        ----------
        points : (n, d) float32/float64 cupy array, input order
        lo : (d,) float64 host array
            Lower corner of the cloud's box.
        scale : (d,) float64 host array
            ``2**bits / extent`` per axis (0 for an axis of zero extent).
        bits : int
            Bits per axis (the engine uses ``63 // d``).

        Returns
        -------
        (n,) uint64 cupy array
            Morton codes, input order.
        """
        xp = cls.xp
        pts = xp.ascontiguousarray(points)
        n, d = pts.shape
        codes = xp.empty(n, np.uint64)
        lo_d = xp.asarray(np.asarray(lo, np.float64))
        sc_d = xp.asarray(np.asarray(scale, np.float64))
        cls._launch(pts.dtype, d, "k_morton", n, (pts, _i32(n), lo_d, sc_d, _i32(bits), codes))
        return codes

    @classmethod
    def sort_by_code(cls, codes):
        """Stable permutation sorting the codes (``backend.argsort``: CuPy's, stable).

        Equal codes keep input order, so a run of duplicate points is sorted by
        input row (the search's duplicate pruning relies on it).

        Parameters
        ----------
        codes : (n,) uint64 cupy array, input order

        Returns
        -------
        (n,) int32 cupy array
            ``perm`` with ``codes[perm]`` ascending.

        Raises
        ------
        ValueError
            n >= 2**31 - 1: the kernels index points with int32.
        """
        n = codes.shape[0]
        if n >= 2**31 - 1:
            raise ValueError("the CUDA backend indexes points with int32: n < 2**31 - 1")
        # stable: a run of equal codes (duplicates) stays in input-row order,
        # which the duplicate pruning of the search relies on
        return cls._be.argsort(codes).astype(np.int32)

    @classmethod
    def build_bvh(cls, points, codes, perm, period=None, fine=None):
        """The LBVH: point records in tree order, then the tree bottom-up (``k_build``).

        ``k_gather`` writes the point records (coordinates, label = own position),
        ``k_delta`` the common-prefix length of each two neighbouring codes.
        Every node of two points of the points' radix tree becomes one leaf:
        ``k_pairs`` marks them and counts the leaves of each 32 points,
        ``k_leaves`` writes the leaf table and the deltas where leaves meet.
        ``k_build`` writes the node records over the leaves bottom-up, one
        thread per leaf with CAS flags in ``aux`` (Apetrei 2014), every node
        labelled -1 (mixed), and each node's far end (``far``) for the
        label pass.  For n < 2 only the gather runs; one device-to-host read
        (the leaf count).

        Parameters
        ----------
        points : (n, d) float32/float64 cupy array, input order
        codes : (n,) uint64 cupy array
            The Morton codes sorted ascending (``codes[perm]``).
        perm : (n,) int32 cupy array
            From ``sort_by_code`` (another integer dtype is converted).
        period : (d,) float64 numpy array, optional
            Box lengths of a periodic box (every coordinate in [0, L)): the
            searches on this tree run the periodic modules' kernels.
        fine : (n,) uint64 cupy array, optional
            The finer codes of the points of crowded cells (runs of equal
            codes), tree order, ascending within each run: the radix tree
            splits those runs by them.

        Returns
        -------
        CudaBVH
            ``orig`` is ``perm``; ``aux`` is all -1.
        """
        xp = cls.xp
        pts = xp.ascontiguousarray(points)
        n, d = pts.shape
        dt = pts.dtype
        ps, ns = record_sizes(dt, d)
        orig = perm if perm.dtype == np.int32 else perm.astype(np.int32)
        P = xp.empty(n * ps, np.uint8)
        cls._launch(dt, d, "k_gather", n, (pts, orig, _i32(n), P))
        aux = xp.full(n, -1, np.int32)  # CAS flags now, Boruvka scratch later
        leaves, tab, delta = cls._leaves(dt, d, codes, fine, n)
        m = leaves - 1  # the nodes
        nodes = xp.empty(max(m, 1) * ns, np.uint8)
        far = xp.empty(max(m, 1), np.int32)
        if m:
            cls._launch(dt, d, "k_build", leaves,
                        (delta, P, tab, _i32(leaves), nodes, aux, far))
        period = None if period is None else np.asarray(period, np.float64)
        return CudaBVH(P=P, nodes=nodes, delta=delta, far=far, orig=orig, aux=aux, n=n, d=d,
                       dtype=dt, pt_bytes=ps, node_bytes=ns, period=period, tab=tab,
                       n_leaves=leaves)

    @classmethod
    def _leaves(cls, dt, d, codes, fine, n):
        """The leaves (a node of two points one leaf): their count L, the
        leaf table ((ceil(L/32),) uint64) and the deltas where they meet
        ((L-1,) uint8, at least one entry)."""
        xp = cls.xp
        if n < 2:
            return max(n, 1), xp.zeros(1, np.uint64), xp.empty(1, np.uint8)
        delta = xp.empty(n - 1, np.uint8)
        has_fine = fine is not None
        cls._launch(dt, d, "k_delta", n - 1, (codes, fine if has_fine else codes,
                                              _i32(has_fine), _i32(n), delta))
        words = (n + 31) // 32
        pairs = xp.empty(words, np.uint32)
        count = xp.empty(words, np.int32)
        cls._launch(dt, d, "k_pairs", words, (delta, _i32(n), pairs, count))
        start = xp.cumsum(count, dtype=np.int32)
        leaves = int(cls.to_host(start[-1:])[0])
        start -= count  # each word's first leaf
        del count
        tab = xp.zeros((leaves + 31) // 32, np.uint64)
        ldelta = xp.empty(max(leaves - 1, 1), np.uint8)
        cls._launch(dt, d, "k_leaves", words, (delta, pairs, start, _i32(n), tab, ldelta))
        return leaves, tab, ldelta

    # -- mutual reachability ---------------------------------------------------
    @classmethod
    def compute_core_distances(cls, bvh, min_samples):
        """Squared core distances: one k-NN query a thread, only the k-th distance kept.

        With ``k = min_samples - 1`` other points: ``k_knn_reg`` (the list in
        registers, for k up to ``KNN_KMAX[-1]``), else ``k_knn`` with (n * k,)
        global scratch.

        Parameters
        ----------
        bvh : CudaBVH
        min_samples : int
            k_pts of HDBSCAN*, counting the point itself (at most n).

        Returns
        -------
        (n,) cupy array of the points' dtype
            Squared distance to the ``(min_samples - 1)``-th nearest other point,
            tree order; zeros when ``min_samples < 2`` or n < 2.
        """
        xp = cls.xp
        n, d, dt = bvh.n, bvh.d, bvh.dtype
        k = int(min_samples) - 1  # k_pts counts the point itself
        core2 = xp.empty(n, dt)
        if k < 1 or n < 2:
            core2.fill(0)
            return core2
        kmax = next((km for km in KNN_KMAX if k <= km), 0)
        if kmax:
            cls._launch(bvh, d, "k_knn_reg", n,
                        (bvh.P, bvh.nodes, bvh.tab, _i32(n), _i32(bvh.n_leaves), _i32(k), core2),
                        kmax)
        else:
            scratch = xp.empty(n * k, dt)
            cls._launch(bvh, d, "k_knn", n,
                        (bvh.P, bvh.nodes, bvh.tab, _i32(n), _i32(bvh.n_leaves), _i32(k),
                         core2, scratch), 0)
        return core2
