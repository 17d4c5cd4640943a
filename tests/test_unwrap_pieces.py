"""The periodic unwrapping of friends-of-friends groups (``products.unwrap``):
groups wider than half the box unwrapped from their pieces (the parts
joined by edges that already agree with the nearest image of the group's
smallest row) and a walk of the few edges between pieces.

Oracle: the groups as scipy's connected components of the tree's edges of
weight <= b, each unwrapped by a breadth-first walk of those edges from its
smallest row in Python (one nearest-image step per edge).  A group that
wraps all the way around an axis (a percolating slab) has no unwrapping
without a seam; the rule kept is the walk along the tree's edges, so such
a group's shifts are the oracle's too, and its centre is the mean of the
members so unwrapped, wrapped into the box.
"""
from __future__ import annotations

from collections import deque

import numpy as np
import pytest

import emst_dask
from emst_dask.products import unwrap
from emst_dask.products._images import image_shifts
from emst_dask.products.cuts import fof_labels
from emst_dask.products.unwrap import image_shifts_any, image_shifts_host, image_shifts_xp

from cupy_emu import on_host
from test_products_fof import periodic_tree

sparse = pytest.importorskip("scipy.sparse")
csgraph = pytest.importorskip("scipy.sparse.csgraph")


def walked_shifts(source, target, weight, points, box, b, min_members=1):
    """The oracle: per group of the edges of weight <= b (of at least
    ``min_members``), a breadth-first walk from its smallest row."""
    x = np.asarray(points, np.float64)
    n, d = x.shape
    inside = np.asarray(weight, np.float64) <= b
    s, t = np.asarray(source)[inside], np.asarray(target)[inside]
    g = sparse.coo_matrix((np.ones(len(s)), (s, t)), shape=(n, n))
    comp = csgraph.connected_components(g, directed=False)[1]
    adj = [[] for _ in range(n)]
    for i, j in zip(s.tolist(), t.tolist()):
        adj[i].append(j)
        adj[j].append(i)
    sizes = np.bincount(comp)
    shift = np.zeros((n, d), np.int64)
    seen = np.zeros(n, bool)
    for r in range(n):
        if seen[r] or sizes[comp[r]] < min_members:
            continue
        seen[r] = True  # r is its group's smallest row: rows are visited in order
        queue = deque([r])
        while queue:
            i = queue.popleft()
            for j in adj[i]:
                if not seen[j]:
                    seen[j] = True
                    # the image of j nearest i, from where i was put
                    shift[j] = shift[i] - np.floor((x[j] - x[i]) / box + 0.5).astype(np.int64)
                    queue.append(j)
    return shift, comp


def slab_cloud(n, seed, percolating=True):
    """A thin slab in z spanning the box in x and y (one group that wraps
    around both axes) or an L-shaped band of two arms 0.8 of the box long
    crossing the x, y and z faces (wider than half the box whichever member
    is its smallest row, not wrapping), plus clumps on faces and corners and
    uniform points."""
    rng = np.random.default_rng(seed)
    m = n // 2
    if percolating:
        big = np.column_stack([rng.random(m), rng.random(m), 0.995 + 0.01 * rng.random(m)])
    else:  # an L of two arms 0.8 long: wider than half the box from any member
        a = m // 2
        big = np.concatenate([
            np.column_stack([0.65 + 0.8 * rng.random(a), 0.985 + 0.03 * rng.random(a),
                             0.99 + 0.02 * rng.random(a)]),
            np.column_stack([0.635 + 0.03 * rng.random(m - a), 0.985 + 0.8 * rng.random(m - a),
                             0.99 + 0.02 * rng.random(m - a)])])
    k = n // 8
    corners = np.array([[0, 0, 0], [0.999, 0.5, 0.5], [0.3, 0.0, 0.7], [0.6, 0.4, 0.999]])
    blobs = np.concatenate([c + 0.01 * rng.standard_normal((k // 4, 3)) for c in corners])
    rest = rng.random((n - m - len(blobs), 3))
    pts = np.mod(np.concatenate([big, blobs, rest]), 1.0)
    pts[pts >= 1.0] = 0.0
    return pts[rng.permutation(n)]


def _tree(pts):
    if len(pts) <= 3000:
        return periodic_tree(pts, 1.0)
    return emst_dask.emst(pts, box_size=1.0, backend="cpu")


CASES = [("percolating", 2400, 0.06), ("band", 2400, 0.03), ("percolating", 20000, 0.02)]


@pytest.mark.parametrize("kind,n,b", CASES)
def test_shifts_are_the_walk_along_the_tree(kind, n, b):
    pts = slab_cloud(n, 7, kind == "percolating")
    tree = _tree(pts)
    box = np.ones(3)
    raw = tree.fof(b)
    sizes = np.bincount(raw)
    big = np.argmax(sizes)
    assert sizes[big] >= n // 2
    members = raw == big
    assert (np.ptp(pts[members], axis=0) > 0.5).sum() >= 2  # across the faces
    want, comp = walked_shifts(tree.source, tree.target, tree.weight, pts, box, b)
    assert (np.abs(want[members]).max(axis=0) > 0).sum() >= 2  # walked, not nearest images
    if kind == "percolating":  # the walk goes around the box: some member >= 1 box away
        span = np.ptp(pts[members] + want[members], axis=0)
        assert span[0] > 1.0 or span[1] > 1.0
    for got in (image_shifts_xp(np, tree.source, tree.target, tree.weight, pts, box, b, raw),
                image_shifts_host(tree.source, tree.target, tree.weight, pts, box, b, raw),
                image_shifts(tree.source, tree.target, tree.weight, pts, box, b)):
        np.testing.assert_array_equal(got, want)
    for m in (5, 30):
        keep = (sizes >= m)[raw]
        want_m, _ = walked_shifts(tree.source, tree.target, tree.weight, pts, box, b, m)
        for got in (image_shifts_any(tree.source, tree.target, tree.weight, pts, box, b, raw, m),
                    image_shifts_xp(np, tree.source, tree.target, tree.weight, pts, box, b,
                                    raw, keep)):
            np.testing.assert_array_equal(got, want_m)


def test_percolating_group_centre_is_the_mean_of_the_walk():
    """The rule for a group that wraps around the box: its members unwrapped
    along the tree's edges from its smallest row, their mean wrapped into
    [0, L); the same whatever the rows' order (the same tree)."""
    n, b = 2400, 0.06
    pts = slab_cloud(n, 3, True)
    tree = periodic_tree(pts, 1.0)
    cat = emst_dask.fof(pts, b, relative=False, box_size=1.0, min_members=20, tree=tree)
    want, comp = walked_shifts(tree.source, tree.target, tree.weight, pts, np.ones(3), b)
    rows = np.flatnonzero(cat.labels == 0)
    assert len(rows) >= n // 2
    centre = np.mod((pts[rows] + want[rows]).mean(axis=0), 1.0)
    diff = np.mod(cat.position[0] - centre + 0.5, 1.0) - 0.5
    assert np.abs(diff).max() < 1e-12
    # rows permuted, the same edges renamed: the same catalogue
    perm = np.random.default_rng(1).permutation(n)
    inv = np.argsort(perm)
    moved = emst_dask.SpanningTree(inv[tree.source], inv[tree.target], tree.weight, None, n, 3)
    moved.box_size = tree.box_size
    cat2 = emst_dask.fof(pts[perm], b, relative=False, box_size=1.0, min_members=20, tree=moved)
    np.testing.assert_array_equal(cat2.length, cat.length)
    diff = np.mod(cat2.position - cat.position + 0.5, 1.0) - 0.5
    assert np.abs(diff).max() < 1e-12
    np.testing.assert_array_equal(cat2.labels[inv], cat.labels)


def test_ties_and_duplicates_on_a_lattice():
    """A lattice filling a slab that wraps around x and y, every point twice
    and every edge length tied: the walk along the tree again."""
    g = (np.arange(12) + 0.5) / 12
    X, Y = np.meshgrid(g, g, indexing="ij")
    layer = np.column_stack([X.ravel(), Y.ravel(), np.full(X.size, 0.99)])
    pts = np.concatenate([layer, layer, np.mod(layer + [0.25, 0.5, 0.3], 1.0)])
    pts = pts[np.random.default_rng(0).permutation(len(pts))]
    tree = periodic_tree(pts, 1.0)
    b = 1 / 12 + 1e-9
    raw = tree.fof(b)
    assert np.bincount(raw).max() == 288
    want, _ = walked_shifts(tree.source, tree.target, tree.weight, pts, np.ones(3), b)
    np.testing.assert_array_equal(
        image_shifts_host(tree.source, tree.target, tree.weight, pts, np.ones(3), b, raw), want)
    np.testing.assert_array_equal(
        image_shifts_xp(np, tree.source, tree.target, tree.weight, pts, np.ones(3), b, raw),
        want)


def test_only_the_pieces_are_walked(monkeypatch):
    """The walk with shifts (``_hooked_shifts``) sees the pieces of the wide
    group, not its members: a graph far smaller than the group."""
    n, b = 2400, 0.03
    pts = slab_cloud(n, 7, False)
    tree = periodic_tree(pts, 1.0)
    raw = tree.fof(b)
    sizes = []
    real = unwrap._hooked_shifts

    def counted(xp, u, v, t, p):
        sizes.append(p)
        return real(xp, u, v, t, p)

    monkeypatch.setattr(unwrap, "_hooked_shifts", counted)
    want, _ = walked_shifts(tree.source, tree.target, tree.weight, pts, np.ones(3), b)
    for fn in (lambda: image_shifts_xp(np, tree.source, tree.target, tree.weight, pts,
                                       np.ones(3), b, raw),
               lambda: image_shifts_host(tree.source, tree.target, tree.weight, pts,
                                         np.ones(3), b, raw)):
        sizes.clear()
        np.testing.assert_array_equal(fn(), want)
        assert sizes and max(sizes) <= np.bincount(raw).max() // 10


@pytest.mark.parametrize("kind,seed", [("percolating", 1), ("band", 2)])
def test_device_equals_host(device_xp, kind, seed):
    """The device path (on a GPU, and emulated: CuPy's calls on numpy, the
    union-find kernels built with g++) gives the host's shifts bit for bit, with and without a
    minimum size, and with the rows permuted."""
    n, b = 2400, 0.06 if kind == "percolating" else 0.03
    pts = slab_cloud(n, seed, kind == "percolating")
    tree = periodic_tree(pts, 1.0)
    box = np.ones(3)
    raw = tree.fof(b)
    for m in (1, 20):
        host = image_shifts_any(tree.source, tree.target, tree.weight, pts, box, b, raw, m)
        keep = None if m == 1 else (np.bincount(raw) >= m)[raw]
        on = device_xp.asarray
        dev = on_host(image_shifts_xp(device_xp, on(tree.source), on(tree.target),
                                      on(tree.weight), on(pts), box, b, on(raw),
                                      None if keep is None else on(keep)))
        np.testing.assert_array_equal(dev, host)
        if m == 1:
            every = host
    perm = np.random.default_rng(seed).permutation(n)
    inv = np.argsort(perm)
    s, t = inv[tree.source], inv[tree.target]
    raw_p = fof_labels(s, t, tree.weight, n, b)
    host_p = image_shifts_host(s, t, tree.weight, pts[perm], box, b, raw_p)
    dev_p = on_host(image_shifts_xp(device_xp, on(s), on(t), on(tree.weight), on(pts[perm]),
                                    box, b, on(raw_p)))
    np.testing.assert_array_equal(dev_p, host_p)
    # the same unwrapping: positions relative to each group's smallest row
    pos, pos_p = pts + every, pts[perm] + host_p
    first = np.array([np.flatnonzero(raw == g).min() for g in range(raw.max() + 1)])
    first_p = np.array([np.flatnonzero(raw_p == g).min() for g in range(raw_p.max() + 1)])
    rel = pos - pos[first[raw]]
    rel_p = pos_p - pos_p[first_p[raw_p]]
    # the same unwrapping: per group, one translation from one frame to the other
    off = rel_p[inv] - rel
    for g in range(raw.max() + 1):
        assert np.abs(off[raw == g] - off[raw == g][:1]).max() < 1e-12
