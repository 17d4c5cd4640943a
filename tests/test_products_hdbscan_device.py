"""HDBSCAN* where the tree is (``emst_dask.products.hdbscan.device``): the
whole-array formulation, run here with numpy, against the host's
``extract`` (itself tested against scikit-learn, hdbscan and a level-set
oracle); on a GPU, CuPy against the host.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emst_dask import HDBSCAN, InputError, emst
from emst_dask.products.hdbscan import extract
from emst_dask.products.hdbscan.device import extract_xp
from emst_dask.products.order import check_edges


def clouds(seed):
    rng = np.random.default_rng(seed)
    blobs = rng.normal(size=(1500, 2)) * 0.6 + rng.integers(0, 4, (1500, 1)) * 4.0
    lattice = rng.integers(0, 14, (1200, 2)).astype(np.float64)  # ties, duplicates
    uniform = rng.random((900, 3))
    dups = np.repeat(rng.random((60, 2)), rng.integers(1, 30, 60), axis=0)
    return {"blobs": blobs, "lattice": lattice, "uniform": uniform, "duplicates": dups}


def same(a, b):
    np.testing.assert_array_equal(a.labels, b.labels)
    np.testing.assert_array_equal(a.probabilities, b.probabilities)
    np.testing.assert_array_equal(a.outlier_scores, b.outlier_scores)
    np.testing.assert_array_equal(a.selected, b.selected)
    np.testing.assert_array_equal(a.stability, b.stability)
    np.testing.assert_array_equal(a.persistence, b.persistence)
    key = ["child", "parent"]
    np.testing.assert_array_equal(np.sort(np.asarray(a.condensed_tree), order=key),
                                  np.sort(np.asarray(b.condensed_tree), order=key))


def both(points, k, **params):
    tree = emst(points, min_samples=k, backend="cpu")
    n = len(points)
    host = extract(tree.source, tree.target, tree.weight, n, **params)
    _, s, t, w = check_edges(tree.source, tree.target, tree.weight, n)
    p = dict(min_cluster_size=5, cluster_selection_method="eom", allow_single_cluster=False,
             cluster_selection_epsilon=0.0, max_cluster_size=None) | params
    whole = extract_xp(np, s, t, w, n, p["min_cluster_size"], p["cluster_selection_method"],
                       p["allow_single_cluster"], p["cluster_selection_epsilon"],
                       p["max_cluster_size"])
    return host, whole


@pytest.mark.parametrize("name", ["blobs", "lattice", "uniform", "duplicates"])
@pytest.mark.parametrize("params", [
    dict(min_cluster_size=10),
    dict(min_cluster_size=25, cluster_selection_method="leaf"),
    dict(min_cluster_size=8, allow_single_cluster=True),
    dict(min_cluster_size=8, cluster_selection_epsilon=0.7),
    dict(min_cluster_size=5, max_cluster_size=200),
    dict(min_cluster_size=2, cluster_selection_method="leaf", cluster_selection_epsilon=1.0,
         allow_single_cluster=True),
], ids=["eom", "leaf", "single", "epsilon", "max-size", "leaf-eps-single"])
@pytest.mark.parametrize("k", [1, 5])
def test_whole_array_equals_host(name, params, k):
    host, whole = both(clouds(0)[name], k, **params)
    same(host, whole)


@pytest.mark.parametrize("name", ["lattice", "duplicates"])
def test_int64_indices_equal_the_host(name, monkeypatch):
    # above 2**31 dendrogram nodes every index is int64: the same clusters
    import emst_dask.products.dendrogram as dendrogram_module

    monkeypatch.setattr(dendrogram_module, "index_dtype", lambda m, n: np.int64)
    host, whole = both(clouds(3)[name], 3, min_cluster_size=6)
    same(host, whole)


def test_tiny_and_degenerate_clouds():
    rng = np.random.default_rng(4)
    for pts in (np.zeros((2, 2)), np.zeros((40, 3)), rng.random((3, 2)), rng.random((7, 1)),
                np.r_[np.zeros((20, 2)), np.ones((20, 2))]):
        for mcs in (2, 5, 50):
            for allow in (False, True):
                host, whole = both(pts, 1, min_cluster_size=mcs, allow_single_cluster=allow)
                same(host, whole)


@settings(max_examples=40, deadline=None)
@given(st.integers(3, 400), st.integers(2, 30), st.integers(1, 6), st.booleans(),
       st.integers(0, 2**31 - 1))
def test_property_row_order_and_host(n, mcs, k, leaf, seed):
    rng = np.random.default_rng(seed)
    pts = rng.integers(0, 9, (n, 2)).astype(np.float64)  # ties everywhere
    k = min(k, n)
    method = "leaf" if leaf else "eom"
    host, whole = both(pts, k, min_cluster_size=mcs, cluster_selection_method=method)
    same(host, whole)
    perm = rng.permutation(n)
    _, shuffled = both(pts[perm], k, min_cluster_size=mcs, cluster_selection_method=method)
    got = shuffled.labels[np.argsort(perm)]
    # the same partition (numbered by the cluster tree of the permuted rows)
    pairs = set(zip(whole.labels.tolist(), got.tolist()))
    assert len(pairs) == len(set(whole.labels.tolist())) == len(set(got.tolist()))
    assert ((whole.labels == -1) == (got == -1)).all()


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["blobs", "lattice", "duplicates"])
@pytest.mark.parametrize("method", ["eom", "leaf"])
def test_cupy_equals_host(name, method):
    cupy = pytest.importorskip("cupy")
    pts = clouds(1)[name]
    tree = emst(pts, min_samples=4, backend="cpu")
    n = len(pts)
    host = extract(tree.source, tree.target, tree.weight, n, 10, method)
    dev = extract(cupy.asarray(tree.source), cupy.asarray(tree.target),
                  cupy.asarray(tree.weight), n, 10, method)
    assert isinstance(dev.labels, cupy.ndarray)
    dev.labels, dev.probabilities = dev.labels.get(), dev.probabilities.get()
    dev.outlier_scores = dev.outlier_scores.get()
    same(host, dev)


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["lattice", "duplicates"])
def test_cupy_int64_indices_equal_host(name, monkeypatch):
    # the device kernels' int64 instantiations (above 2**31 dendrogram nodes)
    cupy = pytest.importorskip("cupy")
    import emst_dask.products.dendrogram as dendrogram_module

    monkeypatch.setattr(dendrogram_module, "index_dtype", lambda m, n: np.int64)
    pts = clouds(3)[name]
    tree = emst(pts, min_samples=3, backend="cpu")
    n = len(pts)
    host = extract(tree.source, tree.target, tree.weight, n, 6)
    dev = extract(cupy.asarray(tree.source), cupy.asarray(tree.target),
                  cupy.asarray(tree.weight), n, 6)
    dev.labels, dev.probabilities = dev.labels.get(), dev.probabilities.get()
    dev.outlier_scores = dev.outlier_scores.get()
    same(host, dev)


@pytest.mark.gpu
def test_estimator_on_the_device_equals_the_host():
    cupy = pytest.importorskip("cupy")
    pts = clouds(2)["blobs"].astype(np.float32)
    cpu = HDBSCAN(min_cluster_size=15, min_samples=6, backend="cpu").fit(pts)
    gpu = HDBSCAN(min_cluster_size=15, min_samples=6, backend="cuda").fit(cupy.asarray(pts))
    assert isinstance(gpu.labels_, cupy.ndarray)  # CuPy in, CuPy out
    np.testing.assert_array_equal(gpu.labels_.get(), cpu.labels_)
    np.testing.assert_array_equal(gpu.probabilities_.get(), cpu.probabilities_)
    np.testing.assert_array_equal(gpu.outlier_scores_.get(), cpu.outlier_scores_)
    host_in = HDBSCAN(min_cluster_size=15, min_samples=6, backend="cuda").fit(pts)
    assert isinstance(host_in.labels_, np.ndarray)  # numpy in, numpy out
    np.testing.assert_array_equal(host_in.labels_, cpu.labels_)


@pytest.mark.gpu
def test_bad_device_edges_are_refused():
    cupy = pytest.importorskip("cupy")
    s, t = cupy.asarray([0, 1]), cupy.asarray([1, 2])
    with pytest.raises(InputError, match="finite"):
        extract(s, t, cupy.asarray([1.0, np.inf]), 3)
    with pytest.raises(InputError, match="shape"):
        extract(s, t, cupy.asarray([1.0, 2.0]), 4)


def test_a_cluster_of_many_runs():
    # the root's points leave at thousands of distinct lambdas: the run sums
    # go block by block (tables.RUN_BLOCK), on the host and here alike
    pts = np.random.default_rng(5).random((6000, 3))
    host, whole = both(pts, 3, min_cluster_size=700, allow_single_cluster=True)
    same(host, whole)


def test_long_spines_equal_host():
    # a cluster that loses points one at a time over many levels (a long
    # spine of big nodes, as in real clouds) before it splits: the births
    # below it are deeper than buckets of depth would take, and are
    # numbered by one sort of (depth, preorder) keys
    rng = np.random.default_rng(8)
    blobs = np.r_[rng.normal(size=(200, 2)) * 0.1, rng.normal(size=(200, 2)) * 0.1 + [5.0, 0]]
    chain = np.c_[-np.cumsum(6.0 + 0.01 * np.arange(300)), np.zeros(300)]
    host, whole = both(np.r_[blobs, chain], 2, min_cluster_size=40)
    assert host.n_clusters == 2
    same(host, whole)


def test_birth_numbers_do_not_depend_on_how_deep_the_spines_are():
    # host_numbers orders births by (depth, preorder); scaling every spine
    # scales every depth and keeps that order, while the numbering switches
    # from buckets of depth to one sort of keys and then to a lexsort
    from emst_dask.products.hdbscan.device import host_numbers

    rng = np.random.default_rng(9)
    for B in (2, 3, 40, 3000):
        parent = np.array([rng.integers(b + 1, min(B, b + 1 + rng.integers(1, 9)))
                           for b in range(B - 1)] + [-1], np.int64)
        min_row = rng.permutation(10 * B)[:B].astype(np.int64)
        spine = rng.integers(1, 4, B)
        want = host_numbers(parent, min_row, spine)
        assert sorted(want) == list(range(B))
        for scale in (10**3, 10**14):
            np.testing.assert_array_equal(host_numbers(parent, min_row, spine * scale), want)


@pytest.mark.gpu
def test_cupy_many_runs_equals_host():
    cupy = pytest.importorskip("cupy")
    pts = np.random.default_rng(6).random((30000, 3))
    tree = emst(pts, min_samples=3, backend="cpu")
    host = extract(tree.source, tree.target, tree.weight, len(pts), 3000)
    dev = extract(cupy.asarray(tree.source), cupy.asarray(tree.target),
                  cupy.asarray(tree.weight), len(pts), 3000)
    np.testing.assert_array_equal(dev.stability, host.stability)
    np.testing.assert_array_equal(dev.labels.get(), host.labels)


@pytest.mark.gpu
def test_cupy_deep_chains_equal_host():
    # 1-D points with growing gaps: every point's lightest edge is the one to
    # its left, so Borůvka's first pick forest is one chain of n, and the
    # one cluster's spine is n deep: the forests' roots must not degrade
    cupy = pytest.importorskip("cupy")
    from emst_dask.products.linkage import single_linkage

    n = 300_000
    perm = np.random.default_rng(3).permutation(n)
    s, t = perm[:-1].copy(), perm[1:].copy()
    w = 1.0 + np.arange(n - 1) * 1e-3
    ds, dt, dw = cupy.asarray(s), cupy.asarray(t), cupy.asarray(w)
    np.testing.assert_array_equal(single_linkage(ds, dt, dw, n).get(),
                                  single_linkage(s, t, w, n))
    host = extract(s, t, w, n, 10)
    dev = extract(ds, dt, dw, n, 10)
    dev.labels, dev.probabilities = dev.labels.get(), dev.probabilities.get()
    dev.outlier_scores = dev.outlier_scores.get()
    same(host, dev)


def _tally_brute(key, k):
    total = np.zeros(k, np.int64)
    low = np.full(k, len(key), key.dtype)
    for i, v in enumerate(key.tolist()):
        if v >= 0:
            total[v] += 1
            low[v] = min(low[v], i)
    return total, low


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_tally_counts_and_first_items(dtype):
    from emst_dask.arrays import tally

    rng = np.random.default_rng(8)
    # long runs of one value (a warp's lanes alike), scattered values, skips
    key = np.r_[np.full(300, 3), rng.integers(-1, 9, 700), np.full(70, -1),
                rng.integers(0, 2, 500)].astype(dtype)
    total, low = tally(np, key, 10, first=True)
    want_total, want_low = _tally_brute(key, 10)
    np.testing.assert_array_equal(total, want_total)
    np.testing.assert_array_equal(low, want_low)
    assert low.dtype == key.dtype and total.dtype == np.int64
    assert tally(np, key, 10)[1] is None


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_cupy_tally_equals_host(dtype):
    cupy = pytest.importorskip("cupy")
    from emst_dask.arrays import tally

    rng = np.random.default_rng(9)
    n = 3_000_000
    key = np.where(rng.random(n) < 0.7, 0, rng.integers(-1, 50_000, n)).astype(dtype)
    key[1_000_000:1_000_100] = 7  # a run crossing warps
    want = tally(np, key, 50_000, first=True)
    got = tally(cupy, cupy.asarray(key), 50_000, first=True)
    np.testing.assert_array_equal(got[0].get(), want[0])
    np.testing.assert_array_equal(got[1].get(), want[1])
    assert tally(cupy, cupy.asarray(key), 50_000)[1] is None
