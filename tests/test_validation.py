"""Bad input gets a clear InputError before any work; odd but valid input works."""
from __future__ import annotations

import os

import numpy as np
import pytest

import emst_dask
import emst_dask.engine.core
from emst_dask import InputError, emst
from emst_dask.kernels import cuda_available
from oracle import check_spanning_tree, host


@pytest.fixture
def no_engine(monkeypatch):
    """Make any call into the engine fail loudly: errors must come first."""
    def boom(*args, **kwargs):
        raise AssertionError("the engine was called before the input was refused")

    monkeypatch.setattr(emst_dask.engine.core, "boruvka", boom)


def test_input_error_is_value_error():
    assert issubclass(InputError, ValueError)


# ---------------------------------------------------------------------------
# non-finite values: count and first row
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite(no_engine, bad, dtype):
    pts = np.random.default_rng(0).random((100, 3)).astype(dtype)
    pts[17, 2] = bad
    pts[42, 0] = bad
    pts[42, 1] = bad  # the same row twice counts once
    pts[90, 1] = bad
    with pytest.raises(InputError) as err:
        emst(pts)
    msg = str(err.value)
    assert "NaN or inf" in msg
    assert "3 row" in msg, msg          # the count of bad rows
    assert "first bad row is 17" in msg, msg


def test_nan_in_first_row(no_engine):
    pts = np.ones((5, 2))
    pts[0, 0] = np.nan
    with pytest.raises(InputError, match=r"1 row.*first bad row is 0"):
        emst(pts)


def test_nan_in_one_point_cloud(no_engine):
    with pytest.raises(InputError, match="NaN or inf"):
        emst(np.array([[np.nan, 0.0]]))


def test_float16_overflowing_to_inf(no_engine):
    # float16 is computed in float32: its own inf is still refused
    pts = np.array([[1.0, np.inf], [0.0, 0.0]], np.float16)
    with pytest.raises(InputError, match="first bad row is 0"):
        emst(pts)


# ---------------------------------------------------------------------------
# shape
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(), (5,), (2, 3, 4), (0,), (1, 1, 1)])
def test_wrong_ndim(no_engine, shape):
    with pytest.raises(InputError, match=r"2-D array of shape \(n, d\)"):
        emst(np.zeros(shape))


def test_zero_columns(no_engine):
    with pytest.raises(InputError, match="zero columns"):
        emst(np.zeros((5, 0)))


@pytest.mark.parametrize("d", [9, 10, 64])
def test_too_many_columns(no_engine, d):
    with pytest.raises(InputError, match=rf"{d} columns.*1 to 8"):
        emst(np.zeros((5, d)))


def test_ragged_list(no_engine):
    with pytest.raises(InputError, match="cannot be read as an array"):
        emst([[0.0, 1.0], [2.0]])


# ---------------------------------------------------------------------------
# dtype
# ---------------------------------------------------------------------------
def test_object_dtype(no_engine):
    pts = np.array([[1.0, 2.0], [3.0, 4.0]], dtype=object)
    with pytest.raises(InputError, match="object"):
        emst(pts)


def test_none(no_engine):
    with pytest.raises(InputError):
        emst(None)


@pytest.mark.parametrize("pts", [np.array([["a", "b"], ["c", "d"]]),
                                 np.array([[b"a", b"b"]]),
                                 [["1.0", "2.0"], ["3.0", "4.0"]]],
                         ids=["unicode", "bytes", "list-of-str"])
def test_strings(no_engine, pts):
    with pytest.raises(InputError, match="non-numeric dtype"):
        emst(pts)


@pytest.mark.parametrize("dtype", [np.complex128, "datetime64[s]", "timedelta64[s]"])
def test_other_non_float_dtypes(no_engine, dtype):
    with pytest.raises(InputError, match="dtype"):
        emst(np.zeros((4, 2), dtype=dtype))


@pytest.mark.skipif(np.dtype(np.longdouble).itemsize <= 8, reason="longdouble is double here")
def test_long_double(no_engine):
    with pytest.raises(InputError, match="float32 or float64"):
        emst(np.zeros((4, 2), dtype=np.longdouble))


# ---------------------------------------------------------------------------
# min_samples
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("k", [0, -1, -100])
def test_min_samples_below_one(no_engine, k):
    with pytest.raises(InputError, match=rf"min_samples must be >= 1, got {k}"):
        emst(np.zeros((5, 2)), min_samples=k)


@pytest.mark.parametrize("n,k", [(5, 6), (1, 2), (10, 1000)])
def test_min_samples_above_n(no_engine, n, k):
    with pytest.raises(InputError, match=rf"min_samples={k}.*number of points \({n}\)"):
        emst(np.zeros((n, 2)), min_samples=k)


@pytest.mark.parametrize("k", [2.0, 2.5, "3", None, True, [2]])
def test_min_samples_not_an_integer(no_engine, k):
    with pytest.raises(InputError, match="min_samples must be an integer"):
        emst(np.zeros((5, 2)), min_samples=k)


def test_min_samples_numpy_integer():
    rng = np.random.default_rng(0)
    pts = rng.random((50, 2))
    tree = emst(pts, min_samples=np.int32(3))
    check_spanning_tree(tree, pts, 3)


def test_min_samples_when_empty():
    """With no points there is no neighbour to count: any k >= 1 is fine."""
    tree = emst(np.zeros((0, 3)), min_samples=5)
    assert tree.n_edges == 0


# ---------------------------------------------------------------------------
# valid edge cases
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [0, 1])
def test_empty_and_single(backend, n, dtype):
    tree = emst(np.zeros((n, 3), dtype), backend=backend)
    assert tree.n_points == n and tree.n_dims == 3
    assert tree.n_edges == 0
    assert host(tree.source).shape == (0,) and host(tree.source).dtype == np.int64
    assert host(tree.target).shape == (0,) and host(tree.target).dtype == np.int64
    assert host(tree.weight).shape == (0,) and host(tree.weight).dtype == dtype
    assert tree.total_weight == 0.0
    assert tree.to_numpy().shape == (0, 3)
    assert tree.core_distances is None


def test_single_point_with_min_samples_one_core():
    tree = emst(np.zeros((1, 2)), min_samples=1)
    assert tree.n_edges == 0


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint8, np.uint64])
def test_integer_input_accepted(dtype):
    rng = np.random.default_rng(1)
    pts = rng.integers(0, 100, (200, 3)).astype(dtype)
    tree = emst(pts)
    assert tree.weight.dtype == np.float64
    check_spanning_tree(tree, pts)


def test_integer_list_input():
    tree = emst([[0, 0], [3, 4], [3, 0]])
    assert tree.weight.dtype == np.float64
    assert tree.total_weight == 7.0


def test_float16_computed_as_float32():
    rng = np.random.default_rng(2)
    pts = rng.random((100, 2)).astype(np.float16)
    tree = emst(pts)
    assert tree.weight.dtype == np.float32
    check_spanning_tree(tree, pts.astype(np.float32))


def test_unknown_backend():
    with pytest.raises(ValueError, match="'auto', 'cpu' or 'cuda'"):
        emst(np.zeros((3, 2)), backend="gpu")


@pytest.mark.skipif(cuda_available(), reason="a GPU is visible here")
def test_cuda_backend_without_gpu():
    with pytest.raises(RuntimeError, match="backend='cpu'"):
        emst(np.zeros((3, 2)), backend="cuda")


def test_auto_backend_without_gpu():
    if cuda_available():
        pytest.skip("a GPU is visible here")
    assert emst(np.random.default_rng(3).random((10, 2))).backend == "cpu"


def test_one_source_given_where_a_sequence_is_expected():
    """``emst_many`` of one path, one array or bytes would walk it element
    by element: refused, saying to use ``emst``; a tuple of sources runs."""
    pts = np.random.default_rng(3).random((60, 3))
    for one in ("snap.zarr", pts, b"/data/pts.npy"):
        with pytest.raises(InputError, match="emst_many takes a sequence of sources"):
            emst_dask.emst_many(one, client=False)
    trees = emst_dask.emst_many((pts, pts[:30]), client=False)
    assert [t.n_points for t in trees] == [60, 30]


def test_bytes_are_no_points():
    for kw in ({}, {"client": False, "out": "/nonexistent/e.zarr"}):
        with pytest.raises(InputError, match="is bytes: give a path as a str"):
            emst_dask.emst(b"/data/pts.npy", **kw)


def test_hdbscan_parameter_checks_are_the_products_checks():
    pts = np.random.default_rng(4).random((60, 2))
    with pytest.raises(InputError, match="allow_single_cluster must be True or False"):
        emst_dask.HDBSCAN(allow_single_cluster="yes").fit(pts)
    with pytest.raises(InputError, match="needs at least one point"):
        emst_dask.HDBSCAN(min_samples=1).fit(np.empty((0, 3)))


def test_cli_generate_refuses_zero_rows_per_chunk(tmp_path):
    from click.testing import CliRunner

    from emst_dask.cli import main

    res = CliRunner().invoke(main, ["generate", "uniform", "100", "--chunk-rows", "0",
                                    "--out", str(tmp_path / "s.zarr")])
    assert res.exit_code == 2 and "must be >= 1" in res.output, res.output
    assert not os.listdir(tmp_path)
    res = CliRunner().invoke(main, ["generate", "uniform", "1e20", "--out",
                                    str(tmp_path / "s.zarr")])
    assert res.exit_code != 0 and "GiB" in res.output and "free" in res.output, res.output
    assert not os.listdir(tmp_path)


def test_emst_many_takes_a_box():
    rng = np.random.default_rng(5)
    clouds = [rng.random((300, 3)), rng.random((200, 3))]
    trees = emst_dask.emst_many(clouds, client=False, box_size=1.0)
    for tree, pts in zip(trees, clouds):
        want = emst(pts, box_size=1.0)
        assert tree.total_weight == want.total_weight
        assert tree.total_weight < emst(pts).total_weight
