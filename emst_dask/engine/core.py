"""The in-memory core: validated points in, a ``SpanningTree`` out.

What the public ``emst()`` runs for in-memory points and what a Dask
worker runs on the points it staged: one call of the engine on one
backend, the weights brought back to input units.
"""
from __future__ import annotations

import numpy as np

from ..kernels import get_kernels, resolve_backend
from .order import strict_edge_order
from ..tree import SpanningTree
from .boruvka import boruvka
from .scaling import unscale_weights


def spanning_tree(points, min_samples: int = 1, backend: str = "auto", *,
                  box_size=None, sort_by_weight: bool = False,
                  progress=None, hierarchy: bool = False) -> SpanningTree:
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
    progress : callable(phase, **info), optional
    hierarchy : bool
        CUDA only (ignored on the CPU): record Borůvka's picks for the
        HDBSCAN* dendrogram (``SpanningTree.hierarchy``); the edges then come
        in the engine's strict order (squared length, min row, max row),
        which sorts them by weight.

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
    res = boruvka(K, points, min_samples, box_size=box_size, progress=progress,
                  hierarchy=hierarchy)
    src, dst, record = res.source, res.target, None
    if res.hierarchy is not None:
        order = strict_edge_order(K.xp, src, dst, res.weight2)
        src, dst, res.weight2 = src[order], dst[order], res.weight2[order]
        record = _in_rank_order(K.xp, res.hierarchy, order)
    weight = unscale_weights(K, res.weight2, res.exponent, points.dtype)
    core = None
    if res.core2 is not None:
        core = unscale_weights(K, res.core2, res.exponent, points.dtype)
    tree = SpanningTree(src, dst, weight, core, n, d, min_samples, name,
                        res.iterations, res.components, res.timings, box_size=box_size,
                        hierarchy=record)
    return tree.sorted_by_weight() if sort_by_weight else tree


def _in_rank_order(xp, picks, order):
    """The engine's recorded picks (``BoruvkaResult.hierarchy``) with edges
    renamed by their rank in ``order``: the layout of
    ``SpanningTree.hierarchy``."""
    m = order.shape[0]
    rank = xp.empty(m, np.int32)
    rank[order] = xp.arange(m, dtype=np.int32)
    alpha = picks["alpha"][order]
    return {"alpha": xp.where(alpha < 0, np.int32(-1), rank[xp.maximum(alpha, 0)]),
            "side": picks["side"][order], "round": picks["round"][order],
            "point_alpha": rank[picks["point_alpha"]], "point_side": picks["point_side"]}
