"""The catalogue's per-group sums (``products.group_sums``): pairwise in
each group's (label, row) order, the host's numba loop and the device's
whole-array rounds giving the same bits, and catalogues with a giant group
that crosses the faces against the brute-force catalogue.

Oracles: ``math.fsum`` per group; ``test_products_fof``'s radius-graph
components (scipy) and direct catalogue (each group unwrapped by a walk of
the radius graph, means in numpy).
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import emst_dask
from emst_dask.products import fof as fof_module
from emst_dask.products.group_sums import member_rows, segment_sums, segment_sums_xp

from test_products_fof import (assert_catalogue, components, direct_catalogue, min_image,
                               periodic_tree, same_partition, wrapped_blobs)


def _groups(seed):
    rng = np.random.default_rng(seed)
    length = np.concatenate([[1, 2, 3, 4, 5, 7, 8, 9, 1023, 1024, 1025, 100_003],
                             rng.integers(1, 60, 300)]).astype(np.int64)
    rng.shuffle(length)
    values = rng.normal(size=(int(length.sum()), 3)) * 10.0 ** rng.integers(-8, 8, (1, 3))
    return values, length


@pytest.mark.parametrize("seed", [0, 1])
def test_segment_sums_host_and_whole_array_same_bits(seed):
    values, length = _groups(seed)
    host = segment_sums(values, length)
    whole = segment_sums_xp(np, values, length)
    assert host.shape == (len(length), 3) and host.dtype == np.float64
    np.testing.assert_array_equal(host, whole)  # the same additions, in the same order
    start = np.concatenate([[0], np.cumsum(length)[:-1]])
    for g in range(len(length)):
        part = values[start[g]:start[g] + length[g]]
        for j in range(3):
            exact = math.fsum(part[:, j])
            scale = np.abs(part[:, j]).sum()
            assert abs(host[g, j] - exact) <= 1e-14 * scale
    assert segment_sums(values[:0], length[:0]).shape == (0, 3)


def test_member_rows_by_label_then_row():
    """The host's counting sort and the device's sort of the members' labels."""
    from cupy_emu import emulated_cupy

    labels = np.array([2, -1, 0, 2, 1, -1, 0, 2, 1], np.int64)
    np.testing.assert_array_equal(member_rows(np, labels, 7), [2, 6, 4, 8, 0, 3, 7])
    big = np.random.default_rng(2).integers(-1, 50, 5000)
    want = np.lexsort([np.arange(5000), big])[(big < 0).sum():]
    np.testing.assert_array_equal(member_rows(np, big, int((big >= 0).sum())), want)
    fake = emulated_cupy()  # numpy with CuPy's stable argsort: the device's steps
    if fake is not None:
        np.testing.assert_array_equal(member_rows(fake, big, int((big >= 0).sum())), want)


def _giant_cloud(n, seed):
    """Small clumps on the faces and corners, and a band of 40% of the points
    0.7 of the box long along x that crosses the x, y and z faces: one
    group wider than half the box (walked along its edges), not percolating."""
    rng = np.random.default_rng(seed)
    m = int(0.4 * n)
    band = np.column_stack([0.65 + 0.7 * rng.random(m), 0.985 + 0.03 * rng.random(m),
                            0.99 + 0.02 * rng.random(m)])
    pts = np.concatenate([band, wrapped_blobs(n - m, 3, 1.0, seed)])
    pts = np.mod(pts, 1.0)
    pts[pts >= 1.0] = 0.0
    return pts[rng.permutation(n)]


def test_giant_group_crossing_faces_against_direct_catalogue(monkeypatch):
    n, b, box = 2400, 0.02, np.ones(3)
    pts = _giant_cloud(n, 4)
    rng = np.random.default_rng(5)
    vel = rng.normal(size=pts.shape)
    mass = rng.random(n) + 0.5
    tree = periodic_tree(pts, box)
    ref = direct_catalogue(pts, b, 5, box, vel)
    comp, _ = components(pts, b, box)
    sizes = np.bincount(comp)
    assert sizes.max() >= 0.4 * n  # the band is one group
    band = ref[0] == 0
    assert (np.ptp(pts[band], axis=0) > 0.5).all()  # across every face
    for given in (tree, None):
        cat = emst_dask.fof(pts, b, relative=False, box_size=1.0, min_members=5,
                            velocities=vel, tree=given, backend="cpu")
        assert assert_catalogue(cat, ref, box) == cat.n_groups  # none percolates
        np.testing.assert_allclose(cat.velocity, ref[3], rtol=1e-12, atol=1e-12)
        assert same_partition(cat.labels[cat.labels >= 0], comp[cat.labels >= 0])
    # masses: the weighted means and the group masses against numpy's
    cat = emst_dask.fof(pts, b, relative=False, box_size=1.0, min_members=5, velocities=vel,
                        masses=mass, ids=np.arange(n) + 1, tree=tree)
    for g in range(cat.n_groups):
        rows = np.flatnonzero(ref[0] == g)
        w = mass[rows]
        assert cat.mass[g] == pytest.approx(w.sum(), rel=1e-14)
        np.testing.assert_allclose(cat.velocity[g], (vel[rows] * w[:, None]).sum(0) / w.sum(),
                                   rtol=1e-12, atol=1e-12)
        np.testing.assert_array_equal(cat.members(g), rows + 1)
    # the whole-array rounds (the device's) give the host's bits
    monkeypatch.setattr(fof_module, "segment_sums", lambda v, L: segment_sums_xp(np, v, L))
    whole = emst_dask.fof(pts, b, relative=False, box_size=1.0, min_members=5,
                          velocities=vel, masses=mass, ids=np.arange(n) + 1, tree=tree)
    for name in ("labels", "length", "position", "velocity", "mass", "offset", "ids"):
        np.testing.assert_array_equal(getattr(whole, name), getattr(cat, name))


def _cosmic(n):
    from emst_dask.datasets_cosmic import snapshot

    pos, vel, ids = snapshot(n, seed=3)
    mass = (1.0 + (ids % 7).astype(np.float64) / 7).astype(np.float32)
    return pos, vel, ids, mass


def _same_catalogue(a, b):
    for name in ("labels", "length", "position", "velocity", "mass", "offset", "ids"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)


@pytest.mark.gpu
def test_device_catalogue_equals_host_bits_on_the_clustered_snapshot():
    """The clustered generator's snapshot: the device's catalogue (its own
    tree, and a given device tree) equals the host's bit for bit, and so
    does every sum (the same pairwise additions)."""
    import cupy

    from emst_dask import emst

    pos, vel, ids, mass = _cosmic(300_000)
    kw = dict(box_size=1.0, min_members=20, velocities=vel, ids=ids, masses=mass)
    host = emst_dask.fof(pos, 0.2, backend="cpu", **kw)
    assert host.n_groups > 100 and host.summary()[0]["fraction"] > 0.2
    dkw = dict(kw, velocities=cupy.asarray(vel), ids=cupy.asarray(ids),
               masses=cupy.asarray(mass))
    dev = emst_dask.fof(cupy.asarray(pos), 0.2, backend="cuda", **dkw).to_host()
    _same_catalogue(dev, host)
    tree = emst(cupy.asarray(pos), backend="cuda", box_size=1.0)
    given = emst_dask.fof(cupy.asarray(pos), 0.2, tree=tree, **dkw).to_host()
    _same_catalogue(given, host)
    host_tree = emst(pos, backend="cpu", box_size=1.0)
    _same_catalogue(emst_dask.fof(pos, 0.2, tree=host_tree, **kw), host)
    # several lengths at once, a giant group among them
    many = emst_dask.fof(cupy.asarray(pos), [0.2, 0.7], tree=tree, **dkw).to_host()
    ref = emst_dask.fof(pos, [0.2, 0.7], tree=host_tree, **kw)
    np.testing.assert_array_equal(many.labels, ref.labels)
    for k in range(2):
        np.testing.assert_array_equal(many.length[k], ref.length[k])
        np.testing.assert_array_equal(many.velocity[k], ref.velocity[k])
        np.testing.assert_array_equal(many.mass[k], ref.mass[k])
        np.testing.assert_allclose(min_image(many.position[k] - ref.position[k], 1.0), 0,
                                   atol=1e-12)
