"""The partitioned EMST in this process: the reference the Dask driver is
held to, and what ``emst(points, partitions=P, client=False)`` runs."""
from __future__ import annotations

import time

import numpy as np

from ..io.checks import as_points, check_box_size, check_in_box, check_min_samples
from ..kernels import resolve_backend
from . import steps
from .algorithm import compute
from .assemble import assemble_tree
from .report import PartitionReport
from .sizing import bound_partitions

#: in-memory points are cut into about this many blocks per box (as the
#: Dask driver reads them), so the shuffle runs as it does there
BLOCKS_PER_BOX = 2


class LocalExecutor:
    """Runs every step at once, here; box k's place is k."""

    workers = 0

    def __init__(self, n_boxes: int):
        self.n_boxes = n_boxes
        self._blocks = 0

    def owner(self, box):
        """See ``Executor.owner``: box ``box``'s place is ``box``."""
        return box

    def submit(self, fn, *args, box=None, name="", urgent=False):
        """See ``Executor.submit``: runs ``fn`` at once, here."""
        return fn(*args)

    def item(self, handle, key, box=None):
        """See ``Executor.item``: ``handle[key]`` at once."""
        return handle[key]

    def gather(self, handles):
        """See ``Executor.gather``: the handles are the values."""
        return list(handles)

    def wait(self, handles):
        """See ``Executor.wait``: everything is computed already."""
        pass

    def exchange(self, blocks, partitioning, frame, exponent, min_samples):
        """See ``Executor.exchange``: none in one process."""
        return None

    def shuffle_bytes(self, split, boxes):
        """See ``Executor.shuffle_bytes``: block i counts as read on place ``i mod P``."""
        # block i is read on place i mod P, as the Dask driver spreads them
        return int(sum(p.nbytes for i, s in enumerate(split) for k, p in s.items()
                       if k != i % self.n_boxes))


def emst_partitioned(points, n_boxes: int, min_samples: int = 1, backend: str = "cpu", *,
                     sort_by_weight: bool = False, max_rounds: int = 8,
                     certificate: str = "auto", seed: int = 0, box_size=None):
    """Exact EMST of in-memory ``points`` computed box by box, in this process.

    Parameters
    ----------
    points : (n, d) array-like
    n_boxes : int
        P; with 1 this is exactly the single-device algorithm.
    min_samples : int
    backend : {"auto", "cpu", "cuda"}
    sort_by_weight : bool
    max_rounds : int
    certificate : {"auto", "kruskal", "boruvka"}
    seed : int
    box_size : float or (d,) floats, optional
        A periodic box (see ``emst_dask.emst``).

    Returns
    -------
    SpanningTree
        Numpy arrays, with ``.report`` (``PartitionReport``).
    """
    pts = as_points(points)
    if not isinstance(pts, np.ndarray):
        pts = pts.get()
    n, d = pts.shape
    k = check_min_samples(min_samples, n)
    period = check_box_size(box_size, d)
    check_in_box(pts, period)
    P = bound_partitions(int(n_boxes), n, 0)
    name = resolve_backend(backend)
    report = PartitionReport(partitions=P, workers=0)
    t0 = time.perf_counter()
    if n < 2:
        from .edges import Edges

        tree = assemble_tree([], Edges.empty(pts.dtype), n, d, pts.dtype, k, name,
                             [(np.arange(n), np.zeros(n, pts.dtype))] if k > 1 else [],
                             sort_by_weight, {}, period)
        tree.report = report
        return tree
    nb = max(1, min(n, BLOCKS_PER_BOX * P))
    cuts = np.linspace(0, n, nb + 1).astype(np.int64)
    blocks = [steps.Block(int(a), pts[a:b]) for a, b in zip(cuts[:-1], cuts[1:])]
    ex = LocalExecutor(P)
    res = compute(ex, blocks, n, d, pts.dtype, P, k, name, report, seed=seed,
                  max_rounds=max_rounds, certificate=certificate, period=period)
    report.seconds["emst"] = time.perf_counter() - t0
    tree = assemble_tree([steps.certified_edges(s) for s in res.solved], res.forest, n, d,
                         pts.dtype, k, res.backend, res.cores or [], sort_by_weight,
                         report.seconds, period, res.exponent)
    tree.report = report
    return tree
