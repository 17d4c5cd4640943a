"""The CUDA Borůvka state between iterations, on the emulated kernels,
against brute force.

Each point holds one word (``s.cl``): ``~j`` for a certified candidate j,
which must be its exact nearest point in another component under
(weight, input row), or the bits of a lower bound on its distance to
every point of another component.  The word replaces a candidate array
and a lower-bound array: a candidate's lower bound is its weight, put
back when the candidate joins the point's component.
"""
from __future__ import annotations

import numpy as np
import pytest

from emst_dask import engine

cuda_emu = pytest.importorskip("cuda_emu")
K = cuda_emu.emulated_kernels()
if K is None:  # pragma: no cover - no C++ compiler
    pytest.skip("no C++ compiler for the emulated CUDA kernels", allow_module_level=True)


def _labels_and_points(bvh):
    """(labels, coordinates) of the point records, tree order."""
    n, d = bvh.n, bvh.d
    rec = bvh.P.reshape(n, bvh.pt_bytes)
    it = bvh.dtype.itemsize
    x = rec[:, :d * it].copy().view(bvh.dtype).reshape(n, d)
    lab = rec[:, d * it:d * it + 4].copy().view(np.int32).ravel()
    return lab, x


def _check_words(bvh, s, core2, phase):
    lab, x = _labels_and_points(bvh)
    orig = np.asarray(bvh.orig)
    dt = bvh.dtype
    # the kernels' weights: squared differences summed axis by axis, in dt
    w = np.zeros((bvh.n, bvh.n), dt)
    for a in range(bvh.d):
        t = (x[:, None, a] - x[None, :, a]).astype(dt)
        w = (w + t * t).astype(dt)
    if core2 is not None:
        w = np.maximum(w, np.maximum(core2[:, None], core2[None, :]))
    foreign = lab[:, None] != lab[None, :]
    wf = np.where(foreign, w, np.inf)
    nearest = wf.min(axis=1)
    words = np.asarray(s.cl)
    cand = words < 0
    for i in np.flatnonzero(cand):
        j = ~int(words[i])
        tie = np.flatnonzero(wf[i] == nearest[i])
        assert lab[j] != lab[i], (phase, i)
        assert w[i, j] == nearest[i] and orig[j] == orig[tie].min(), (phase, i)
    lower = words[~cand].astype(np.int64 if dt == np.float64 else np.int32).view(dt)
    assert (lower >= 0).all(), phase
    assert (lower <= nearest[~cand]).all(), phase
    return int(cand.sum()), int((~cand).sum())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("cloud", ["uniform", "lattice", "mrd"])
def test_candidates_exact_and_bounds_below_the_nearest_foreign_point(cloud, dtype):
    rng = np.random.default_rng(7)
    if cloud == "lattice":  # ties everywhere, every site twice
        g = rng.integers(0, 9, size=(300, 3)).astype(dtype)
        x = np.concatenate([g, g[:150]])
    else:
        x = rng.random((700, 3)).astype(dtype)
    ms = 5 if cloud == "mrd" else 1
    bvh = engine.construct_bvh(K, x, engine.Timers(enabled=False))
    core2 = K.compute_core_distances(bvh, ms) if ms > 1 else None
    s = K.init_boruvka(bvh, core2, ms > 1)
    assert bvh.delta is None  # construction only: the label pass reads the far ends
    n, edges, checked = bvh.n, 0, 0
    seen = np.zeros(2, np.int64)  # candidates, bounds
    while edges < n - 1:
        K.reduce_labels(bvh, s)
        K.compute_upper_bounds(bvh, s)  # joined candidates become bounds again
        if s.it > 0:
            seen += _check_words(bvh, s, core2, ("bounds", s.it))
        K.find_component_outgoing_edges(bvh, s)
        K.reduce_component_minima(bvh, s)  # raises the bounds to the radii
        seen += _check_words(bvh, s, core2, ("minima", s.it))
        checked += 1
        edges = K.merge_components(bvh, s)
    assert checked >= 3 and (seen > 0).all(), seen
    src, dst, w2 = K.finalize_edges(bvh, s)
    assert src.shape[0] == n - 1


def _leaves(bvh):
    """(first point, holds two) of every leaf, from the leaf table."""
    tab = np.asarray(bvh.tab, np.uint64)
    L = bvh.n_leaves
    l = np.arange(L)
    word = tab[l >> 5]
    base = (word & np.uint64(0xFFFFFFFF)).astype(np.int64)
    mask = (word >> np.uint64(32)).astype(np.int64)
    b = l & 31
    below = np.array([bin(int(m) & ((1 << int(k)) - 1)).count("1") for m, k in zip(mask, b)])
    return base + b + below, ((mask >> b) & 1).astype(bool)


def _nodes(bvh):
    """(lo, hi, split, label) of the node records."""
    d, it = bvh.d, bvh.dtype.itemsize
    m = bvh.n_leaves - 1
    rec = bvh.nodes.reshape(-1, bvh.node_bytes)[:m]
    box = rec[:, :2 * d * it].copy().view(bvh.dtype).reshape(m, 2, d)
    words = rec[:, 2 * d * it:2 * d * it + 8].copy().view(np.int32).reshape(m, 2)
    return box[:, 0], box[:, 1], words[:, 0], words[:, 1]


def _check_tree(bvh, delta):
    """The tree over leaves of one point or two: the leaves are the points'
    tree's nodes of two points (``delta``, the points' prefix lengths) and
    the single points left; every node's box is the tight box of its
    points, its label their common label or -1, its far end the other end
    of its range; every leaf is reached once.  Returns the nodes checked."""
    lab, x = _labels_and_points(bvh)
    n, L = bvh.n, bvh.n_leaves
    first, two = _leaves(bvh)
    size = 1 + two
    assert first[0] == 0 and (first[1:] == first[:-1] + size[:-1]).all()
    assert first[-1] + size[-1] == n
    # a pair (i, i + 1): split i is above both neighbouring splits
    ext = np.concatenate([[-1], delta.astype(int), [-1]])  # ext[i + 1] = delta[i]
    i = np.arange(n - 1)
    pair = (ext[i + 1] > ext[i]) & (ext[i + 1] > ext[i + 2])
    np.testing.assert_array_equal(np.flatnonzero(pair), first[two])
    assert bvh.nodes.shape[0] == max(L - 1, 1) * bvh.node_bytes
    if L < 2:
        return 0
    lo, hi, split, label = _nodes(bvh)
    reached = np.zeros(L, np.int64)
    todo = [(0, L - 1, 0)]  # (first leaf, last leaf, node)
    while todo:
        f, l, k = todo.pop()
        pts = slice(first[f], first[l] + size[l])
        np.testing.assert_array_equal(lo[k], x[pts].min(axis=0))
        np.testing.assert_array_equal(hi[k], x[pts].max(axis=0))
        common = lab[pts][0] if (lab[pts] == lab[pts][0]).all() else -1
        assert label[k] == common, (f, l, k)
        assert bvh.far[k] == (l if k == f else f), (f, l, k)  # the label pass's range
        g = split[k]
        assert f <= g < l
        for a, b in ((f, g), (g + 1, l)):
            if a == b:
                reached[a] += 1
            else:  # a left child is stored at its right end, a right child at its left
                todo.append((a, b, b if b == g else a))
    assert (reached == 1).all()
    return L - 1


@pytest.mark.parametrize("n", [2, 3, 4, 5, 8, 9, 33, 700, 701])
def test_tree_over_leaves_of_one_or_two_points(n, monkeypatch):
    """Every node of two points of the points' radix tree is one leaf: the
    leaf table, the boxes and, after every label walk, the labels against
    brute force."""
    rng = np.random.default_rng(n)
    x = rng.random((n, 3)).astype(np.float32)
    if n > 8:  # duplicates and a crowded cell
        x[n // 2:n // 2 + 4] = x[0]
        x[-6:] = 0.25 + 1e-9 * rng.standard_normal((6, 3))
    kept = {}
    real = K._leaves.__func__

    def keep(cls, dt, d, codes, fine, n):  # the points' deltas, which the build drops
        if n >= 2:
            delta = np.empty(n - 1, np.uint8)
            has_fine = fine is not None
            cls._launch(dt, d, "k_delta", n - 1, (codes, fine if has_fine else codes,
                                                  np.int32(has_fine), np.int32(n), delta))
            kept["delta"] = delta
        return real(cls, dt, d, codes, fine, n)

    monkeypatch.setattr(K, "_leaves", classmethod(keep))
    bvh = engine.construct_bvh(K, x, engine.Timers(enabled=False))
    delta = kept.get("delta", np.zeros(0, np.uint8))
    s = K.init_boruvka(bvh, None, False)
    checked, edges = 0, 0
    while edges < n - 1:
        K.reduce_labels(bvh, s)
        checked += _check_tree(bvh, delta)
        K.compute_upper_bounds(bvh, s)
        K.find_component_outgoing_edges(bvh, s)
        K.reduce_component_minima(bvh, s)
        edges = K.merge_components(bvh, s)
    assert checked > 0 or n <= 2


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("cloud", ["uniform", "lattice"])
def test_first_search_second_nearest_exact(cloud, dtype):
    """The first Euclidean search's runner-up (``s.second``): each certified
    one is the point's second-nearest other point under (weight, input row),
    and the second iteration's bounds take it (then drop the array)."""
    rng = np.random.default_rng(11)
    if cloud == "lattice":  # ties everywhere (no copies: distinct sites)
        x = np.unique(rng.integers(0, 12, size=(600, 3)), axis=0).astype(dtype)
        x = x[rng.permutation(len(x))]
    else:
        x = rng.random((700, 3)).astype(dtype)
    bvh = engine.construct_bvh(K, x, engine.Timers(enabled=False))
    s = K.init_boruvka(bvh, None, False)
    K.reduce_labels(bvh, s)
    K.compute_upper_bounds(bvh, s)
    K.find_component_outgoing_edges(bvh, s)
    second = np.asarray(s.second).copy()
    _, pts = _labels_and_points(bvh)
    orig = np.asarray(bvh.orig).astype(np.int64)
    dt = bvh.dtype
    w = np.zeros((bvh.n, bvh.n), dt)
    for a in range(bvh.d):
        t = (pts[:, None, a] - pts[None, :, a]).astype(dt)
        w = (w + t * t).astype(dt)
    np.fill_diagonal(w, np.inf)
    # (weight, input row) order: rank by weight, then by the other's row
    order = np.lexsort((np.broadcast_to(orig, w.shape), w), axis=1)
    assert (second >= -1).all()
    assert (second >= 0).mean() > 0.9, (second >= 0).mean()
    for i in np.flatnonzero(second >= 0):
        assert second[i] == order[i, 1], i
    K.reduce_component_minima(bvh, s)
    K.merge_components(bvh, s)
    K.reduce_labels(bvh, s)
    K.compute_upper_bounds(bvh, s)
    assert s.second is None
    lab, _ = _labels_and_points(bvh)
    words = np.asarray(s.cl)
    took = [i for i in np.flatnonzero(second >= 0) if lab[second[i]] != lab[i]]
    assert took and all(~int(words[i]) == second[i] for i in took)
