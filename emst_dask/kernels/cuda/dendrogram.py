"""CUDA kernels for steps of the parallel dendrogram (``products.dendrogram``)
that are one thread per item here and many whole-array passes there, and
the roots of a forest (``arrays.jump_to_roots`` on CuPy arrays)."""
from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from .backend import THREADS, grid_stride_blocks


@functools.cache
def _module():
    import cupy

    code = Path(__file__).with_name("dendrogram.cu").read_text()
    return cupy.RawModule(code=code, options=("-std=c++14",))


def pick_forest_roots(ptr):
    """Every node's root in Borůvka's pick forest, in place.

    Parameters
    ----------
    ptr : (k,) int64 cupy array, C-contiguous: ``ptr[c]`` the component
        joined by c's pick (itself for none); mutual pairs allowed.

    Returns
    -------
    ptr, now every node's root (a mutual pair's root is its smaller id).
    """
    k = int(ptr.shape[0])
    if k:
        _module().get_function("pick_forest_break_pairs")(grid_stride_blocks(k), (THREADS,),
                                                          (ptr, np.int64(k)))
    return _jump(ptr)


def forest_roots(ptr):
    """Every node's root in a forest.

    Parameters
    ----------
    ptr : (k,) integer cupy array, every node's parent (roots: ``ptr[c] ==
        c``); left as it is.

    Returns
    -------
    root : (k,) int64 cupy array.
    """
    import cupy

    return _jump(cupy.array(ptr, dtype=cupy.int64, order="C"))


def _jump(ptr):
    """Pointer jumping in place until every node points at its root."""
    import cupy

    k = int(ptr.shape[0])
    changed = cupy.zeros(1, cupy.int32)
    while k:
        changed.fill(0)
        _module().get_function("forest_jump")(grid_stride_blocks(k), (THREADS,),
                                              (ptr, np.int64(k), changed))
        if not int(changed.get()[0]):
            break
    return ptr


def place_followers(key, owner, edge, target, m):
    """Chain keys of one round's followers, in place in ``key``.

    Parameters
    ----------
    key : (m + n,) int64 cupy array, the chain keys.
    owner : (m,) int64 cupy array, the edge each chain key names.
    edge, target : (f,) int64 cupy arrays, the round's followers (edges above
        their component's pick) and their component's pick.
    m : int, the number of edges.
    """
    f = int(edge.shape[0])
    if f:
        _module().get_function("place_followers")(
            grid_stride_blocks(f), (THREADS,),
            (edge, target, np.int64(f), key, owner, np.int64(m)))


def lightest_edges(k, cs, ct, rank, m):
    """(k,) int64 cupy: every component's lowest edge rank (m for none).

    Parameters
    ----------
    k : int, the number of components.
    cs, ct : (e,) int64 cupy arrays, the components at each edge's ends.
    rank : (e,) int64 cupy array, the edges' ranks (>= 0, < m).
    m : int, the sentinel for no edge.
    """
    import cupy

    best = cupy.full(k, m, cupy.int64)
    count = int(cs.shape[0])
    if count:
        _module().get_function("lightest_edges")(
            grid_stride_blocks(count), (THREADS,), (cs, ct, rank, best, np.int64(count)))
    return best


def picks(k, cs, ct, rank, best):
    """The picked edges of a round (as ``products.dendrogram._picks``).

    Returns
    -------
    picked : (p,) int64 cupy, positions of the edges some component picked.
    side : (k,) int64 cupy, 0 where a component is its pick's source, 1 where
        it is the target.
    ptr : (k,) int64 cupy, the component at the other end of each pick.
    """
    import cupy

    count = int(cs.shape[0])
    flag = cupy.empty(count, cupy.uint8)
    side = cupy.empty(k, cupy.int64)
    ptr = cupy.arange(k, dtype=cupy.int64)
    if count:
        _module().get_function("picks")(
            grid_stride_blocks(count), (THREADS,),
            (cs, ct, rank, best, flag, side, ptr, np.int64(count)))
    return cupy.flatnonzero(flag), side, ptr


def chain_keys(key, items, comp, best, cid, side):
    """``key[items] = 2 * cid[best[comp]] + side[comp]``; returns (i,) int64
    cupy ``best[comp]``, the pick of every item's component."""
    import cupy

    count = int(items.shape[0])
    alpha = cupy.empty(count, cupy.int64)
    if count:
        _module().get_function("chain_keys")(
            grid_stride_blocks(count), (THREADS,),
            (items, comp, best, cid, side, key, alpha, np.int64(count)))
    return alpha
