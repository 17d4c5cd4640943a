"""Every parameter of ``sklearn.cluster.HDBSCAN`` on ``emst_dask.HDBSCAN``,
held to scikit-learn on tie-free clouds (float64 blobs, min_samples 1 or
2: no two merges of the tree share a height)."""
from __future__ import annotations

import numpy as np
import pytest

from emst_dask import HDBSCAN, InputError

from hdbscan_oracle import same_partition

sk = pytest.importorskip("sklearn.cluster")


def blobs(n=900, d=2, seed=3):
    rng = np.random.default_rng(seed)
    centres = rng.random((4, d)) * 10
    parts = [c + rng.normal(0, 0.2 + 0.1 * i, (n // 5, d)) for i, c in enumerate(centres)]
    parts.append(rng.random((n - 4 * (n // 5), d)) * 10)
    return np.concatenate(parts)


def relabel(ours, ref):
    """The permutation taking our labels to scikit-learn's (k,)."""
    k = int(ours.max()) + 1
    return np.array([int(ref[np.flatnonzero(ours == i)[0]]) for i in range(k)])


@pytest.fixture(scope="module")
def X():
    return blobs()


def fit_both(X, **kw):
    ours = HDBSCAN(backend="cpu", **kw).fit(X)
    ref = sk.HDBSCAN(**{"copy": True, **kw}).fit(X)
    assert same_partition(ours.labels_, ref.labels_)
    np.testing.assert_allclose(ours.probabilities_, ref.probabilities_, rtol=1e-9,
                               atol=1e-12)
    return ours, ref


@pytest.mark.parametrize("alpha,ms", [(0.3, 1), (2.0, 1), (7.0, 1), (0.3, 2), (0.5, 2)])
def test_alpha_equals_scikit_learn(X, alpha, ms):
    """scikit-learn divides the distances (not the core distances) by alpha
    before the tree.  Tie-free: min_samples=1, or alpha < 1 (a core
    distance with min_samples=2 is at most each of its point's distances,
    so alpha < 1 only scales the weights)."""
    ours, _ = fit_both(X, min_cluster_size=20, min_samples=ms, alpha=alpha)
    tree = ours.minimum_spanning_tree_
    d = np.linalg.norm(X[tree.source] - X[tree.target], axis=1) / alpha
    core = tree.core_distances
    core = np.zeros(len(X)) if core is None else core
    np.testing.assert_allclose(tree.weight, np.maximum(np.maximum(core[tree.source],
                                                                  core[tree.target]), d),
                               rtol=1e-12)


@pytest.mark.parametrize("alpha", [1.5, 3.0])
def test_alpha_above_one_equals_the_level_set_oracle(alpha):
    """alpha > 1 with min_samples > 1 ties edges at core distances (as a
    larger min_samples does): the clusters are held to the brute-force
    level-set oracle on the dense matrix max(core_u, core_v, d / alpha)."""
    import hdbscan_oracle as O
    from scipy.spatial.distance import cdist

    X = blobs(n=160, seed=5)
    k, m = 3, 10
    ours = HDBSCAN(backend="cpu", min_cluster_size=m, min_samples=k, alpha=alpha).fit(X)
    d = cdist(X, X)
    core = np.sort(d, axis=1)[:, k - 1]
    mrd = np.maximum(d / alpha, np.maximum(core[:, None], core[None, :]))
    ref = O.condense(O.level_hierarchy(mrd), len(X), m)
    lab, prob, _ = O.flat(ref, O.select(ref), len(X))
    assert lab.max() >= 1 and same_partition(ours.labels_, lab)
    np.testing.assert_allclose(ours.probabilities_, prob, rtol=1e-9, atol=1e-12)
    plain = HDBSCAN(backend="cpu", min_cluster_size=m, min_samples=k).fit(X)
    assert not np.allclose(ours.probabilities_, plain.probabilities_)


def test_alpha_needs_the_points_here(X, tmp_path):
    with pytest.raises(InputError, match="alpha=0.5 is computed in this process"):
        HDBSCAN(alpha=0.5, partitions=2).fit(X)
    for bad in (0, -1.0, float("nan"), "1", True):
        with pytest.raises(InputError, match="alpha must be"):
            HDBSCAN(alpha=bad).fit(X)


@pytest.mark.parametrize("kw", [dict(algorithm="brute"), dict(algorithm="kd_tree"),
                                dict(algorithm="ball_tree", leaf_size=5),
                                dict(leaf_size=100, n_jobs=2), dict(n_jobs=-1),
                                dict(metric="l2"),
                                dict(metric="minkowski", metric_params={"p": 2}),
                                dict(copy=False), dict(copy=True)])
def test_parameters_without_effect_equal_scikit_learn(X, kw):
    """algorithm, leaf_size, n_jobs and copy choose how scikit-learn
    computes; the exact tree is the same whatever they are."""
    Xc = X.copy()
    fit_both(X, min_cluster_size=20, min_samples=2, **kw)
    np.testing.assert_array_equal(X, Xc)  # never written, copy or not


def test_minkowski_without_p_is_euclidean(X):
    a = HDBSCAN(backend="cpu", min_cluster_size=20, metric="minkowski").fit(X)
    b = HDBSCAN(backend="cpu", min_cluster_size=20).fit(X)
    np.testing.assert_array_equal(a.labels_, b.labels_)


@pytest.mark.parametrize("metric", ["manhattan", "cosine", "chebyshev", "precomputed",
                                    len])
def test_other_metrics_refused(X, metric):
    with pytest.raises(ValueError, match="only Euclidean distances are supported"):
        HDBSCAN(metric=metric).fit(X)
    with pytest.raises(ValueError, match="only Euclidean distances are supported"):
        HDBSCAN(metric="minkowski", metric_params={"p": 1}).fit(X)


@pytest.mark.parametrize("bad", [dict(algorithm="kdtree"), dict(leaf_size=0),
                                 dict(n_jobs=1.5), dict(store_centers="mean"),
                                 dict(copy="yes"), dict(prediction_data=1),
                                 dict(metric_params={"w": 1})])
def test_bad_parameters_refused(X, bad):
    with pytest.raises(InputError):
        HDBSCAN(**bad).fit(X)


@pytest.mark.parametrize("store", ["centroid", "medoid", "both"])
def test_store_centers_equals_scikit_learn(X, store):
    ours, ref = fit_both(X, min_cluster_size=20, min_samples=1, store_centers=store)
    perm = relabel(ours.labels_, ref.labels_)
    for name in ("centroids_", "medoids_"):
        if store in (name[:-2].rstrip("s"), "both"):
            got = getattr(ours, name)
            assert got.shape == (len(perm), X.shape[1]) and got.dtype == np.float64
            np.testing.assert_allclose(got, getattr(ref, name)[perm], rtol=1e-12)
        else:
            assert not hasattr(ours, name)


def test_medoid_is_order_free_under_ties():
    """Four corners of a square, equal weights: every corner has the same
    summed distance; the medoid is the lexicographically smallest corner
    whatever the row order."""
    from emst_dask.products.hdbscan.centers import centers

    sq = np.array([[1.0, 1.0], [0.0, 1.0], [1.0, 0.0], [0.0, 0.0]])
    for perm in ([0, 1, 2, 3], [3, 2, 1, 0], [2, 0, 3, 1]):
        _, med = centers(sq[perm], np.zeros(4, np.int64), np.ones(4))
        np.testing.assert_array_equal(med, [[0.0, 0.0]])


def test_relative_validity_equals_hdbscan(X):
    hdbscan = pytest.importorskip("hdbscan")
    ours = HDBSCAN(backend="cpu", min_cluster_size=20, min_samples=2).fit(X)
    ref = hdbscan.HDBSCAN(min_cluster_size=20, min_samples=1, gen_min_span_tree=True,
                          approx_min_span_tree=False).fit(X)
    assert same_partition(ours.labels_, ref.labels_)
    assert ours.relative_validity_ == pytest.approx(ref.relative_validity_, rel=1e-12)


def test_centres_need_a_cluster_store_not_labels(X, tmp_path):
    out = tmp_path / "labels.npy"
    for kw in (dict(store_centers="centroid"), dict(prediction_data=True)):
        with pytest.raises(InputError, match="not a .npy of labels"):
            HDBSCAN(out=str(out), **kw).fit(X)
    assert not out.exists()
