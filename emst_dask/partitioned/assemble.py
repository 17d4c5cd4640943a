"""The partitioned job's edges as one ``SpanningTree``."""
from __future__ import annotations

import numpy as np

from ..tree import SpanningTree
from .edges import Edges


def assemble_tree(certified, forest: Edges, n: int, d: int, dtype, min_samples: int,
                  backend: str, cores, sort_by_weight: bool, timings: dict,
                  box_size=None) -> SpanningTree:
    """The tree of the boxes' certified edges and the phase-2 forest.

    Parameters
    ----------
    certified : sequence of Edges
        Per box (global ids, squared weights in input units).
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
            core[gids] = np.sqrt(c)
    w = np.sqrt(w2.astype(dtype, copy=False))
    tree = SpanningTree(u, v, w, core, n, d, min_samples, backend, 0, [], dict(timings),
                        box_size=box_size)
    return tree.sorted_by_weight() if sort_by_weight else tree
