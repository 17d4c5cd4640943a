"""Checks that a tree given to a product is the tree of the points and box
it is used with (``fof(tree=...)``, ``SpanningTree.statistics``, the
command line's ``stats``): run before the work, an ``InputError`` naming
what differs."""
from __future__ import annotations

import numpy as np

from ..arrays import to_host
from ..errors import InputError

#: edges whose weights are recomputed from the points at a time
CHECKED_EDGES = 1 << 20
#: relative difference allowed between a recorded and a recomputed weight
#: (the tree's arithmetic may be float32; other points differ by far more)
WEIGHT_RTOL = 1e-3


def tree_box(tree, d: int):
    """The tree's periodic box as (d,) float64, or None (open space)."""
    tb = getattr(tree, "box_size", None)
    if tb is None:
        return None
    tb = np.asarray(tb if isinstance(tb, (int, float, list, tuple, np.ndarray))
                    else to_host(tb), np.float64).reshape(-1)
    return np.repeat(tb, d) if tb.size == 1 else tb


def check_same_box(tree, box, d: int, open_tree_ok: bool = False):
    """Refuse a box (``(d,)`` float64 or None) other than the tree's own;
    ``open_tree_ok``: an open tree may be used in a box."""
    tb = tree_box(tree, d)
    if tb is None and open_tree_ok:
        return
    if (tb is None) != (box is None) or (tb is not None and not np.array_equal(tb, box)):
        have = "no box" if tb is None else f"box_size={tb.tolist()}"
        want = "no box" if box is None else f"box_size={np.asarray(box).tolist()}"
        raise InputError(f"the tree records {have}, this call asks for {want}: "
                         "compute the tree with emst(points, box_size=...) in the same box")


def check_weights_of(tree, points, box=None, where: str = "points"):
    """Refuse ``points`` (``(n, d)``, numpy or cupy) that are not the ones
    the Euclidean ``tree`` was computed from: every edge's weight is
    recomputed (under the minimum image in ``box``), ``CHECKED_EDGES`` at a
    time, and compared.  A tree of the same points moved or rotated passes:
    its groups and statistics are the same."""
    m = int(tree.n_edges)
    if m == 0 or int(getattr(tree, "min_samples", 1)) != 1:
        return
    n = points.shape[0]
    first, count = None, 0
    for lo in range(0, m, CHECKED_EDGES):
        hi = min(m, lo + CHECKED_EDGES)  # a slice: no index array, no gather
        s, t = (np.asarray(to_host(a[lo:hi])) for a in (tree.source, tree.target))
        if s.max() >= n or t.max() >= n:
            raise InputError(f"the tree indexes rows beyond the {n} rows of {where}")
        w = np.asarray(to_host(tree.weight[lo:hi]), np.float64)
        diff = np.abs(np.asarray(_take(points, s), np.float64)
                      - np.asarray(_take(points, t), np.float64))
        if box is not None:
            diff = np.minimum(diff, np.asarray(box, np.float64) - diff)
        got = np.sqrt((diff * diff).sum(axis=1))
        bad = np.abs(got - w) > WEIGHT_RTOL * np.maximum(np.abs(w), np.abs(got))
        if bad.any():
            count += int(bad.sum())
            if first is None:
                k = int(np.argmax(bad))
                first = (int(s[k]), int(t[k]), float(w[k]), float(got[k]))
    if first is not None:
        a, b, w, got = first
        raise InputError(f"the tree is not the tree of {where}: its edge ({a}, {b}) "
                         f"weighs {w!r}, but those rows of {where} lie {got!r} apart "
                         f"({count} of {m} edges differ); pass the points the tree was "
                         "computed from, in the same row order")


def _take(a, idx):
    """``a[idx]`` on the host, ``a`` a numpy or cupy array, ``idx`` numpy."""
    if type(a).__module__.startswith("cupy"):
        import cupy

        return to_host(a[cupy.asarray(idx)])
    return np.asarray(a)[idx]
