"""Public entry point: ``emst(points, ...)``."""
from __future__ import annotations

import numpy as np

from . import engine
from .kernels import get_kernels, resolve_backend
from .result import SpanningTree
from .validation import as_points, check_min_samples


def emst(points, *, min_samples: int = 1, backend: str = "auto",
         sort_by_weight: bool = False, progress=None) -> SpanningTree:
    """Exact Euclidean (or mutual-reachability) minimum spanning tree.

    Parameters
    ----------
    points : (n, d) array-like of float32/float64 (numpy or cupy), 1 <= d <= 8.
        Integer input is converted to float64.  NaN or inf is refused.
    min_samples : int, default 1
        HDBSCAN*'s k_pts, counting the point itself: the core distance of a
        point is the distance to its ``min_samples``-th nearest neighbour,
        itself included.  This is scikit-learn's ``HDBSCAN(min_samples=k)``,
        and ``hdbscan.HDBSCAN(min_samples=k - 1)`` / fast_hdbscan's
        ``min_samples=k - 1``, which do not count the point.  1 gives the
        plain Euclidean MST.
    backend : {"auto", "cpu", "cuda"}
        "auto" takes CUDA for CuPy input or when a GPU is visible.
    sort_by_weight : bool
        Order the edges by (weight, source, target).
    progress : callable(phase, **info), optional
        Called after the core distances and after every Borůvka iteration.

    Returns
    -------
    SpanningTree
        ``n - 1`` edges (``source``, ``target``: int64 input rows; ``weight``:
        the input float type); numpy arrays, or cupy arrays for the CUDA
        backend.
    """
    pts = as_points(points)
    n, d = pts.shape
    k = check_min_samples(min_samples, n)
    name = resolve_backend(backend, pts)
    K = get_kernels(name)
    if name == "cuda" and isinstance(pts, np.ndarray):
        pts = K.xp.asarray(pts)
    elif name == "cpu" and not isinstance(pts, np.ndarray):
        pts = pts.get()
    res = engine.boruvka(K, pts, k, progress=progress)
    xp = K.xp
    weight = _unscale(xp, res.weight2, res.exponent, pts.dtype)
    core = None if res.core2 is None else _unscale(xp, res.core2, res.exponent, pts.dtype)
    tree = SpanningTree(res.source, res.target, weight,
                        core, n, d, k, name, res.iterations, res.components,
                        res.timings)
    return tree.sorted_by_weight() if sort_by_weight else tree


def _unscale(xp, w2, exponent, dtype):
    """sqrt of squared weights, back in input units (exact power-of-two scaling)."""
    w = xp.sqrt(w2)
    if exponent:
        w = xp.ldexp(w, -exponent)
    return w.astype(dtype, copy=False)
