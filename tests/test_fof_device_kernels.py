"""The friends-of-friends catalogue's device kernels
(``kernels.cuda.fof_products`` and the pieces' kernels of
``union_find_pieces.cu``): on a GPU, and emulated (CuPy's calls on numpy,
the kernels built with g++), equal to the host bit for bit.

Oracles: the host's whole-array sums (``group_sums.segment_sums`` of the
members' columns, each group pairwise in its order, itself checked against
``math.fsum`` in ``test_fof_group_sums``) and the host's catalogue
(``catalogue_of_tree`` on numpy, checked against the brute-force catalogue
in ``test_products_fof`` and ``test_fof_group_sums``).
"""
from __future__ import annotations

import types

import numpy as np
import pytest

from emst_dask.products.fof import _host_sums, catalogue_of_tree
from emst_dask.products.group_sums import member_rows

from cupy_emu import on_host
from test_fof_group_sums import _giant_cloud
from test_products_fof import periodic_tree
from test_unwrap_pieces import slab_cloud


def _sum_case(seed, dtype):
    """Groups of every awkward length around the chunk (32) and its powers,
    one of 40,000 members (four rounds), members scattered over the rows."""
    rng = np.random.default_rng(seed)
    length = np.array([1, 2, 3, 31, 32, 33, 63, 64, 65, 1023, 1024, 1025, 40_000]
                      + list(rng.integers(1, 90, 60)), np.int64)
    G, M = len(length), int(length.sum())
    n = M + 500  # some rows in no group
    labels = np.full(n, -1, np.int64)
    labels[rng.permutation(n)[:M]] = np.repeat(rng.permutation(G), length)
    length = np.bincount(labels[labels >= 0], minlength=G)
    points = rng.random((n, 3)).astype(dtype)
    shift = rng.integers(-3, 4, (n, 3))
    vel = rng.normal(size=(n, 3)).astype(dtype) * 10.0 ** rng.integers(-6, 6, (1, 3))
    mass = (rng.random(n) + 0.5).astype(np.float32)
    box = np.array([1.0, 0.75, 2.5])
    rows = member_rows(np, labels, M, G)
    top = np.array([np.flatnonzero(labels == g).min() for g in range(G)])
    return points, rows, labels, length, top, shift, box, vel, mass


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_member_sums_are_the_host_pairwise_sums(device_xp, dtype):
    from emst_dask.kernels.cuda.fof_products import member_sums

    points, rows, labels, length, top, shift, box, vel, mass = _sum_case(3, dtype)
    on = device_xp.asarray
    for s, v, w in [(shift, vel, mass), (shift, vel, None), (None, None, None),
                    (shift, None, mass)]:
        host = _host_sums(points, rows, labels, length, top, None if s is None else box, s, v, w)
        dev = on_host(member_sums(on(points), on(rows), on(length), on(top),
                                  None if s is None else on(s),
                                  None if s is None else on(box),
                                  None if v is None else on(v), None if w is None else on(w)))
        assert dev.shape == host.shape == (len(length), 3 + 3 * (v is not None) + (w is not None))
        np.testing.assert_array_equal(dev, host)


def _device_tree(xp, tree):
    on = xp.asarray
    return types.SimpleNamespace(source=on(tree.source), target=on(tree.target),
                                 weight=on(tree.weight), n_points=tree.n_points)


def _same(dev, host):
    for name in ("labels", "length", "position", "velocity", "mass", "offset", "ids"):
        a, b = getattr(dev, name), getattr(host, name)
        if isinstance(b, list):
            for x, y in zip(a, b):
                np.testing.assert_array_equal(on_host(x), y, err_msg=name)
        else:
            np.testing.assert_array_equal(on_host(a), b, err_msg=name)


@pytest.mark.parametrize("cloud", ["giant", "percolating", "band"])
def test_catalogue_device_equals_host(device_xp, cloud):
    """The whole device catalogue (nearest images, the edges' check, the
    wide groups' pieces, the sums) against the host's, bit for bit: one
    length and two, with and without masses and IDs, float32 and float64."""
    n = 2400
    pts = _giant_cloud(n, 4) if cloud == "giant" else slab_cloud(n, 5, cloud == "percolating")
    b = {"giant": 0.02, "percolating": 0.06, "band": 0.03}[cloud]
    tree = periodic_tree(pts, np.ones(3))
    rng = np.random.default_rng(6)
    vel = rng.normal(size=pts.shape)
    mass = rng.random(n) + 0.5
    ids = np.arange(n, dtype=np.int64) * 7 + 1
    box = np.ones(3)
    on = device_xp.asarray
    dtree = _device_tree(device_xp, tree)
    for dtype in (np.float64, np.float32):
        x = pts.astype(dtype)
        for lengths, m, extra in [([b], 5, {}), ([b], 1, dict(masses=mass, ids=ids)),
                                  ([0.5 * b, b], 20, dict(masses=mass))]:
            single = len(lengths) == 1
            host = catalogue_of_tree(x, tree, np.array(lengths), single, m, box, vel, **extra)
            assert (host.length if single else host.length[-1])[0] >= n // 3
            dev = catalogue_of_tree(on(x), dtree, np.array(lengths), single, m, box, on(vel),
                                    xp=device_xp, **{k: on(v) for k, v in extra.items()})
            _same(dev, host)


def test_catalogue_without_box_and_empty(device_xp):
    """No box (no shifts), and no group reaching the minimum."""
    pts = slab_cloud(600, 2, False)
    tree = periodic_tree(pts, np.ones(3))
    on = device_xp.asarray
    dtree = _device_tree(device_xp, tree)
    for m in (3, 10_000):
        host = catalogue_of_tree(pts, tree, np.array([0.05]), True, m, None, None)
        dev = catalogue_of_tree(on(pts), dtree, np.array([0.05]), True, m, None, None,
                                xp=device_xp)
        assert (host.n_groups > 0) == (m == 3)
        _same(dev, host)
