"""The products' CuPy paths without a GPU: the dendrogram, the single-linkage
matrix and HDBSCAN*'s extraction run with ``cupy_emu`` standing in for CuPy
(the CUDA kernels of ``dendrogram.cu`` and ``clusters.cu`` built with g++,
threads one after another), against the host's union-find and ``extract``,
bit for bit.  Races are the GPU tests' part.
"""
from __future__ import annotations

import numpy as np
import pytest

from emst_dask import emst
from emst_dask.products.hdbscan import extract
from emst_dask.products.hdbscan.device import extract_xp
from emst_dask.products.linkage import device_linkage, single_linkage
from emst_dask.products.order import check_edges

from test_products_hdbscan_device import clouds, same




def _tree(points, k):
    tree = emst(points, min_samples=k, backend="cpu")
    return check_edges(tree.source, tree.target, tree.weight, len(points))[1:]


@pytest.mark.parametrize("name", ["blobs", "lattice", "duplicates"])
@pytest.mark.parametrize("params", [
    dict(min_cluster_size=10),
    dict(min_cluster_size=25, cluster_selection_method="leaf"),
    dict(min_cluster_size=8, allow_single_cluster=True, cluster_selection_epsilon=0.7),
    dict(min_cluster_size=5, max_cluster_size=200),
], ids=["eom", "leaf", "single-epsilon", "max-size"])
def test_emulated_extraction_equals_host(fake_cupy, name, params):
    pts = clouds(1)[name]
    s, t, w = _tree(pts, 4)
    n = len(pts)
    host = extract(s, t, w, n, **params)
    p = dict(cluster_selection_method="eom", allow_single_cluster=False,
             cluster_selection_epsilon=0.0, max_cluster_size=None) | params
    dev = extract_xp(fake_cupy, s, t, w, n, p["min_cluster_size"],
                     p["cluster_selection_method"], p["allow_single_cluster"],
                     p["cluster_selection_epsilon"], p["max_cluster_size"])
    same(host, dev)


@pytest.mark.parametrize("name", ["lattice", "uniform"])
def test_emulated_int64_indices_equal_host(fake_cupy, monkeypatch, name):
    import emst_dask.products.dendrogram as dendrogram_module

    monkeypatch.setattr(dendrogram_module, "index_dtype", lambda m, n: np.int64)
    pts = clouds(3)[name]
    s, t, w = _tree(pts, 3)
    n = len(pts)
    host = extract(s, t, w, n, 6)
    dev = extract_xp(fake_cupy, s, t, w, n, 6, "eom", False, 0.0, None)
    same(host, dev)
    np.testing.assert_array_equal(device_linkage(fake_cupy, s, t, w, n),
                                  single_linkage(s, t, w, n))


@pytest.mark.parametrize("name", ["blobs", "lattice", "duplicates", "uniform"])
@pytest.mark.parametrize("k", [1, 5])
def test_emulated_linkage_equals_host(fake_cupy, name, k):
    pts = clouds(2)[name]
    s, t, w = _tree(pts, k)
    np.testing.assert_array_equal(device_linkage(fake_cupy, s, t, w, len(pts)),
                                  single_linkage(s, t, w, len(pts)))


def test_emulated_deep_chain(fake_cupy):
    # every point's lightest edge is the one to its left: Borůvka's first
    # pick forest is one chain of n, the one cluster's spine n deep
    n = 20_000
    perm = np.random.default_rng(3).permutation(n)
    s, t = perm[:-1].copy(), perm[1:].copy()
    w = 1.0 + np.arange(n - 1) * 1e-3
    np.testing.assert_array_equal(device_linkage(fake_cupy, s, t, w, n),
                                  single_linkage(s, t, w, n))
    same(extract(s, t, w, n, 10), extract_xp(fake_cupy, s, t, w, n, 10, "eom", False, 0.0,
                                             None))


def test_emulated_recorded_picks(fake_cupy, monkeypatch):
    # the EMST's recorded picks (the engine's kernels emulated too) give the
    # host union-find's matrix in the tree's own order, and the same clusters
    import emst_dask.engine.core as api
    from cuda_emu import emulated_kernels
    from emst_dask.engine.core import spanning_tree
    from emst_dask.products._uf import linkage_merges

    monkeypatch.setattr(api, "get_kernels", lambda backend: emulated_kernels())

    pts = clouds(4)["blobs"].astype(np.float32)
    n = len(pts)
    tree = spanning_tree(pts, 3, "cuda", hierarchy=True)
    s, t, w = tree.source, tree.target, tree.weight
    want, _ = linkage_merges(s, t, w, np.arange(n - 1), n)
    np.testing.assert_array_equal(device_linkage(fake_cupy, s, t, w, n,
                                                 hierarchy=tree.hierarchy), want)
    same(extract(s, t, w, n, 12),
         extract_xp(fake_cupy, s, t, w, n, 12, "eom", False, 0.0, None,
                    hierarchy=tree.hierarchy))


def test_emulated_tiny_and_degenerate_clouds(fake_cupy):
    # two points, all points equal (every height 0, lambda inf), two lumps
    rng = np.random.default_rng(4)
    for pts in (np.zeros((2, 2)), np.zeros((40, 3)), rng.random((3, 2)), rng.random((7, 1)),
                np.r_[np.zeros((20, 2)), np.ones((20, 2))]):
        s, t, w = _tree(pts, 1)
        n = len(pts)
        np.testing.assert_array_equal(device_linkage(fake_cupy, s, t, w, n),
                                      single_linkage(s, t, w, n))
        for mcs in (2, 5, 50):
            for allow in (False, True):
                host = extract(s, t, w, n, mcs, allow_single_cluster=allow)
                dev = extract_xp(fake_cupy, s, t, w, n, mcs, "eom", allow, 0.0, None)
                same(host, dev)


@pytest.mark.parametrize("seed", range(6))
def test_emulated_random_clouds_and_sizes(fake_cupy, seed):
    # mixed densities and quantised coordinates (tied heights), the smallest
    # cluster size from 2 to a fifth of the points
    rng = np.random.default_rng(seed)
    n = int(rng.integers(50, 3000))
    d = int(rng.integers(1, 4))
    pts = np.r_[rng.normal(size=(n // 2, d)) * 0.1, rng.random((n - n // 2, d)) * 5]
    if seed % 2:
        pts = np.round(pts * 8) / 8
    k = int(rng.integers(1, 6))
    mcs = int(rng.integers(2, max(3, n // 5)))
    s, t, w = _tree(pts, k)
    method = "leaf" if seed % 3 == 0 else "eom"
    same(extract(s, t, w, n, mcs, method),
         extract_xp(fake_cupy, s, t, w, n, mcs, method, False, 0.0, None))
