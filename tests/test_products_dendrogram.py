"""The parallel (whole-array) dendrogram of ``emst_dask.products.dendrogram``,
the device formulation of single linkage, run here with numpy.

Oracles: Kruskal's union-find on the same strict order (``single_linkage``
on the host), and scipy's own single linkage of the points.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emst_dask import InputError, emst
from emst_dask.products.linkage import device_linkage, single_linkage
from emst_dask.products.order import check_edges

hierarchy = pytest.importorskip("scipy.cluster.hierarchy")


def parallel_linkage(s, t, w, n):
    _, s, t, w = check_edges(s, t, w, n)
    return device_linkage(np, s, t, w, n)


def random_tree(rng, n, shape):
    """(source, target) of a tree of n points: random recursive, a path, a
    star, a caterpillar or a balanced binary tree, rows relabelled at random."""
    child = np.arange(1, n)
    if shape == "recursive":
        parent = np.array([rng.integers(0, i) for i in range(1, n)], np.int64)
    elif shape == "path":
        parent = child - 1
    elif shape == "star":
        parent = np.zeros(n - 1, np.int64)
    elif shape == "caterpillar":
        parent = np.maximum(0, child - 1 - (rng.random(n - 1) < 0.5))
    else:  # binary
        parent = (child - 1) // 2
    label = rng.permutation(n)
    s, t = label[parent], label[child]
    flip = rng.random(n - 1) < 0.5
    return np.where(flip, t, s), np.where(flip, s, t)


@pytest.mark.parametrize("shape", ["recursive", "path", "star", "caterpillar", "binary"])
@pytest.mark.parametrize("levels", [3, 1000], ids=["ties", "distinct"])
def test_equals_union_find_on_random_trees(shape, levels):
    rng = np.random.default_rng(levels)
    for n in list(range(1, 40)) + [200, 1000]:
        s, t = random_tree(rng, n, shape)
        w = rng.integers(0, levels, n - 1).astype(np.float64)
        Z = parallel_linkage(s, t, w, n)
        np.testing.assert_array_equal(Z, single_linkage(s, t, w, n))
        if n > 1:
            assert hierarchy.is_valid_linkage(Z)


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 120), st.integers(1, 6), st.integers(0, 2**31 - 1))
def test_property_equals_union_find(n, levels, seed):
    rng = np.random.default_rng(seed)
    s, t = random_tree(rng, n, ["recursive", "path", "caterpillar"][seed % 3])
    w = rng.integers(0, levels, n - 1).astype(np.float32)
    np.testing.assert_array_equal(parallel_linkage(s, t, w, n), single_linkage(s, t, w, n))


@pytest.mark.parametrize("quantum", [None, 0.25], ids=["distinct", "lattice"])
def test_euclidean_tree_against_scipy(quantum):
    rng = np.random.default_rng(3)
    pts = rng.random((3000, 3))
    if quantum:
        pts = np.round(pts / quantum) * quantum  # duplicates and tied distances
    tree = emst(pts, backend="cpu")
    Z = parallel_linkage(tree.source, tree.target, tree.weight, len(pts))
    np.testing.assert_array_equal(Z, tree.linkage())
    ref = hierarchy.linkage(pts, "single")
    np.testing.assert_allclose(Z[:, 2], ref[:, 2], rtol=1e-12, atol=0)
    for h in np.unique(ref[:, 2])[:: max(1, len(np.unique(ref[:, 2])) // 20)]:
        a = hierarchy.fcluster(Z, h, "distance")
        b = hierarchy.fcluster(ref, h, "distance")
        assert len(set(zip(a, b))) == len(set(a)) == len(set(b))


def test_edges_that_do_not_span_are_refused():
    # four edges among five points with a cycle: two components
    s, t = np.array([0, 1, 2, 3]), np.array([1, 2, 0, 4])
    with pytest.raises(InputError, match="do not connect"):
        parallel_linkage(s, t, np.arange(4.0), 5)
    with pytest.raises(InputError, match="do not connect"):
        parallel_linkage(np.array([0, 1, 1]), np.array([1, 0, 2]), np.ones(3), 4)


@pytest.mark.parametrize("shape", ["recursive", "path", "binary"])
def test_index_types_agree(shape):
    # int32 indices (below 2**31 items) and the int64 fallback: one answer
    from emst_dask.products.chains import index_dtype
    from emst_dask.products.dendrogram import dendrogram
    from emst_dask.products.order import sorted_edges

    assert index_dtype(10, 11) == np.int32 and index_dtype(2**30, 2**30 + 1) == np.int64
    rng = np.random.default_rng(7)
    for n in (2, 3, 17, 500):
        s, t = random_tree(rng, n, shape)
        w = rng.integers(0, 4, n - 1).astype(np.float64)
        _, s, t, w = check_edges(s, t, w, n)
        o = sorted_edges(np, s, t, w)
        c32, z32 = dendrogram(np, s[o], t[o], n)
        c64, z64 = dendrogram(np, s[o], t[o], n, index_type=np.int64)
        assert c32.dtype == z32.dtype == np.int32 and c64.dtype == z64.dtype == np.int64
        np.testing.assert_array_equal(c32, c64)
        np.testing.assert_array_equal(z32, z64)
        Z = single_linkage(s, t, w, n)
        np.testing.assert_array_equal(c64, Z[:, :2])
        np.testing.assert_array_equal(z64, Z[:, 3])
