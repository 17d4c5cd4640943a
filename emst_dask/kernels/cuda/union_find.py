"""Friends-of-friends cuts on the GPU: one union-find for every length.

The friends-of-friends cuts (``products.cuts``) add the tree's edges to one
lock-free union-find, shortest lengths first.  Each edge hooks the larger of
its endpoints' roots under the smaller with a compare-and-swap, so every
root is its component's smallest row and groups come out numbered by their
smallest row, as on the host.  Each link also records the cut it was made
at, so the groups of all K cuts are read in one pass over the points at the
end instead of one pass per cut (``union_find.cu`` says how).
"""
from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from .backend import THREADS, grid_stride_blocks

# Levels are one byte of a node and 255 marks a root: at most 254 cuts are
# read from one set of links; more are done in batches.
MAX_LEVELS = 254


def _code(name):
    here = Path(__file__)
    return here.with_name("union_find_core.cuh").read_text() + here.with_name(name).read_text()


@functools.cache
def _module():
    import cupy

    code = _code("union_find.cu")
    names = tuple(f"{k}<{t}>" for k in ("uf_edge_levels", "uf_hook_range")
                  for t in ("float", "double"))
    return cupy.RawModule(code=code, options=("-std=c++14",), name_expressions=names)


@functools.cache
def _pieces_module():
    import cupy

    return cupy.RawModule(code=_code("union_find_pieces.cu"), options=("-std=c++14",))


def _kernel(name, weight=None):
    if weight is not None:
        name += "<float>" if weight.dtype == np.float32 else "<double>"
    return _module().get_function(name)


def fof_cuts(source, target, weight, n: int, cuts, rows, out):
    """Write the groups at increasing linking lengths into ``out``.

    Parameters
    ----------
    source, target : (m,) int64 cupy arrays, C-contiguous, in [0, n).
    weight : (m,) float32 or float64 cupy array, C-contiguous.
    n : int, the number of points.
    cuts : (K,) float64 numpy array, strictly increasing lengths.
    rows : (K,) int64 numpy array: cut j is written to ``out[rows[j]]``.
    out : (R, n) int64 cupy array, C-contiguous: row ``rows[j]`` receives
        the groups of the edges of weight <= cuts[j], numbered 0, 1, ... by
        their smallest row.
    """
    import cupy

    m = int(source.shape[0])
    nodes = cupy.empty(n, cupy.uint64)
    _kernel("uf_init")(grid_stride_blocks(n), (THREADS,), (nodes, np.int64(n)))
    levels = cupy.empty(m, cupy.uint8) if cuts.shape[0] > 1 else None
    below = -np.inf
    for start in range(0, cuts.shape[0], MAX_LEVELS):
        batch = cuts[start:start + MAX_LEVELS]
        if start:
            _kernel("uf_flatten")(grid_stride_blocks(n), (THREADS,), (nodes, np.int64(n)))
        if m and levels is None:
            _kernel("uf_hook_range", weight)(
                grid_stride_blocks(m), (THREADS,),
                (source, target, weight, np.float64(below), np.float64(batch[0]),
                 np.uint32(1), nodes, np.int64(m)))
        elif m:
            _kernel("uf_edge_levels", weight)(
                grid_stride_blocks(m), (THREADS,),
                (weight, cupy.asarray(batch), np.int32(batch.shape[0]), levels,
                 np.int64(m)))
            # (an edge an earlier batch hooked is hooked again at level 1: a
            # no-op, its endpoints share a root)
            for level in range(1, batch.shape[0] + 1):
                _kernel("uf_hook_level")(grid_stride_blocks(m), (THREADS,),
                                         (source, target, levels, np.uint32(level),
                                          nodes, np.int64(m)))
        _read_groups(nodes, n, batch.shape[0], rows[start:start + MAX_LEVELS], out)
        below = batch[-1]


def _read_groups(nodes, n, k, rows, out):
    """out[rows[j]] = the groups at level j + 1, for j < k."""
    import cupy

    if n == 0:
        return
    words = -(-n // 32)
    bits = cupy.empty((k, words), cupy.uint32)
    ranks = cupy.empty((k, words), cupy.int64)
    _kernel("uf_root_bits")(grid_stride_blocks(32 * words), (THREADS,),
                            (nodes, np.int32(k), bits, ranks, np.int64(n),
                             np.int64(words)))
    cupy.cumsum(ranks, axis=1, out=ranks)
    _kernel("uf_labels")(grid_stride_blocks(n), (THREADS,),
                         (nodes, np.int32(k), bits, ranks,
                          cupy.asarray(np.ascontiguousarray(rows, np.int64)), out,
                          np.int64(n), np.int64(words)))


def agreeing_pieces(source, target, state, raw, wide, n: int):
    """The pieces of the wide groups: the components of the edges whose
    state is 1 (``fof_products.edge_states``) in a group marked ``wide``.

    Parameters
    ----------
    source, target : (m,) int64 cupy arrays; state : (m,) uint8.
    raw : (n,) int64 raw groups; wide : (C,) bool by raw group.
    n : int, the number of points.

    Returns
    -------
    (n,) uint64 cupy array, the union-find's nodes (``roots_of`` reads
    them; ``add_piece_offsets`` takes them).
    """
    import cupy

    m = int(source.shape[0])
    kernel = _pieces_module().get_function
    nodes = cupy.empty(n, cupy.uint64)
    kernel("uf_init")(grid_stride_blocks(n), (THREADS,), (nodes, np.int64(n)))
    if m:
        kernel("uf_hook_agreeing")(grid_stride_blocks(m), (THREADS,),
                                    (cupy.ascontiguousarray(source, dtype=cupy.int64),
                                     cupy.ascontiguousarray(target, dtype=cupy.int64),
                                     cupy.ascontiguousarray(state, dtype=cupy.uint8),
                                     cupy.ascontiguousarray(raw, dtype=cupy.int64),
                                     cupy.ascontiguousarray(wide, dtype=bool), nodes,
                                     np.int64(m)))
    return nodes


def roots_of(nodes, rows):
    """(k,) int64: the root (smallest row) of each of ``rows`` ((k,) int64)
    in the union-find ``nodes``."""
    import cupy

    k = int(rows.shape[0])
    out = cupy.empty(k, cupy.int64)
    if k:
        _pieces_module().get_function("uf_roots_of")(
            grid_stride_blocks(k), (THREADS,),
            (nodes, cupy.ascontiguousarray(rows, dtype=cupy.int64), out, np.int64(k)))
    return out


def add_piece_offsets(nodes, raw, wide, keep, pieces, off, shift):
    """``shift[i] += off[piece of i]`` for every kept point of a wide group
    whose piece (its root in ``nodes``) is among ``pieces`` ((p,) int64,
    increasing; ``off`` (p, d) int64), in place: one pass over the points."""
    import cupy

    n, d = shift.shape
    if n == 0:
        return
    _pieces_module().get_function("uf_add_piece_offsets")(
        grid_stride_blocks(n), (THREADS,),
        (nodes, cupy.ascontiguousarray(raw, dtype=cupy.int64),
         cupy.ascontiguousarray(wide, dtype=bool),
         np.intp(0) if keep is None else cupy.ascontiguousarray(keep, dtype=bool),
         cupy.ascontiguousarray(pieces, dtype=cupy.int64),
         cupy.ascontiguousarray(off, dtype=cupy.int64), np.int64(pieces.shape[0]),
         np.int32(d), shift, np.int64(n)))
