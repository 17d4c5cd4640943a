"""``emst_dask.HDBSCAN`` (the estimator), ``SpanningTree.linkage``/``fof``, the
cluster store, the service's clustering jobs and the command line.

The clusters themselves are held to scikit-learn and to a brute-force oracle
in ``test_products_hdbscan.py``; here the estimator is held to scikit-learn
end to end on tie-free clouds, and every other way in (a tree, an edge
store, a cluster on a worker, the command line) to the estimator.
"""
from __future__ import annotations

import os

import numpy as np
import pytest
import zarr
from click.testing import CliRunner

import emst_dask
from emst_dask import HDBSCAN, InputError, OutputError, emst
from emst_dask.cli import main
from emst_dask.io.cluster_store import read_clusters

from hdbscan_oracle import same_partition

sklearn_cluster = pytest.importorskip("sklearn.cluster")


def blobs(n=1200, d=2, seed=0):
    """Tie-free float64 blobs of different densities, with background noise."""
    rng = np.random.default_rng(seed)
    centres = rng.random((5, d)) * 10
    parts = [c + rng.normal(0, 0.15 + 0.1 * i, (n // 6, d)) for i, c in enumerate(centres)]
    parts.append(rng.random((n - 5 * (n // 6), d)) * 10)
    return np.concatenate(parts)


@pytest.fixture(scope="module")
def X():
    return blobs()


@pytest.mark.parametrize("kw", [dict(min_samples=1), dict(min_samples=2),
                                dict(min_samples=2, cluster_selection_method="leaf"),
                                dict(min_samples=1, max_cluster_size=150),
                                dict(min_samples=2, allow_single_cluster=True,
                                     min_cluster_size=150)])
def test_estimator_equals_scikit_learn(X, kw):
    """Tie-free float64 blobs: with min_samples 1 or 2 no two merges of the
    mutual-reachability tree share a height, so the level sets are
    scikit-learn's binary hierarchy (with larger min_samples a point's core
    distance ties several of its edges: test_products_hdbscan.py holds those
    to the brute-force level-set oracle)."""
    params = {"min_cluster_size": 25, **kw}
    ours = HDBSCAN(backend="cpu", **params).fit(X)
    ref = sklearn_cluster.HDBSCAN(**params).fit(X)
    assert same_partition(ours.labels_, ref.labels_)
    np.testing.assert_allclose(ours.probabilities_, ref.probabilities_, rtol=1e-9, atol=1e-12)
    assert ours.labels_.dtype == np.int64 and ours.labels_.shape == (len(X),)


def test_attributes(X, tmp_path):
    from scipy.cluster.hierarchy import is_valid_linkage

    est = HDBSCAN(min_cluster_size=30, min_samples=5, backend="cpu").fit(X)
    n = len(X)
    assert est.outlier_scores_.shape == (n,) and np.all(est.outlier_scores_ >= 0)
    ct = est.condensed_tree_.to_numpy()
    assert ct.dtype.names == ("parent", "child", "lambda_val", "child_size")
    assert int(ct["parent"].min()) == n
    assert len(est.cluster_persistence_) == est.labels_.max() + 1
    assert est.single_linkage_tree_.shape == (n - 1, 4)
    assert is_valid_linkage(est.single_linkage_tree_)
    tree = est.minimum_spanning_tree_
    assert tree.min_samples == 5 and tree.n_edges == n - 1
    assert est.n_features_in_ == X.shape[1]
    np.testing.assert_array_equal(est.fit_predict(X), est.labels_)
    import matplotlib

    matplotlib.use("Agg", force=True)
    ax = est.condensed_tree_.plot()
    ax.figure.savefig(tmp_path / "ct.png")
    assert (tmp_path / "ct.png").stat().st_size > 1000
    assert est.get_params()["min_samples"] == 5
    assert est.set_params(min_samples=7).min_samples == 7


def test_tree_methods_agree_with_the_estimator(X):
    tree = emst(X, min_samples=1, backend="cpu")
    Z = tree.linkage()
    assert Z.shape == (len(X) - 1, 4)
    one = tree.fof(0.2)
    many = tree.fof([0.1, 0.2, 0.4])
    np.testing.assert_array_equal(many[1], one)
    assert one[0] == 0 and many.shape == (3, len(X))


@pytest.mark.parametrize("bad", [dict(min_cluster_size=1), dict(min_cluster_size=2.5),
                                 dict(min_samples=0), dict(cluster_selection_method="x"),
                                 dict(cluster_selection_epsilon=-1.0),
                                 dict(cluster_selection_epsilon=float("nan")),
                                 dict(max_cluster_size=0)])
def test_bad_parameters_refused_before_any_work(X, bad, monkeypatch):
    import emst_dask.engine.core

    def boom(*a, **k):
        raise AssertionError("computed before refusing")

    monkeypatch.setattr(emst_dask.engine.core, "boruvka", boom)
    with pytest.raises(InputError):
        HDBSCAN(**{"min_cluster_size": 5, **bad}).fit(X)


def test_a_refit_drops_the_former_results_first(X, monkeypatch):
    import emst_dask.engine.core

    est = HDBSCAN(min_cluster_size=20, min_samples=3, backend="cpu").fit(X)
    first = est.labels_.copy()
    seen = {}
    real = emst_dask.engine.core.boruvka

    def spy(*a, **k):  # the former results are gone before the new tree
        seen["held"] = [n for n in ("labels_", "minimum_spanning_tree_", "condensed_tree_")
                        if hasattr(est, n)]
        return real(*a, **k)

    monkeypatch.setattr(emst_dask.engine.core, "boruvka", spy)
    est.fit(X[:600])
    assert seen["held"] == [] and est.labels_.shape == (600,)
    monkeypatch.setattr(emst_dask.engine.core, "boruvka", real)
    with pytest.raises(InputError):  # a failed fit leaves no stale results
        est.fit(np.r_[X[:10], [[np.nan, 0.0]]])
    assert not hasattr(est, "labels_") and est.single_linkage_tree_ is None
    np.testing.assert_array_equal(est.fit(X).labels_, first)
    assert est.fit_tree(est.minimum_spanning_tree_).labels_.shape == first.shape


def test_out_of_memory_says_what_to_do(X, monkeypatch):
    import emst_dask.api

    def oom(*a, **k):
        raise MemoryError("std::bad_alloc")

    monkeypatch.setattr(emst_dask.api, "emst", oom)
    with pytest.raises(MemoryError, match=r"1,200 points ran out of memory.*partitions="):
        HDBSCAN(min_cluster_size=20, backend="cpu").fit(X)


def test_min_samples_above_n_refused():
    with pytest.raises(InputError, match="min_samples"):
        HDBSCAN(min_cluster_size=5, min_samples=50, backend="cpu").fit(blobs(30))


def test_clusters_an_edge_store_without_recomputing(X, tmp_path):
    est = HDBSCAN(min_cluster_size=30, min_samples=4, backend="cpu").fit(X)
    store = emst(X, min_samples=4, backend="cpu", out=str(tmp_path / "e.zarr"))
    again = HDBSCAN(min_cluster_size=30, min_samples=4).fit_tree(str(store))
    np.testing.assert_array_equal(again.labels_, est.labels_)
    with pytest.raises(InputError, match="min_samples=4"):
        HDBSCAN(min_cluster_size=30, min_samples=6).fit_tree(str(store))
    euclid = emst(X, backend="cpu", out=str(tmp_path / "e1.npy"))
    with pytest.raises(InputError, match="does not record its min_samples"):
        HDBSCAN(min_cluster_size=30, min_samples=1).fit_tree(str(euclid))


@pytest.fixture(scope="module")
def client():
    with emst_dask.EmbeddedCluster(n_workers=1, backend="cpu") as emb:
        yield emb.client


def test_service_clusters_on_the_worker(X, client, tmp_path):
    local = HDBSCAN(min_cluster_size=30, min_samples=5, backend="cpu").fit(X)
    path = str(tmp_path / "snap.zarr")
    g = zarr.open_group(path, mode="w")
    g.create_array("points", shape=X.shape, chunks=(300, X.shape[1]), dtype=X.dtype)[...] = X
    remote = HDBSCAN(min_cluster_size=30, min_samples=5, backend="cpu", client=client).fit(path)
    np.testing.assert_array_equal(remote.labels_, local.labels_)
    np.testing.assert_array_equal(remote.probabilities_, local.probabilities_)
    assert remote.minimum_spanning_tree_.total_weight == local.minimum_spanning_tree_.total_weight
    out = str(tmp_path / "labels.zarr")
    stored = HDBSCAN(min_cluster_size=30, min_samples=5, backend="cpu", client=client,
                     out=out).fit(path)
    np.testing.assert_array_equal(stored.labels_, local.labels_)
    got = read_clusters(out)
    assert got["attrs"]["complete"] is True and got["attrs"]["kind"] == "hdbscan"
    np.testing.assert_array_equal(got["outlier_scores"], local.outlier_scores_)
    assert stored.minimum_spanning_tree_ is None
    # complete or absent: an existing store is refused without overwrite,
    # before any work, and nothing of the job is left beside it
    with pytest.raises(OutputError, match="already exists"):
        HDBSCAN(min_cluster_size=30, min_samples=5, client=client, out=out).fit(path)
    again = HDBSCAN(min_cluster_size=30, min_samples=5, backend="cpu", client=client, out=out,
                    overwrite=True).fit(path)
    np.testing.assert_array_equal(again.labels_, local.labels_)
    assert not [f for f in os.listdir(tmp_path) if "emst-tmp" in f]
    # an edge store is never replaced by clusters
    emst(X, backend="cpu", out=str(tmp_path / "edges.zarr"))
    with pytest.raises(OutputError, match="not a cluster store"):
        HDBSCAN(min_cluster_size=30, client=client, out=str(tmp_path / "edges.zarr"),
                overwrite=True).fit(path)


def test_command_line(X, tmp_path):
    np.save(tmp_path / "x.npy", X)
    r = CliRunner().invoke(main, ["hdbscan", str(tmp_path / "x.npy"), "-m", "30", "-k", "5",
                                  "--out", str(tmp_path / "labels.zarr"), "--backend", "cpu",
                                  "--plot", str(tmp_path / "ct.png")])
    assert r.exit_code == 0, r.output
    local = HDBSCAN(min_cluster_size=30, min_samples=5, backend="cpu").fit(X)
    np.testing.assert_array_equal(read_clusters(tmp_path / "labels.zarr")["labels"],
                                  local.labels_)
    assert (tmp_path / "ct.png").stat().st_size > 1000
    # the tree of an edge store, clustered without recomputing it
    emst(X, min_samples=5, backend="cpu", out=str(tmp_path / "mr.zarr"))
    r = CliRunner().invoke(main, ["hdbscan", str(tmp_path / "mr.zarr"), "-m", "30", "-k", "5",
                                  "--out", str(tmp_path / "l2.npy")])
    assert r.exit_code == 0, r.output
    np.testing.assert_array_equal(np.load(tmp_path / "l2.npy"), local.labels_)
    # cuts and single linkage of a Euclidean store
    emst(X, backend="cpu", out=str(tmp_path / "e.zarr"))
    r = CliRunner().invoke(main, ["cut", str(tmp_path / "e.zarr"), "-b", "0.1", "-b", "0.3",
                                  "--out", str(tmp_path / "fof.npy")])
    assert r.exit_code == 0, r.output
    tree = emst(X, backend="cpu")
    np.testing.assert_array_equal(np.load(tmp_path / "fof.npy"), tree.fof([0.1, 0.3]))
    r = CliRunner().invoke(main, ["linkage", str(tmp_path / "e.zarr"), "--out",
                                  str(tmp_path / "Z.npy")])
    assert r.exit_code == 0, r.output
    np.testing.assert_array_equal(np.load(tmp_path / "Z.npy"), tree.linkage())
    r = CliRunner().invoke(main, ["plot-clusters", str(tmp_path / "labels.zarr"), "--points",
                                  str(tmp_path / "x.npy"), "--out", str(tmp_path / "c.png")])
    assert r.exit_code == 0, r.output
    # errors: one line, status 2
    for args in (["cut", str(tmp_path / "mr.zarr"), "-b", "0.1", "--out",
                  str(tmp_path / "bad.npy")],
                 ["cut", str(tmp_path / "e.zarr"), "-b", "-1", "--out",
                  str(tmp_path / "bad.npy")],
                 ["hdbscan", str(tmp_path / "x.npy"), "-m", "1", "--out",
                  str(tmp_path / "bad.zarr")],
                 ["linkage", str(tmp_path / "e.zarr"), "--out", str(tmp_path / "x.npy")]):
        r = CliRunner().invoke(main, args)
        assert r.exit_code == 2 and r.output.startswith("Error:"), (args, r.output)
        assert "Traceback" not in r.output
    assert np.array_equal(np.load(tmp_path / "x.npy"), X)  # the input never replaced


def test_command_line_refuses_parameters_before_reading_the_store(X, tmp_path, monkeypatch):
    """A bad linking length or HDBSCAN* parameter, or a store of the wrong
    min_samples, is said before the store's arrays are read: a damaged
    store does not hide it, and nothing is loaded for nothing."""
    from emst_dask.io import edge_store

    emst(X, backend="cpu", out=str(tmp_path / "e.zarr"))
    emst(X, min_samples=5, backend="cpu", out=str(tmp_path / "mr.zarr"))
    loads = []
    real = edge_store.EdgeStore.load
    monkeypatch.setattr(edge_store.EdgeStore, "load",
                        lambda self: loads.append(self.path) or real(self))
    e, mr, out = str(tmp_path / "e.zarr"), str(tmp_path / "mr.zarr"), str(tmp_path / "o.npy")
    for args, says in ((["cut", e, "-b", "-1"], "linking length"),
                       (["cut", e, "-b", "nan"], "linking length"),
                       (["hdbscan", mr, "-m", "1"], "min_cluster_size"),
                       (["hdbscan", mr, "-m", "5", "-k", "0"], "min_samples"),
                       (["hdbscan", mr, "-m", "5", "--epsilon", "nan"], "epsilon"),
                       (["hdbscan", mr, "-m", "5", "-k", "4"], "--min-samples 5"),
                       (["hdbscan", e, "-m", "5"], "--min-samples 1")):
        r = CliRunner().invoke(main, args + ["--out", out])
        assert r.exit_code == 2 and r.output.startswith("Error:"), (args, r.output)
        assert says in r.output, (args, r.output)
        assert loads == [], (args, loads)
    assert not os.path.exists(out)
    np.save(tmp_path / "empty.npy", np.empty((0, 3)))
    r = CliRunner().invoke(main, ["hdbscan", str(tmp_path / "empty.npy"), "-m", "2", "-k", "1",
                                  "--out", str(tmp_path / "h.zarr"), "--backend", "cpu"])
    assert r.exit_code == 2 and "empty.npy" in r.output and "no points" in r.output, r.output


def test_min_samples_default_larger_than_n_says_where_it_comes_from():
    X = np.random.default_rng(3).random((40, 2))
    with pytest.raises(InputError, match=r"min_samples=100 \(min_samples=None takes "
                                         r"min_cluster_size\) is larger than the number "
                                         r"of points \(40\)"):
        HDBSCAN(min_cluster_size=100, backend="cpu").fit(X)
    with pytest.raises(InputError, match=r"min_samples=50 is larger"):
        HDBSCAN(min_cluster_size=5, min_samples=50, backend="cpu").fit(X)
