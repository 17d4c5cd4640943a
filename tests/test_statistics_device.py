"""The MST statistics' device path (``kernels.cuda.branches``: the fused
CuPy kernels) run on the CPU emulator (``cupy_emu``: CuPy's calls on numpy,
the kernels built with g++) and, on a GPU, on CuPy itself: the whole-array algorithm's result
(``mst_statistics_xp`` with numpy) bit for bit, lengths and shapes
included, on random trees with long chains, paths, stars, tiny trees,
zero-length branches and periodic shapes; cycles refused alike."""
from __future__ import annotations

import numpy as np
import pytest

from emst_dask import InputError, emst
from emst_dask.products.statistics import check_points, mst_statistics, mst_statistics_xp

from cupy_emu import on_host
from test_products_statistics import cloud, random_tree

FIELDS = ("degree", "branch_edges", "branch_offsets", "branch_edge_count", "branch_ends",
          "branch_length", "branch_shape", "edge_length")


def same_bits(fake, s, t, w, n, points=None, box=None):
    want = mst_statistics_xp(np, s, t, w, n, points, box)
    got = mst_statistics_xp(fake, s, t, w, n, points, box)
    for name in FIELDS:
        a, b = on_host(getattr(got, name)), getattr(want, name)
        if b is None:
            assert a is None, name
            continue
        assert a.dtype == b.dtype, name
        np.testing.assert_array_equal(a, b, err_msg=name)
    host = mst_statistics(s, t, w, n, points, box)  # and the numba version's values
    for name in ("degree", "branch_edges", "branch_offsets", "branch_ends"):
        np.testing.assert_array_equal(on_host(getattr(got, name)), getattr(host, name),
                                      err_msg=name)
    np.testing.assert_allclose(on_host(got.branch_length), host.branch_length, rtol=1e-13,
                               atol=0)
    return got


@pytest.mark.parametrize("seed,chain", [(0, 0.0), (1, 0.5), (2, 0.9), (3, 0.99)])
def test_random_trees(device_xp, seed, chain):
    rng = np.random.default_rng(seed)
    s, t, w, n = random_tree(2500, rng, chain)
    points = rng.random((n, 3))
    same_bits(device_xp, s, t, w, n)
    same_bits(device_xp, s, t, w, n, points)
    same_bits(device_xp, s, t, w, n, points, np.ones(3))
    same_bits(device_xp, s, t, w.astype(np.float32), n, points.astype(np.float32),
              np.array([1.0, 1.0, 1.0]))


def test_path_star_and_tiny_trees(device_xp):
    rng = np.random.default_rng(1)
    n = 1000
    p = rng.permutation(n)
    got = same_bits(device_xp, p[:-1], p[1:], rng.random(n - 1), n, rng.random((n, 2)))
    assert got.n_branches == 1 and got.branch_edge_count[0] == n - 1
    m = 50
    star = same_bits(device_xp, np.zeros(m - 1, np.int64), np.arange(1, m),
                     np.linspace(1, 2, m - 1), m, rng.random((m, 3)))
    assert star.n_branches == 0
    for k in range(5):
        pts = np.random.default_rng(k).random((k, 3))
        if k < 2:
            s = t = np.zeros(0, np.int64)
            w = np.zeros(0)
        else:
            tree = emst(pts, backend="cpu")
            s, t, w = tree.source, tree.target, tree.weight
        same_bits(device_xp, s, t, w, k, pts)


@pytest.mark.parametrize("name", ["lattice", "duplicates", "halos"])
def test_clouds_with_ties_and_zero_lengths(device_xp, name):
    points = cloud(name)
    tree = emst(points, backend="cpu")
    box = np.ptp(points, axis=0) + 1.0
    same_bits(device_xp, tree.source, tree.target, tree.weight, tree.n_points, points)
    same_bits(device_xp, tree.source, tree.target, tree.weight, tree.n_points,
              points - points.min(axis=0), box)


def test_cycles_refused(device_xp):
    with pytest.raises(InputError, match="cycle"):
        mst_statistics_xp(device_xp, np.array([0, 1, 2]), np.array([1, 2, 0]), np.ones(3), 4)


def test_points_checked_in_one_pass(device_xp):
    """The device's check of the points names the same row and axis as the
    host's, for a coordinate outside the box and for one not finite."""
    rng = np.random.default_rng(0)
    pts = rng.random((100, 3))
    for bad, value in ((37, 1.0), (12, -1e-300), (60, np.nan), (99, np.inf)):
        x = pts.copy()
        x[bad, 1] = value
        x[bad + 1 if bad < 99 else 0, 2] = 1.5  # a later (or earlier) bad row too
        box = np.ones(3)
        msgs = []
        for xp in (np, device_xp):
            with pytest.raises(InputError) as e:
                check_points(xp, x, 100, box)
            msgs.append(str(e.value))
        assert msgs[0] == msgs[1]
    np.testing.assert_array_equal(on_host(check_points(device_xp, pts, 100, np.ones(3))), pts)


def test_edges_checked_in_one_pass(fake_cupy, monkeypatch):
    """The device's check of an edge list: good edges pass, each bad one
    gets the host's message (the edges taken as device arrays)."""
    from emst_dask.products import order

    s, t, w = np.array([0, 1, 2]), np.array([1, 2, 3]), np.array([0.5, 0.0, 2.0])
    cases = [{}, {"w": np.array([0.5, -1.0, 2.0])}, {"w": np.array([0.5, np.nan, 2.0])},
             {"t": np.array([1, 2, 4])}, {"s": np.array([0, -1, 2])},
             {"w": np.array([0.5, 0.0, 2.0], np.float32), "t": np.array([1, 9, 3])}]
    for bad in cases:
        args = dict(dict(s=s, t=t, w=w), **bad)
        msgs = []
        for mod in (np, fake_cupy):
            monkeypatch.setattr(order, "array_module", lambda a, mod=mod: mod)
            try:
                xp, s2, t2, w2 = order.check_edges(args["s"], args["t"], args["w"], 4)
                msgs.append(("ok", s2.tolist(), t2.tolist(), w2.tolist(), xp is mod))
            except InputError as e:
                msgs.append(str(e))
        assert msgs[0][:4] == msgs[1][:4] if bad == {} else msgs[0] == msgs[1], msgs
        assert isinstance(msgs[0], tuple) == (bad == {})
