"""Mutual-reachability MSTs (HDBSCAN*) against the brute-force oracle.

min_samples = k_pts counts the point itself: the core distance of x is the
distance to its k_pts-th nearest point, x itself being the first (at 0).
"""
from __future__ import annotations

import itertools

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from emst_dask import InputError, datasets, emst
from oracle import (squarable, check_spanning_tree, core_distances, distance_matrix, edge_set,
                    host, kruskal_tie_ordered, oracle, resolution)

FLOATS = [np.float32, np.float64]


# float32 in the dimensions the suite compiles (a numba compilation each)
@pytest.mark.parametrize("d, dtype", [(2, np.float32), (3, np.float32), (8, np.float32),
                                      (2, np.float64), (3, np.float64), (5, np.float64)],
                         ids=["2-f32", "3-f32", "8-f32", "2-f64", "3-f64", "5-f64"])
@pytest.mark.parametrize("k", [2, 5, 16])
def test_random_clouds(backend, k, d, dtype):
    rng = np.random.default_rng(10 * k + d)
    pts = rng.random((700, d)).astype(dtype)
    tree = emst(pts, min_samples=k, backend=backend)
    assert tree.min_samples == k
    check_spanning_tree(tree, pts, k)


@pytest.mark.parametrize("k", [2, 5, 16])
def test_clustered_cloud(backend, k):
    pts = datasets.halos(1500, dim=3, seed=3)
    tree = emst(pts, min_samples=k, backend=backend)
    check_spanning_tree(tree, pts, k)


@pytest.mark.parametrize("k", [2, 5, 16])
def test_core_distances_against_kd_tree(backend, k):
    """A second, independent reference for the core distances: scipy's k-d tree."""
    spatial = pytest.importorskip("scipy.spatial")
    rng = np.random.default_rng(k)
    pts = rng.standard_normal((1000, 3))
    tree = emst(pts, min_samples=k, backend=backend)
    dist, _ = spatial.cKDTree(pts).query(pts, k=k)  # includes the point itself
    want = dist[:, -1] if k > 1 else np.zeros(len(pts))
    np.testing.assert_allclose(host(tree.core_distances), want, rtol=1e-12)


def test_min_samples_two_is_nearest_neighbour(backend):
    rng = np.random.default_rng(1)
    pts = rng.random((500, 2))
    dist = distance_matrix(pts)
    np.fill_diagonal(dist, np.inf)
    tree = emst(pts, min_samples=2, backend=backend)
    np.testing.assert_allclose(host(tree.core_distances), dist.min(axis=1), rtol=1e-12)


def test_min_samples_one_is_euclidean(backend):
    rng = np.random.default_rng(2)
    pts = rng.random((600, 3))
    a = emst(pts, min_samples=1, backend=backend)
    b = emst(pts, backend=backend)
    assert a.core_distances is None
    assert edge_set(a.source, a.target) == edge_set(b.source, b.target)
    check_spanning_tree(a, pts, 1)


@pytest.mark.parametrize("dtype", FLOATS, ids=["f32", "f64"])
def test_min_samples_two_is_the_euclidean_tree(backend, dtype):
    """k = 2: a core distance is the nearest-neighbour distance, never more than
    any distance from that point, so every mutual-reachability distance is the
    Euclidean one and the tree is the Euclidean MST, weight for weight."""
    rng = np.random.default_rng(8)
    pts = rng.random((700, 3)).astype(dtype)
    a = emst(pts, backend=backend)
    b = emst(pts, min_samples=2, backend=backend)
    assert edge_set(a.source, a.target) == edge_set(b.source, b.target)
    np.testing.assert_array_equal(np.sort(host(a.weight)), np.sort(host(b.weight)))


@pytest.mark.parametrize("k", [2, 5, 16])
def test_weights_dominate_euclidean(backend, k):
    """MRD >= Euclidean pairwise, so the MRD MST is at least as heavy; every
    weight is at least both core distances."""
    rng = np.random.default_rng(3)
    pts = rng.random((800, 3))
    e = emst(pts, backend=backend)
    m = emst(pts, min_samples=k, backend=backend)
    assert m.total_weight >= e.total_weight
    core = host(m.core_distances)
    w = host(m.weight)
    src, dst = host(m.source), host(m.target)
    assert np.all(w >= core[src]) and np.all(w >= core[dst])


@pytest.mark.parametrize("n", [2, 3, 17])
def test_min_samples_equal_to_n(backend, n):
    rng = np.random.default_rng(n)
    pts = rng.random((n, 2))
    tree = emst(pts, min_samples=n, backend=backend)
    check_spanning_tree(tree, pts, n)
    np.testing.assert_allclose(host(tree.core_distances),
                               distance_matrix(pts).max(axis=1), rtol=1e-12)


@pytest.mark.parametrize("k", [2, 5, 16])
def test_duplicates(backend, k):
    """Points repeated at least k times have core distance 0."""
    rng = np.random.default_rng(4)
    pool = rng.random((30, 3))
    counts = rng.integers(1, 25, 30)
    pts = np.repeat(pool, counts, axis=0)
    pts = pts[rng.permutation(len(pts))]
    tree = emst(pts, min_samples=k, backend=backend)
    check_spanning_tree(tree, pts, k)
    idx = np.unique(pts, axis=0, return_inverse=True)[1].ravel()
    mult = np.bincount(idx)[idx]
    core = host(tree.core_distances)
    assert np.all(core[mult >= k] == 0)
    assert np.all(core[mult < k] > 0)


@pytest.mark.parametrize("dtype", FLOATS, ids=["f32", "f64"])
@pytest.mark.parametrize("k", [2, 5, 16])
def test_lattice_tie_order(backend, k, dtype):
    """On exact data the edge set is Kruskal's under (mrd, min(u,v), max(u,v))."""
    grid = np.array(list(itertools.product(range(9), range(9), range(5))))
    rng = np.random.default_rng(k)
    grid = grid[rng.permutation(len(grid))]
    pts = grid.astype(dtype)
    tree = emst(pts, min_samples=k, backend=backend)
    check_spanning_tree(tree, pts, k)
    diff = grid[:, None, :] - grid[None, :, :]
    d2 = (diff * diff).sum(axis=2)
    core2 = np.partition(d2, k - 1, axis=1)[:, k - 1]
    keys = np.maximum(d2, np.maximum(core2[:, None], core2[None, :]))
    assert edge_set(tree.source, tree.target) == kruskal_tie_ordered(keys)


@pytest.mark.parametrize("k", [2, 5])
def test_all_points_equal(backend, k):
    pts = np.ones((50, 3))
    tree = emst(pts, min_samples=k, backend=backend)
    check_spanning_tree(tree, pts, k)
    assert np.all(host(tree.core_distances) == 0)
    assert edge_set(tree.source, tree.target) == {(0, j) for j in range(1, 50)}


@pytest.mark.parametrize("k", [2, 5, 16])
def test_permutation_invariance(backend, k):
    rng = np.random.default_rng(5)
    pts = rng.random((900, 3), dtype=np.float32)
    perm = rng.permutation(len(pts))
    a = emst(pts, min_samples=k, backend=backend)
    b = emst(pts[perm], min_samples=k, backend=backend)
    np.testing.assert_array_equal(host(b.core_distances), host(a.core_distances)[perm])
    np.testing.assert_array_equal(np.sort(host(a.weight)), np.sort(host(b.weight)))


@pytest.mark.parametrize("k", [5, 16])
def test_deterministic(backend, k):
    rng = np.random.default_rng(6)
    pts = rng.integers(0, 6, (1000, 3)).astype(np.float64)  # many ties
    a = emst(pts, min_samples=k, backend=backend)
    b = emst(pts, min_samples=k, backend=backend)
    assert edge_set(a.source, a.target) == edge_set(b.source, b.target)
    np.testing.assert_array_equal(host(a.core_distances), host(b.core_distances))


@pytest.mark.parametrize("k", [2, 5, 16])
@pytest.mark.parametrize("scale,dtype", [(1e-15, np.float32), (1e15, np.float32),
                                         (1e-150, np.float64), (1e150, np.float64)])
def test_extreme_scales(backend, k, scale, dtype):
    rng = np.random.default_rng(7)
    pts = (rng.random((400, 3)) * scale).astype(dtype)
    tree = emst(pts, min_samples=k, backend=backend)
    check_spanning_tree(tree, pts, k)


@st.composite
def cloud_and_k(draw):
    n = draw(st.integers(1, 40))
    dtype = draw(st.sampled_from(FLOATS))
    # float32 where the rest of the suite compiles it (a numba compilation per
    # (dtype, d))
    d = draw(st.integers(1, 4) if dtype is np.float64 else st.sampled_from([2, 3]))
    if draw(st.booleans()):
        el = st.integers(-2, 2).map(float)  # ties and duplicates
    else:
        el = st.floats(-100, 100, width=32 if dtype is np.float32 else 64,
                       allow_nan=False, allow_infinity=False).filter(
            lambda x: x == 0 or abs(x) > 1e-30)
    pts = draw(hnp.arrays(dtype, (n, d), elements=el))
    k = draw(st.integers(1, n))
    return pts, k


@given(case=cloud_and_k())
def test_property_small_clouds(backend, case):
    pts, k = case
    verdict = squarable(pts)
    try:
        tree = emst(pts, min_samples=k, backend=backend)
    except InputError as exc:  # no exact computation exists: refused, saying why
        assert verdict is not True and "span magnitudes" in str(exc), (verdict, exc)
        return
    assert verdict is not False, "computed a cloud whose squared distances cannot all exist"
    exp = check_spanning_tree(tree, pts, k)
    if k > 1 and len(pts) > 1:
        np.testing.assert_allclose(
            host(tree.core_distances).astype(np.float64),
            core_distances(distance_matrix(pts), k),
            rtol=2e-6 if pts.dtype == np.float32 else 1e-12, atol=resolution(pts))
    assert exp is not None


def test_oracle_core_distance_definition():
    """The oracle's own convention: row i's k-th smallest entry, self at 0 first."""
    pts = np.array([[0.0], [1.0], [3.0], [7.0]])
    dist = distance_matrix(pts)
    np.testing.assert_array_equal(core_distances(dist, 1), [0, 0, 0, 0])
    np.testing.assert_array_equal(core_distances(dist, 2), [1, 1, 2, 4])
    np.testing.assert_array_equal(core_distances(dist, 3), [3, 2, 3, 6])
    res = oracle(pts, 2)
    # MRD: (0,1)=1, (1,2)=max(1,2,2)=2, (2,3)=max(2,4,4)=4
    assert res["total"] == 7.0
