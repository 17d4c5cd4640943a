"""The products' input checks on the GPU in one pass each.

The whole-array checks of an edge list (weights >= 0 and not NaN,
endpoints in [0, n)) and of points (finite, inside a periodic box) read
their arrays several times and come back to the host after each reduction.
Here one elementwise kernel flags every edge or point and one reduction
brings the worst flag back; only when something is wrong do the callers
run their whole-array checks again, for the message.
"""
from __future__ import annotations

import functools

import numpy as np


@functools.cache
def _kernels():
    import cupy

    edges = cupy.ElementwiseKernel(
        "int64 s, int64 t, W w, int64 n", "int8 bad",
        "double x = (double)w;"
        "bad = !(x >= 0) || s < 0 || t < 0 || (n >= 0 && (s >= n || t >= n));",
        "emst_check_edges")
    points = cupy.ElementwiseKernel(
        "raw P points, raw float64 box, int32 d, bool periodic", "int8 bad",
        "bad = 0;"
        "for (int j = 0; j < d; ++j) {"
        "  double x = (double)points[i * d + j];"
        "  if (!isfinite(x)) bad = 1;"
        "  else if (periodic && (x < 0 || x >= box[j])) bad = 1;"
        "}", "emst_check_points")
    return edges, points


def edges_ok(source, target, weight, n) -> bool:
    """(m,) int64 ``source``, ``target``, float32/float64 ``weight`` cupy
    arrays, C-contiguous: every weight >= 0 and not NaN and every endpoint
    in [0, n) (``n`` None: >= 0).  One pass, one number read back."""
    if source.shape[0] == 0:
        return True
    bad = _kernels()[0](source, target, weight, np.int64(-1 if n is None else n))
    return not bool(bad.max())


def points_ok(points, box) -> bool:
    """(k, d) float32/float64 cupy ``points``, C-contiguous: every
    coordinate finite and, with ``box`` ((d,) float64 numpy or None), in
    [0, L).  One pass, one number read back."""
    import cupy

    k, d = points.shape
    if k == 0:
        return True
    L = cupy.asarray(np.zeros(d) if box is None else np.asarray(box, np.float64))
    bad = _kernels()[1](points, L, np.int32(d), np.bool_(box is not None), size=k)
    return not bool(bad.max())
