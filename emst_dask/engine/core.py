"""The in-memory core: validated points in, a ``SpanningTree`` out.

What the public ``emst()`` runs for in-memory points and what a Dask
worker runs on the points it staged: one call of the engine on one
backend, the weights brought back to input units.
"""
from __future__ import annotations

import numpy as np

from ..errors import InputError
from ..kernels import get_kernels, resolve_backend
from ..tree import SpanningTree
from .boruvka import boruvka, core_distances2
from .scaling import unscale_weights


def spanning_tree(points, min_samples: int = 1, backend: str = "auto", *,
                  box_size=None, sort_by_weight: bool = False,
                  progress=None, hierarchy: bool = False,
                  core_scale: float = 1.0) -> SpanningTree:
    """The exact (mutual-reachability) MST of in-memory points.

    Parameters
    ----------
    points : (n, d) float32/float64, numpy or cupy
        Validated (``emst_dask.io.checks.as_points``): C-contiguous, native
        byte order, finite.
    min_samples : int
        k_pts, counting the point itself; checked by the caller.
    backend : {"auto", "cpu", "cuda"}
    box_size : (d,) float64, optional
        A periodic box (``emst_dask.io.checks.check_box_size``), every
        coordinate in [0, L) (``check_in_box``): the minimum-image tree.
    sort_by_weight : bool
        Order the edges by (weight, source, target).
    progress : callable, optional
        ``progress(phase, **info)``.
    hierarchy : bool
        CUDA only (ignored on the CPU): record Borůvka's picks for the
        HDBSCAN* dendrogram (``SpanningTree.hierarchy``); the edges then come
        in the engine's strict order (squared length, min row, max row),
        which sorts them by weight.
    core_scale : float > 0
        Multiply the core distances by this before the tree: the weights
        are ``max(s * core_u, s * core_v, |x_u - x_v|)`` (robust single
        linkage's alpha, ``s = alpha``); ``core_distances`` stay unscaled.
        1 (default) is HDBSCAN*'s mutual reachability.

    Returns
    -------
    SpanningTree
        Arrays of the backend's array module (cupy for "cuda").
    """
    n, d = points.shape
    name = resolve_backend(backend, points)
    K = get_kernels(name)
    if name == "cuda" and isinstance(points, np.ndarray):
        points = K.to_device(points)
    elif name == "cpu" and not isinstance(points, np.ndarray):
        points = points.get()
    core2 = None
    if core_scale != 1.0 and min_samples > 1:  # squared: the scale enters squared
        raw2 = core_distances2(K, points, min_samples, box_size)
        core2 = raw2 * (core_scale ** 2)
    res = boruvka(K, points, min_samples, box_size=box_size, progress=progress,
                  hierarchy=hierarchy, core_distances2=core2)
    src, dst, record = res.source, res.target, res.hierarchy
    weight = unscale_weights(K, res.weight2, res.exponent, points.dtype)
    if res.exponent < 0 or res.weight2.dtype != points.dtype:  # could overflow
        check_representable(K, weight, src, dst)
    core = None
    if res.core2 is not None:
        core = unscale_weights(K, res.core2, res.exponent, points.dtype)
        if core2 is not None:  # the unscaled ones, without a rounding
            core = K.xp.sqrt(raw2)
    tree = SpanningTree(src, dst, weight, core, n, d, min_samples, name,
                        res.iterations, res.components, res.timings, box_size=box_size,
                        hierarchy=record)
    return tree.sorted_by_weight() if sort_by_weight else tree


def check_representable(K, weight, src, dst):
    """Refuse a tree with an edge longer than the weights' float type holds.

    A cloud scaled down to be squared safely (or a float32 one computed in
    float64) can have an edge whose length, scaled back, overflows: its
    weight would be inf.  Which edges the tree has is only known once it
    is built, so this runs after the Borůvka iterations.

    Parameters
    ----------
    K : kernel set
    weight : (m,) float32/float64 array of ``K.xp``, the weights in input units.
    src, dst : (m,) int64 arrays of ``K.xp``, the edges' rows.

    Raises
    ------
    InputError
        Naming the first such edge's rows.
    """
    bad = K.xp.flatnonzero(K.xp.isinf(weight))
    if bad.shape[0] == 0:
        return
    e = int(bad[0])
    a, b = sorted((int(src[e]), int(dst[e])))
    dtype = np.dtype(weight.dtype)
    hint = ("convert the points to float64, or scale the cloud down" if dtype == np.float32
            else "scale the cloud down")
    raise InputError(
        f"rows {a} and {b} are an edge of the tree and lie farther "
        f"apart than the largest {dtype} ({float(np.finfo(dtype).max):.4g}): no {dtype} "
        f"weight holds their distance ({bad.shape[0]} such edge(s)); {hint}")
