"""The CUDA kernel set: CuPy arrays, CUDA C++ kernels compiled by NVRTC.

The kernels live in ``boruvka.cu`` (read that file's header for the data
layout and the invariants).  They are templates over the float type and the
dimension, compiled per (dtype, d, part) at first use and launched by
``backend.CupyBackend``.

The engine's phases map to launches as follows (n threads each, tree order):

=============================  ==================================================
construct_bvh                  k_morton, argsort (CuPy's, stable), k_gather,
                               k_delta, k_build (bottom-up, CAS flags)
compute_core_distances         k_knn (k-th other neighbour, value only)
reduce_labels                  aux <- -1, k_climb (bottom-up); nothing in the
                               first iteration (all nodes are mixed)
compute_upper_bounds           k_bounds: Morton neighbours + still-foreign
                               certified candidates, 64-bit atomicMin
find_component_outgoing_edges  k_search (the first iteration is a plain
                               nearest-other-point query)
reduce_component_minima        k_ties, k_winner (the strict order's tie-break)
merge_components               k_merge_next, k_merge_roots, k_merge_jump,
                               k_relabel; one 4-byte device-to-host read
finalize_edges                 k_finalize
=============================  ==================================================

Device memory per point, 3-D float32, min_samples = 1: points with labels 16,
nodes 32 (n - 1 of them), delta 1, orig 4, aux 4, lower 4, cand 4, best 8
(which also holds the finished edges): 73 bytes, plus what the engine holds.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


from .backend import (KNN_KMAX, PERIOD_KEY, THREADS, CupyBackend, cupy, expr,  # noqa: F401
                      expressions, part_of, record_sizes, source)

#: best[] initial value per dtype: an infinite radius (float: and the largest key)
KEY_INIT = {np.dtype(np.float32): np.uint64(0x7F800000FFFFFFFF),
            np.dtype(np.float64): np.uint64(0x7FF0000000000000)}
_NO_KEY = np.uint64(0xFFFFFFFFFFFFFFFF)


def _i32(v):
    return np.int32(v)


#: pointer-jumping steps of one k_merge_jump launch (each step doubles a
#: jump while the threads run together; unfinished chains get another launch)
JUMP_STEPS = 64
#: threads of the grid-stride bounding-box kernel (about two waves on an H100)
BOUNDS_THREADS = 1 << 19


def _ordered_to_float(u: np.ndarray, dtype) -> np.ndarray:
    """Invert the kernels' order-preserving float -> unsigned map."""
    dt = np.dtype(dtype)
    ut = np.uint32 if dt == np.float32 else np.uint64
    u = u.astype(ut)
    top = ut(1) << ut(8 * dt.itemsize - 1)
    b = np.where(u & top, u ^ top, ~u).astype(ut)
    return b.view(dt)


@dataclass(eq=False)
class CudaBVH:
    """The LBVH on the device (tree order; see ``boruvka.cu`` for the records).

    P : (n * pt_bytes,) uint8 point records (coordinates and component
    label).  nodes : ((n-1) * node_bytes,) uint8 node records (box, children).
    delta : (n-1,) uint8 common-prefix lengths of neighbouring codes.
    orig : (n,) int32 input row of each position.  aux : (n,) int32 scratch
    (construction flags, then the Borůvka work lists).  period : (d,)
    float64 box lengths of a periodic box (scaled with the points; the
    kernels of the periodic modules run), or None.
    """

    P: Any
    nodes: Any
    delta: Any
    orig: Any
    aux: Any
    n: int
    d: int
    dtype: np.dtype
    pt_bytes: int
    node_bytes: int
    period: Any = None


@dataclass(eq=False)
class CudaBoruvkaState:
    """Borůvka iteration state on the device (arrays (n,)).

    core2 : squared core distances (tree order; ``lower`` when not mrd).
    lower : per point, a lower bound on its distance to anything foreign.
    cand : int32 best foreign candidate.  best : uint64 packed (weight,
    position) keys per component, which also hold the finished edges for
    float32; key2 : the same for float64 ties (``best`` itself for float32).
    counter : int32 [edges so far, unfinished root searches]; count : int32
    the work list's length.  it : iteration; n_edges : edges so far.
    """

    mrd: bool
    core2: Any
    lower: Any
    cand: Any
    best: Any
    key2: Any
    edges: Any
    counter: Any
    count: Any
    it: int = 0
    n_edges: int = 0


class _CudaKernelsBase:
    """Kernel set of the CUDA backend (see ``emst_dask.engine``)."""

    name = "cuda"
    _be = None
    xp = None

    # -- plumbing ----------------------------------------------------------
    @classmethod
    def synchronize(cls) -> None:
        """Wait for the device's queued work (the backend's current stream).

        Returns
        -------
        None
        """
        cls._be.synchronize()

    @classmethod
    def to_host(cls, a):
        """``a`` as a numpy array (``backend.to_host``: with CuPy a blocking copy).

        Parameters
        ----------
        a : array of ``xp``

        Returns
        -------
        numpy.ndarray
        """
        return cls._be.to_host(a)

    @classmethod
    def to_device(cls, a):
        """A host array on the device (the backend's fast path when it has one).

        Parameters
        ----------
        a : numpy array
            (An array of ``xp`` comes back as it is.)

        Returns
        -------
        array of ``xp`` (cupy), same shape and dtype
        """
        return cls._be.to_device(a)

    @classmethod
    def _launch(cls, bvh_or_dtype, d, name, nthreads, args, *extra):
        """Launch kernel ``name<T, d, *extra>`` with ``nthreads`` threads (``backend.launch``).

        ``bvh_or_dtype`` is the float dtype T, or a ``CudaBVH`` (its dtype,
        and its periodic box if it has one); ``args`` the kernel's arguments.
        """
        if isinstance(bvh_or_dtype, CudaBVH):
            cls._be.launch(bvh_or_dtype.dtype, d, name, extra, nthreads, args,
                           period=bvh_or_dtype.period)
        else:
            cls._be.launch(bvh_or_dtype, d, name, extra, nthreads, args)

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
    def build_bvh(cls, points, codes, perm, period=None):
        """The LBVH: point records in tree order, then the tree bottom-up (``k_build``).

        ``k_gather`` writes the point records (coordinates, label = own position),
        ``k_delta`` the common-prefix length of each two neighbouring codes, and
        ``k_build`` the node records bottom-up, one thread per leaf with CAS flags
        in ``aux`` (Apetrei 2014), every node labelled -1 (mixed).  For n < 2 only
        the gather runs.

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
        m = max(n - 1, 0)
        delta = xp.empty(max(m, 1), np.uint8)
        nodes = xp.empty(max(m, 1) * ns, np.uint8)
        aux = xp.full(n, -1, np.int32)  # CAS flags now, Boruvka scratch later
        if n >= 2:
            cls._launch(dt, d, "k_delta", m, (codes, _i32(n), delta))
            cls._launch(dt, d, "k_build", n, (delta, P, _i32(n), nodes, aux))
        period = None if period is None else np.asarray(period, np.float64)
        return CudaBVH(P=P, nodes=nodes, delta=delta, orig=orig, aux=aux, n=n, d=d,
                       dtype=dt, pt_bytes=ps, node_bytes=ns, period=period)

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
            cls._launch(bvh, d, "k_knn_reg", n, (bvh.P, bvh.nodes, _i32(n), _i32(k), core2),
                        kmax)
        else:
            scratch = xp.empty(n * k, dt)
            cls._launch(bvh, d, "k_knn", n,
                        (bvh.P, bvh.nodes, _i32(n), _i32(k), core2, scratch), 0)
        return core2

    # -- Boruvka ---------------------------------------------------------------
    @classmethod
    def init_boruvka(cls, bvh, core2, mrd):
        """The iteration state; the labels live in ``bvh.P`` (each point its own).

        Parameters
        ----------
        bvh : CudaBVH
        core2 : (n,) cupy array of the points' dtype
            Squared core distances, tree order (not kept when ``mrd`` is False:
            ``s.core2`` is then ``s.lower``; the Euclidean kernels do not read it).
        mrd : bool
            Mutual reachability: weights are ``max(core2_i, core2_j, d2)``.

        Returns
        -------
        CudaBoruvkaState
            ``lower`` zeros; ``best`` the infinite-radius key (``KEY_INIT``);
            ``key2`` all ones for float64, else ``best`` itself; ``edges`` is
            ``best`` (float32) or ``key2`` (float64); ``cand`` uninitialised;
            ``it = 0``.
        """
        xp = cls.xp
        n, dt = bvh.n, bvh.dtype
        lower = xp.zeros(n, dt)
        best = xp.full(n, KEY_INIT[dt], np.uint64)
        key2 = xp.full(n, _NO_KEY, np.uint64) if dt == np.float64 else best
        return CudaBoruvkaState(
            mrd=bool(mrd), core2=core2 if mrd else lower, lower=lower,
            cand=xp.empty(n, np.int32), best=best, key2=key2,
            edges=best if dt == np.float32 else key2,
            counter=xp.zeros(2, np.int32), count=xp.zeros(1, np.int32),
            )

    @classmethod
    def reduce_labels(cls, bvh, s):
        """Label every internal node with its leaves' common component, or -1 (``k_climb``).

        The construction's bottom-up walk, one thread per leaf, CAS flags in
        ``bvh.aux`` (reset to -1 first).  Nothing in the first iteration: all
        points are singletons and ``k_build`` left every node at -1.

        Parameters
        ----------
        bvh : CudaBVH
        s : CudaBoruvkaState

        Returns
        -------
        None
            Writes the label field of the node records in ``bvh.nodes``.
        """
        if s.it == 0:
            return  # all points singletons: every node is mixed (k_build set -1)
        bvh.aux.fill(-1)
        cls._launch(bvh, bvh.d, "k_climb", bvh.n,
                    (bvh.delta, bvh.P, _i32(bvh.n), bvh.nodes, bvh.aux))

    @classmethod
    def compute_upper_bounds(cls, bvh, s):
        """Upper bounds on each component's shortest outgoing edge (``k_bounds``).

        One thread per point: an edge to the next tree position in another
        component lowers both components' key in ``s.best`` (64-bit atomicMin of
        the packed (weight, min input row) key; float64: the weight), and so does a
        certified candidate that is still foreign; a candidate that has joined the
        point's component is dropped.  Nothing in the first iteration (the search
        starts from the Morton neighbours).

        Parameters
        ----------
        bvh : CudaBVH
        s : CudaBoruvkaState

        Returns
        -------
        None
            Lowers ``s.best``; sets ``s.cand[i] = -1`` for dropped candidates.
        """
        if s.it == 0:
            return  # the first search starts from its Morton neighbours
        cls._launch(bvh, bvh.d, "k_bounds", bvh.n,
                    (bvh.P, bvh.orig, s.core2, s.cand, s.best, _i32(bvh.n)), s.mrd)

    @classmethod
    def find_component_outgoing_edges(cls, bvh, s):
        """Each point's nearest point in another component: a pruned traversal a thread.

        After the first iteration ``k_select`` compacts the points that must
        search (no certified candidate, lower bound not above their component's
        radius) into ``bvh.aux`` (``s.count`` of them), and ``k_search`` runs one
        thread per listed point.  The first iteration is a plain nearest-other-point
        query for every point.

        Parameters
        ----------
        bvh : CudaBVH
        s : CudaBoruvkaState

        Returns
        -------
        None
            Sets ``s.cand`` (int32 tree position of the certified nearest foreign
            point, else -1), raises ``s.lower``, lowers ``s.best`` (not in the first
            iteration); the work list's slots of ``bvh.aux`` are back at -1.
        """
        n = _i32(bvh.n)
        first = s.it == 0
        if not first:
            # the points that must search, compacted into aux[] (at rest -1;
            # the search puts every slot it reads back to -1)
            s.count.fill(0)
            cls._launch(bvh, bvh.d, "k_select", bvh.n,
                        (bvh.P, s.cand, s.lower, s.best, bvh.aux, s.count, n))
        cls._launch(bvh, bvh.d, "k_search", bvh.n,
                    (bvh.P, bvh.nodes, bvh.orig, s.core2, s.lower, s.cand, s.best,
                     n, bvh.aux, s.count), s.mrd, first)

    @classmethod
    def reduce_component_minima(cls, bvh, s):
        """Each component's minimum outgoing edge, strict order (``k_ties``, ``k_winner``).

        ``s.best`` already holds each component's least (weight, min input row)
        key (float64: least weight).  ``k_ties`` raises every point's ``s.lower``
        to its component's radius and, among the candidates matching that key,
        takes the least source row (float32: atomicMin in ``bvh.aux``; float64: of
        (min row, source row) in ``s.key2``); ``k_winner`` marks the winning point
        ``i`` with ``bvh.aux[C] = ~i``.  Nothing in the first iteration (a
        singleton's edge is its point's candidate).

        Parameters
        ----------
        bvh : CudaBVH
        s : CudaBoruvkaState

        Returns
        -------
        None
            Sets ``bvh.aux[C]`` per component, raises ``s.lower``, fills ``s.key2``
            (float64).
        """
        if s.it == 0:
            return  # a singleton's shortest edge is its point's candidate
        n = _i32(bvh.n)
        cls._launch(bvh, bvh.d, "k_ties", bvh.n,
                    (bvh.P, bvh.orig, s.core2, s.cand, s.best, s.lower, bvh.aux, s.key2, n),
                    s.mrd)
        cls._launch(bvh, bvh.d, "k_winner", bvh.n,
                    (bvh.P, bvh.orig, s.cand, bvh.aux, s.key2, n))

    @classmethod
    def merge_components(cls, bvh, s):
        """Hook every component along its chosen edge, find the roots, relabel the points.

        ``k_merge_next`` packs each representative's edge (source and target tree
        positions) into its ``s.edges`` slot and points ``bvh.aux[C]`` at the far
        end's component; ``k_merge_roots`` makes the smaller representative of each
        mutual pair a root and counts the other representatives' edges;
        ``k_merge_jump`` (pointer jumping, ``JUMP_STEPS`` a launch, launched again
        while a chain is unfinished) and ``k_relabel`` give every point its root.
        ``s.counter`` (two int32) is read back after each ``k_merge_jump``.

        Parameters
        ----------
        bvh : CudaBVH
        s : CudaBoruvkaState

        Returns
        -------
        int
            Tree edges found so far (also ``s.n_edges``).  ``s.it`` is incremented,
            the labels in ``bvh.P`` are the new roots, and each root's ``s.best``
            (and ``s.key2``) is back at the infinite key.
        """
        dt, d, n = bvh.dtype, bvh.d, _i32(bvh.n)
        cls._launch(dt, d, "k_merge_next", bvh.n,
                    (bvh.P, s.cand, bvh.aux, s.edges, n, _i32(1 if s.it == 0 else 0)))
        cls._launch(dt, d, "k_merge_roots", bvh.n,
                    (bvh.P, bvh.aux, s.best, s.key2, s.counter, n))
        # counter = [edges so far, unfinished root search]
        unfinished = s.counter[1:]
        unfinished.fill(0)
        cls._launch(dt, d, "k_merge_jump", bvh.n,
                    (bvh.P, bvh.aux, n, _i32(JUMP_STEPS), unfinished))
        # the loop condition: the one device-to-host read of an iteration
        h = cls.to_host(s.counter)
        while h[1]:  # only chains much longer than real data makes
            unfinished.fill(0)
            cls._launch(dt, d, "k_merge_jump", bvh.n,
                        (bvh.P, bvh.aux, n, _i32(JUMP_STEPS), unfinished))
            h = cls.to_host(s.counter)
        cls._launch(dt, d, "k_relabel", bvh.n, (bvh.P, bvh.aux, n))
        s.it += 1
        s.n_edges = int(h[0])
        return s.n_edges

    @classmethod
    def finalize_edges(cls, bvh, s):
        """The tree's edges as input rows, their weights recomputed (``k_finalize``).

        Reads the root's label (4 bytes), releases the tree and the search state
        (``bvh.nodes``, ``bvh.delta``, ``bvh.aux``, ``s.lower``, ``s.cand`` and the
        key arrays become None), then one thread per edge: every tree position but
        the root's holds the edge that absorbed it.

        Parameters
        ----------
        bvh : CudaBVH
        s : CudaBoruvkaState

        Returns
        -------
        source, target : (n-1,) int64 cupy arrays
            Input rows of each edge's ends (edges in tree-position order).
        weight2 : (n-1,) cupy array of the points' dtype
            Squared weights.

        Raises
        ------
        RuntimeError
            ``s.n_edges != n - 1``.
        """
        xp = cls.xp
        n, d, dt = bvh.n, bvh.d, bvh.dtype
        m = s.n_edges
        if m != n - 1:
            raise RuntimeError(f"finalize_edges: {m} edges for {n} points")
        off = d * dt.itemsize
        root = int(cls.to_host(bvh.P[off:off + 4].view(np.int32))[0])
        # the tree and the search state are done with: give their memory back
        # before the outputs are allocated (the peak stays the loop's)
        bvh.nodes = bvh.delta = bvh.aux = None
        s.lower = s.cand = None
        if s.edges is not s.best:
            s.best = None
        src = xp.empty(m, np.int64)
        dst = xp.empty(m, np.int64)
        w2 = xp.empty(m, dt)
        cls._launch(bvh, d, "k_finalize", m,
                    (bvh.P, bvh.orig, s.core2, s.edges, _i32(root), _i32(n), src, dst, w2),
                    s.mrd)
        s.edges = s.best = s.key2 = None
        return src, dst, w2

    # -- extras (benchmarks) -----------------------------------------------------
    @classmethod
    def nearest_other_point(cls, bvh):
        """The floor's query: every point's nearest other point (tree positions).

        Parameters
        ----------
        bvh : CudaBVH

        Returns
        -------
        cand : (n,) int32 cupy array
            Tree position of each point's nearest other point (ties: the
            smaller input row); -1 where a tie at the pruning distance left
            it uncertified.
        d2 : (n,) cupy array of the points' dtype
            Squared distance to it (a lower bound where ``cand`` is -1).
        """
        xp = cls.xp
        n = bvh.n
        lower = xp.zeros(n, bvh.dtype)
        cand = xp.empty(n, np.int32)
        unused = xp.empty(1, np.uint64)  # the first search reads no radius
        nolist = xp.zeros(1, np.int32)   # nor a work list
        cls._launch(bvh, bvh.d, "k_search", n,
                    (bvh.P, bvh.nodes, bvh.orig, lower, lower, cand, unused, _i32(n),
                     nolist, nolist), False, True)
        return cand, lower


def make_kernel_set(backend, name: str = "CudaKernels"):
    """A kernel-set class bound to ``backend`` (CuPy, or the test emulator)."""
    return type(name, (_CudaKernelsBase,), {"_be": backend, "xp": backend.xp,
                                            "__doc__": _CudaKernelsBase.__doc__})


CudaKernels = make_kernel_set(CupyBackend()) if cupy is not None else None
