"""hdbscan's prediction API (``approximate_predict``, ``membership_vector``,
``all_points_membership_vectors``, ``exemplars_``) and the trees' pandas
views.

Held to the ``hdbscan`` package on tie-free clouds (its public functions
where they compute the same thing; its own per-point routines, fed the
exact neighbour lists and the fit's core distances, where its public
functions search fewer neighbours or recompute the core distances), and to
a brute-force computation on dense distances (below) on clouds with ties
and duplicate points, where permuting the rows permutes the results.
"""
from __future__ import annotations

import math
import pickle

import numpy as np
import pytest
from scipy.spatial.distance import cdist

import emst_dask as ed
from emst_dask import HDBSCAN, InputError

hdbscan = pytest.importorskip("hdbscan")
DBL_MAX = np.finfo(np.float64).max


def blobs(n=900, seed=1):
    rng = np.random.default_rng(seed)
    c = rng.random((4, 2)) * 10
    parts = [ci + rng.normal(0, 0.3 + 0.1 * i, (n // 9 * 2, 2)) for i, ci in enumerate(c)]
    parts.append(rng.random((n - 4 * (n // 9 * 2), 2)) * 10)
    return np.concatenate(parts)


def grid_cloud():
    """Lattice blobs with duplicate points and lattice noise: ties everywhere."""
    rng = np.random.default_rng(7)
    g = np.stack(np.meshgrid(np.arange(5.0), np.arange(5.0)), -1).reshape(-1, 2)
    pts = [g, g * 1.0 + [20.0, 0.0], g * 2.0 + [0.0, 20.0], g[:6] + [20.0, 20.0]]
    X = np.concatenate(pts)
    X = np.concatenate([X, X[rng.choice(len(X), 12, replace=False)],
                        rng.integers(0, 30, (15, 2)).astype(float)])
    new = np.concatenate([rng.integers(-2, 32, (60, 2)) * 0.5, X[:10]])
    return X, new


def perm_of(ours, ref):
    return np.array([int(ref[np.flatnonzero(ours == i)[0]]) for i in range(ours.max() + 1)])


# -- tie-free: against hdbscan ------------------------------------------------
@pytest.fixture(scope="module")
def fitted():
    X = blobs()
    ours = HDBSCAN(min_cluster_size=15, min_samples=2, prediction_data=True,
                   backend="cpu").fit(X)
    ref = hdbscan.HDBSCAN(min_cluster_size=15, min_samples=1, prediction_data=True,
                          approx_min_span_tree=False).fit(X)
    perm = perm_of(ours.labels_, ref.labels_)
    assert np.array_equal(np.where(ours.labels_ >= 0, perm[ours.labels_], -1), ref.labels_)
    Y = np.random.default_rng(2).random((300, 2)) * 12 - 1
    return X, Y, ours, ref, perm


def test_all_points_membership_vectors_equal_hdbscan(fitted):
    X, _, ours, ref, perm = fitted
    got = ed.all_points_membership_vectors(ours)
    want = hdbscan.all_points_membership_vectors(ref)
    assert got.shape == (len(X), len(perm))
    np.testing.assert_allclose(got, want[:, np.argsort(perm)], rtol=1e-9, atol=1e-12)
    blocks = ed.all_points_membership_vectors(ours, block_rows=97)
    np.testing.assert_array_equal(blocks, got)


def test_exemplars_and_trees_equal_hdbscan(fitted):
    X, _, ours, ref, perm = fitted
    for j, e in enumerate(ours.exemplars_):
        theirs = ref.exemplars_[perm[j]]
        assert e.shape == theirs.shape
        np.testing.assert_array_equal(e, theirs[np.lexsort(theirs.T[::-1])])
    ct = ours.condensed_tree_.to_pandas()
    assert list(ct.columns) == list(ref.condensed_tree_.to_pandas().columns)
    sl = ours.single_linkage_tree_.to_pandas()
    theirs = ref.single_linkage_tree_.to_pandas()
    assert list(sl.columns) == list(theirs.columns) and len(sl) == len(theirs) == len(X) - 1
    np.testing.assert_array_equal(sl["parent"], theirs["parent"])
    np.testing.assert_allclose(np.sort(sl["distance"]), np.sort(theirs["distance"]),
                               rtol=1e-12)
    assert sl["size"].iloc[-1] == len(X)
    np.testing.assert_array_equal(np.asarray(ours.single_linkage_tree_),
                                  ours.minimum_spanning_tree_.linkage())


def hdbscan_per_point(X, Y, ours, ref, k):
    """hdbscan's own routines of approximate_predict and membership_vector,
    given every training point as a neighbour (sorted) and the fit's core
    distances, with ``min_samples = k - 2`` so that its new point's core
    distance is the (k-1)-th neighbour's, as here."""
    from hdbscan._prediction_utils import (dist_membership_vector, get_tree_row_with_child,
                                           outlier_membership_vector, prob_in_some_cluster)
    from hdbscan.prediction import _find_cluster_and_probability, _find_neighbor_and_lambda

    pd = ref.prediction_data_
    core = ours.minimum_spanning_tree_.core_distances
    raw = ref.condensed_tree_._raw_tree
    clusters = np.array(sorted(ref.condensed_tree_._select_clusters())).astype(np.intp)
    d = cdist(Y, X)
    labels, probs, nbrs, mv = [], [], [], []
    for i in range(len(Y)):
        ni = np.argsort(d[i]).astype(np.intp)
        lab, pr, nb = _find_cluster_and_probability(ref.condensed_tree_, pd.cluster_tree, ni,
                                                    d[i, ni], core, pd.cluster_map,
                                                    pd.max_lambdas, k - 2)
        labels.append(lab), probs.append(pr), nbrs.append(nb)
        nn, lam = _find_neighbor_and_lambda(ni, d[i, ni], core, k - 2)
        row = get_tree_row_with_child(raw, nn)
        lam = min(lam, row["lambda_val"])
        r = (dist_membership_vector(Y[i], pd.exemplars, pd.dist_metric) ** 0.5
             * outlier_membership_vector(nn, lam, clusters, raw, pd.leaf_max_lambdas,
                                         pd.cluster_tree) ** 2.0)
        r /= r.sum()
        mv.append(r * prob_in_some_cluster(nn, lam, clusters, raw, pd.leaf_max_lambdas,
                                           pd.cluster_tree))
    return np.array(labels), np.array(probs), np.array(nbrs), np.array(mv)


def test_prediction_equals_hdbscan(fitted):
    X, Y, ours, ref, perm = fitted
    lab, prob, nb, mv = hdbscan_per_point(X, Y, ours, ref, 2)
    got_l, got_p, got_nb = ed.approximate_predict(ours, Y, return_connecting_points=True)
    np.testing.assert_array_equal(np.where(got_l >= 0, perm[got_l], -1), lab)
    assert (got_l >= 0).sum() > 100 and (got_l < 0).sum() > 5
    # where several training points tie in mutual reachability (the new
    # point's core distance is their common value) hdbscan takes the
    # nearest, this package the lexicographically smallest: the same lambda
    d = cdist(Y, X)
    core = ours.minimum_spanning_tree_.core_distances
    mr = np.maximum(np.maximum(core[None, :], np.sort(d, axis=1)[:, :1]), d)
    unique = (mr == mr.min(axis=1, keepdims=True)).sum(axis=1) == 1
    assert unique.sum() > 50 and (~unique).sum() > 0
    np.testing.assert_array_equal(got_nb[unique], nb[unique])
    np.testing.assert_array_equal(mr[np.arange(len(Y)), got_nb], mr[np.arange(len(Y)), nb])
    np.testing.assert_allclose(got_p, prob, rtol=1e-9, atol=1e-12)
    got = ed.membership_vector(ours, Y)
    # hdbscan rounds the point's lambda to float32 in the outlier vector
    # (per_cluster_scores' argument type): 1e-7, not 1e-9, here; the
    # brute-force test below holds these to 1e-12
    np.testing.assert_allclose(got, mv[:, np.argsort(perm)], rtol=0, atol=1e-7)
    # the public functions agree with ours where ours matches them: on
    # points of clusters hdbscan and this package both put there
    lab2, _ = hdbscan.approximate_predict(ref, Y)
    assert (np.where(got_l >= 0, perm[got_l], -1) == lab2).mean() > 0.8


def test_prediction_refusals_and_pickling(fitted, tmp_path):
    X, Y, ours, _, _ = fitted
    with pytest.raises(ValueError, match="prediction_data=True"):
        ed.approximate_predict(HDBSCAN(backend="cpu").fit(X), Y)
    with pytest.raises(ValueError, match="dimension does not match"):
        ed.membership_vector(ours, np.c_[Y, Y])
    with pytest.raises(ValueError, match="NaN"):
        ed.approximate_predict(ours, np.r_[Y, [[np.nan, 0.0]]])
    with pytest.raises(AttributeError, match="prediction_data=True"):
        HDBSCAN(backend="cpu").fit(X).exemplars_
    back = pickle.loads(pickle.dumps(ours))
    np.testing.assert_array_equal(ed.approximate_predict(back, Y)[1],
                                  ed.approximate_predict(ours, Y)[1])


def test_all_points_limit_and_streaming(fitted, tmp_path):
    import dask.config

    X, _, ours, _, perm = fitted
    full = ed.all_points_membership_vectors(ours)
    with dask.config.set({"emst_dask.hdbscan.membership-max-bytes": 1000}):
        with pytest.raises(InputError, match=r"n \* k \* 8 bytes.*give out="):
            ed.all_points_membership_vectors(ours)
        mm = np.lib.format.open_memmap(tmp_path / "m.npy", "w+", np.float64,
                                       (len(X), len(perm)))
        assert ed.all_points_membership_vectors(ours, out=mm, block_rows=128) is mm
        mm.flush()
    np.testing.assert_array_equal(np.load(tmp_path / "m.npy"), full)
    with pytest.raises(InputError, match="out has shape"):
        ed.all_points_membership_vectors(ours, out=np.empty((3, 3)))
    from emst_dask.products.hdbscan.membership import iter_all_points_membership_vectors

    parts = list(iter_all_points_membership_vectors(ours, block_rows=400))
    assert [s for s, _ in parts] == [0, 400, 800]
    np.testing.assert_array_equal(np.concatenate([b for _, b in parts]), full)


def test_no_clusters_is_noise():
    X = np.random.default_rng(0).random((30, 2))
    est = HDBSCAN(min_cluster_size=25, prediction_data=True, backend="cpu").fit(X)
    assert est.labels_.max() == -1
    lab, prob = ed.approximate_predict(est, X[:5] + 0.01)
    assert lab.tolist() == [-1] * 5 and prob.tolist() == [0.0] * 5
    assert ed.membership_vector(est, X[:5]).shape == (5, 0)
    assert ed.all_points_membership_vectors(est).shape == (30, 0)


# -- ties and duplicates: against a brute-force computation --------------------
class Brute:
    """hdbscan's definitions the slow and obvious way: dicts over the
    condensed tree, dense distances, ties to the lexicographically smallest
    training point."""

    def __init__(self, est, X):
        self.X, self.k = X, est.minimum_spanning_tree_.min_samples
        d = cdist(X, X)
        self.core = np.sort(d, axis=1)[:, self.k - 1]
        ct = est.condensed_tree_.to_numpy()
        n = len(X)
        self.root = n
        self.up, self.row, self.maxl = {}, {}, {}
        for p, c, lam, _ in ct.tolist():
            self.maxl[p] = max(self.maxl.get(p, -1.0), lam)
            (self.up if c >= n else self.row)[c] = (p, lam)
        self.sel = sorted(est.condensed_tree_.selected)
        self.label = {}
        for j, s in enumerate(self.sel):
            for c in [s] + [c for c in self.up if s in self.anc(c)]:
                self.label[c] = j
        kids = {p for p, _ in self.up.values()}
        self.exemplars = []
        for s in self.sel:
            leaves = [c for c in [s] + list(self.up) if c not in kids and s in self.anc(c)]
            rows = [p for p, (c, lam) in self.row.items() if c in leaves
                    and lam == self.maxl[c]]
            self.exemplars.append(X[rows])

    def anc(self, c):
        out = [c]
        while c in self.up:
            c = self.up[c][0]
            out.append(c)
        return out

    def nearest(self, x):
        d = np.sqrt(((self.X - x) ** 2).sum(axis=1))
        cx = np.sort(d)[self.k - 2] if self.k >= 2 else 0.0
        mr = np.maximum(np.maximum(self.core, cx), d)
        tied = [j for j in range(len(d)) if mr[j] == mr.min()]
        j = min(tied, key=lambda j: tuple(self.X[j]))
        return j, (1.0 / mr.min() if mr.min() > 0 else DBL_MAX)

    def predict(self, x):
        j, lam = self.nearest(x)
        c, plam = self.row[j]
        if plam > lam:
            while c != self.root and self.up[c][1] >= lam:
                c = self.up[c][0]
        lab = self.label.get(c, -1)
        if lab < 0:
            return lab, 0.0
        ml = self.maxl[self.sel[lab]]
        return lab, (min(ml, lam) / ml if ml > 0 else 1.0)

    def heights(self, c, lam):
        out = []
        ac = self.anc(c)
        for s in self.sel:
            a_s = self.anc(s)
            if s in ac or c in a_s:
                out.append(lam)
            else:
                lca = next(a for a in ac if a in a_s)
                out.append(self.up[ac[ac.index(lca) - 1]][1])
        return np.array(out)

    def dist(self, x):
        d = np.array([np.sqrt(((e - x) ** 2).sum(axis=1)).min() for e in self.exemplars])
        inv = np.array([1 / v if v != 0 else DBL_MAX / len(d) for v in d])
        return inv / inv.sum()

    def membership(self, x):
        j, lam = self.nearest(x)
        c, plam = self.row[j]
        lam = min(lam, plam)
        h = self.heights(c, lam)
        ml = self.maxl[c]
        s = np.array([ml / (ml - v) if ml - v > 0 else ml / 1e-8 for v in h])
        o = np.exp(s - s.max())
        o /= o.sum()
        r = self.dist(x) ** 0.5 * o ** 2
        r /= r.sum()
        top = self.maxl[self.sel[int(np.argmax(h))]]
        return r * h.max() / (max(lam, top) + 1e-8)

    def all_points(self, p):
        c, lam = self.row[p]
        h = self.heights(c, lam)
        s = np.array([math.exp(-(self.maxl[c] + 1e-8) / v) for v in h])
        o = np.exp(s - s.max())
        o /= o.sum()
        r = self.dist(self.X[p]) * o
        r /= r.sum()
        top = self.maxl[self.sel[int(np.argmax(h))]]
        return r * h.max() / max(top, lam)


@pytest.mark.parametrize("k,m", [(3, 5), (4, 6), (2, 4)])
def test_ties_and_duplicates_equal_brute_force(k, m):
    X, new = grid_cloud()
    est = HDBSCAN(min_cluster_size=m, min_samples=k, prediction_data=True,
                  backend="cpu").fit(X)
    assert est.labels_.max() >= 1
    b = Brute(est, X)
    lab, prob = ed.approximate_predict(est, new)
    want = [b.predict(x) for x in new]
    np.testing.assert_array_equal(lab, [w[0] for w in want])
    np.testing.assert_allclose(prob, [w[1] for w in want], rtol=1e-12, atol=0)
    np.testing.assert_allclose(ed.membership_vector(est, new),
                               [b.membership(x) for x in new], rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(ed.all_points_membership_vectors(est),
                               [b.all_points(p) for p in range(len(X))], rtol=1e-12,
                               atol=1e-15)
    for e, w in zip(est.exemplars_, b.exemplars):
        np.testing.assert_array_equal(e, w[np.lexsort(w.T[::-1])])


def test_ties_and_duplicates_order_free():
    """Permuting the training rows permutes the fit and the memberships of
    the fitted points, and leaves the predictions of new points as they
    were (the labels renumbered as the fit's)."""
    X, new = grid_cloud()
    kw = dict(min_cluster_size=5, min_samples=3, prediction_data=True, backend="cpu")
    a = HDBSCAN(**kw).fit(X)
    for seed in (1, 2, 3):
        p = np.random.default_rng(seed).permutation(len(X))
        b = HDBSCAN(**kw).fit(X[p])
        relabel = perm_of(a.labels_[p], b.labels_)
        assert np.array_equal(np.where(a.labels_[p] >= 0, relabel[a.labels_[p]], -1),
                              b.labels_)
        la, pa = ed.approximate_predict(a, new)
        lb, pb = ed.approximate_predict(b, new)
        np.testing.assert_array_equal(np.where(la >= 0, relabel[la], -1), lb)
        np.testing.assert_array_equal(pa, pb)
        inv = np.argsort(relabel)
        np.testing.assert_allclose(ed.membership_vector(a, new)[:, inv],
                                   ed.membership_vector(b, new), rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(ed.all_points_membership_vectors(a)[p][:, inv],
                                   ed.all_points_membership_vectors(b), rtol=1e-12,
                                   atol=1e-15)
        for j in range(len(relabel)):
            np.testing.assert_array_equal(a.exemplars_[j], b.exemplars_[relabel[j]])


@pytest.fixture(scope="module")
def client():
    with ed.EmbeddedCluster(n_workers=1, backend="cpu") as emb:
        yield emb.client


def test_dask_array_on_a_worker_predicts_as_in_memory(client, tmp_path):
    """A dask array clustered on a worker (the tree comes back, or stays
    there with out=) keeps the same prediction data and centres as the
    in-memory fit; a path source is refused before any work."""
    import dask.array as da
    import zarr

    X = blobs(600, seed=4)
    Y = np.random.default_rng(5).random((50, 2)) * 12 - 1
    kw = dict(min_cluster_size=15, min_samples=3, prediction_data=True, store_centers="both",
              backend="cpu")
    local = HDBSCAN(**kw).fit(X)
    for extra in ({}, {"out": str(tmp_path / "c.zarr")}):
        remote = HDBSCAN(client=client, **kw, **extra).fit(da.from_array(X, chunks=(200, 2)))
        np.testing.assert_array_equal(remote.labels_, local.labels_)
        for f in (ed.approximate_predict, ed.membership_vector):
            for a, b in zip(np.atleast_1d(f(remote, Y)), np.atleast_1d(f(local, Y))):
                np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(remote.centroids_, local.centroids_, rtol=1e-12)
        np.testing.assert_array_equal(remote.medoids_, local.medoids_)
    path = str(tmp_path / "snap.zarr")
    g = zarr.open_group(path, mode="w")
    g.create_array("points", shape=X.shape, chunks=(300, 2), dtype=X.dtype)[...] = X
    with pytest.raises(InputError, match="need the points in this process"):
        HDBSCAN(client=client, **kw).fit(path)


def test_every_code_path_gives_the_same_memberships(fitted, monkeypatch):
    """The merge-height table and the per-point walk, one block or several,
    agree."""
    import emst_dask.products.hdbscan.membership as P

    X, Y, ours, _, _ = fitted
    want_all = ed.all_points_membership_vectors(ours)
    want_mv = ed.membership_vector(ours, Y)
    for entries in (0, 2**25):
        monkeypatch.setattr(P, "BLOCK_ROWS", 37)  # membership_vector's blocks
        monkeypatch.setattr(P, "MERGE_TABLE_ENTRIES", entries)
        back = pickle.loads(pickle.dumps(ours))  # without the cached tables
        np.testing.assert_allclose(ed.all_points_membership_vectors(back), want_all,
                                   rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(ed.membership_vector(back, Y), want_mv, rtol=1e-12,
                                   atol=1e-15)
