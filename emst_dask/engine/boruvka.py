"""The single-tree Borůvka EMST, written once against a kernel set.

The control flow, the invariants and the phase names follow the paper
(Prokopenko, Sao, Lebrun-Grandié, ICPP 2022):

1. ``construct_bvh``: Morton codes, stable sort, finer codes in crowded
   cells, radix-tree hierarchy, boxes.
2. ``compute_core_distances`` (mutual reachability only): k-NN on the tree.
3. Borůvka iterations until one component is left, each made of
   ``reduce_labels``, ``compute_upper_bounds``,
   ``find_component_outgoing_edges``, ``reduce_component_minima`` and
   ``merge_components``.

A kernel set (``emst_dask.kernels.protocol.KernelSet``) supplies the array
module and one function per phase; the CPU (numba) and CUDA (CuPy) sets
differ in how they compute a phase, never in what it means.  Everything is
squared distance internally, on the exactly scaled cloud of
``emst_dask.engine.scaling``; the square root is taken once on output.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..arrays import scatter_max, scatter_min
from . import duplicates
from .duplicates import crowded_points, min_fraction, set_aside, stable_argsort
from .order import strict_edge_order
from .scaling import bounds, ldexp, scale_exactly

#: the largest supported dimension (64-bit Morton codes: at least 7 bits/axis)
MAX_DIM = 8


@dataclass
class Timers:
    """Named wall-clock timers per phase (seconds), one per phase.

    ``sync`` is called before reading the clock so that asynchronous device
    work is attributed to the phase that launched it.  When ``enabled`` is
    False no synchronisation happens at all.
    """

    sync: Callable[[], None] = lambda: None
    enabled: bool = True
    seconds: dict[str, float] = field(default_factory=dict)
    _t0: float = 0.0

    def start(self) -> None:
        """Start the clock (after the device's queued work)."""
        if self.enabled:
            self.sync()
            self._t0 = time.perf_counter()

    def stop(self, name: str) -> None:
        """Add the time since ``start`` (or the last ``stop``) to ``name``."""
        if self.enabled:
            self.sync()
            t = time.perf_counter()
            self.seconds[name] = self.seconds.get(name, 0.0) + t - self._t0
            self._t0 = t


@dataclass
class BoruvkaResult:
    """Raw engine output, in the kernel set's array module.

    Attributes
    ----------
    source, target : (n-1,) int64
        Input rows of each edge's ends (with ``hierarchy``: the edges in the
        strict order, ``order.strict_edge_order``).
    weight2 : (n-1,) float
        Squared weights in the *scaled* frame.
    core2 : (n,) float or None
        Squared core distances in input-row order (scaled frame).
    exponent : int
        The coordinates were multiplied by ``2**exponent``.
    iterations : int
    components : list of int
        Component count before each iteration and at the end.
    timings : dict
        Seconds per phase.
    hierarchy : dict or None
        The recorded picks (``hierarchy=True`` on a kernel set that records
        them: ``finalize_hierarchy``), edges named by their position in
        ``source``.
    """

    source: Any
    target: Any
    weight2: Any
    core2: Any
    exponent: int
    iterations: int
    components: list
    timings: dict
    hierarchy: Any = None


def code_scale(xp, ext, bits):
    """Per-axis factors mapping a box of extents ``ext`` (float64 array of
    ``xp``, any shape) onto [0, 2**bits]; 0 along a flat axis."""
    safe = xp.where(ext > 0, ext, 1.0)
    return xp.where(ext > 0, (2.0**bits) / safe, 0.0)


def morton_order(K, points, timers: Timers, box=None):
    """Morton codes and their stable sort.

    Parameters
    ----------
    K : kernel set
    points : (n, d) float array of ``K.xp``
    timers : Timers
    box : (lo, hi) float64 (d,) of the points, when already known

    Returns
    -------
    codes : (n,) uint64 array of ``K.xp``, sorted ascending (tree order)
    perm : (n,) integer array of ``K.xp``, tree position -> input row
    """
    n, d = points.shape
    timers.start()
    lo, hi = bounds(K, points)[:2] if box is None else box
    bits = 63 // d
    scale = code_scale(np, hi - lo, bits)
    codes = K.morton_codes(points, lo, scale, bits)
    timers.stop("morton_codes")
    perm = K.sort_by_code(codes)
    codes = codes[perm]
    timers.stop("sort")
    return codes, perm


def construct_bvh(K, points, timers: Timers, box=None, period=None, order=None,
                  distinct_cells=False):
    """Morton codes, stable sort, finer codes in crowded cells, and the
    radix tree with its boxes.

    Parameters
    ----------
    K : kernel set
    points : (n, d) float array of ``K.xp``
    timers : Timers
    box : (lo, hi) float64 (d,) of the points, when already known
    period : (d,) float64 box lengths of a periodic box, or None
    order : (codes, perm) from ``morton_order``, when already known; a
        list is emptied (the caller keeps no reference to the codes)
    distinct_cells : bool
        Known that no code cell holds two distinct points (``set_aside``
        found none): the finer codes are skipped without a look.

    Returns
    -------
    The kernel set's BVH, whose ``orig`` maps tree positions to input rows.
    """
    n, d = points.shape
    if order is None:
        codes, perm = morton_order(K, points, timers, box)
    else:  # a list is emptied: the codes are freed once the tree is built
        codes, perm = order
        if isinstance(order, list):
            order.clear()
    timers.start()
    fine = None if distinct_cells else refine_crowded_cells(K, points, codes, perm, 63 // d)
    timers.stop("crowded_cells")
    bvh = K.build_bvh(points, codes, perm, period, fine=fine)
    timers.stop("build_hierarchy")
    del codes, fine
    return bvh


#: consecutive points of one run reduced together before the scatters
_RUN_BLOCK = 256


def _run_boxes(xp, x, rid, r):
    """Every run's bounding box: a segmented minimum and maximum.

    Blocks of ``_RUN_BLOCK`` consecutive points of one run are reduced
    first: the scatters of a run of millions of points would otherwise all
    hit one address.

    Parameters
    ----------
    xp : numpy or cupy.
    x : (c, d) float64 array of ``xp``, every value >= 0.
    rid : (c,) int64 array of ``xp``, each point's run, ascending.
    r : int, the number of runs.

    Returns
    -------
    lo, hi : (d, r) float64 arrays of ``xp``.
    """
    c, d = x.shape
    full = c // _RUN_BLOCK * _RUN_BLOCK
    blocks = rid[:full].reshape(-1, _RUN_BLOCK)
    pure = blocks[:, 0] == blocks[:, -1]  # the block lies in one run
    xb = x[:full].reshape(-1, _RUN_BLOCK, d)
    bmin, bmax, brun = xb.min(axis=1)[pure], xb.max(axis=1)[pure], blocks[pure, 0]
    loose = xp.concatenate([xp.flatnonzero(~xp.repeat(pure, _RUN_BLOCK)),
                            xp.arange(full, c)])
    lrun = rid[loose]
    lo, hi = xp.empty((d, r)), xp.empty((d, r))
    for a in range(d):
        lo[a] = np.inf
        hi[a] = 0.0
        for run, low, high in ((brun, bmin[:, a], bmax[:, a]),
                               (lrun, x[loose, a], x[loose, a])):
            scatter_min(xp, lo[a], run, xp.ascontiguousarray(low))
            scatter_max(xp, hi[a], run, xp.ascontiguousarray(high))
    return lo, hi


def refine_crowded_cells(K, points, codes, perm, bits):
    """Order the points of crowded cells by codes of their own, in place in ``perm``.

    A code cell spans 2**-bits of each axis' extent (2**-21 in 3-D, 2**-7 in
    8-D).  A cluster smaller than a cell (a collapsed halo in a big box, the
    bulk of a data set beside far outliers) falls into a few cells; a run
    of equal codes would become a subtree split by input row, every box of
    it spanning the whole cluster, and every search there would visit all
    of it (quadratic time).  So each run of equal codes gets Morton codes
    of its own, ``bits`` bits per axis over the run's own bounding box, and
    is sorted by them, stably: duplicates keep input order.  The tree then
    splits the runs by these finer codes before the rows.  (The codes only
    shape the tree: any order gives the same, exact, tree.)

    Parameters
    ----------
    K : kernel set
    points : (n, d) float array of ``K.xp``, input order
    codes : (n,) uint64 array of ``K.xp``, sorted ascending (tree order)
    perm : (n,) integer array of ``K.xp``, ``codes``' sort permutation;
        reordered within the runs of equal codes
    bits : int, the codes' bits per axis

    Returns
    -------
    (n,) uint64 array of ``K.xp`` or None
        The finer codes in tree order (0 outside the runs), ascending in
        each run; None when no run holds two distinct points, or in 1-D
        (63 bits already part every two float64 values).  Up to
        ``duplicates.HOST_ROWS`` crowded points are ordered with numpy on
        the host (their codes still come from ``K.morton_codes``).
    """
    xp = K.xp
    n, d = points.shape
    if n < 3 or d == 1:
        return None
    at, first = crowded_points(xp, codes)
    if at is None:
        return None
    rows = perm[at]

    def codes_of(u):  # in the points' dtype: the kernels compiled for this cloud serve
        return K.morton_codes(xp.asarray(u.astype(points.dtype)), np.zeros(d), np.ones(d), bits)

    if at.shape[0] <= duplicates.HOST_ROWS:  # a few: numpy on the host, codes on the device
        fine, by = _finer_order(np, stable_argsort, K.to_host(points[rows]).astype(np.float64),
                                K.to_host(first), bits, lambda u: K.to_host(codes_of(u)))
        if fine is None:
            return None
        fine, rows = xp.asarray(fine[by]), xp.asarray(K.to_host(rows)[by])
    else:
        fine, by = _finer_order(xp, K.sort_by_code, points[rows].astype(np.float64), first,
                                bits, codes_of)
        if fine is None:
            return None
        fine, rows = fine[by], rows[by]
    perm[at] = rows
    out = xp.zeros(n, np.uint64)
    out[at] = fine
    return out


def _finer_order(xp, sort, x, first, bits, codes_of):
    """The crowded points' finer codes and their order (``refine_crowded_cells``' body).

    Parameters
    ----------
    xp : numpy or cupy
    sort : stable argsort of a uint64 array of ``xp``
    x : (c, d) float64 array of ``xp``, the crowded points, tree order
        (overwritten)
    first : (c,) bool array of ``xp``, where a run of equal codes starts
    bits : int, bits per axis
    codes_of : callable, (c, d) float64 array of ``xp`` in [0, 2**bits] ->
        its Morton codes, (c,) uint64 array of ``xp``

    Returns
    -------
    fine : (c,) uint64 array of ``xp``, or None when only duplicates share
        their cells
    by : (c,) int array of ``xp``, the order by run, then finer code
    """
    rid = xp.cumsum(first) - 1  # each crowded point's run, 0 .. R - 1
    x -= x.min(axis=0)  # offsets >= 0, which the scatters compare by their bits
    lo, hi = _run_boxes(xp, x, rid, int(rid[-1]) + 1)
    scale = code_scale(xp, hi - lo, bits)
    x -= lo.T[rid]
    x *= scale.T[rid]
    del lo, hi, scale
    fine = codes_of(x)
    del x
    if not bool(((fine[1:] != fine[:-1]) & ~first[1:]).any()):
        return None, None  # only duplicates share their cells: nothing to split
    by = sort(fine)
    by = by[sort(rid[by].astype(np.uint64))]  # stable: by run, then finer code
    return fine, by


def boruvka(K, points, min_samples: int = 1, *, box_size=None, core_distances2=None,
            progress=None, timers: Timers | None = None,
            hierarchy: bool = False) -> BoruvkaResult:
    """Exact (mutual-reachability) MST of ``points`` with kernel set ``K``.

    Parameters
    ----------
    K : kernel set (``emst_dask.kernels.get_kernels``)
    points : (n, d) float32/float64 array of ``K.xp``, validated, finite
    min_samples : int
        k_pts of HDBSCAN*, counting the point itself (1: Euclidean).
    box_size : (d,) float64, optional
        A periodic box: every coordinate in [0, L) (validated by the caller),
        distances under the minimum image.
    core_distances2 : (n,) float, optional
        Squared core distances known from elsewhere (a partition's points
        need neighbours across its faces), input units and order; replace
        the local k-NN computation.  Squared, so no rounding is added.
    progress : callable(phase: str, **info), optional
    timers : Timers, optional
    hierarchy : bool
        Also record every iteration's picks (kernel sets with
        ``start_hierarchy``; others ignore it): the single-linkage
        dendrogram's chains then need no Borůvka rounds of their own
        (``products.chains.record_chains``).

    Returns
    -------
    BoruvkaResult

    Notes
    -----
    For the Euclidean tree (``min_samples == 1``, no core distances, no
    recorded picks) exact duplicates are collapsed first when at least the
    fraction ``duplicates.min_fraction()`` of the rows are copies: the tree
    of the distinct points plus each group's star from its smallest row,
    the same tree edge for edge (``engine.duplicates``).  ``components``
    then starts with n, the count before the copies joined.
    """
    xp = K.xp
    n, d = points.shape
    timers = timers or Timers(sync=K.synchronize)
    dtype = points.dtype
    if n <= 1:
        e = xp.zeros(0, np.int64)
        core2 = xp.zeros(n, dtype) if min_samples > 1 else None
        return BoruvkaResult(e, e.copy(), xp.zeros(0, dtype), core2, 0, 0, [n], {})

    points, exponent, box, period = scale_exactly(K, points, box_size)
    dtype = points.dtype  # float64 for a float32 cloud float32 cannot square
    if getattr(K, "name", None) == "cpu":  # a first run compiles: say so
        from ..kernels.cpu.cache import notice_if_cold

        notice_if_cold(dtype, d, progress)
    mrd = min_samples > 1 or core_distances2 is not None
    record = hierarchy and hasattr(K, "start_hierarchy")
    order = list(morton_order(K, points, timers, box))
    distinct_cells = False  # known that no code cell holds two distinct points
    if not (mrd or record):
        timers.start()
        kept, dup, mixed = set_aside(K, points, *order, min_fraction())
        distinct_cells = not mixed
        if kept is not None:
            del order
            rows = kept.rows
            m = rows.shape[0]
            points = points[rows]  # the distinct points, ascending rows
            timers.stop("duplicates")
            if m > 1:
                # the codes go with the tree, the points after it: the
                # iterations hold the tree's own arrays only
                bvh = construct_bvh(K, points, timers, box, period, order=list(kept.take_order()),
                                    distinct_cells=distinct_cells)
                del points
                t = _tree(K, bvh, dtype, 1, None, timers, progress, False)
                del bvh
                src, dst, w2 = rows[t[0]], rows[t[1]], t[2]
                iterations, components = t[4], [n] + t[5]
                del t
            else:
                del points
                src = dst = xp.zeros(0, np.int64)
                w2 = xp.zeros(0, dtype)
                iterations, components = 0, [n, 1]
            del kept, rows
            timers.start()
            src = xp.concatenate([src, dup.rep])
            dst = xp.concatenate([dst, dup.copy.astype(np.int64, copy=False)])
            w2 = xp.concatenate([w2, xp.zeros(dup.copy.shape[0], dtype)])
            timers.stop("duplicates")
            return BoruvkaResult(src, dst, w2, None, exponent, iterations, components,
                                 dict(timers.seconds))
        del kept, dup
        timers.stop("duplicates")
    # (the codes go with the tree and the scaled points are dropped after
    # it: the iterations hold the tree's own arrays only)
    bvh = construct_bvh(K, points, timers, box, period, order=order,
                        distinct_cells=distinct_cells)
    del order, points
    src, dst, w2, core_out, iterations, components, picks = _tree(
        K, bvh, dtype, min_samples, core_distances2, timers, progress, record, exponent)
    return BoruvkaResult(src, dst, w2, core_out, exponent, iterations, components,
                         dict(timers.seconds), picks)


def _tree(K, bvh, dtype, min_samples, core_distances2, timers, progress, record, exponent=0):
    """``boruvka`` on the scaled cloud (of ``dtype``) from its tree on:
    (source, target, w2, core2 in input order or None, iterations,
    components, picks)."""
    xp = K.xp
    n = bvh.n
    mrd = min_samples > 1 or core_distances2 is not None
    if core_distances2 is not None:
        core2 = ldexp(K, core_distances2, 2 * exponent, dtype)[bvh.orig]
    elif mrd:
        timers.start()
        core2 = K.compute_core_distances(bvh, min_samples)
        timers.stop("compute_core_distances")
        if progress:
            progress("core_distances", k=min_samples)
    else:
        core2 = None  # Euclidean: no core distances (kernel sets use zeros if they need them)

    timers.start()
    state = K.init_boruvka(bvh, core2, mrd)
    if record:
        K.start_hierarchy(bvh, state)
    timers.stop("init_boruvka")
    n_edges = 0
    iterations = 0
    components = [n]
    while n_edges < n - 1:
        timers.start()
        K.reduce_labels(bvh, state)
        timers.stop("reduce_labels")
        K.compute_upper_bounds(bvh, state)
        timers.stop("compute_upper_bounds")
        K.find_component_outgoing_edges(bvh, state)
        timers.stop("find_component_outgoing_edges")
        K.reduce_component_minima(bvh, state)
        timers.stop("reduce_component_minima")
        new_edges = K.merge_components(bvh, state)
        timers.stop("merge_components")
        if new_edges <= n_edges:
            raise RuntimeError(
                f"Boruvka made no progress at iteration {iterations} "
                f"({n - n_edges} components); this is a bug, please report it")
        n_edges = new_edges
        iterations += 1
        components.append(n - n_edges)
        if progress:
            progress("iteration", iteration=iterations, components=n - n_edges)

    src, dst, w2 = K.finalize_edges(bvh, state)
    picks = None
    if record:  # the picks name edges by rank: the edges come sorted
        timers.start()
        order = strict_edge_order(xp, src, dst, w2)
        src, dst, w2 = src[order], dst[order], w2[order]
        picks = K.finalize_hierarchy(bvh, state, order)
        picks["round_ends"] = [n - c for c in components[1:]]  # edges after each
        del order
        timers.stop("record_hierarchy")
    if mrd:
        core_out = xp.empty_like(core2)
        core_out[bvh.orig] = core2
    else:
        core_out = None
    return src, dst, w2, core_out, iterations, components, picks


def core_distances2(K, points, min_samples: int, box_size=None):
    """Squared core distances of ``points``, without a tree of edges.

    Parameters
    ----------
    K : kernel set
    points : (n, d) float array of ``K.xp``
    min_samples : int
    box_size : (d,) float64, optional
        A periodic box (see ``boruvka``).

    Returns
    -------
    (n,) squared core distances (input units, input order), ``K.xp``.
    """
    n = points.shape[0]
    dtype = points.dtype
    if min_samples <= 1 or n <= 1:
        return K.xp.zeros(n, dtype)
    points, exponent, box, period = scale_exactly(K, points, box_size)
    bvh = construct_bvh(K, points, Timers(enabled=False), box, period)
    core2 = K.compute_core_distances(bvh, min_samples)
    out = K.xp.empty_like(core2)
    out[bvh.orig] = core2
    return ldexp(K, out, -2 * exponent, dtype)
