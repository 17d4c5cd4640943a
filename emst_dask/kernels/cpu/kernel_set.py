"""The CPU kernel set: numpy arrays, the numba kernels of this package."""
from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from . import bvh as cpu_bvh
from . import components, copies, search

#: subtrees of at most this many points are scanned point by point: on a CPU
#: a short linear scan beats descending the last levels of a binary tree
#: (Borůvka search, 1M points, 1 thread, CPU s: halos 0.55 / 0.54 / 0.53
#: with 8 / 12 / 16, uniform 3-D 0.40 / 0.40 / 0.37)
LEAF_SIZE = 16
#: the k-NN scans longer runs: with the axis loop unrolled a distance is
#: cheap next to a box test (k-NN alone, CPU s with 8 / 16 / 32: halos
#: 1.23 / 1.06 / 0.96, uniform 2-D 0.69 / 0.63 / 0.61; flat up to 64)
KNN_LEAF_SIZE = 32
#: neighbours listed per point up front; they answer the early iterations'
#: searches exactly (most points' nearest foreign point is among them)
NEIGHBOUR_LIST = 8
#: in 3-D and up a shorter list is cheaper than the searches it saves
#: (measured at 1M points, 2 cores: halos 3.24 s with 6 against 3.67 s with 8;
#: uniform 2-D 2.13 s with 8 against 2.42 s with 6; checked again after the
#: leaf sizes above, 1 thread, CPU s: halos 1.94 / 1.92 / 2.03 with 5 / 6 / 8,
#: uniform 2-D 1.45 / 1.38 / 1.38 with 6 / 8 / 10)
NEIGHBOUR_LIST_3D = 6


def _index_type(n: int):
    """Narrowest integer type for tree positions (and counts) below n."""
    return np.int32 if n < 2**31 - 1 else np.int64


def _chunks(n: int) -> int:
    """Stretches of component ids for the parallel reduce and merge: one
    per thread (a component's stretch is its owner), none under 4096 ids."""
    return max(1, min(numba.get_num_threads(), n // 4096))


def neighbour_list_size(d: int) -> int:
    """Neighbours listed per point up front in ``d`` dimensions: ``NEIGHBOUR_LIST``
    for d <= 2, ``NEIGHBOUR_LIST_3D`` from 3-D on.
    """
    return NEIGHBOUR_LIST if d <= 2 else NEIGHBOUR_LIST_3D


@dataclass(eq=False)
class CpuBVH:
    """The LBVH on the CPU (tree order; unified child ids, see ``cpu``).

    points : (n, d) float, tree order.  orig : (n,) int64 input row of each
    position.  nodes : (n-1, 4) int32 (int64 from 2**30 points) left and
    right child, first and last leaf.  box : (n-1, 2d) float node boxes (lo
    then hi).  min_orig : (n-1,) int32/int64 smallest input row below a node
    (duplicate pruning).  span : (n-1, 2) int32/int64 leaf range (compact
    copy of ``nodes[:, 2:4]``).  dims : a tuple of d zeros (the kernels are
    compiled per d).  knn_j : (n, k)
    int32/int64 neighbour lists (tree positions, nearest first) and
    knn_bound : (n,) the k-th squared distance, once computed.
    period : (d,) box lengths of a periodic box in the points' dtype (scaled
    with them; the searches measure minimum-image distances), or (0,).
    """

    points: np.ndarray
    orig: np.ndarray
    nodes: np.ndarray
    box: np.ndarray
    min_orig: np.ndarray
    span: np.ndarray
    n: int
    d: int
    dims: tuple
    knn_j: np.ndarray | None = None
    knn_bound: np.ndarray | None = None
    period: np.ndarray | None = None


@dataclass(eq=False)
class CpuBoruvkaState:
    """Borůvka iteration state on the CPU (arrays (n,) unless said).

    Tree positions and component ids are int32 below 2**31 - 1 points, else
    int64.  labels : component (a tree position) of every point.  node_labels :
    (n-1,) the leaves' common label or -1.  breaks : label-change prefix
    counts, per stretch of ``2**shift`` positions.  radii : float upper bound
    per component.  lower : float, per point, a lower bound on its distance
    to anything foreign.  resolved, skip : the neighbour-list pass's marks.
    cand_w, cand_j : each point's best foreign candidate.  comp_w, comp_src,
    comp_dst : each component's minimum outgoing edge.  edge_src, edge_dst,
    edge_w : (n-1,) the tree so far (``n_edges`` of them).  nxt, scratch :
    merge scratch.  nchunks : stretches of component ids per pass.
    """

    resolved: np.ndarray
    skip: np.ndarray
    core2: np.ndarray
    mrd: bool
    inf: np.floating
    labels: np.ndarray
    node_labels: np.ndarray
    breaks: np.ndarray
    shift: int
    radii: np.ndarray
    lower: np.ndarray
    cand_w: np.ndarray
    cand_j: np.ndarray
    comp_w: np.ndarray
    comp_src: np.ndarray
    comp_dst: np.ndarray
    edge_src: np.ndarray
    edge_dst: np.ndarray
    edge_w: np.ndarray
    n_edges: int
    nxt: np.ndarray
    scratch: np.ndarray
    nchunks: int


class CpuKernels:
    """Kernel set of the numba CPU backend (see ``emst_dask.engine``)."""

    name = "cpu"
    xp = np

    @staticmethod
    def synchronize() -> None:
        """Wait for queued work: a no-op on the CPU (a numba kernel returns when done).

        Returns
        -------
        None
        """
        pass

    @staticmethod
    def bounds(points):
        """Per-axis (min, max), float64: one parallel pass (``engine.scaling.bounds``).

        The same pass (``bvh.axis_bounds``) finds the smallest nonzero
        magnitude of any coordinate, which the exact scaling needs.

        Parameters
        ----------
        points : (n, d) float32/float64 numpy array, input order

        Returns
        -------
        lo, hi : (d,) float64 numpy arrays
            Per-axis minimum and maximum.
        smallest : float
            Smallest nonzero magnitude of any coordinate (+inf when all are
            zero, or n == 0).
        """
        if points.shape[0] == 0:
            d = points.shape[1]
            return np.zeros(d), np.zeros(d), np.inf
        return cpu_bvh.axis_bounds(np.ascontiguousarray(points))

    @staticmethod
    def to_host(a):
        """``a`` as a numpy array (``np.asarray``: no copy of a numpy array).

        Parameters
        ----------
        a : array-like

        Returns
        -------
        numpy.ndarray
        """
        return np.asarray(a)

    @staticmethod
    def to_device(a):
        """``a`` as an array of ``xp`` (``np.asarray``: the CPU's device is the host).

        Parameters
        ----------
        a : array-like

        Returns
        -------
        numpy.ndarray
        """
        return np.asarray(a)

    @staticmethod
    def morton_codes(points, lo, scale, bits):
        """64-bit Morton codes, one parallel numba pass (``bvh.morton_codes``).

        Each coordinate is mapped by ``int((x - lo) * scale)`` in float64, clamped
        to [0, 2**bits - 1], and the axes' bits interleaved, axis 0 most
        significant.

        Parameters
        ----------
        points : (n, d) float32/float64 numpy array, input order
        lo : (d,) float64 numpy array
            Lower corner of the cloud's box.
        scale : (d,) float64 numpy array
            ``2**bits / extent`` per axis (0 for an axis of zero extent).
        bits : int
            Bits per axis (the engine uses ``63 // d``).

        Returns
        -------
        (n,) uint64 numpy array
            Morton codes, input order.
        """
        codes = np.empty(points.shape[0], np.uint64)
        cpu_bvh.morton_codes(points, lo, scale, bits, codes)
        return codes

    @staticmethod
    def sort_by_code(codes):
        """Stable permutation sorting the codes: a sequential LSD radix sort, 11 bits a pass.

        Equal codes keep input order, so a run of duplicate points is sorted by
        input row (the ``min_orig`` pruning relies on it).

        Parameters
        ----------
        codes : (n,) uint64 numpy array, input order

        Returns
        -------
        (n,) int64 numpy array
            ``perm`` with ``codes[perm]`` ascending.
        """
        # stable: equal codes keep input order, so a run of duplicate points
        # is sorted by input row and ``min_orig`` pruning stays effective
        return cpu_bvh.radix_argsort(codes, 64)

    @staticmethod
    def mark_copies(points, codes, perm):
        """The points equal to the one before them in tree order (``copies.mark_copies``).

        Parameters
        ----------
        points : (n, d) float32/float64 numpy array, input order
        codes : (n,) uint64 numpy array, sorted ascending (tree order)
        perm : (n,) integer numpy array, ``codes``' stable sort permutation

        Returns
        -------
        keep_tree : (n,) uint8 numpy array
            0 where a tree position is a copy of the one before it, else 1.
        counts : (copies, shared, mixed) ints
            The copies; the positions sharing the code of the one before;
            of those, the ones unequal to it.
        """
        keep_tree = np.empty(points.shape[0], np.uint8)
        counts = copies.mark_copies(points, perm, codes, keep_tree)
        return keep_tree, tuple(int(v) for v in counts)

    @staticmethod
    def compact_copies(points, codes, perm, keep_tree, m):
        """The distinct points' rows and tree order, and each copy's
        representative, when every run of equal codes is one group.

        Parameters
        ----------
        points, codes, perm : as for ``mark_copies``
        keep_tree : from ``mark_copies`` (whose ``mixed`` count was 0)
        m : int
            The distinct points: n less the copies.

        Returns
        -------
        rows : (m,) int64, the representatives' input rows, ascending
        codes : (m,) uint64, their codes in tree order
        perm : (m,) integer, tree position -> local index (into ``rows``)
        copy : (n - m,) int64, the copies' rows, tree order
        rep : (n - m,) int64, each copy's group's smallest row
        """
        return copies.compact(codes, perm, keep_tree, m)

    @staticmethod
    def build_bvh(points, codes, perm, period=None, fine=None):
        """The LBVH: the radix tree top-down (Karras 2012), then the boxes bottom-up.

        The points are gathered into tree order, the hierarchy built with every
        internal node independent (``bvh.build_hierarchy``), then each internal
        node's box and smallest input row (``bvh.compute_bounding_boxes``).

        Parameters
        ----------
        points : (n, d) float32/float64 numpy array, input order, n >= 2
        codes : (n,) uint64 numpy array
            The Morton codes sorted ascending (``codes[perm]``).
        perm : (n,) int64 numpy array
            From ``sort_by_code``.
        period : (d,) float64 numpy array, optional
            Box lengths of a periodic box (every coordinate in [0, L)): the
            searches then measure minimum-image distances.  Exactly
            representable in the points' dtype.
        fine : (n,) uint64 numpy array, optional
            The finer codes of the points of crowded cells (runs of equal
            codes), tree order, ascending within each run: the radix tree
            splits those runs by them.

        Returns
        -------
        CpuBVH
            ``orig`` is ``perm`` as int64; no neighbour lists yet.
        """
        n, d = points.shape
        orig = perm.astype(np.int64, copy=False)
        pts = cpu_bvh.gather_rows(points, orig)
        m = n - 1
        # child ids run to 2n - 2 (leaves 0..n-1, internal nodes n + k)
        nodes = np.empty((m, 4), _index_type(2 * n))
        parent = np.empty(2 * n - 1, np.int64)
        cpu_bvh.build_hierarchy(codes, np.zeros(0, np.uint64) if fine is None else fine,
                                nodes, parent)
        box = np.empty((m, 2 * d), pts.dtype)
        min_orig = np.empty(m, _index_type(n))
        # the kernels are compiled for each d: ``dims`` carries it in its type
        dims = (0,) * d
        cpu_bvh.compute_bounding_boxes(pts, orig, nodes, box, min_orig, dims)
        # each node's leaf range, compact: label reduction reads it every iteration
        span = nodes[:, 2:4].astype(_index_type(n))
        period = (np.zeros(0, pts.dtype) if period is None
                  else np.asarray(period, np.float64).astype(pts.dtype))
        return CpuBVH(points=pts, orig=orig, nodes=nodes, box=box, min_orig=min_orig,
                      span=span, n=n, d=d, dims=dims, period=period)

    @staticmethod
    def k_nearest_neighbours(bvh, k, core_rank=-1):
        """The k nearest others of every point: their tree positions, the
        k-th squared distance and, optionally, the ``core_rank``-th.

        One pruned traversal per point, blocks of points in parallel
        (``search.k_nearest_neighbours``), under the order (d2, input row).

        Parameters
        ----------
        bvh : CpuBVH
        k : int
            1 <= k <= n - 1.
        core_rank : int
            0 <= core_rank < k, or -1 (none).

        Returns
        -------
        j : (n, k) int32 (int64 from 2**31 points) numpy array
            Tree positions of the neighbours, nearest first; rows in tree order.
        bound : (n,) numpy array of the points' dtype
            The k-th squared distance.
        core : (n,) numpy array of the points' dtype, or None
            The ``core_rank``-th squared distance.
        """
        n = bvh.n
        dt = bvh.points.dtype
        j = np.empty((n, k), _index_type(n))
        bound = np.empty(n, dt)
        core = np.empty(n if core_rank >= 0 else 0, dt)
        search.k_nearest_neighbours(bvh.points, bvh.orig, bvh.nodes, bvh.box, bvh.min_orig,
                                    k, KNN_LEAF_SIZE, core_rank, j, bound, core, bvh.dims,
                                    bvh.period)
        return j, bound, (core if core_rank >= 0 else None)

    @classmethod
    def compute_core_distances(cls, bvh, min_samples):
        """Squared core distances from k-NN lists, which are kept on ``bvh``.

        The ``min(max(min_samples, neighbour_list_size(d)), n - 1)`` nearest
        other points of every point go to ``bvh.knn_j`` (and the last one's
        squared distance to ``bvh.knn_bound``): they also answer the first
        Borůvka searches.

        Parameters
        ----------
        bvh : CpuBVH
        min_samples : int
            k_pts of HDBSCAN*, counting the point itself: 2 <= min_samples <= n.

        Returns
        -------
        (n,) numpy array of the points' dtype
            Squared distance to the ``(min_samples - 1)``-th nearest other point,
            tree order.
        """
        # k_pts counts the point itself: the (k_pts - 1)-th other neighbour.
        # The lists are kept: they also answer the first Borůvka searches,
        # and list one point beyond the core's so that they can: a listed
        # answer is exact below the last listed distance, and most points'
        # best mutual-reachability edge weighs their own core distance
        # (a neighbour with a smaller one), which a list ending at the core
        # distance can never show to be strictly below it
        k = min(max(min_samples, neighbour_list_size(bvh.d)), bvh.n - 1)
        bvh.knn_j, bvh.knn_bound, core2 = cls.k_nearest_neighbours(bvh, k, min_samples - 2)
        return core2

    @classmethod
    def init_boruvka(cls, bvh, core2, mrd):
        """The iteration state: every point its own component (label = tree position).

        Computes the neighbour lists first (``neighbour_list_size(d)`` nearest, at
        most n - 1) when ``compute_core_distances`` has not.

        Parameters
        ----------
        bvh : CpuBVH
        core2 : (n,) numpy array of the points' dtype, or None
            Squared core distances, tree order (zeros or None when ``mrd``
            is False).
        mrd : bool
            Mutual reachability: weights are ``max(core2_i, core2_j, d2)``.

        Returns
        -------
        CpuBoruvkaState
            ``labels`` = arange(n), ``lower`` and ``skip`` zeros, no edges;
            the other arrays are uninitialised.
        """
        n = bvh.n
        dt = bvh.points.dtype
        if core2 is None:  # the kernels read core distances in every search
            core2 = np.zeros(n, dt)
        if bvh.knn_j is None:
            bvh.knn_j, bvh.knn_bound, _ = cls.k_nearest_neighbours(
                bvh, min(neighbour_list_size(bvh.d), n - 1))
        # tree positions and component ids (both < n, or -1) in the narrowest type
        it = _index_type(n)
        return CpuBoruvkaState(
            resolved=np.empty(n, np.bool_), skip=np.zeros(n, np.int32),
            core2=core2, mrd=mrd, inf=dt.type(np.inf),
            labels=np.arange(n, dtype=it),
            node_labels=np.empty(n - 1, it),
            breaks=np.empty(n, it),
            shift=max(12, int(np.ceil(np.log2(max(1.0, n / numba.get_num_threads()))))),
            radii=np.empty(n, dt),
            lower=np.zeros(n, dt),
            cand_w=np.empty(n, dt), cand_j=np.empty(n, it),
            comp_w=np.empty(n, dt), comp_src=np.empty(n, it), comp_dst=np.empty(n, it),
            edge_src=np.empty(n - 1, it), edge_dst=np.empty(n - 1, it),
            edge_w=np.empty(n - 1, dt), n_edges=0,
            nxt=np.empty(n, it), scratch=np.empty(n, it),
            nchunks=_chunks(n))

    @staticmethod
    def reduce_labels(bvh, s):
        """Label every internal node with its leaves' common component, or -1.

        A prefix count of label changes along the curve, per stretch of
        ``2**s.shift`` positions in parallel (``components.reduce_labels``): a node
        is single-component iff the count is equal at both ends of its leaf range.

        Parameters
        ----------
        bvh : CpuBVH
        s : CpuBoruvkaState

        Returns
        -------
        None
            Fills ``s.node_labels`` ((n-1,) int32, int64 for n >= 2**31 - 1);
            ``s.breaks`` is scratch.
        """
        components.reduce_labels(s.labels, bvh.span, s.node_labels, s.breaks, s.shift)

    @staticmethod
    def compute_upper_bounds(bvh, s):
        """Upper bounds on each component's shortest outgoing edge, from Morton neighbours.

        ``s.radii`` is reset to +inf, then every two consecutive tree positions in
        different components lower both components' radius to the weight of their
        edge (``search.compute_upper_bounds``; a racy minimum, so a lost update
        only leaves a looser bound).

        Parameters
        ----------
        bvh : CpuBVH
        s : CpuBoruvkaState

        Returns
        -------
        None
            Fills ``s.radii`` ((n,), indexed by component id; +inf where none).
        """
        s.radii.fill(s.inf)
        search.compute_upper_bounds(bvh.points, s.labels, s.core2, s.mrd, s.radii, bvh.dims,
                                    bvh.period)

    @staticmethod
    def find_component_outgoing_edges(bvh, s):
        """Each point's nearest point in another component: neighbour lists, then the tree.

        ``search.resolve_from_neighbour_lists`` answers, exactly, every point its
        k-NN list settles and seeds the others; ``search.find_component_outgoing_edges``
        then runs one pruned traversal for each other point whose lower bound does
        not exceed its component's radius (subtrees of at most ``LEAF_SIZE`` points
        are scanned point by point).

        Parameters
        ----------
        bvh : CpuBVH
        s : CpuBoruvkaState

        Returns
        -------
        None
            Sets ``s.cand_w`` and ``s.cand_j`` (each point's best foreign candidate:
            squared weight and tree position, -1 for none), ``s.resolved`` and
            ``s.skip``; raises ``s.lower``; lowers ``s.radii`` to the candidates.
        """
        search.resolve_from_neighbour_lists(
            bvh.points, bvh.orig, s.labels, s.core2, s.mrd, bvh.knn_bound, bvh.knn_j,
            s.radii, s.lower, s.resolved, s.cand_w, s.cand_j, s.inf, bvh.dims,
            s.skip, bvh.period)
        search.find_component_outgoing_edges(
            bvh.points, bvh.orig, s.labels, s.node_labels, bvh.nodes, bvh.box,
            bvh.min_orig, s.core2, s.mrd,
            s.radii, s.lower, LEAF_SIZE, s.resolved, s.cand_w, s.cand_j, bvh.dims,
            bvh.period)

    @staticmethod
    def reduce_component_minima(bvh, s):
        """Each component's minimum outgoing edge under (w, min input row, max input row).

        Each thread owns a stretch of component ids (``s.nchunks`` of them); points
        of other stretches' components are taken afterwards, in order, so the
        result does not depend on scheduling (``components.reduce_component_minima``).
        Only candidates with ``cand_w <= radii[C]`` can win.

        Parameters
        ----------
        bvh : CpuBVH
        s : CpuBoruvkaState

        Returns
        -------
        None
            Fills ``s.comp_w``, ``s.comp_src`` and ``s.comp_dst`` (indexed by
            component id; the edge's squared weight and tree positions;
            ``comp_src = -1`` and ``comp_w = inf`` without an edge); ``s.scratch``
            is scratch.
        """
        components.reduce_component_minima(bvh.orig, s.labels, s.cand_w, s.cand_j, s.radii,
                                    s.comp_w, s.comp_src, s.comp_dst, s.scratch,
                                    s.nchunks, s.inf)

    @staticmethod
    def merge_components(bvh, s):
        """Add every component's chosen edge and relabel the points to the new roots.

        Of a mutual pair (two components that chose the same edge) the smaller
        component is the root and the edge is added once; the roots are found by
        path compression (``components.merge_components``).

        Parameters
        ----------
        bvh : CpuBVH
        s : CpuBoruvkaState

        Returns
        -------
        int
            Tree edges found so far (also stored in ``s.n_edges``).  The new edges
            are appended, in component order, to ``s.edge_src`` and ``s.edge_dst``
            (tree positions) and ``s.edge_w``; ``s.labels`` hold the new roots;
            each point's ``s.lower`` is raised to its old component's edge weight;
            ``s.nxt`` and ``s.scratch`` are scratch.
        """
        s.n_edges = components.merge_components(s.labels, s.comp_w, s.comp_src, s.comp_dst,
                                         s.lower, s.edge_src, s.edge_dst, s.edge_w,
                                         s.n_edges, s.nxt, s.scratch, s.nchunks)
        return s.n_edges

    @staticmethod
    def finalize_edges(bvh, s):
        """The tree's edges as input rows, in the order the iterations added them.

        Parameters
        ----------
        bvh : CpuBVH
        s : CpuBoruvkaState

        Returns
        -------
        source, target : (n-1,) int64 numpy arrays
            Input rows of each edge's ends.
        weight2 : (n-1,) numpy array of the points' dtype
            Squared weights (a copy of ``s.edge_w``).
        """
        m = s.n_edges
        return (bvh.orig[s.edge_src[:m]], bvh.orig[s.edge_dst[:m]], s.edge_w[:m].copy())
