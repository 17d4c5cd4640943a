"""The strict edge order and the single-linkage hierarchy of a tree
(``emst_dask.products.order``, ``emst_dask.products.linkage``).

Oracles: numpy's lexsort for the order; scipy's ``linkage(points,
"single")`` (its own MST of the distance matrix), its flat clusters and
cophenetic distances for the hierarchy; a Python union-find for the merge
order under ties.
"""
from __future__ import annotations

import numpy as np
import pytest

from emst_dask import InputError, datasets, emst
from emst_dask.products.linkage import single_linkage
from emst_dask.products.order import strict_order

from cupy_emu import StableNumpy

hierarchy = pytest.importorskip("scipy.cluster.hierarchy")


def canonical(labels):
    """Each point's label replaced by the rank of its group's smallest row:
    equal partitions give equal arrays."""
    _, first, inv = np.unique(labels, return_index=True, return_inverse=True)
    return np.unique(first[inv.reshape(-1)], return_inverse=True)[1].reshape(-1)


def tree_linkage(points):
    tree = emst(points, backend="cpu")
    return single_linkage(tree.source, tree.target, tree.weight, len(points)), tree


def cuts_between(heights):
    """Thresholds halfway between consecutive distinct heights (and beyond)."""
    h = np.unique(heights)
    return np.concatenate([[h[0] / 2], (h[:-1] + h[1:]) / 2, [h[-1] * 2 + 1]])


def lattice_with_duplicates(seed=0):
    rng = np.random.default_rng(seed)
    grid = np.stack(np.meshgrid(np.arange(6), np.arange(5), np.arange(3)), -1).reshape(-1, 3)
    pts = np.concatenate([grid, grid[rng.integers(0, len(grid), 25)]]).astype(np.float64)
    return pts[rng.permutation(len(pts))]


# --- the strict order -----------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_strict_order_against_lexsort(dtype):
    rng = np.random.default_rng(1)
    m = 5000
    s = rng.integers(0, 300, m)
    t = rng.integers(0, 300, m)
    w = rng.integers(0, 20, m).astype(dtype) / 4  # many ties
    dup = rng.integers(0, m, 300)  # the same edges again, endpoints swapped
    s, t, w = np.r_[s, t[dup]], np.r_[t, s[dup]], np.r_[w, w[dup]]
    order = strict_order(s, t, w)
    assert order.dtype == np.int64 and np.array_equal(np.sort(order), np.arange(len(s)))
    lo, hi = np.minimum(s, t), np.maximum(s, t)
    want = np.lexsort((hi, lo, w))
    for key in (w, lo, hi):
        np.testing.assert_array_equal(key[order], key[want])


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("case", ["random tree", "star", "lattice ties", "duplicates"])
def test_device_strict_order_branch_against_lexsort(case, dtype):
    """The device's one packed (weight, min) sort (float32; float64: one
    sort of the weight's bits) and its tie fix-up, run on the host, equal
    the three-key lexsort: ties in (weight, min) are the point (a star's
    centre is the smaller end of every edge)."""
    from emst_dask.engine.order import strict_edge_order

    rng = np.random.default_rng(7)
    m = 20_000
    child = np.arange(1, m + 1)
    if case == "star":
        parent = np.zeros(m, np.int64)
    else:
        parent = rng.integers(0, child)
    flip = rng.random(m) < 0.5
    s, t = np.where(flip, child, parent), np.where(flip, parent, child)
    w2 = (rng.integers(0, 4 if case != "random tree" else 1 << 20, m) ** 2).astype(dtype)
    if dtype == np.float64 and case == "random tree":  # beyond float32's mantissa too
        w2 = w2 * (1 + 2.0 ** -40 * rng.integers(0, 3, m))
    if case == "duplicates":
        dup = rng.integers(0, m, 2000)
        s, t, w2 = np.r_[s, t[dup]], np.r_[t, s[dup]], np.r_[w2, w2[dup]]
    shuffle = rng.permutation(len(s))  # rows in no particular order
    s, t, w2 = s[shuffle], t[shuffle], w2[shuffle]
    got = strict_edge_order(StableNumpy(), s, t, w2)
    want = np.lexsort([np.maximum(s, t), np.minimum(s, t), w2.astype(np.float64)])
    for key in (w2, np.minimum(s, t), np.maximum(s, t)):
        np.testing.assert_array_equal(key[got], key[want])
    assert np.array_equal(np.sort(got), np.arange(len(s)))


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_strict_order_unique_keys_is_lexsort(dtype):
    rng = np.random.default_rng(2)
    pairs = rng.choice(400 * 400, 3000, replace=False)
    s, t = pairs // 400, pairs % 400
    w = rng.integers(0, 10, len(s)).astype(dtype)
    w[:5] = -0.0  # a negative zero is zero
    want = np.lexsort((np.maximum(s, t), np.minimum(s, t), w))
    np.testing.assert_array_equal(strict_order(s, t, w), want)
    np.testing.assert_array_equal(strict_order(s.astype(np.int32), t, w), want)


def test_strict_order_empty_and_bad_input():
    assert strict_order(np.zeros(0, int), np.zeros(0, int), np.zeros(0)).shape == (0,)
    s, t = np.array([0, 1]), np.array([1, 2])
    for w in (np.array([1.0, np.nan]), np.array([1.0, -1.0]), np.array([1.0]),
              np.array(["a", "b"]), np.ones((2, 1))):
        with pytest.raises(InputError):
            strict_order(s, t, w)
    with pytest.raises(InputError):
        strict_order(np.array([0.0, 1.0]), t, np.ones(2))
    with pytest.raises(InputError):
        strict_order(np.array([-1, 1]), t, np.ones(2))


# --- against scipy on tie-free clouds ---------------------------------------------------

def check_against_scipy(points, rtol=1e-12):
    Z, _ = tree_linkage(points)
    want = hierarchy.linkage(points.astype(np.float64), "single")
    assert Z.shape == (len(points) - 1, 4) and Z.dtype == np.float64
    assert hierarchy.is_valid_linkage(Z)
    np.testing.assert_allclose(Z[:, 2], want[:, 2], rtol=rtol)
    for t in cuts_between(want[:, 2])[::max(1, len(points) // 40)]:
        np.testing.assert_array_equal(canonical(hierarchy.fcluster(Z, t, "distance")),
                                      canonical(hierarchy.fcluster(want, t, "distance")))
    np.testing.assert_allclose(hierarchy.cophenet(Z), hierarchy.cophenet(want), rtol=rtol)
    return Z, want


@pytest.mark.parametrize("d", [1, 2, 3, 5])
def test_random_cloud_against_scipy(d):
    rng = np.random.default_rng(d)
    Z, want = check_against_scipy(rng.random((800, d)))
    # tie-free: the hierarchy itself is unique, ids and sizes included
    np.testing.assert_array_equal(Z[:, [0, 1, 3]], want[:, [0, 1, 3]])


def test_clustered_cloud_against_scipy():
    check_against_scipy(datasets.halos(1200, dim=3, seed=4).astype(np.float64))


def test_float32_cloud_against_scipy():
    rng = np.random.default_rng(7)
    check_against_scipy(rng.random((600, 3)).astype(np.float32), rtol=1e-6)


# --- ties ---------------------------------------------------------------------------

def partitions_at_heights(Z, heights):
    return [canonical(hierarchy.fcluster(Z, h, "distance")) for h in heights]


@pytest.mark.parametrize("cloud", ["lattice", "all_equal", "two_values"])
def test_ties(cloud):
    if cloud == "lattice":
        pts = lattice_with_duplicates()
    elif cloud == "all_equal":
        pts = np.full((50, 2), 0.5)
    else:
        pts = np.repeat([[0.0, 0.0], [3.0, 4.0]], [20, 30], axis=0)
    Z, tree = tree_linkage(pts)
    n = len(pts)
    assert hierarchy.is_valid_linkage(Z)
    assert np.all(np.diff(Z[:, 2]) >= 0)
    assert np.array_equal(Z, single_linkage(tree.source, tree.target, tree.weight, n))
    # partitions and cophenetic distances are unique even under ties: scipy's
    want = hierarchy.linkage(pts, "single")
    heights = np.unique(want[:, 2])
    for a, b in zip(partitions_at_heights(Z, heights), partitions_at_heights(want, heights)):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(hierarchy.cophenet(Z), hierarchy.cophenet(want))
    # a row permutation of the input: the same partitions, mapped back
    perm = np.random.default_rng(3).permutation(n)
    Zp, _ = tree_linkage(pts[perm])
    for a, b in zip(partitions_at_heights(Z, heights), partitions_at_heights(Zp, heights)):
        back = np.empty(n, np.int64)
        back[perm] = b
        np.testing.assert_array_equal(a, canonical(back))


def test_merges_follow_the_strict_edge_order():
    """Row k merges the clusters holding the endpoints of the k-th edge in the
    order (weight, min row, max row); checked with a plain Python union-find."""
    pts = lattice_with_duplicates(seed=5)
    Z, tree = tree_linkage(pts)
    n = len(pts)
    s, t, w = tree.source, tree.target, tree.weight
    order = np.lexsort((np.maximum(s, t), np.minimum(s, t), w))
    cluster_of = list(range(n))  # point -> current cluster id
    members = {i: [i] for i in range(n)}
    for k, e in enumerate(order):
        a, b = sorted((cluster_of[s[e]], cluster_of[t[e]]))
        assert (Z[k, 0], Z[k, 1], Z[k, 2]) == (a, b, w[e])
        members[n + k] = members.pop(a) + members.pop(b)
        assert Z[k, 3] == len(members[n + k])
        for p in members[n + k]:
            cluster_of[p] = n + k


# --- edge cases and bad input ------------------------------------------------------------

def test_small_n():
    empty = np.zeros(0, np.int64)
    for n in (0, 1):
        Z = single_linkage(empty, empty, np.zeros(0), n)
        assert Z.shape == (0, 4) and Z.dtype == np.float64
    Z = single_linkage(np.array([1]), np.array([0]), np.array([2.5]), 2)
    np.testing.assert_array_equal(Z, [[0, 1, 2.5, 2]])


def test_edges_beyond_a_tree_are_skipped():
    """A connected graph (cycles, a self loop) gives its MST's hierarchy."""
    s = np.array([0, 1, 2, 0, 3, 2])
    t = np.array([1, 2, 0, 0, 2, 3])
    w = np.array([1.0, 2.0, 1.5, 0.0, 3.0, 4.0])
    Z = single_linkage(s, t, w, 4)
    np.testing.assert_array_equal(Z, [[0, 1, 1.0, 2], [2, 4, 1.5, 3], [3, 5, 3.0, 4]])


def test_bad_trees():
    with pytest.raises(InputError, match="at least 3 edges"):
        single_linkage(np.array([0, 1]), np.array([1, 2]), np.ones(2), 4)
    with pytest.raises(InputError, match="do not connect"):  # a cycle, point 3 left out
        single_linkage(np.array([0, 1, 2]), np.array([1, 2, 0]), np.ones(3), 4)
    with pytest.raises(InputError, match=r"\[0, 3\)"):
        single_linkage(np.array([0, 1]), np.array([1, 3]), np.ones(2), 3)
    for n in (-1, 2.0, "3", None, True):
        with pytest.raises(InputError):
            single_linkage(np.array([0]), np.array([1]), np.ones(1), n)


@pytest.mark.gpu
@pytest.mark.parametrize("seed", [9, 10])
def test_cupy_input_is_computed_on_the_device(seed):
    cupy = pytest.importorskip("cupy")
    pts = lattice_with_duplicates(seed=seed)
    Z, tree = tree_linkage(pts)
    Zd = single_linkage(cupy.asarray(tree.source), cupy.asarray(tree.target),
                        cupy.asarray(tree.weight), len(pts))
    assert isinstance(Zd, cupy.ndarray)
    np.testing.assert_array_equal(Zd.get(), Z)
    gpu_tree = emst(cupy.asarray(pts), backend="cuda")
    np.testing.assert_array_equal(gpu_tree.linkage().get(), Z)


def kruskal_in_listed_order(tree):
    """The host union-find merging the tree's edges in the order listed."""
    from emst_dask.arrays import to_host
    from emst_dask.products._uf import linkage_merges

    s, t, w = to_host(tree.source), to_host(tree.target), to_host(tree.weight)
    Z, merges = linkage_merges(s, t, w, np.arange(len(s)), tree.n_points)
    assert merges == tree.n_points - 1
    return Z


def same_hierarchy(Z, Z_ref):
    """Equal heights and equal flat clusters at every height (scipy)."""
    np.testing.assert_array_equal(Z[:, 2], Z_ref[:, 2])
    for h in cuts_between(Z_ref[:, 2]):
        a = hierarchy.fcluster(Z, h, "distance")
        b = hierarchy.fcluster(Z_ref, h, "distance")
        np.testing.assert_array_equal(canonical(a), canonical(b))


@pytest.mark.gpu
@pytest.mark.parametrize("cloud", ["lattice", "halos32", "sqrt_ties", "mrd"])
def test_cupy_linkage_from_recorded_picks(cloud):
    # a tree that recorded Borůvka's picks gives Kruskal's matrix in its own
    # edge order (the engine's), the hierarchy of the sorted weights' matrix
    cupy = pytest.importorskip("cupy")
    k = 1
    if cloud == "lattice":
        pts = lattice_with_duplicates(seed=4)
    elif cloud == "halos32":
        pts = datasets.halos(5_000, 3, 1).astype(np.float32)
    elif cloud == "mrd":
        pts, k = datasets.halos(20_000, 3, 2), 5
    else:  # rows 2-3 come first in the engine's order, 0-1 in the weights'
        dy = np.float32(2.0**-11.5)
        pts = np.array([[10, 0], [11, dy], [0, 0], [1, 0], [5, 7]], np.float32)
    tree = emst(cupy.asarray(pts), min_samples=k, backend="cuda", hierarchy=True)
    assert tree.hierarchy is not None
    got = tree.linkage()
    assert isinstance(got, cupy.ndarray)
    got = got.get()
    assert hierarchy.is_valid_linkage(got)
    np.testing.assert_array_equal(got, kruskal_in_listed_order(tree))
    sorted_matrix = single_linkage(tree.source.get(), tree.target.get(), tree.weight.get(),
                                   len(pts))
    same_hierarchy(got, sorted_matrix)
    if k == 1:
        np.testing.assert_allclose(got[:, 2], hierarchy.linkage(pts, "single")[:, 2],
                                   rtol=1e-6 if pts.dtype == np.float32 else 1e-12)
    if cloud == "sqrt_ties":
        assert got[0, :2].tolist() == [2, 3] and sorted_matrix[0, :2].tolist() == [0, 1]
