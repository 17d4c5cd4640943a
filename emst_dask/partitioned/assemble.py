"""The partitioned job's edges as one ``SpanningTree``."""
from __future__ import annotations

import numpy as np

from ..engine.scaling import weights_from_squares
from ..tree import SpanningTree
from .edges import Edges


def assemble_tree(certified, forest: Edges, n: int, d: int, dtype, min_samples: int,
                  backend: str, cores, sort_by_weight: bool, timings: dict,
                  box_size=None, exponent: int = 0) -> SpanningTree:
    """The tree of the boxes' certified edges and the phase-2 forest.

    Parameters
    ----------
    certified : sequence of Edges
        Per box (global ids, squared weights in the job's frame).
    forest : Edges
        Phase 2's edges.
    n, d : int
    dtype : float32 or float64
    min_samples : int
    backend : str
    cores : sequence of (gids, squared core distances)
        Per box (empty without mutual reachability).
    sort_by_weight : bool
    timings : dict
    box_size : (d,) float64 or None
        The periodic box the weights are minimum-image distances in.
    exponent : int
        The frame's scaling (``Partitioned.exponent``): squared weights and
        core distances are of the points times ``2**exponent``.

    Returns
    -------
    SpanningTree (numpy arrays)
    """
    parts = [e for e in list(certified) + [forest] if len(e)]
    dtype = np.dtype(dtype)

    def cat(f, dt):
        return np.concatenate([getattr(e, f) for e in parts]) if parts else np.zeros(0, dt)

    u, v, w2 = cat("u", np.int64), cat("v", np.int64), cat("w2", dtype)
    core = None
    if min_samples > 1:
        core = np.empty(n, dtype)
        for gids, c in cores:
            core[gids] = weights_from_squares(c, exponent, dtype)
    w = weights_from_squares(w2, exponent, dtype)
    tree = SpanningTree(u, v, w, core, n, d, min_samples, backend, 0, [], dict(timings),
                        box_size=box_size)
    return tree.sorted_by_weight() if sort_by_weight else tree
