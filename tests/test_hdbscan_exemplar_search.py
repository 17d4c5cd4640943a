"""The pruned nearest-exemplar search of soft memberships
(``products/hdbscan/exemplar_search.py``) against a brute-force minimum
over every exemplar: equal bit for bit, on clouds with ties, duplicate
points, points on the exemplars, one-exemplar clusters and tiles cut short."""
from __future__ import annotations

import pickle

import numpy as np
import pytest

from emst_dask.products.hdbscan import exemplar_search as S


def brute(X, exemplars):
    """min over each cluster's exemplars of |x - e|, the squares summed in
    coordinate order (the search's formula), for every pair."""
    out = np.empty((len(X), len(exemplars)))
    for j, e in enumerate(exemplars):
        diff = X[:, None, :] - e[None, :, :]
        s = diff[..., 0] * diff[..., 0]
        for c in range(1, X.shape[1]):
            s = s + diff[..., c] * diff[..., c]
        out[:, j] = np.sqrt(s.min(axis=1))
    return out


def clusters(rng, d, sizes, lattice):
    out = []
    for m in sizes:
        c = rng.random(d) * 10
        if lattice:  # coordinates on a grid: many equal distances
            e = c.round() + rng.integers(-3, 4, (m, d)) * 0.5
        else:
            e = c + rng.normal(0, 0.2 + rng.random(), (m, d))
        if m > 3:
            e[: m // 4] = e[m // 4: 2 * (m // 4)]  # duplicated exemplars
        out.append(e)
    return out


@pytest.mark.parametrize("d", [1, 2, 3, 5])
@pytest.mark.parametrize("lattice", [False, True])
def test_equal_to_brute_force_bit_for_bit(d, lattice):
    rng = np.random.default_rng(d * 10 + lattice)
    sizes = [1, 2, 7, 8, 9, 17, 64, 300, 1000]
    ex = clusters(rng, d, sizes, lattice)
    idx = S.build_index([e.copy() for e in ex])
    X = np.concatenate([
        rng.random((400, d)) * 12 - 1,  # everywhere, near and far
        np.concatenate(ex)[rng.choice(sum(sizes), 150)],  # on exemplars: distance 0
        np.repeat(rng.random((5, d)) * 10, 7, axis=0),  # duplicated queries
    ])
    if lattice:
        X = X.round() * 0.5
    want = brute(X, ex)
    for rows in (X, X[::-1], X[:S.TILE + 3], X[:1]):  # orders, tiles cut short
        got = S.nearest_exemplar_distances(idx, rows)
        np.testing.assert_array_equal(got, brute(rows, ex))
    np.testing.assert_array_equal(S.nearest_exemplar_distances(idx, X), want)
    perm = rng.permutation(len(X))
    np.testing.assert_array_equal(S.nearest_exemplar_distances(idx, X[perm]), want[perm])


def test_index_keeps_every_exemplar_and_bounds_it():
    rng = np.random.default_rng(3)
    ex = clusters(rng, 3, [1, 5, 33, 129, 1000], False)
    idx = S.build_index([e.copy() for e in ex])
    for j, e in enumerate(ex):  # the same multiset, reordered
        got = idx.points[idx.offsets[j]:idx.offsets[j + 1]]
        np.testing.assert_array_equal(got[np.lexsort(got.T)], e[np.lexsort(e.T)])
        no = idx.node_offsets[j]  # the root box is the cluster's box
        np.testing.assert_array_equal(idx.lo[no], e.min(axis=0))
        np.testing.assert_array_equal(idx.hi[no], e.max(axis=0))
        h = idx.height[j]
        n = len(e)
        for t in range(1 << h):  # each leaf within its box, its box within the root's
            s, f = (t * n) >> h, ((t + 1) * n) >> h
            assert 1 <= f - s <= S.LEAF
            r = no + (1 << h) - 1 + t
            assert np.all(got[s:f] >= idx.lo[r]) and np.all(got[s:f] <= idx.hi[r])


def test_out_of_range_and_empty():
    rng = np.random.default_rng(0)
    ex = clusters(rng, 2, [3, 40], False)
    idx = S.build_index(ex)
    assert S.nearest_exemplar_distances(idx, np.empty((0, 2))).shape == (0, 2)
    far = np.array([[1e300, -1e300], [0.0, 0.0]])  # squares overflow to inf
    with np.errstate(over="ignore"):
        want = brute(far, ex)
    np.testing.assert_array_equal(S.nearest_exemplar_distances(idx, far), want)
    empty = S.build_index([])
    assert S.nearest_exemplar_distances(empty, rng.random((4, 2))).shape == (4, 0)


def test_prediction_data_pickled_before_the_index_loads(monkeypatch):
    """A model pickled with the KD-trees' field (before the index) still
    predicts."""
    from emst_dask.products.hdbscan.prediction import PredictionData

    rng = np.random.default_rng(1)
    ex = clusters(rng, 2, [5, 9], False)
    pd = PredictionData(np.zeros((1, 2)), np.zeros(1), 1, np.zeros(1, np.int64), np.zeros(1),
                        np.zeros(1), np.zeros(1, np.int64), np.zeros(1),
                        np.arange(2), np.zeros(1, np.int64), np.zeros(1), ex)

    def old_state(self):
        state = dict(self.__dict__)
        del state["_exemplar_index"]
        state["_tree"] = state["_exemplar_trees"] = None
        return state

    with monkeypatch.context() as m:
        m.setattr(PredictionData, "__getstate__", old_state)
        blob = pickle.dumps(pd)
    old = pickle.loads(blob)
    assert not hasattr(old, "_exemplar_trees")
    X = rng.random((10, 2))
    np.testing.assert_array_equal(
        S.nearest_exemplar_distances(old.exemplar_index(), X), brute(X, ex))
