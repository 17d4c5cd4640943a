"""What a kernel set is: the phases of the single-tree Borůvka, once per backend.

The engine (``emst_dask.engine``) runs the algorithm's control flow against
this protocol; a backend supplies one method per phase.  Shapes use n for
the number of points and d for the dimension; "tree order" means the points
sorted by Morton code, "input order" the caller's rows.  Distances are
squared throughout (the square root is taken once, on output) and ties
break by the strict order (weight, min(input row), max(input row)).

Each backend keeps its own BVH and Borůvka state (dataclasses in its
module): the engine only reads ``bvh.orig`` and passes both objects back.
"""
from __future__ import annotations

from types import ModuleType
from typing import Any, Protocol, runtime_checkable

import numpy as np


class BVH(Protocol):
    """The linear BVH of one point set, as a backend builds it.

    Attributes
    ----------
    n, d : int
        Points and dimensions.
    orig : (n,) int array of the backend's array module
        Input row of each tree position (int64 on the CPU, int32 on the GPU).
    """

    n: int
    d: int
    orig: Any


@runtime_checkable
class KernelSet(Protocol):
    """One function per phase of the paper, on one backend.

    Attributes
    ----------
    name : {"cpu", "cuda"}
    xp : module
        The array module of every array the methods take and return (numpy
        or cupy).
    """

    name: str
    xp: ModuleType

    # -- plumbing ---------------------------------------------------------------
    def synchronize(self) -> None:
        """Wait for the device's queued work (a no-op on the CPU)."""

    def to_host(self, a) -> np.ndarray:
        """``a`` as a numpy array."""

    def to_device(self, a):
        """A host array as an array of ``xp`` (the fast path for large ones)."""

    # -- construct_bvh ----------------------------------------------------------
    def bounds(self, points) -> tuple[np.ndarray, np.ndarray, float]:
        """Per-axis (min, max) of (n, d) ``points`` (two (d,) float64 host
        arrays) and the smallest nonzero magnitude of any coordinate (a
        float, +inf when all are zero)."""

    def morton_codes(self, points, lo: np.ndarray, scale: np.ndarray, bits: int):
        """(n,) uint64 Morton codes of (n, d) ``points`` (input order), each
        axis mapped by ``(x - lo) * scale`` (float64 (d,)) to ``bits`` bits."""

    def sort_by_code(self, codes):
        """(n,) integer permutation sorting ``codes`` *stably* (a run of equal
        codes keeps input order: the duplicate pruning relies on it)."""

    def mark_copies(self, points, codes, perm) -> tuple:
        """The points equal to the one before them in tree order: (keep_tree,
        (copies, shared, mixed)), an (n,) uint8 array (0 at a copy, tree
        order) and three counts (the copies; the positions sharing the code
        of the one before; of those, the unequal ones)."""

    def compact_copies(self, points, codes, perm, keep_tree, m: int) -> tuple:
        """When no run of equal codes holds distinct points (``mark_copies``'
        mixed count 0): (rows, codes, perm, copy, rep) of the m distinct
        points (their input rows ascending, codes in tree order, tree position
        -> local index) and of the n - m copies (rows in tree order, each
        group's smallest row)."""

    def build_bvh(self, points, codes, perm, period=None, fine=None) -> BVH:
        """The radix tree over sorted ``codes`` with its bounding boxes;
        ``points`` (n, d) in input order, ``perm`` from ``sort_by_code``;
        ``period`` (d,) float64 box lengths of a periodic box (every
        coordinate in [0, L)), or None: every later search on the tree then
        measures minimum-image distances; ``fine`` (n,) uint64 or None, the
        finer codes of the crowded cells' points (tree order, ascending in
        each run of equal codes), which split those runs before the rows."""

    # -- compute_core_distances (mutual reachability) ---------------------------
    def compute_core_distances(self, bvh: BVH, min_samples: int):
        """(n,) squared core distances in tree order: the squared distance to
        the ``min_samples``-th nearest point counting the point itself."""

    # -- the Borůvka iterations ---------------------------------------------------
    def init_boruvka(self, bvh: BVH, core2, mrd: bool):
        """The iteration state: every point its own component.  ``core2`` (n,)
        squared core distances in tree order (None, or zeros, when ``mrd`` is
        False: the engine passes None and a kernel set that reads them makes
        its own zeros)."""

    def reduce_labels(self, bvh: BVH, state) -> None:
        """Label every internal node with its leaves' common component, or -1."""

    def compute_upper_bounds(self, bvh: BVH, state) -> None:
        """Upper bounds on each component's shortest outgoing edge (Morton
        neighbours in other components)."""

    def find_component_outgoing_edges(self, bvh: BVH, state) -> None:
        """Each point's nearest point in another component (pruned traversal)."""

    def reduce_component_minima(self, bvh: BVH, state) -> None:
        """Each component's minimum outgoing edge under the strict order."""

    def merge_components(self, bvh: BVH, state) -> int:
        """Add the chosen edges, relabel points to the new components; the
        number of tree edges found so far."""

    def finalize_edges(self, bvh: BVH, state) -> tuple[Any, Any, Any]:
        """The n - 1 edges: (n-1,) int64 source and target input rows and
        (n-1,) squared weights of the points' dtype."""
