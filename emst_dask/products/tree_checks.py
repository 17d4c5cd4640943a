"""Checks that a tree given to a product is the tree of the points and box
it is used with (``fof(tree=...)``, ``SpanningTree.statistics``, the
command line's ``stats``): run before the work, an ``InputError`` naming
what differs."""
from __future__ import annotations

import numpy as np

from ..arrays import is_device_array, to_host
from ..errors import InputError

#: edges whose weights are recomputed from the points at a time
CHECKED_EDGES = 1 << 20
#: the same for a tree already on the device: nothing to copy, so few
#: chunks (each some ten launches; 1M-edge chunks made the check of a
#: 100M-edge tree a thousand launches), 2 bytes an edge of flags each
CHECKED_DEVICE_EDGES = 1 << 26
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
    its groups and statistics are the same.  When the points or the tree
    are on the device, so is the check (``check_weights_xp``): only a few
    numbers come back."""
    m = int(tree.n_edges)
    if m == 0 or int(getattr(tree, "min_samples", 1)) != 1:
        return
    if is_device_array(points) or is_device_array(tree.source):
        import cupy

        return check_weights_xp(cupy, tree, points, box, where)
    n = points.shape[0]
    first, count = None, 0
    for lo in range(0, m, CHECKED_EDGES):
        hi = min(m, lo + CHECKED_EDGES)  # a slice: no index array, no gather
        s, t = (np.asarray(a[lo:hi]) for a in (tree.source, tree.target))
        if s.min() < 0 or t.min() < 0 or s.max() >= n or t.max() >= n:
            raise _rows_beyond(n, where)
        w = np.asarray(tree.weight[lo:hi], np.float64)
        got = _distances(points[s], points[t], box)
        bad = np.abs(got - w) > WEIGHT_RTOL * np.maximum(np.abs(w), np.abs(got))
        if bad.any():
            count += int(bad.sum())
            if first is None:
                k = int(np.argmax(bad))
                first = (int(s[k]), int(t[k]), float(w[k]), float(got[k]))
    if first is not None:
        raise _not_the_tree(*first, count, m, where)


def check_weights_xp(xp, tree, points, box=None, where: str = "points"):
    """``check_weights_of`` on the device (``xp`` cupy): the tree's edges,
    ``CHECKED_EDGES`` at a time, flagged by one kernel
    (``kernels.cuda.weights``) whose counts and first bad edge are kept on
    the device; they come back once, and the one edge the message names.
    Neither the tree nor the points are copied to the host (host arrays
    are copied to the device, a chunk of the tree at a time; a device tree
    is taken ``CHECKED_DEVICE_EDGES`` at a time)."""
    from ..kernels.cuda.weights import FLAG_ROW, FLAG_WEIGHT, weight_flags

    m = int(tree.n_edges)
    n = points.shape[0]
    pts = xp.ascontiguousarray(xp.asarray(points))
    if pts.dtype not in (np.float32, np.float64):
        pts = pts.astype(xp.float64)
    dbox = None if box is None else xp.asarray(np.asarray(box, np.float64))
    worst = xp.zeros((), xp.int8)
    count = xp.zeros((), xp.int64)
    first = xp.full((), m, xp.int64)
    step = CHECKED_DEVICE_EDGES if is_device_array(tree.source) else CHECKED_EDGES
    for lo in range(0, m, step):
        hi = min(m, lo + step)
        s, t = (xp.asarray(a[lo:hi]) for a in (tree.source, tree.target))
        if s.dtype != t.dtype:
            s, t = s.astype(xp.int64), t.astype(xp.int64)
        flag = weight_flags(xp, pts, s, t, xp.asarray(tree.weight[lo:hi]), dbox, WEIGHT_RTOL)
        bad = flag == FLAG_WEIGHT
        worst = xp.maximum(worst, flag.max())
        count += bad.sum(dtype=xp.int64)
        first = xp.minimum(first, xp.where(bad.any(), lo + xp.argmax(bad), m))
    worst, count, first = (int(v) for v in to_host(xp.stack(
        [worst.astype(xp.int64), count, first.astype(xp.int64)])))
    if worst == FLAG_ROW:
        raise _rows_beyond(n, where)
    if count:
        a, b = int(tree.source[first]), int(tree.target[first])
        w = float(np.float64(to_host(tree.weight[first])))
        got = _distances(np.asarray(to_host(pts[a]))[None], np.asarray(to_host(pts[b]))[None],
                         box)
        raise _not_the_tree(a, b, w, float(got[0]), count, m, where)


def _distances(pa, pb, box):
    """(k,) float64 (minimum-image) distances between the rows of pa and pb."""
    diff = np.abs(np.asarray(pa, np.float64) - np.asarray(pb, np.float64))
    if box is not None:
        diff = np.minimum(diff, np.asarray(box, np.float64) - diff)
    return np.sqrt((diff * diff).sum(axis=1))


def _rows_beyond(n, where):
    return InputError(f"the tree indexes rows beyond the {n} rows of {where}")


def _not_the_tree(a, b, w, got, count, m, where):
    return InputError(f"the tree is not the tree of {where}: its edge ({a}, {b}) "
                      f"weighs {w!r}, but those rows of {where} lie {got!r} apart "
                      f"({count} of {m} edges differ); pass the points the tree was "
                      "computed from, in the same row order")
