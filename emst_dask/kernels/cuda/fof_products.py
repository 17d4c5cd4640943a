"""The friends-of-friends catalogue's passes over the points on the GPU.

``products.unwrap`` and ``products.fof`` written as whole-array operations
take a dozen CuPy passes per axis, each writing an (n,) float64 or int64
temporary; here each step is one kernel (``fof_products.cu``) that reads
what it needs and keeps the rest in registers:

* ``nearest_shifts``: every kept point's image nearest its group's
  smallest row, the (n, d) int64 shifts written once;
* ``edge_states``: every edge of weight <= b checked against those shifts,
  one byte an edge;
* ``member_sums``: the catalogue's per-group pairwise sums formed from the
  points (the unwrapped displacement, velocity and mass of each member) in
  chunks of 32 members a thread, then rounds over the chunks' sums, 32 to
  one, until one row a group is left: no (M, c) float64 array of the
  members' values and a round per 32-fold, not per halving.

Every kernel is one thread an item with no cooperation between lanes, and
does the additions of ``products.group_sums`` in its order, so the results
are the host's bits.
"""
from __future__ import annotations

import functools

import numpy as np

from .backend import THREADS, grid_stride_blocks
from .dendrogram import item_source

#: members (then chunk sums) one thread adds: the pairwise tree's levels 0 .. 5
CHUNK = 32
_CTYPE = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}


@functools.cache
def _module(names):
    import cupy

    return cupy.RawModule(code=item_source("fof_products.cu"),
                          options=("-std=c++14", "--fmad=false"), name_expressions=names)


def _run(name, count, args):
    if count:
        _module((name,)).get_function(name)(grid_stride_blocks(count), (THREADS,), args)


def _floats(a):
    """``a`` C-contiguous as float32 or float64 (other dtypes widened to
    float64, as ``astype(float64)`` would) and its C type."""
    import cupy

    if a.dtype not in _CTYPE:
        a = a.astype(cupy.float64)
    return _device(a), _CTYPE[a.dtype]


def _device(a, dtype=None):
    """``a`` as a C-contiguous device array; a host array (a box's sides,
    say) is copied over, which ``cupy.ascontiguousarray`` refuses."""
    import cupy

    return cupy.ascontiguousarray(cupy.asarray(a, dtype=dtype))


def _null():
    return np.intp(0)


def nearest_shifts(points, raw, first, keep, box):
    """Each kept point moved to its image nearest its group's smallest row.

    Parameters
    ----------
    points : (n, d) float32/float64 cupy array.
    raw : (n,) int64 raw groups; first : (C,) int64, each group's smallest row.
    keep : (n,) bool or None (every point).
    box : (d,) float64 cupy array.

    Returns
    -------
    (n, d) int64 cupy array, 0 on the points not kept.
    """
    import cupy

    n, d = points.shape
    points, tp = _floats(points)
    shift = cupy.empty((n, d), cupy.int64)
    _run(f"fof_nearest_shifts<{tp}>", n,
         (points, np.int64(n), np.int32(d), _device(raw, dtype=cupy.int64),
          _device(first, dtype=cupy.int64),
          _null() if keep is None else _device(keep, dtype=bool),
          _device(box, dtype=cupy.float64), shift))
    return shift


def edge_states(source, target, weight, b, keep, points, box, shift):
    """The edges checked against the shifts.

    Parameters
    ----------
    source, target : (m,) int64; weight : (m,) float32/float64 cupy arrays.
    b : float; keep : (n,) bool or None; points : (n, d) float32/float64;
    box : (d,) float64; shift : (n, d) int64 (``nearest_shifts``).

    Returns
    -------
    state : (m,) uint8 cupy array: 0 an edge not unwrapped along (weight >
        b or its source not kept), 1 one whose ends are at each other's
        nearest image, 2 one whose ends are not.
    bad : int, the number of 2s.
    """
    import cupy

    m = int(source.shape[0])
    d = int(points.shape[1])
    points, tp = _floats(points)
    weight, tw = _floats(weight)
    state = cupy.empty(m, cupy.uint8)
    count = cupy.zeros(1, cupy.uint64)
    _run(f"fof_edge_states<{tp}, {tw}>", m,
         (_device(source, dtype=cupy.int64),
          _device(target, dtype=cupy.int64), weight, np.int64(m),
          np.float64(b), _null() if keep is None else _device(keep, dtype=bool),
          points, np.int32(d), _device(box, dtype=cupy.float64),
          _device(shift, dtype=cupy.int64), state, count))
    return state, int(count[0]) if m else 0


def _chunks(length):
    """(G + 1,) int64: where each group's chunks of ``CHUNK`` start, and the
    total."""
    import cupy

    cstart = cupy.zeros(length.shape[0] + 1, cupy.int64)
    cupy.cumsum((length + (CHUNK - 1)) // CHUNK, out=cstart[1:])
    return cstart


def member_sums(points, rows, length, ref, shift=None, box=None, velocities=None,
                masses=None):
    """The catalogue's per-group sums, pairwise in each group's order.

    Parameters
    ----------
    points : (n, d) float32/float64 cupy array.
    rows : (M,) int64, the members by (label, row) (``member_rows``).
    length : (G,) int64, each >= 1, summing to M; ref : (G,) int64, the
        row each group's displacements are taken from.
    shift : (n, d) int64 image shifts, or None (no box); box : (d,) float64.
    velocities : (n, d) array or None; masses : (n,) array or None.

    Returns
    -------
    (G, c) float64 cupy array: per group the sums of the columns of
    ``products.fof.group_catalogue`` (d displacements, d velocities when
    given, each times the mass when given, then the mass), equal to
    ``group_sums.segment_sums`` of those columns bit for bit.
    """
    import cupy

    G = int(length.shape[0])
    d = int(points.shape[1])
    c = d + (d if velocities is not None else 0) + (masses is not None)
    if G == 0:
        return cupy.zeros((0, c), cupy.float64)
    points, tp = _floats(points)
    vel, tv = (None, "float") if velocities is None else _floats(velocities)
    mass, tm = (None, "float") if masses is None else _floats(masses)
    length = _device(length, dtype=cupy.int64)
    start = cupy.cumsum(length) - length
    cstart = _chunks(length)
    K = int(cstart[-1])
    out = cupy.empty((K, c), cupy.float64)
    name = (f"fof_member_sums<{tp}, {tv}, {tm}, {d}, {str(vel is not None).lower()}, "
            f"{str(mass is not None).lower()}>")
    _run(name, K, (points, _null() if shift is None else _device(shift),
                   _null() if box is None else _device(box, dtype=cupy.float64),
                   _null() if vel is None else vel, _null() if mass is None else mass,
                   _device(rows, dtype=cupy.int64), start, length,
                   _device(ref, dtype=cupy.int64), cstart, np.int64(G),
                   np.int64(K), out))
    while K > G:  # the chunks' sums, 32 to one, until one a group
        length = cstart[1:] - cstart[:-1]
        start = cstart[:-1]
        cstart = _chunks(length)
        K = int(cstart[-1])
        nxt = cupy.empty((K, c), cupy.float64)
        _run(f"fof_value_sums<{c}>", K, (out, start, length, cstart, np.int64(G),
                                         np.int64(K), nxt))
        out = nxt
    return out
