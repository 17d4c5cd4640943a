"""The products on the GPU against the host, on the clouds that break
things: quantised coordinates (duplicates, ties), lattices, clouds far
from the origin, a cluster a billion times denser than its background,
identical points, two points.

For each: the device's linkage matrix, FoF labels and HDBSCAN* results
from a device tree equal, bit for bit, the host's from the same edges
(themselves checked against scipy, radius graphs and a level-set oracle
elsewhere); the device tree's weights are the CPU engine's; and
``HDBSCAN(backend="cuda")`` (which records Borůvka's picks) equals
``HDBSCAN(backend="cpu")``.
"""
from __future__ import annotations

import numpy as np
import pytest

from emst_dask import HDBSCAN, datasets, emst
from emst_dask.products.cuts import fof_labels
from emst_dask.products.hdbscan import extract
from emst_dask.products.linkage import single_linkage

pytestmark = pytest.mark.gpu


def _cloud(name):
    rng = np.random.default_rng(11)
    if name == "quantised":  # many exact duplicates and tied distances
        return np.round(datasets.halos(20000, 2, 1), 2).astype(np.float32)
    if name == "lattice":
        return rng.integers(0, 12, (6000, 3)).astype(np.float64)
    if name == "far":  # 1e6 from the origin: spacing near float64's resolution there
        return datasets.halos(20000, 3, 2).astype(np.float64) + 1e6
    if name == "contrast":  # a 1e-9 cluster inside a unit background
        return np.concatenate([rng.random((15000, 3)),
                               0.5 + 1e-9 * rng.standard_normal((5000, 3))])
    if name == "identical":
        return np.full((3000, 2), 0.25)
    if name == "two":
        return np.array([[0.0, 0.0], [3.0, 4.0]])
    raise KeyError(name)


NAMES = ["quantised", "lattice", "far", "contrast", "identical", "two"]


def _same(dev, host):
    np.testing.assert_array_equal(dev.labels.get(), host.labels)
    np.testing.assert_array_equal(dev.probabilities.get(), host.probabilities)
    np.testing.assert_array_equal(dev.outlier_scores.get(), host.outlier_scores)
    np.testing.assert_array_equal(dev.selected, host.selected)
    np.testing.assert_array_equal(dev.persistence, host.persistence)


@pytest.mark.parametrize("name", NAMES)
def test_device_products_equal_the_host_on_the_same_tree(name):
    cupy = pytest.importorskip("cupy")
    X = _cloud(name)
    n = len(X)
    tree = emst(cupy.asarray(X), backend="cuda")
    s, t, w = tree.source.get(), tree.target.get(), tree.weight.get()
    np.testing.assert_array_equal(tree.linkage().get(), single_linkage(s, t, w, n))
    lengths = sorted({0.0, float(np.median(w)), float(w.max())})
    np.testing.assert_array_equal(tree.fof(lengths).get(), fof_labels(s, t, w, n, lengths))
    k = min(5, n)
    mr = emst(cupy.asarray(X), min_samples=k, backend="cuda")
    s, t, w = mr.source.get(), mr.target.get(), mr.weight.get()
    for method in ("eom", "leaf"):
        dev = extract(mr.source, mr.target, mr.weight, n, 2 if n < 10 else 10, method)
        host = extract(s, t, w, n, 2 if n < 10 else 10, method)
        _same(dev, host)


@pytest.mark.parametrize("name", NAMES)
def test_device_tree_and_estimator_equal_the_cpu_backend(name):
    cupy = pytest.importorskip("cupy")
    X = _cloud(name)
    gpu = emst(cupy.asarray(X), backend="cuda")
    cpu = emst(X, backend="cpu")
    # every MST has the same sorted weights; both engines compute them alike
    np.testing.assert_array_equal(np.sort(gpu.weight.get()), np.sort(cpu.weight))
    params = dict(min_cluster_size=2 if len(X) < 10 else 10, min_samples=min(5, len(X)))
    g = HDBSCAN(backend="cuda", **params).fit(cupy.asarray(X))
    c = HDBSCAN(backend="cpu", **params).fit(X)
    np.testing.assert_array_equal(g.labels_.get(), c.labels_)
    np.testing.assert_array_equal(g.probabilities_.get(), c.probabilities_)
    np.testing.assert_array_equal(g.outlier_scores_.get(), c.outlier_scores_)
