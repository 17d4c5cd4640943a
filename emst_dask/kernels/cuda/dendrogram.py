"""CUDA kernels for steps of the parallel dendrogram (``products.chains``,
``products.dendrogram``) that are one thread per item here and many
whole-array passes there, the roots of a forest (``arrays.jump_to_roots``
on CuPy arrays) and counts per value (``arrays.tally``).

Every kernel is a template over the index type: int32 arrays while the
items fit (``products.chains.index_dtype``), int64 beyond; all the
index arrays of one call share it.
"""
from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from .backend import THREADS, grid_stride_blocks

_KERNELS = ("forest_walk", "root_flags", "renumber",
            "place_followers", "lightest_edges",
            "component_picks", "take_picks", "split_edges", "chain_keys", "chain_tops", "point_tops",
            "record_keys", "chain_below", "chain_parents", "point_parents",
            "recorded_point_parents",
            "order_pairs", "size_terms", "chain_bases", "chain_sizes", "tally")
#: the C type of each index dtype the one-thread-an-item kernels take
INDEX_CTYPES = {np.dtype(np.int32): "int", np.dtype(np.int64): "long long"}


def item_source(name):
    """The CUDA source ``name`` with ``items.cuh`` (the index types, the
    grid-stride loop) in front."""
    here = Path(__file__).parent
    return (here / "items.cuh").read_text() + "\n" + (here / name).read_text()


@functools.cache
def _module():
    import cupy

    code = item_source("dendrogram.cu")
    names = tuple(f"{k}<{t}>" for k in _KERNELS for t in INDEX_CTYPES.values())
    return cupy.RawModule(code=code, options=("-std=c++14",), name_expressions=names)


def _launch(name, index, count, args):
    """``name<index's C type>`` over ``count`` items, grid-stride."""
    if count:
        _module().get_function(f"{name}<{INDEX_CTYPES[np.dtype(index.dtype)]}>")(
            grid_stride_blocks(count), (THREADS,), args)


def pick_forest_components(ptr):
    """Borůvka's merged components: every node's root in the pick forest,
    numbered in the order of the roots' ids.

    Parameters
    ----------
    ptr : (k,) int32 or int64 cupy array, C-contiguous: ``ptr[c]`` the
        component joined by c's pick, or c for a root (``component_picks``
        makes the smaller of a mutual pair one); overwritten.

    Returns
    -------
    new_id : ``ptr``, now every node's component number in [0, count).
    count : int, the number of components.
    """
    import cupy

    k = int(ptr.shape[0])
    jump_in_place(ptr)
    flag = cupy.empty(k, ptr.dtype)
    _launch("root_flags", ptr, k, (ptr, flag, np.int64(k)))
    scan = cupy.cumsum(flag, out=flag)  # in place (an int32 scan is int64 by default)
    _launch("renumber", ptr, k, (ptr, scan, np.int64(k)))
    return ptr, int(scan[-1]) if k else 0


def forest_roots(ptr):
    """Every node's root in a forest.

    Parameters
    ----------
    ptr : (k,) integer cupy array, every node's parent (roots: ``ptr[c] ==
        c``); left as it is.

    Returns
    -------
    root : (k,) cupy array, int32 for an int32 ``ptr``, else int64.
    """
    import cupy

    dtype = cupy.int32 if ptr.dtype == cupy.int32 else cupy.int64
    return jump_in_place(cupy.array(ptr, dtype=dtype, order="C"))


#: the steps of a pass's walks up a forest (``jump_in_place``)
WALK_STEPS = 8


def jump_in_place(ptr):
    """Every node pointing at its root, in place: passes of walks of up to
    ``WALK_STEPS`` steps up the forest until every walk ends at a root.

    Parameters
    ----------
    ptr : (k,) int32 or int64 cupy array, C-contiguous, a forest (roots
        where ``ptr[c] == c``); overwritten and returned.
    """
    import cupy

    k = int(ptr.shape[0])
    unfinished = cupy.ones(1, cupy.int32)
    while k and int(unfinished[0]):
        unfinished.fill(0)
        _launch("forest_walk", ptr, k, (ptr, np.int64(k), np.int32(WALK_STEPS), unfinished))
    return ptr


def place_followers(key, owner, edge, target, m):
    """Chain keys of one round's followers, in place in ``key``.

    Parameters
    ----------
    key : (m + n,) cupy array of the index type, the chain keys.
    owner : (m,) same type, the edge each chain key names.
    edge, target : (f,) same type, the round's followers (edges above their
        component's pick) and their component's pick.
    m : int, the number of edges.
    """
    f = int(edge.shape[0])
    _launch("place_followers", key, f, (edge, target, np.int64(f), key, owner, np.int64(m)))


def lightest_edges(k, cs, ct, m):
    """(k,) cupy array of the index type: every component's lightest edge,
    its lowest position (the edges being in rank order; m for none).

    Parameters
    ----------
    k : int, the number of components.
    cs, ct : (e,) int32 or int64 cupy arrays, the components at each edge's
        ends, e <= m.
    m : int, the sentinel for no edge.
    """
    import cupy

    best = cupy.full(k, m, cs.dtype)
    count = int(cs.shape[0])
    _launch("lightest_edges", cs, count, (cs, ct, best, np.int64(count)))
    return best


def picks(k, cs, ct, rank, best):
    """The picked edges of a round (as ``products.chains._picks``), one
    thread a component; every one of the k components must have a pick.

    Parameters
    ----------
    k : int, the number of components.
    cs, ct : (e,) cupy arrays of the index type, the round's edges' ends.
    rank : (e,) same type, their ranks; None where the ranks are the
        positions (the first round).
    best : (k,) same type, every component's pick (``lightest_edges``).

    Returns
    -------
    flag : (e,) uint8 cupy, 1 for the edges some component picked.
    side : (k,) int8 cupy, 0 where a component is its pick's source, 1 where
        it is the target.
    ptr : (k,) cupy of the index type, the component at the other end of
        each pick, or the component itself for the smaller of a mutual pair
        (a forest).
    alpha : (k,) same type, every component's pick's rank.
    """
    import cupy

    count = int(cs.shape[0])
    flag = cupy.zeros(count, cupy.uint8)
    side = cupy.empty(k, cupy.int8)
    ptr = cupy.empty(k, cs.dtype)
    alpha = cupy.empty(k, cs.dtype)
    positions = rank is None
    _launch("component_picks", cs, k, (best, cs, ct, cs if positions else rank,
                                       np.int32(positions), flag, side, ptr, alpha,
                                       np.int64(k)))
    return flag, side, ptr, alpha


def take_picks(pos, rank, cid, so_far):
    """The picks' ranks in edge order, numbering their chains.

    Parameters
    ----------
    pos : (e,) cupy of the index type, the inclusive running count of picks
        over the edges.
    rank : (e,) same type, the edges' ranks; None where they are the
        positions (the first round).
    cid : (m,) same type; ``cid[r] = so_far + i`` for the i-th pick r.
    so_far : int, the picks of the rounds before.

    Returns
    -------
    prank : (p,) same type, the picked ranks.
    """
    import cupy

    count = int(pos.shape[0])
    prank = cupy.empty(int(pos[-1]) if count else 0, pos.dtype)
    positions = rank is None
    _launch("take_picks", pos, count, (pos, pos if positions else rank, np.int32(positions),
                                       np.int64(count), prank, cid, np.int64(so_far)))
    return prank


def split_edges(pos, p, rank, cs, ct, new_comp):
    """One pass after a round's merge: the picks' new components, and the
    other edges compacted in order with their ends' new components.

    Parameters
    ----------
    pos : (e,) cupy of the index type, the inclusive running count of picks.
    p : int, the number of picks (``pos[-1]``, known to the caller).
    rank, cs, ct : (e,) same type, the round's edges (rank None where the
        ranks are the positions: the first round).
    new_comp : (k,) same type, every component's merged component.

    Returns
    -------
    item_comp : (p,) the new component of every pick, in edge order.
    rank, cs, ct : (e - p,) the edges left, in order.
    cycle : bool, some edge left joins a component to itself.
    """
    import cupy

    count = int(pos.shape[0])
    it = cs.dtype
    item_comp = cupy.empty(p, it)
    rest = [cupy.empty(count - p, it) for _ in range(3)]
    cycle = cupy.zeros(1, cupy.int32)
    positions = rank is None
    _launch("split_edges", cs, count, (pos, cs if positions else rank, np.int32(positions),
                                       cs, ct, new_comp, np.int64(count), item_comp, *rest,
                                       cycle))
    return (item_comp, *rest, bool(int(cycle[0])))


def chain_keys(key, items, comp, best, cid, side):
    """``key[items] = 2 * cid[best[comp]] + side[comp]``; returns (i,) cupy
    (the index type) ``best[comp]``, the pick of every item's component."""
    import cupy

    count = int(items.shape[0])
    alpha = cupy.empty(count, key.dtype)
    _launch("chain_keys", key, count, (items, comp, best, cid, side, key, alpha,
                                       np.int64(count)))
    return alpha


def record_keys(hierarchy, cid, m):
    """(m,) cupy array of cid's type: the edges' chain keys from the
    recorded picks (``products.chains.record_chains``), one thread an edge.

    Parameters
    ----------
    hierarchy : dict of cupy arrays (``SpanningTree.hierarchy``): ``alpha``
        (m,) int32, ``side`` (m,) int8.
    cid : (m,) int32 or int64 cupy array, every edge's chain number.
    m : int, the number of edges.
    """
    import cupy

    key = cupy.empty(m, cid.dtype)
    _launch("record_keys", cid, m, (hierarchy["alpha"], hierarchy["side"], cid, key,
                                    np.int64(m)))
    return key


def point_tops(pslot, m, n):
    """(m, 2) cupy array of pslot's type: the dendrogram's children with
    only the points in place (-1 elsewhere), one thread a point.

    Parameters
    ----------
    pslot : (n,) int32 or int64 cupy array, every point's slot (2 edge +
        side).
    m, n : int, the numbers of edges and points.
    """
    import cupy

    children = cupy.full((m, 2), -1, pslot.dtype)
    if m:
        _launch("point_tops", pslot, n, (cupy.ascontiguousarray(pslot), children,
                                         np.int64(n)))
    return children


@functools.cache
def _above_kernel():
    import cupy

    return cupy.ElementwiseKernel("int32 alpha", "bool above", "above = alpha >= 0 && i > alpha",
                                  "emst_above_their_pick")


def above_their_pick(alpha):
    """(m,) bool cupy: ``alpha[r] >= 0 and r > alpha[r]`` (alpha (m,) int32
    cupy, the recorded picks by rank), one pass."""
    return _above_kernel()(alpha)


@functools.cache
def _linkage_rows_kernel():
    import cupy

    return cupy.ElementwiseKernel(
        "raw I children, T weight, I size", "raw float64 Z",
        "Z[4 * i] = children[2 * i]; Z[4 * i + 1] = children[2 * i + 1]; "
        "Z[4 * i + 2] = weight; Z[4 * i + 3] = size;", "emst_linkage_rows")


def linkage_rows(children, weight, size):
    """The scipy linkage matrix, one thread a row.

    Parameters
    ----------
    children : (m, 2) int32 or int64 cupy array, C-contiguous.
    weight : (m,) float32 or float64 cupy array, the heights.
    size : (m,) cupy array of children's type.

    Returns
    -------
    (m, 4) float64 cupy array: (children, height, size) per row.
    """
    import cupy

    m = int(weight.shape[0])
    Z = cupy.empty((m, 4), cupy.float64)
    _linkage_rows_kernel()(cupy.ascontiguousarray(children).ravel(), weight,
                           size.astype(children.dtype, copy=False), Z.ravel())
    return Z


def chain_children(skey, order, children, owner, m, n):
    """The two clusters every edge merges, in place, from the edges in
    chain order.

    Parameters
    ----------
    skey : (m,) int32 or int64 cupy array, the edges' chain keys, sorted.
    order : (m,) same type, the edges in that order.
    children : (m, 2) same type, C-contiguous, the points in their slots and
        -1 in the others; receives every edge's two clusters as linkage ids
        (points' rows, n + edge), the smaller first.
    owner : (m,) same type, the edge each chain key names.
    m, n : int, the numbers of edges and points.
    """
    count = int(skey.shape[0])
    args = (np.int64(count), np.int64(m), np.int64(n))
    _launch("chain_tops", skey, count, (skey, order, owner, children) + args)
    _launch("chain_below", skey, count, (skey, order, children) + args)
    _launch("order_pairs", skey, m, (children, np.int64(m)))


def chain_parents(skey, order, points, owner, m, n):
    """Every node's parent from the edges in chain order, and the points
    among every edge's children.

    Parameters
    ----------
    skey, order, owner : as ``chain_children``.
    points : (n,) cupy array of skey's type, every point's slot (2 edge +
        side); or the recorded (m, 2) int32 children (points in their
        slots, -1 elsewhere).
    m, n : int, the numbers of edges and points.

    Returns
    -------
    parent : (2n - 1,) of skey's type, the node (n + edge) every node
        (point v < n, edge n + e) merges into, -1 for the root.
    weight : (m,) of skey's type, the points among every edge's children.
    """
    import cupy

    it = skey.dtype
    count = int(skey.shape[0])
    parent = cupy.empty(2 * n - 1, it)
    _launch("chain_parents", skey, count, (skey, order, owner, parent, np.int64(count),
                                           np.int64(m), np.int64(n)))
    if points.ndim == 2:
        weight = cupy.empty(m, it)
        _launch("recorded_point_parents", skey, m,
                (cupy.ascontiguousarray(points, dtype=cupy.int32), parent, weight,
                 np.int64(m), np.int64(n)))
    else:
        weight = cupy.zeros(m, it)
        _launch("point_parents", skey, n, (cupy.ascontiguousarray(points, dtype=it), parent,
                                            weight, np.int64(n)))
    return parent, weight


def chain_sizes(skey, order, owner, weight, size, lo, hi, m):
    """One round's sizes: prefix sums along its chains ``[lo, hi)`` of the
    sorted items, in place.

    Parameters
    ----------
    skey, order : (m,) int32 cupy arrays, the edges in chain order (see
        ``chain_children``).
    owner : (m,) int32, the edge each chain key names.
    weight : (m,) int32, every edge's points below it off its own chain
        (the totals of the chains it names, from earlier rounds); this
        round's chain totals are added to their edges.
    size : (m,) int32, receives the cluster size of every edge of the round.
    lo, hi : int, the round's items in the sorted order.
    m : int, the number of edges.

    Notes
    -----
    A running total is 32 bits: the chains of one round hold disjoint
    points, so it stays below n < 2**31 (int32 indices only).
    """
    import cupy

    count = hi - lo
    if count <= 0:
        return
    terms = cupy.empty(count, cupy.uint64)
    _launch("size_terms", skey, count, (skey, order, weight, np.int64(lo), np.int64(hi),
                                        np.int64(m), terms))
    scan = cupy.cumsum(terms, out=terms)  # in place: no second (count,) uint64
    base = cupy.empty(count, cupy.uint32)  # at most a chain an item: no sync
    _launch("chain_bases", skey, count, (skey, scan, np.int64(lo), np.int64(hi), base))
    _launch("chain_sizes", skey, count, (skey, order, owner, scan, base, np.int64(lo),
                                         np.int64(hi), np.int64(m), size, weight))


def tally(key, k, first=False):
    """Per value in [0, k): the items of ``key`` holding it, and the lowest.

    Parameters
    ----------
    key : (c,) int32 or int64 cupy array, C-contiguous; negative entries
        are skipped.
    k : int, the values' range.
    first : bool, also the lowest item holding each value.

    Returns
    -------
    total : (k,) int64 cupy array.
    low : (k,) cupy array of key's type, ``c`` for a value no item holds
        (None without ``first``).
    """
    import cupy

    count = int(key.shape[0])
    total = cupy.zeros(k, cupy.int64)
    low = cupy.full(k, count, key.dtype) if first else None
    _launch("tally", key, count, (key, np.int64(count), total, low if first else np.intp(0)))
    return total, low
