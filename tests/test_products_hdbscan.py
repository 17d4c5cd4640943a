"""HDBSCAN* extraction (``emst_dask.products.hdbscan``) against independent
oracles: scikit-learn's and hdbscan's ``HDBSCAN`` on clouds without tied
merges, a brute-force level-set oracle built from the dense
mutual-reachability matrix (``hdbscan_oracle``) on clouds with ties, and
invariance under row permutations and under the choice among equal-weight
spanning trees.

``min_samples`` conventions: our k (``emst(min_samples=k)``) counts the
point itself, as scikit-learn's ``min_samples=k``; hdbscan's is ``k - 1``.
"""
from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import hdbscan_oracle as O
from emst_dask import HDBSCAN, InputError, emst
from emst_dask.products.hdbscan import (CONDENSED_DTYPE, cluster_persistence, condensed_tree,
                                        extract, labels_and_probabilities, level_tree,
                                        outlier_scores, select_clusters, stabilities)

sk_cluster = pytest.importorskip("sklearn.cluster")
make_blobs = pytest.importorskip("sklearn.datasets").make_blobs
hdbscan = pytest.importorskip("hdbscan")


# ----------------------------------------------------------------- helpers

def label_map(a, b):
    """{label of a: label of b} when a and b are the same partition with the
    same noise, else None."""
    if not np.array_equal(a < 0, b < 0):
        return None
    keep = a >= 0
    pairs = set(zip(a[keep].tolist(), b[keep].tolist()))
    if len(pairs) != len(set(a[keep].tolist())) or len(pairs) != len(set(b[keep].tolist())):
        return None
    return dict(pairs)


def assert_same_partition(a, b):
    assert label_map(a, b) is not None, "different partitions"


def assert_same_persistence(mine, ref, mp, rtol=0.0):
    """Per-cluster values in label order, matched through the label map
    (a selected cluster with no point, possible with allow_single_cluster,
    is matched by value)."""
    assert len(mine) == len(ref)
    if len(mp) == len(mine):
        np.testing.assert_allclose(mine, ref[[mp[i] for i in range(len(mine))]], rtol=rtol)
    else:
        np.testing.assert_allclose(np.sort(mine), np.sort(ref), rtol=rtol)


def run(tree, n, *args, **kw):
    return extract(tree.source, tree.target, tree.weight, n, *args, **kw)


def assert_same_condensed(mine, ref, rtol=0.0):
    """Two canonical condensed trees (``O.canonical``/``O.condense``): the same
    cluster sets, parents, and lambdas (exact, or to rtol)."""
    assert mine.keys() == ref.keys()
    for c, v in ref.items():
        w = mine[c]
        assert w["parent"] == v["parent"]
        assert w["points"].keys() == v["points"].keys()
        for key in ("birth", "death"):
            assert w[key] == pytest.approx(v[key], rel=rtol, abs=0)
        for p, lam in v["points"].items():
            assert w["points"][p] == pytest.approx(lam, rel=rtol, abs=0)


# ------------------------------------------------ scikit-learn and hdbscan

CLOUDS = {  # name -> (n, centers, std, seed)
    "small": (400, 4, 1.0, 0),
    "mid": (1500, 6, 1.6, 1),
    "large": (3000, 5, 1.2, 2),
}
_TREES = {}


def cloud(name, k):
    """(X, tree) of a blob cloud, tie-free: the level-set tree is binary."""
    key = (name, k)
    if key not in _TREES:
        n, centers, std, seed = CLOUDS[name]
        X, _ = make_blobs(n, centers=centers, cluster_std=std, random_state=seed)
        tree = emst(X, min_samples=k, backend="cpu")
        _, offsets, _ = level_tree(tree.source, tree.target, tree.weight, n)
        assert np.diff(offsets).max() == 2, "the cloud has tied merges"
        _TREES[key] = (X, tree)
    return _TREES[key]


PARAMS = [  # (min_cluster_size, method, allow_single_cluster, epsilon, max_cluster_size)
    (m, meth, allow, eps, mx)
    for m, meth, allow, eps, mx in itertools.product(
        [5, 25], ["eom", "leaf"], [False, True], [0.0, 0.6], [None, 120])
    if not (meth == "leaf" and mx is not None)
] + [(60, "eom", True, 0.0, None), (60, "eom", True, 3.0, None), (400, "eom", True, 0.0, None),
     (400, "eom", False, 0.0, None), (2, "leaf", False, 0.0, None)]


def pid(p):
    return "-".join(str(x) for x in p)


@pytest.mark.parametrize("params", PARAMS, ids=pid)
@pytest.mark.parametrize("k", [1, 2])
@pytest.mark.parametrize("name", ["small", "mid", "large"])
def test_matches_sklearn(name, k, params):
    m, meth, allow, eps, mx = params
    X, tree = cloud(name, k)
    r = run(tree, len(X), m, meth, allow, eps, mx)
    est = sk_cluster.HDBSCAN(min_cluster_size=m, min_samples=k, cluster_selection_method=meth,
                             allow_single_cluster=allow, cluster_selection_epsilon=eps,
                             max_cluster_size=mx, copy=True)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.fit(X)
    except (TypeError, KeyError) as e:  # its traverse_upwards under numpy 2; its KeyError
        pytest.skip(f"scikit-learn fails on this case itself: {type(e).__name__}: {e}")
    assert_same_partition(r.labels, est.labels_)
    np.testing.assert_allclose(r.probabilities, est.probabilities_, rtol=0, atol=1e-9)


@pytest.mark.parametrize("params", PARAMS, ids=pid)
@pytest.mark.parametrize("name", ["small", "mid"])
def test_matches_hdbscan(name, params):
    m, meth, allow, eps, mx = params
    k = 2
    X, tree = cloud(name, k)
    r = run(tree, len(X), m, meth, allow, eps, mx)
    est = hdbscan.HDBSCAN(min_cluster_size=m, min_samples=k - 1, cluster_selection_method=meth,
                          allow_single_cluster=allow, cluster_selection_epsilon=eps,
                          max_cluster_size=mx or 0, algorithm="prims_kdtree")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(X)
    mp = label_map(r.labels, est.labels_)
    assert mp is not None, "different partitions"
    np.testing.assert_allclose(r.probabilities, est.probabilities_, rtol=0, atol=1e-9)
    np.testing.assert_allclose(r.outlier_scores, est.outlier_scores_, rtol=0, atol=1e-9)
    # hdbscan keeps the replaced stability of a cluster excess of mass did
    # not keep in a C float (float32); such clusters come back with epsilon
    # or max_cluster_size
    rtol = 1e-6 if (eps or mx) and meth == "eom" else 1e-9
    assert_same_persistence(r.persistence, est.cluster_persistence_, mp, rtol)
    # the condensed tree and the stabilities, cluster by cluster
    ref = est.condensed_tree_.to_numpy()
    assert_same_condensed(O.canonical(r.condensed_tree), O.canonical(ref), rtol=1e-9)
    from hdbscan._hdbscan_tree import compute_stability
    ref_stab = compute_stability(ref)
    sets_mine = {c: s for s, c in _ids(r.condensed_tree).items()}
    sets_ref = _ids(ref)
    for c, s in sets_mine.items():
        assert r.stability[c - len(X)] == pytest.approx(ref_stab[sets_ref[s]], rel=1e-9)


@pytest.mark.parametrize("params", PARAMS, ids=pid)
@pytest.mark.parametrize("k", [1, 2])
@pytest.mark.parametrize("name", ["small", "large"])
def test_matches_hdbscan_on_the_same_tree(name, k, params):
    """hdbscan's condensation and selection run on our spanning tree (its
    binary single-linkage tree): every parameter, k = 1 included, where
    scikit-learn fails on its own."""
    from hdbscan._hdbscan_linkage import label
    from hdbscan._hdbscan_tree import outlier_scores as hd_outlier_scores
    from hdbscan.hdbscan_ import _tree_to_labels
    m, meth, allow, eps, mx = params
    X, tree = cloud(name, k)
    r = run(tree, len(X), m, meth, allow, eps, mx)
    edges = np.stack([tree.source, tree.target, tree.weight], axis=1).astype(np.float64)
    edges = edges[np.argsort(edges[:, 2], kind="stable")]
    labels, prob, persistence, ct, _ = _tree_to_labels(
        None, label(edges), m, meth, allow, False, eps, 0.0, mx or 0)
    mp = label_map(r.labels, labels)
    assert mp is not None, "different partitions"
    np.testing.assert_allclose(r.probabilities, prob, rtol=0, atol=1e-9)
    np.testing.assert_allclose(r.outlier_scores, hd_outlier_scores(ct), rtol=0, atol=1e-9)
    rtol = 1e-6 if (eps or mx) and meth == "eom" else 1e-9  # hdbscan's float32, as above
    assert_same_persistence(r.persistence, persistence, mp, rtol)
    assert_same_condensed(O.canonical(r.condensed_tree), O.canonical(ct))


def _ids(condensed):
    """{point set: cluster id}."""
    n = int(condensed["parent"].min())
    members = {}
    for p, c in zip(condensed["parent"][::-1].tolist(), condensed["child"][::-1].tolist()):
        members.setdefault(p, set())
        members[p] |= members.get(c, set()) if c >= n else {c}
    return {frozenset(v): c for c, v in members.items()}


# ------------------------------------------------ the level-set oracle (ties)

def lattice(seed, n, side, d=2):
    rng = np.random.default_rng(seed)
    return rng.integers(0, side, size=(n, d)).astype(np.float64)


LATTICES = [(seed, n, side) for seed, (n, side) in enumerate(
    [(40, 4), (80, 6), (120, 10), (150, 5), (100, 30), (60, 3)])]


@pytest.mark.parametrize("k", [1, 2, 3, 5])
@pytest.mark.parametrize("lat", LATTICES, ids=lambda x: f"s{x[0]}n{x[1]}side{x[2]}")
def test_oracle_ties(lat, k):
    X = lattice(*lat)
    n = len(X)
    tree = emst(X, min_samples=k, backend="cpu")
    mrd = O.mutual_reachability(X, k)
    nodes = O.level_hierarchy(mrd)
    for m in (2, 4, 9):
        ref = O.condense(nodes, n, m)
        r = run(tree, n, m)
        assert_same_condensed(O.canonical(r.condensed_tree), ref)  # exact lambdas
        for meth, allow in itertools.product(["eom", "leaf"], [False, True]):
            sel = O.select(ref, meth, allow)
            lab, prob, score = O.flat(ref, sel, n, allow)
            r = run(tree, n, m, meth, allow)
            assert_same_partition(r.labels, lab)
            np.testing.assert_array_equal(r.probabilities, prob)
            np.testing.assert_array_equal(r.outlier_scores, score)


@pytest.mark.parametrize("k", [1, 4, 8])
def test_oracle_float_cloud(k):
    X, _ = make_blobs(250, centers=3, cluster_std=1.0, random_state=7)
    n = len(X)
    tree = emst(X, min_samples=k, backend="cpu")
    ref = O.condense(O.level_hierarchy(O.mutual_reachability(X, k)), n, 10)
    r = run(tree, n, 10)
    assert_same_condensed(O.canonical(r.condensed_tree), ref, rtol=1e-12)
    lab, prob, score = O.flat(ref, O.select(ref), n)
    assert_same_partition(r.labels, lab)
    np.testing.assert_allclose(r.probabilities, prob, atol=1e-9, rtol=0)
    np.testing.assert_allclose(r.outlier_scores, score, atol=1e-9, rtol=0)


def test_tie_semantics_matter():
    """Two 4-point runs 2 apart, then two pairs 3 further: at distance 3 the
    8 points and both pairs merge at once.  One merge: the 8 go on, the
    pairs are noise, and the runs are the clusters.  A binary single-linkage
    tree that joins the pairs first sees a cluster of 4 born there."""
    x = np.array([0, 1, 2, 3, 5, 6, 7, 8, 11, 12, 15, 16], np.float64)
    X = np.stack([x, np.zeros_like(x)], axis=1)
    n, m = len(X), 4
    tree = emst(X, min_samples=1, backend="cpu")
    ref = O.condense(O.level_hierarchy(O.mutual_reachability(X, 1)), n, m)
    lab, prob, _ = O.flat(ref, O.select(ref), n)
    expected = np.array([0, 0, 0, 0, 1, 1, 1, 1, -1, -1, -1, -1])
    assert_same_partition(lab, expected)
    r = run(tree, n, m)
    assert_same_partition(r.labels, expected)
    np.testing.assert_array_equal(r.probabilities, prob)

    from hdbscan._hdbscan_linkage import label
    from hdbscan.hdbscan_ import _tree_to_labels
    edges = np.stack([tree.source, tree.target, tree.weight], axis=1).astype(np.float64)
    edges = edges[np.argsort(edges[:, 2], kind="stable")]
    tied = np.flatnonzero(edges[:, 2] == 3.0)
    assert len(tied) == 2
    binary = []
    for order in (tied, tied[::-1]):
        e = edges.copy()
        e[tied] = edges[order]
        binary.append(_tree_to_labels(None, label(e), m)[0])
    assert any(label_map(b, expected) is None for b in binary)
    assert any(len(set(b.tolist()) - {-1}) == 3 for b in binary)


# ------------------------------------------------------------- invariance

def _kruskal_random_ties(X, k, seed):
    """An MST of the mutual-reachability graph, ties broken at random."""
    mrd = O.mutual_reachability(X, k)
    n = len(X)
    i, j = np.triu_indices(n, 1)
    w = mrd[i, j]
    order = np.lexsort((np.random.default_rng(seed).random(len(w)), w))
    uf = list(range(n))

    def find(a):
        while uf[a] != a:
            uf[a] = uf[uf[a]]
            a = uf[a]
        return a
    s, t, ww = [], [], []
    for e in order:
        a, b = find(i[e]), find(j[e])
        if a != b:
            uf[a] = b
            s.append(i[e])
            t.append(j[e])
            ww.append(w[e])
    return np.array(s), np.array(t), np.array(ww)


@pytest.mark.parametrize("seed", range(4))
def test_any_equal_weight_tree_same_result(seed):
    X = lattice(100 + seed, 90, 5)
    n, k = len(X), 1 + seed
    tree = emst(X, min_samples=k, backend="cpu")
    s, t, w = _kruskal_random_ties(X, k, seed)
    assert not (np.array_equal(np.sort(s + n * t), np.sort(tree.source + n * tree.target)))
    for meth, allow in itertools.product(["eom", "leaf"], [False, True]):
        a = run(tree, n, 3, meth, allow)
        # another spanning tree, its edges shuffled and turned around
        p = np.random.default_rng(seed).permutation(n - 1)
        b = extract(t[p], s[p], w[p], n, 3, meth, allow)
        np.testing.assert_array_equal(a.condensed_tree, b.condensed_tree)
        np.testing.assert_array_equal(a.labels, b.labels)
        np.testing.assert_array_equal(a.probabilities, b.probabilities)
        np.testing.assert_array_equal(a.outlier_scores, b.outlier_scores)
        np.testing.assert_array_equal(a.persistence, b.persistence)


@given(st.data())
def test_row_permutation_invariance(data):
    n = data.draw(st.integers(2, 60), label="n")
    side = data.draw(st.integers(1, 8), label="side")
    seed = data.draw(st.integers(0, 2**31), label="seed")
    k = data.draw(st.integers(1, min(n, 5)), label="k")
    m = data.draw(st.integers(2, 8), label="m")
    meth = data.draw(st.sampled_from(["eom", "leaf"]), label="method")
    allow = data.draw(st.booleans(), label="allow_single_cluster")
    eps = data.draw(st.sampled_from([0.0, 0.0, 1.0, 1.5, 2.5]), label="epsilon")
    X = lattice(seed, n, side)
    perm = np.random.default_rng(seed).permutation(n)
    a = run(emst(X, min_samples=k, backend="cpu"), n, m, meth, allow, eps)
    b = run(emst(X[perm], min_samples=k, backend="cpu"), n, m, meth, allow, eps)
    back = np.empty(n, np.int64)
    back[perm] = np.arange(n)  # row i of X is row back[i] of X[perm]
    assert_same_partition(a.labels, b.labels[back])
    np.testing.assert_array_equal(a.probabilities, b.probabilities[back])
    np.testing.assert_array_equal(a.outlier_scores, b.outlier_scores[back])
    mp = label_map(a.labels, b.labels[back])
    assert_same_persistence(a.persistence, b.persistence, mp)
    ca, cb = O.canonical(a.condensed_tree), O.canonical(b.condensed_tree)
    relabel = {}
    for c, v in cb.items():
        relabel[frozenset(perm[list(c)].tolist())] = dict(
            parent=None if v["parent"] is None else frozenset(perm[list(v["parent"])].tolist()),
            birth=v["birth"], death=v["death"],
            points={int(perm[p]): lam for p, lam in v["points"].items()})
    assert_same_condensed(ca, relabel)


# ---------------------------------------------------------- the functions

def test_functional_pieces_compose():
    X, tree = cloud("small", 2)
    n = len(X)
    for meth, allow, eps, mx in [("eom", False, 0.0, None), ("eom", True, 0.6, 120),
                                 ("leaf", True, 0.6, None)]:
        r = run(tree, n, 5, meth, allow, eps, mx)
        ct = condensed_tree(tree.source, tree.target, tree.weight, n, 5)
        assert ct.dtype == CONDENSED_DTYPE
        np.testing.assert_array_equal(ct, r.condensed_tree)
        stab = stabilities(ct)
        np.testing.assert_array_equal(stab, r.stability)
        sel, eom_stab = select_clusters(ct, stab, meth, allow, eps, mx)
        np.testing.assert_array_equal(sel, r.selected)
        lab, prob = labels_and_probabilities(ct, sel, allow, eps)
        np.testing.assert_array_equal(lab, r.labels)
        np.testing.assert_array_equal(prob, r.probabilities)
        np.testing.assert_array_equal(outlier_scores(ct), r.outlier_scores)
        np.testing.assert_array_equal(cluster_persistence(ct, lab, sel, eom_stab), r.persistence)
        assert r.labels.dtype == np.int64 and r.probabilities.dtype == np.float64
        assert set(np.unique(r.labels)) <= set(range(-1, r.n_clusters))


def test_condensed_tree_layout():
    X, tree = cloud("mid", 1)
    n = len(X)
    ct = condensed_tree(tree.source, tree.target, tree.weight, n, 20)
    pts = ct[ct["child"] < n]
    assert np.array_equal(np.sort(pts["child"]), np.arange(n))  # each point once
    assert (pts["child_size"] == 1).all()
    cl = ct[ct["child"] >= n]
    assert ct["parent"].min() == n
    assert (cl["child"] > cl["parent"]).all()  # parents first
    assert np.array_equal(np.sort(cl["child"]), np.arange(n + 1, n + 1 + len(cl)))
    assert (cl["child_size"] >= 20).all()
    # a cluster's size is the number of points below it
    sizes = {c: len(members) for members, c in _ids(ct).items()}
    for row in cl:
        assert sizes[row["child"]] == row["child_size"]


def test_float32_weights_and_edge_cases():
    X, tree = cloud("small", 1)
    n = len(X)
    a = run(tree, n, 10)
    b = extract(tree.source, tree.target, tree.weight.astype(np.float32), n, 10)
    assert b.labels.shape == (n,)
    # one point; two points
    r = extract(np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0), 1, 2)
    assert r.labels.tolist() == [-1] and r.outlier_scores.tolist() == [0.0]
    r = extract([0], [1], [1.0], 2, 2)
    assert r.labels.tolist() == [-1, -1]
    r = extract([0], [1], [1.0], 2, 2, allow_single_cluster=True)
    assert r.labels.tolist() == [0, 0] and r.probabilities.tolist() == [1.0, 1.0]
    # min_cluster_size above n: no cluster, or the root alone
    r = run(tree, n, n + 1)
    assert (r.labels == -1).all() and r.n_clusters == 0
    r = run(tree, n, n + 1, allow_single_cluster=True)
    assert r.selected.tolist() == [n] and (r.labels >= -1).all()
    assert a.n_clusters >= 2


def test_all_duplicates():
    X = np.ones((30, 2))
    for k in (1, 3):
        tree = emst(X, min_samples=k, backend="cpu")
        r = run(tree, 30, 5)
        assert (r.labels == -1).all()
        assert np.isinf(r.condensed_tree["lambda_val"]).all()
        r = run(tree, 30, 5, allow_single_cluster=True)
        assert (r.labels == 0).all() and (r.probabilities == 1).all()
        assert (r.outlier_scores == 0).all() and r.persistence.tolist() == [1.0]


def test_duplicates_glosh_limit():
    """A cluster holding duplicates has lambda max inf: the other points
    score 1 (hdbscan's formula gives NaN there)."""
    X = np.concatenate([np.zeros((6, 1)), np.arange(1, 9)[:, None] * 0.5, [[40.0]]])
    X = np.concatenate([X, X + 100])
    tree = emst(X, min_samples=1, backend="cpu")
    r = run(tree, len(X), 3)
    assert not np.isnan(r.outlier_scores).any()
    assert ((r.outlier_scores >= 0) & (r.outlier_scores <= 1)).all()
    ref = O.condense(O.level_hierarchy(O.mutual_reachability(X, 1)), len(X), 3)
    np.testing.assert_array_equal(r.outlier_scores, O.flat(ref, O.select(ref), len(X))[2])


# ------------------------------------------------------------------ checks

BAD = [
    (dict(min_cluster_size=1), "min_cluster_size"),
    (dict(min_cluster_size=2.5), "min_cluster_size"),
    (dict(min_cluster_size=True), "min_cluster_size"),
    (dict(cluster_selection_method="max"), "cluster_selection_method"),
    (dict(cluster_selection_epsilon=-1.0), "epsilon"),
    (dict(cluster_selection_epsilon=math.inf), "epsilon"),
    (dict(cluster_selection_epsilon=math.nan), "epsilon"),
    (dict(cluster_selection_epsilon="0"), "epsilon"),
    (dict(max_cluster_size=0), "max_cluster_size"),
    (dict(max_cluster_size=3.0), "max_cluster_size"),
    (dict(allow_single_cluster=None), "allow_single_cluster"),
]


@pytest.mark.parametrize("kw,word", BAD, ids=[w + str(i) for i, (_, w) in enumerate(BAD)])
def test_bad_parameters(kw, word):
    args = dict(min_cluster_size=5)
    args.update(kw)
    with pytest.raises(InputError, match=word):
        # the edges are bad too: parameters are checked first
        extract([0, 5], [1, 2], [1.0, -1.0], 3, **args)


@pytest.mark.parametrize("s,t,w,n,word", [
    ([0], [1], [1.0], 3, "shape"),
    ([0, 1], [1, 3], [1.0, 1.0], 3, "rows"),
    ([0, 1], [1, 2], [1.0, -1.0], 3, "finite"),
    ([0, 1], [1, 2], [1.0, np.nan], 3, "finite"),
    ([0, 1], [1, 0], [1.0, 2.0], 3, "cycle"),
    ([0, 0], [0, 1], [1.0, 2.0], 3, "cycle"),
    ([0.0, 1.0], [1, 2], [1.0, 2.0], 3, "integer"),
    ([0], [1], [1.0], 0, "n must"),
])
def test_bad_edges(s, t, w, n, word):
    with pytest.raises(InputError, match=word):
        extract(np.asarray(s), np.asarray(t), np.asarray(w), n, 2)


def test_distances_too_small_for_lambdas_are_refused_scaled_ones_are_the_same():
    """lambda = 1 / distance overflows float64 below about 5.6e-309, and the
    stabilities (sums of lambdas over points) below n times that: such a
    cloud is refused with the remedy; a cloud scaled by a power of two
    within range gives the same clusters, bit for bit."""
    rng = np.random.default_rng(7)
    X = np.concatenate([rng.normal(c, 0.05, (150, 2)) for c in ([0, 0], [1, 1], [0, 2])])
    ref = HDBSCAN(min_cluster_size=10, min_samples=4, backend="cpu").fit(X)
    assert ref.labels_.max() == 2
    for k in (-1000, -600, 600, 1000):
        got = HDBSCAN(min_cluster_size=10, min_samples=4, backend="cpu").fit(X * 2.0 ** k)
        np.testing.assert_array_equal(got.labels_, ref.labels_)
        np.testing.assert_array_equal(got.probabilities_, ref.probabilities_)
        np.testing.assert_array_equal(got.outlier_scores_, ref.outlier_scores_)
    for Y in (X * 2.0 ** -1040, 2.0 ** -1000 + X * 2.0 ** -1040):  # subnormal distances
        with pytest.raises(InputError, match="power of two"):
            HDBSCAN(min_cluster_size=10, min_samples=4, backend="cpu").fit(Y)
