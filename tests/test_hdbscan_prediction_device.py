"""hdbscan's prediction API on the device (``device_prediction``): a model
fitted on CuPy points predicts there, equal to the host's computation
(labels and connecting points exactly, probabilities and memberships to
1e-9), with ties and duplicate points.

Without a GPU the device path runs on ``cupy_emu`` (its CUDA sources and
the kernel set's queries built with g++, threads one after another); the
``gpu`` tests fit on CuPy and compare with a CPU fit of the same points.
"""
from __future__ import annotations

import copy

import numpy as np
import pytest

import emst_dask as ed
from emst_dask import HDBSCAN
from emst_dask.products.hdbscan import device_prediction

from cuda_emu import emulated_kernels
from cupy_emu import emulated_cupy, installed


def blobs(n=900, seed=1, d=2):
    rng = np.random.default_rng(seed)
    c = rng.random((4, d)) * 10
    parts = [ci + rng.normal(0, 0.3 + 0.1 * i, (n // 9 * 2, d)) for i, ci in enumerate(c)]
    parts.append(rng.random((n - 4 * (n // 9 * 2), d)) * 10)
    return np.concatenate(parts)


def tied(seed=7):
    """Lattice blobs, duplicated points, lattice noise; new points on the
    lattice's half steps and on fitted points: ties everywhere."""
    rng = np.random.default_rng(seed)
    g = np.stack(np.meshgrid(np.arange(5.0), np.arange(5.0)), -1).reshape(-1, 2)
    X = np.concatenate([g, g + [20.0, 0.0], g * 2.0 + [0.0, 20.0], g[:6] + [20.0, 20.0]])
    X = np.concatenate([X, X[rng.choice(len(X), 12, replace=False)],
                        rng.integers(0, 30, (15, 2)).astype(float)])
    new = np.concatenate([rng.integers(-2, 32, (60, 2)) * 0.5, X[:10]])
    return X, new


def same_prediction(host_model, dev_model, Y, dev_Y=None, get=np.asarray):
    """Every prediction of the device model equals the host model's."""
    dev_Y = Y if dev_Y is None else dev_Y
    lh, ph, nh = ed.approximate_predict(host_model, Y, return_connecting_points=True)
    ld, pd_, nd = ed.approximate_predict(dev_model, dev_Y, return_connecting_points=True)
    np.testing.assert_array_equal(get(ld), lh)
    np.testing.assert_array_equal(get(nd), nh)
    np.testing.assert_allclose(get(pd_), ph, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(get(ed.membership_vector(dev_model, dev_Y)),
                               ed.membership_vector(host_model, Y), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(get(ed.all_points_membership_vectors(dev_model)),
                               ed.all_points_membership_vectors(host_model),
                               rtol=1e-9, atol=1e-12)
    assert (lh >= 0).any()
    assert getattr(dev_model.prediction_data_, "_device", None) is not None  # ran there


# -- without a GPU: the device path on the emulator ----------------------------
@pytest.fixture
def emulated(monkeypatch):
    fake, K = emulated_cupy(), emulated_kernels()
    if fake is None or K is None:
        pytest.skip("no C++ compiler for the emulated CUDA kernels")
    monkeypatch.setattr(device_prediction, "_kernels", lambda: K)
    with installed(fake):
        yield fake


def _as_device(model):
    dev = copy.deepcopy(model)
    dev.prediction_data_.on_device = True
    return dev


@pytest.mark.parametrize("min_samples", [1, 2, 5, 12, 40])
def test_emulated_device_prediction_equals_host(emulated, min_samples):
    X = blobs()
    Y = np.concatenate([blobs(300, seed=5), X[:25], [[50.0, 50.0]]])
    host = HDBSCAN(min_cluster_size=15, min_samples=min_samples, prediction_data=True,
                   backend="cpu").fit(X)
    same_prediction(host, _as_device(host), Y)


def test_emulated_device_prediction_with_ties_and_duplicates(emulated):
    X, new = tied()
    for k, m in [(3, 5), (4, 6), (2, 4)]:
        host = HDBSCAN(min_cluster_size=m, min_samples=k, prediction_data=True,
                       backend="cpu").fit(X)
        same_prediction(host, _as_device(host), new)
        # order-free: the rows permuted, the same labels, neighbours and memberships
        perm = np.random.default_rng(k).permutation(len(X))
        dev = _as_device(HDBSCAN(min_cluster_size=m, min_samples=k, prediction_data=True,
                                 backend="cpu").fit(X[perm]))
        l1, p1, n1 = ed.approximate_predict(_as_device(host), new, True)
        l2, p2, n2 = ed.approximate_predict(dev, new, True)
        np.testing.assert_array_equal(X[n1], X[perm][n2])
        np.testing.assert_array_equal(p1, p2)


def test_emulated_device_all_points_streams(emulated, monkeypatch):
    """Blocks of a few rows, the merge heights walked per pair instead of
    tabulated: the same matrix; out= takes it; too large is refused."""
    X = blobs(d=3)
    host = HDBSCAN(min_cluster_size=15, min_samples=4, prediction_data=True,
                   backend="cpu").fit(X)
    dev = _as_device(host)
    want = ed.all_points_membership_vectors(host)
    monkeypatch.setattr(device_prediction, "MERGE_TABLE_ENTRIES", 1)
    got = np.empty_like(want)
    ed.all_points_membership_vectors(dev, out=got, block_rows=37)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
    import dask.config

    with dask.config.set({"emst_dask.hdbscan.membership-max-bytes": 1000}):
        with pytest.raises(ed.InputError, match="GiB"):
            ed.all_points_membership_vectors(dev)


def test_emulated_device_refuses_bad_points(emulated):
    host = HDBSCAN(min_cluster_size=15, prediction_data=True, backend="cpu").fit(blobs())
    dev = _as_device(host)
    with pytest.raises(ed.InputError, match="dimension"):
        ed.approximate_predict(dev, np.zeros((3, 3)))
    with pytest.raises(ed.InputError):
        ed.membership_vector(dev, np.array([[np.nan, 0.0]]))


# -- on a GPU: a fit on CuPy points against the CPU's fit ---------------------
def _gpu_fits(X, **params):
    cupy = pytest.importorskip("cupy")
    g = HDBSCAN(backend="cuda", prediction_data=True, **params).fit(cupy.asarray(X))
    c = HDBSCAN(backend="cpu", prediction_data=True, **params).fit(X)
    return cupy, g, c


def _clouds():
    X, new = tied()
    yield "tie-free", blobs(4000, d=3), np.concatenate([blobs(500, seed=5, d=3),
                                                         [[40.0, 40.0, 40.0]]]), 5
    yield "ties", X, new, 3
    rng = np.random.default_rng(3)  # quantised: duplicates and tied distances in 3-D
    Q = np.round(blobs(6000, seed=2, d=3), 1)
    yield "quantised", Q, np.concatenate([np.round(rng.random((400, 3)) * 10, 1), Q[:50]]), 8


@pytest.mark.gpu
@pytest.mark.parametrize("name,X,Y,k", list(_clouds()), ids=lambda v: v if isinstance(v, str) else "")
def test_gpu_fit_and_prediction_equal_the_cpu(name, X, Y, k):
    cupy, g, c = _gpu_fits(X, min_cluster_size=5 if name == "ties" else 20, min_samples=k)
    np.testing.assert_array_equal(g.labels_.get(), c.labels_)
    np.testing.assert_array_equal(g.probabilities_.get(), c.probabilities_)
    np.testing.assert_array_equal(g.outlier_scores_.get(), c.outlier_scores_)
    assert len(g.exemplars_) == len(c.exemplars_)
    for a, b in zip(g.exemplars_, c.exemplars_):
        np.testing.assert_array_equal(a, b)
    assert g.prediction_data_.on_device and not c.prediction_data_.on_device
    # numpy and CuPy new points against the device model: CuPy results
    same_prediction(c, g, Y, get=cupy.asnumpy)
    same_prediction(c, g, Y, dev_Y=cupy.asarray(Y), get=cupy.asnumpy)
    assert isinstance(ed.approximate_predict(g, Y)[0], cupy.ndarray)
    # CuPy new points against the host model: computed on the host
    lab, prob = ed.approximate_predict(c, cupy.asarray(Y))
    assert isinstance(lab, np.ndarray)
    np.testing.assert_array_equal(lab, ed.approximate_predict(c, Y)[0])


@pytest.mark.gpu
def test_gpu_all_points_streams_into_host_out(tmp_path):
    cupy, g, c = _gpu_fits(blobs(3000, d=3), min_cluster_size=20, min_samples=5)
    want = ed.all_points_membership_vectors(c)
    out = np.lib.format.open_memmap(tmp_path / "m.npy", mode="w+", dtype=np.float64,
                                    shape=want.shape)
    ed.all_points_membership_vectors(g, out=out, block_rows=500)
    np.testing.assert_allclose(out, want, rtol=1e-9, atol=1e-12)
    from emst_dask.products.hdbscan.membership import iter_all_points_membership_vectors

    blocks = list(iter_all_points_membership_vectors(g, block_rows=1000))
    assert all(isinstance(b, cupy.ndarray) for _, b in blocks)
    np.testing.assert_allclose(cupy.concatenate([b for _, b in blocks]).get(), want,
                               rtol=1e-9, atol=1e-12)
