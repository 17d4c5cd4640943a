"""The spanning tree a call returns (``SpanningTree``)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .arrays import to_host as _to_numpy
from .errors import InputError


@dataclass
class SpanningTree:
    """A (mutual-reachability) Euclidean minimum spanning tree.

    Attributes
    ----------
    source, target : (n-1,) int64, rows of the input (input order).
    weight : (n-1,) float32 or float64 (the input's float type), edge lengths;
        under mutual reachability ``max(core_u, core_v, |x_u - x_v|)``.
    core_distances : (n,) float or None, the distance from each point to its
        ``min_samples``-th nearest neighbour counting itself (None when
        ``min_samples == 1``).
    n_points, n_dims, min_samples : the problem.
    backend : "cpu" or "cuda"; the arrays are numpy or cupy accordingly.
    iterations : number of Borůvka iterations.
    components : component count before each iteration and at the end.
    timings : seconds per named phase.
    report : ``emst_dask.partitioned.PartitionReport`` of a partitioned job
        (rounds, bytes moved between workers, seconds per phase), else None.
    box_size : (d,) float64 or None, the periodic box the weights are
        minimum-image distances in (None: open space).
    hierarchy : dict of arrays or None
        Borůvka's recorded picks (a CUDA tree computed with
        ``hierarchy=True``, whose edges come in the engine's strict order):
        per edge ``alpha`` (m,) int32, the rank of the edge whose chain it
        joins (-1: the root chain), ``side`` (m,) int8, ``round`` (m,)
        uint8; ``point_children`` (m, 2) int32, every row in the slot
        ``[rank, side]`` of its first pick (-1 elsewhere); ``round_ends``,
        a list of the edge count after each iteration (14 bytes a point
        in all).  ``linkage()`` and HDBSCAN* build the dendrogram from it
        without rounds of their own (``products.chains.record_chains``).
    """

    source: Any
    target: Any
    weight: Any
    core_distances: Any
    n_points: int
    n_dims: int
    min_samples: int = 1
    backend: str = "cpu"
    iterations: int = 0
    components: list = field(default_factory=list)
    timings: dict = field(default_factory=dict)
    report: Any = None
    box_size: Any = None
    hierarchy: Any = field(default=None, repr=False, compare=False)
    _total: float | None = field(default=None, repr=False, compare=False)

    @property
    def total_weight(self) -> float:
        """Sum of the edge weights, accumulated in float64 where they are (a
        reduction on the device for a CUDA tree: no copy of the weights; its
        order of additions differs from numpy's, so the two may differ in
        the last bits); computed once."""
        if self._total is None:  # float64 accumulation, no float64 copy of the weights
            w = self.weight
            if not len(w):
                self._total = 0.0
            elif type(w).__module__.startswith("cupy"):
                from .kernels.cuda.sums import sum_float64

                self._total = sum_float64(w)
            else:
                self._total = float(w.sum(dtype=np.float64))
        return self._total

    @property
    def n_edges(self) -> int:
        """Number of edges, ``len(source)``."""
        return int(len(self.source))

    def to_numpy(self) -> np.ndarray:
        """(n-1, 3) float64 array of (source, target, weight) on the host."""
        out = np.empty((self.n_edges, 3), np.float64)
        out[:, 0] = _to_numpy(self.source)
        out[:, 1] = _to_numpy(self.target)
        out[:, 2] = _to_numpy(self.weight)
        return out

    def sorted_by_weight(self) -> "SpanningTree":
        """The same tree with edges ordered by (weight, source, target)
        (without ``hierarchy``, whose edges are ranks of the former order)."""
        xp = np if isinstance(self.weight, np.ndarray) else _cupy()
        order = xp.lexsort(xp.stack([self.target, self.source, self.weight]))
        return SpanningTree(self.source[order], self.target[order], self.weight[order],
                            self.core_distances, self.n_points, self.n_dims,
                            self.min_samples, self.backend, self.iterations,
                            self.components, self.timings, self.report,
                            box_size=self.box_size)

    def linkage(self):
        """The single-linkage hierarchy as a scipy linkage matrix.

        Returns
        -------
        (n-1, 4) float64, numpy, or cupy for a tree on the device (computed
            there, in parallel)
            Clusters numbered n + i in merge order, merges in the strict edge
            order (weight, min row, max row), each row (smaller id, larger
            id, height, size).  On a mutual-reachability tree this is
            HDBSCAN*'s hierarchy.  A tree computed with ``hierarchy=True``
            builds it from Borůvka's recorded picks, faster, with merges in
            the tree's own edge order (squared length, min row, max row):
            the same hierarchy, equal heights whose squared lengths differ
            in that order.
        """
        from .products.linkage import single_linkage

        return single_linkage(self.source, self.target, self.weight, self.n_points,
                              hierarchy=self.hierarchy)

    def fof(self, linking_length):
        """Friends-of-friends groups: the single-linkage cut at a length.

        Parameters
        ----------
        linking_length : float or sequence of K floats
            Absolute lengths b: points joined by tree edges of weight <= b
            are one group.

        Returns
        -------
        (n,) int64, or (K, n) int64 for a sequence
            Groups numbered by their smallest row (the group of row 0 is 0).
        """
        from .products.cuts import fof_labels

        return fof_labels(self.source, self.target, self.weight, self.n_points,
                          linking_length)

    def statistics(self, points=None, box_size=None):
        """MiSTree's MST statistics of this tree: degree, edge length, branch
        length, edge count and shape (``emst_dask.products.statistics``).

        Parameters
        ----------
        points : (n, d) float array, optional; the points of the tree (the
            branch shapes need them).
        box_size : float or (d,) floats, optional; the periodic box of the
            shapes (default: the tree's own ``box_size``, if any).

        Returns
        -------
        emst_dask.products.statistics.MSTStatistics
        """
        from .products.order import check_edges
        from .products.statistics import (check_box_size, check_points,
                                          statistics_of_checked)
        from .products.tree_checks import check_same_box, check_weights_of

        shape = getattr(points, "shape", np.shape(points) if points is not None else ())
        cols = shape[1] if len(shape) == 2 else None
        if self.n_dims and cols is not None and cols != self.n_dims:  # 0: not recorded
            raise InputError(f"the tree was computed in {self.n_dims} dimensions but points "
                             f"has {cols} columns")
        own = getattr(self, "box_size", None)
        if box_size is None:
            box_size = own
        box = check_box_size(box_size, self.n_dims or cols)
        # an open tree may be measured in a box; a periodic one only in its own
        check_same_box(self, box, None if box is None else box.size, open_tree_ok=True)
        xp, s, t, w = check_edges(self.source, self.target, self.weight, self.n_points)
        if points is not None:  # checked once, here (and the tree's weights against them)
            points = check_points(xp, points, self.n_points, box)
            check_weights_of(self, points, box if own is not None else None)
        return statistics_of_checked(xp, s, t, w, self.n_points, points, box)

    def __repr__(self) -> str:
        return (f"SpanningTree(n_points={self.n_points}, n_dims={self.n_dims}, "
                f"min_samples={self.min_samples}, n_edges={self.n_edges}, "
                f"total_weight={self.total_weight!r}, backend={self.backend!r})")


def _cupy():
    import cupy

    return cupy
