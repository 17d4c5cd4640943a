"""Friends-of-friends cuts of a tree (``emst_dask.products.cuts``).

Oracles: the connected components of the radius graph (scipy's k-d tree
``query_pairs``, pairs at distance <= b, and ``connected_components``), a
brute-force distance matrix, exact grouping of duplicate rows; the
whole-array (device) algorithm run with numpy against the numba one.
"""
from __future__ import annotations

import numpy as np
import pytest

from emst_dask import InputError, datasets, emst
from emst_dask.products.cuts import fof_labels, fof_labels_xp

spatial = pytest.importorskip("scipy.spatial")
csgraph = pytest.importorskip("scipy.sparse.csgraph")
sparse = pytest.importorskip("scipy.sparse")
distance = pytest.importorskip("scipy.spatial.distance")


def by_smallest_row(labels):
    """Groups renumbered by their smallest row (fof_labels' numbering)."""
    _, first, inv = np.unique(labels, return_index=True, return_inverse=True)
    return np.unique(first[inv.reshape(-1)], return_inverse=True)[1].reshape(-1)


def components(n, i, j):
    graph = sparse.coo_matrix((np.ones(len(i)), (i, j)), shape=(n, n))
    return by_smallest_row(csgraph.connected_components(graph, directed=False)[1])


def radius_graph_labels(points, b):
    pairs = spatial.cKDTree(points).query_pairs(b, output_type="ndarray")
    return components(len(points), pairs[:, 0], pairs[:, 1])


def brute_force_labels(points, b):
    d = distance.squareform(distance.pdist(points))
    i, j = np.nonzero(d <= b)
    return components(len(points), i, j)


def tree_of(points):
    tree = emst(points, backend="cpu")
    return tree.source, tree.target, tree.weight, len(points)


def lengths_between_distances(points, quantiles):
    """Linking lengths halfway between two consecutive distinct pair
    distances, away from every distance."""
    d = np.unique(distance.pdist(points))
    k = np.clip((np.asarray(quantiles) * len(d)).astype(int), 0, len(d) - 2)
    return (d[k] + d[k + 1]) / 2


def clouds():
    rng = np.random.default_rng(0)
    return {
        "uniform2": rng.random((1500, 2)),
        "uniform3": rng.random((1500, 3)),
        "normal5": rng.standard_normal((1000, 5)),
        "halos": datasets.halos(2000, dim=3, seed=2).astype(np.float64),
    }


QUANTILES = [1e-5, 1e-4, 3e-4, 1e-3, 3e-3, 0.01, 0.05]


@pytest.mark.parametrize("name", ["uniform2", "uniform3", "normal5", "halos"])
def test_against_radius_graph(name):
    points = clouds()[name]
    tree = tree_of(points)
    bs = lengths_between_distances(points, QUANTILES)
    many = fof_labels(*tree, bs)
    assert many.shape == (len(bs), len(points)) and many.dtype == np.int64
    for b, row in zip(bs, many):
        want = radius_graph_labels(points, b)
        np.testing.assert_array_equal(row, want)  # numbered by smallest row: exactly equal
        one = fof_labels(*tree, float(b))
        assert one.shape == (len(points),) and one.dtype == np.int64
        np.testing.assert_array_equal(one, row)  # K cuts at once == K single cuts
    assert 1 < many[0].max() + 1 and many[-1].max() < many[0].max()


def integer_cloud(seed=0):
    rng = np.random.default_rng(seed)
    pts = rng.integers(0, 7, (250, 3)).astype(np.float64)  # ties and duplicates
    return pts


def test_length_equal_to_an_edge_weight():
    """b equal to an edge's weight joins it (<= b); integer coordinates make
    the tree's weights and the distance matrix bit-identical."""
    points = integer_cloud()
    tree = tree_of(points)
    weights = np.unique(tree[2])
    assert weights[0] == 0  # duplicates
    got = fof_labels(*tree, weights)
    for b, row in zip(weights, got):
        np.testing.assert_array_equal(row, brute_force_labels(points, b))
        np.testing.assert_array_equal(row, radius_graph_labels(points, b))


def test_float32_weights_are_compared_exactly():
    s, t = np.array([0]), np.array([1])
    w = np.array([0.1], np.float32)  # 0.100000001490116...
    np.testing.assert_array_equal(fof_labels(s, t, w, 2, 0.1), [0, 1])
    np.testing.assert_array_equal(fof_labels(s, t, w, 2, float(w[0])), [0, 0])
    np.testing.assert_array_equal(fof_labels(s, t, w, 2, np.float32(0.1)), [0, 0])


def test_extremes():
    points = clouds()["uniform3"]
    tree = tree_of(points)
    n = len(points)
    low, high = tree[2].min(), tree[2].max()
    got = fof_labels(*tree, [low / 2, 0.0, high, np.inf, high * 2])
    np.testing.assert_array_equal(got[0], np.arange(n))
    np.testing.assert_array_equal(got[1], np.arange(n))
    assert not got[2:].any()
    assert fof_labels(*tree, []).shape == (0, n)


def test_duplicates_join_at_zero():
    rng = np.random.default_rng(4)
    base = rng.random((300, 2))
    points = base[rng.integers(0, len(base), 700)]
    got = fof_labels(*tree_of(points), 0)
    _, inverse = np.unique(points, axis=0, return_inverse=True)
    np.testing.assert_array_equal(got, by_smallest_row(inverse))


@pytest.mark.parametrize("name", ["uniform2", "halos"])
def test_row_permutation_invariance(name):
    points = clouds()[name]
    n = len(points)
    bs = lengths_between_distances(points, QUANTILES)
    got = fof_labels(*tree_of(points), bs)
    perm = np.random.default_rng(5).permutation(n)
    permuted = fof_labels(*tree_of(points[perm]), bs)
    for row, prow in zip(got, permuted):
        back = np.empty(n, np.int64)
        back[perm] = prow
        np.testing.assert_array_equal(row, by_smallest_row(back))


def test_lattice_permutation_invariance_at_tied_lengths():
    points = integer_cloud(seed=1)
    n = len(points)
    tree = tree_of(points)
    bs = np.unique(tree[2])
    got = fof_labels(*tree, bs)
    perm = np.random.default_rng(6).permutation(n)
    permuted = fof_labels(*tree_of(points[perm]), bs)
    for row, prow in zip(got, permuted):
        back = np.empty(n, np.int64)
        back[perm] = prow
        np.testing.assert_array_equal(row, by_smallest_row(back))


# --- the whole-array (device) algorithm, run with numpy ----------------------------------

@pytest.mark.parametrize("name", ["uniform3", "halos"])
def test_xp_algorithm_equals_numba(name):
    points = clouds()[name]
    tree = tree_of(points)
    w = np.unique(tree[2])
    bs = [w[len(w) // 2], 0.0, w[-1], w[3], np.inf, w[len(w) // 2], w[len(w) // 10] * 1.5]
    np.testing.assert_array_equal(fof_labels_xp(np, *tree, bs), fof_labels(*tree, bs))
    np.testing.assert_array_equal(fof_labels_xp(np, *tree, bs[0]), fof_labels(*tree, bs[0]))


@pytest.mark.parametrize("seed", range(4))
def test_xp_algorithm_on_general_graphs(seed):
    """Edge lists with cycles, self loops, repeated edges, float32 weights."""
    rng = np.random.default_rng(seed)
    n, m = 400, 600
    s, t = rng.integers(0, n, m), rng.integers(0, n, m)
    w = rng.integers(0, 50, m).astype(np.float32) / 8
    bs = np.r_[np.unique(w)[::3], 2.3, 0.0]
    got = fof_labels(s, t, w, n, bs)
    np.testing.assert_array_equal(fof_labels_xp(np, s, t, w, n, bs), got)
    for b, row in zip(bs, got):
        keep = w <= b
        np.testing.assert_array_equal(row, components(n, s[keep], t[keep]))


def test_xp_algorithm_on_a_long_path():
    """A path through the rows in random order: long hook chains to jump."""
    n = 3000
    rng = np.random.default_rng(8)
    p = rng.permutation(n)
    s, t, w = p[:-1], p[1:], rng.random(n - 1)
    bs = [0.0, 0.5, 0.9, 1.0]
    got = fof_labels(s, t, w, n, bs)
    np.testing.assert_array_equal(fof_labels_xp(np, s, t, w, n, bs), got)
    assert not got[-1].any()
    for b, row in zip(bs, got):
        keep = w <= b
        np.testing.assert_array_equal(row, components(n, s[keep], t[keep]))


def test_tiny_inputs():
    empty = np.zeros(0, np.int64)
    assert fof_labels(empty, empty, np.zeros(0), 0, 1.0).shape == (0,)
    np.testing.assert_array_equal(fof_labels(empty, empty, np.zeros(0), 3, [1.0, 2.0]),
                                  np.tile(np.arange(3), (2, 1)))
    np.testing.assert_array_equal(fof_labels_xp(np, empty, empty, np.zeros(0), 3, 1.0),
                                  np.arange(3))


# --- bad input ----------------------------------------------------------------------------

@pytest.mark.parametrize("bad", [-1.0, np.nan, "0.5", None, True, 1j, [0.1, -0.2],
                                 [0.1, np.nan], [[0.1]], ["a"], object()])
def test_bad_lengths(bad):
    s, t, w = np.array([0]), np.array([1]), np.array([1.0])
    with pytest.raises(InputError):
        fof_labels(s, t, w, 2, bad)
    with pytest.raises(InputError):
        fof_labels_xp(np, s, t, w, 2, bad)
    # refused before the edges are looked at
    with pytest.raises(InputError, match="linking length"):
        fof_labels(s, t, np.array([np.nan]), 1, bad)


def test_bad_edges():
    with pytest.raises(InputError):
        fof_labels(np.array([0]), np.array([2]), np.array([1.0]), 2, 1.0)
    with pytest.raises(InputError):
        fof_labels(np.array([0]), np.array([1]), np.array([-1.0]), 2, 1.0)
    with pytest.raises(InputError):
        fof_labels(np.array([0]), np.array([1]), np.array([1.0]), -2, 1.0)


@pytest.mark.gpu
def test_cupy_input_matches_numpy():
    cupy = pytest.importorskip("cupy")
    points = clouds()["halos"]
    s, t, w, n = tree_of(points)
    bs = lengths_between_distances(points, QUANTILES)
    got = fof_labels(cupy.asarray(s), cupy.asarray(t), cupy.asarray(w), n, bs)
    assert isinstance(got, cupy.ndarray) and got.dtype == cupy.int64
    np.testing.assert_array_equal(got.get(), fof_labels(s, t, w, n, bs))
    one = fof_labels(cupy.asarray(s), cupy.asarray(t), cupy.asarray(w), n, bs[2])
    np.testing.assert_array_equal(one.get(), fof_labels(s, t, w, n, bs[2]))
    w32 = w.astype(np.float32)
    np.testing.assert_array_equal(
        fof_labels(cupy.asarray(s), cupy.asarray(t), cupy.asarray(w32), n, bs).get(),
        fof_labels(s, t, w32, n, bs))


@pytest.mark.gpu
def test_cupy_union_find_on_a_lattice_with_duplicates():
    # many threads hook into the same few roots: zero-length edges, ties
    cupy = pytest.importorskip("cupy")
    rng = np.random.default_rng(12)
    pts = rng.integers(0, 50, (200_000, 3)).astype(np.float64)
    tree = emst(pts, backend="cpu")
    s, t, w, n = tree.source, tree.target, tree.weight, len(pts)
    bs = [0.0, 1.0, 1.0, 0.5, 2 ** 0.5, np.inf]
    got = fof_labels(cupy.asarray(s), cupy.asarray(t), cupy.asarray(w), n, bs)
    np.testing.assert_array_equal(got.get(), fof_labels(s, t, w, n, bs))


@pytest.mark.gpu
def test_cupy_more_lengths_than_one_batch_of_levels():
    # more lengths than a node's level byte holds (batches of 254), equal
    # lengths, lengths at every tied weight, and 0 and inf
    cupy = pytest.importorskip("cupy")
    from emst_dask.kernels.cuda.union_find import MAX_LEVELS

    rng = np.random.default_rng(5)
    pts = rng.integers(0, 40, (20_000, 2)).astype(np.float64)
    tree = emst(pts, backend="cpu")
    s, t, w, n = tree.source, tree.target, tree.weight, len(pts)
    distinct = np.unique(w)
    bs = np.concatenate([[0.0, np.inf], distinct, distinct[::7],
                         np.linspace(0, distinct[-1] * 1.1, 2 * MAX_LEVELS)])
    bs = rng.permutation(bs)
    assert bs.shape[0] > MAX_LEVELS
    order = rng.permutation(s.shape[0])
    got = fof_labels(cupy.asarray(s[order]), cupy.asarray(t[order]),
                     cupy.asarray(w[order]), n, bs)
    np.testing.assert_array_equal(got.get(), fof_labels(s, t, w, n, bs))
