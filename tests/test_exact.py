"""Exactness of the Euclidean MST against the brute-force oracle.

Every test checks a whole spanning tree with ``oracle.check_spanning_tree``
(n-1 edges, connected, acyclic, weights equal to recomputed distances,
total weight equal to Prim's, the cycle property, and the edge set where the
MST is unique).  Where all distances are exact (integer lattices,
duplicates), the edge set must also equal Kruskal's under the design's tie
order (weight, min(u, v), max(u, v)).
"""
from __future__ import annotations

import itertools
import math
import warnings

import hypothesis.extra.numpy as hnp

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from emst_dask import InputError, SpanningTree, emst
from emst_dask import datasets
from oracle import (WEIGHT_RTOL, squarable, check_spanning_tree, distance_matrix, edge_set, host,
                    kruskal_tie_ordered)

FLOATS = [np.float32, np.float64]


def _tie_ordered_set(points):
    """Kruskal under (d^2, min, max) on exactly computed squared distances."""
    x = np.asarray(points).astype(np.int64)
    diff = x[:, None, :] - x[None, :, :]
    return kruskal_tie_ordered((diff * diff).sum(axis=2))


# ---------------------------------------------------------------------------
# random clouds
# ---------------------------------------------------------------------------
# Every (dtype, d) is a numba compilation of its own (the axis loops are
# unrolled per d, about half a minute each on one core): float64 in every
# dimension, float32 where the rest of the suite uses it and at the largest d.
EVERY_DIMENSION = ([(d, np.float64) for d in range(1, 9)]
                   + [(d, np.float32) for d in (2, 3, 8)])


@pytest.mark.parametrize("d, dtype", EVERY_DIMENSION,
                         ids=[f"{d}-{np.dtype(t).name}" for d, t in EVERY_DIMENSION])
def test_random_uniform_every_dimension(backend, d, dtype):
    rng = np.random.default_rng(100 + d)
    pts = rng.random((700, d)).astype(dtype)
    tree = emst(pts, backend=backend)
    assert isinstance(tree, SpanningTree)
    assert tree.n_dims == d
    check_spanning_tree(tree, pts)


@pytest.mark.parametrize("name,d,dtype", [
    ("uniform", 2, np.float32),
    ("uniform", 3, np.float64),
    ("normal", 3, np.float32),
    ("halos", 3, np.float32),
    ("normal", 5, np.float64),
    ("halos", 2, np.float64),
])
def test_larger_clouds(backend, name, d, dtype):
    pts = datasets.GENERATORS[name](2000, dim=d, seed=7).astype(dtype)
    tree = emst(pts, backend=backend)
    check_spanning_tree(tree, pts)


@pytest.mark.parametrize("d", [2, 3, 6])
def test_edge_set_equals_unique_mst_float64(backend, d):
    rng = np.random.default_rng(d)
    pts = rng.standard_normal((400, d))
    info = check_spanning_tree(emst(pts, backend=backend), pts)
    # continuous random data: the MST is unique, so the edge sets were compared
    assert info["unique"]


def test_edge_set_equals_unique_mst_float32(backend):
    rng = np.random.default_rng(11)
    pts = rng.random((150, 3), dtype=np.float32)
    info = check_spanning_tree(emst(pts, backend=backend), pts)
    assert info["unique"]


# ---------------------------------------------------------------------------
# hypothesis: small clouds, duplicate-heavy draws
# ---------------------------------------------------------------------------
@st.composite
def clouds(draw, max_n=48, max_d=5):
    n = draw(st.integers(0, max_n))
    dtype = draw(st.sampled_from(FLOATS))
    # float32 in the dimensions the rest of the suite compiles: each (dtype,
    # d) is a numba compilation of its own, half a minute or more on one core
    d = draw(st.integers(1, max_d) if dtype is np.float64 else st.sampled_from([2, 3]))
    kind = draw(st.sampled_from(["float", "grid", "pool"]))
    width = 32 if dtype is np.float32 else 64
    if kind == "float":
        el = st.floats(-1000, 1000, width=width, allow_nan=False, allow_infinity=False)
        return draw(hnp.arrays(dtype, (n, d), elements=el))
    if kind == "grid":  # small integer coordinates: massive ties
        return draw(hnp.arrays(dtype, (n, d), elements=st.integers(-3, 3).map(float)))
    # a few distinct rows, repeated: duplicates dominate
    n_pool = draw(st.integers(1, 4))
    el = st.floats(-10, 10, width=width, allow_nan=False, allow_infinity=False)
    pool = draw(hnp.arrays(dtype, (n_pool, d), elements=el))
    idx = draw(hnp.arrays(np.int64, (n,), elements=st.integers(0, n_pool - 1)))
    return np.ascontiguousarray(pool[idx])


@given(pts=clouds())
# one point has no distances to square, however far apart its magnitudes
@example(pts=np.array([[1.0, 2.22507386e-311]]))
def test_property_small_clouds(backend, pts):
    verdict = squarable(pts)
    try:
        tree = emst(pts, backend=backend)
    except InputError as exc:  # no exact computation exists: refused, saying why
        assert verdict is not True and "span magnitudes" in str(exc), (verdict, exc)
        return
    assert verdict is not False, "computed a cloud whose squared distances cannot all exist"
    info = check_spanning_tree(tree, pts)
    if pts.shape[0] > 1:
        # duplicates give exactly the zero-weight edges: zero distance is an
        # equivalence, so any MST has (n - number of distinct points) of them;
        # a distance between distinct points never rounds to 0
        e, w = info["edges"], info["w"]
        dup_edges = int((w[e[:, 0], e[:, 1]] == 0).sum())
        zero = int((host(tree.weight) == 0).sum())
        assert zero == dup_edges


# float32 where the suite compiles it (a numba compilation per (dtype, d))
GRID_DIMS = [(d, np.float64) for d in range(1, 5)] + [(2, np.float32), (3, np.float32)]


@given(n=st.integers(2, 40), d_dtype=st.sampled_from(GRID_DIMS),
       seed=st.integers(0, 2**32 - 1))
def test_property_integer_grid_tie_order(backend, n, d_dtype, seed):
    """On exact data the edge set is Kruskal's under (w, min(u,v), max(u,v))."""
    d, dtype = d_dtype
    rng = np.random.default_rng(seed)
    pts = rng.integers(-3, 4, size=(n, d)).astype(dtype)
    tree = emst(pts, backend=backend)
    check_spanning_tree(tree, pts)
    assert edge_set(tree.source, tree.target) == _tie_ordered_set(pts)


# ---------------------------------------------------------------------------
# duplicates and ties
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS, ids=["f32", "f64"])
@pytest.mark.parametrize("n", [2, 3, 17, 1000])
def test_all_points_equal(backend, n, dtype):
    pts = np.full((n, 3), 0.25, dtype=dtype)
    tree = emst(pts, backend=backend)
    check_spanning_tree(tree, pts)
    assert np.all(host(tree.weight) == 0)
    # the tie order (0, min, max) makes the star around row 0 the only answer
    assert edge_set(tree.source, tree.target) == {(0, j) for j in range(1, n)}


@pytest.mark.parametrize("dtype", FLOATS, ids=["f32", "f64"])
def test_many_duplicates(backend, dtype):
    rng = np.random.default_rng(5)
    pool = rng.random((40, 3))
    pts = pool[rng.integers(0, 40, 1500)].astype(dtype)
    tree = emst(pts, backend=backend)
    check_spanning_tree(tree, pts)
    n_distinct = len(np.unique(pts, axis=0))
    assert int((host(tree.weight) == 0).sum()) == len(pts) - n_distinct


def test_duplicates_of_a_random_cloud(backend):
    """Every point twice (a common data-loading mistake): the same MST plus zeros."""
    rng = np.random.default_rng(9)
    base = rng.random((500, 3))
    pts = np.concatenate([base, base])
    tree = emst(pts, backend=backend)
    check_spanning_tree(tree, pts)
    w = np.sort(host(tree.weight))
    assert np.all(w[:500] == 0)
    ref = emst(base, backend=backend)
    np.testing.assert_allclose(w[500:], np.sort(host(ref.weight)), rtol=1e-12)


# float32 where the suite compiles it (2-D, 3-D); float64 and int64 (run as
# float64) in every shape
LATTICES = [((30, 30), "2d"), ((12, 12, 12), "3d"), ((50,), "1d"), ((6, 6, 6, 6), "4d")]


@pytest.mark.parametrize("shape, dtype", [
    (shape, dtype) for shape, name in LATTICES for dtype in (np.float32, np.float64, np.int64)
    if dtype is not np.float32 or len(shape) in (2, 3)],
    ids=[f"{name}-{t}" for shape, name in LATTICES for t in ("f32", "f64", "i64")
         if t != "f32" or len(shape) in (2, 3)])
def test_integer_lattice(backend, shape, dtype):
    grid = np.array(list(itertools.product(*[range(s) for s in shape])))
    rng = np.random.default_rng(len(shape))
    pts = grid[rng.permutation(len(grid))].astype(dtype)  # input order scrambled
    tree = emst(pts, backend=backend)
    check_spanning_tree(tree, pts)
    assert np.all(host(tree.weight) == 1)
    assert edge_set(tree.source, tree.target) == _tie_ordered_set(pts)


def test_lattice_with_spacing_and_offset(backend):
    """A lattice of spacing 0.5 shifted by 3: still exact in binary floating point."""
    grid = np.array(list(itertools.product(range(15), range(15), range(4))), float)
    pts = 3.0 + 0.5 * grid
    tree = emst(pts, backend=backend)
    check_spanning_tree(tree, pts)
    assert np.all(host(tree.weight) == 0.5)
    assert edge_set(tree.source, tree.target) == _tie_ordered_set(grid)


def test_anisotropic_lattice(backend):
    """Spacing 1 in x, 2 in y: ties within each class of edges only."""
    grid = np.array(list(itertools.product(range(20), range(20))), float)
    pts = grid * np.array([1.0, 2.0])
    tree = emst(pts, backend=backend)
    check_spanning_tree(tree, pts)
    w = host(tree.weight)
    assert (w == 1).sum() == 19 * 20 and (w == 2).sum() == 19
    assert edge_set(tree.source, tree.target) == _tie_ordered_set(pts)


# ---------------------------------------------------------------------------
# degenerate geometry
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS, ids=["f32", "f64"])
def test_collinear_axis_aligned(backend, dtype):
    rng = np.random.default_rng(1)
    pts = np.zeros((800, 3), dtype)
    pts[:, 1] = rng.random(800)  # zero extent in x and z
    tree = emst(pts, backend=backend)
    check_spanning_tree(tree, pts)


@pytest.mark.parametrize("dtype", FLOATS, ids=["f32", "f64"])
def test_collinear_oblique(backend, dtype):
    rng = np.random.default_rng(2)
    t = rng.random(800)
    pts = (np.array([0.1, -0.3, 0.7]) + t[:, None] * np.array([1.0, 2.0, -0.5])).astype(dtype)
    tree = emst(pts, backend=backend)
    check_spanning_tree(tree, pts)


def test_one_dimensional_sorted_chain(backend):
    """In 1-D the MST joins neighbours in sorted order."""
    rng = np.random.default_rng(3)
    x = rng.random(1000)
    tree = emst(x[:, None], backend=backend)
    check_spanning_tree(tree, x[:, None])
    order = np.argsort(x)
    want = {(min(a, b), max(a, b)) for a, b in zip(order[:-1].tolist(), order[1:].tolist())}
    assert edge_set(tree.source, tree.target) == want


@pytest.mark.parametrize("dtype", FLOATS, ids=["f32", "f64"])
def test_coplanar_axis_aligned(backend, dtype):
    rng = np.random.default_rng(4)
    pts = np.full((800, 3), 2.0, dtype)
    pts[:, [0, 2]] = rng.random((800, 2))
    tree = emst(pts, backend=backend)
    check_spanning_tree(tree, pts)


def test_coplanar_rotated(backend):
    rng = np.random.default_rng(6)
    uv = rng.random((800, 2))
    basis = np.array([[1.0, 1.0, 0.0], [0.0, 1.0, 1.0]]) / np.sqrt(2)
    pts = uv @ basis
    tree = emst(pts, backend=backend)
    check_spanning_tree(tree, pts)


def test_flat_in_high_dimension(backend):
    """8 columns, only two of them vary."""
    rng = np.random.default_rng(8)
    pts = np.zeros((600, 8))
    pts[:, 3] = rng.random(600)
    pts[:, 6] = rng.random(600)
    tree = emst(pts, backend=backend)
    check_spanning_tree(tree, pts)


# ---------------------------------------------------------------------------
# tiny inputs
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS, ids=["f32", "f64"])
@pytest.mark.parametrize("n", [0, 1, 2])
def test_tiny(backend, n, dtype):
    pts = np.arange(3 * n, dtype=dtype).reshape(n, 3)
    tree = emst(pts, backend=backend)
    check_spanning_tree(tree, pts)
    assert tree.n_points == n and tree.n_dims == 3
    assert tree.to_numpy().shape == (max(n - 1, 0), 3)
    if n == 2:
        assert edge_set(tree.source, tree.target) == {(0, 1)}
        assert host(tree.weight)[0] == dtype(np.sqrt(27.0))


@pytest.mark.parametrize("d", [1, 2, 3, 8])
def test_two_points(backend, d):
    pts = np.zeros((2, d))
    pts[1] = 3.0
    tree = emst(pts, backend=backend)
    check_spanning_tree(tree, pts)
    np.testing.assert_allclose(host(tree.weight), [3.0 * np.sqrt(d)], rtol=1e-15)


def test_three_collinear_points(backend):
    pts = np.array([[0.0], [10.0], [1.0]])
    tree = emst(pts, backend=backend)
    assert edge_set(tree.source, tree.target) == {(0, 2), (1, 2)}
    assert tree.total_weight == 10.0


# ---------------------------------------------------------------------------
# extreme scales and offsets
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("dtype,scale", [
    (np.float32, 1e-15), (np.float32, 1e15), (np.float32, 1e-30), (np.float32, 1e30),
    (np.float32, 1e-37),
    (np.float64, 1e-150), (np.float64, 1e150), (np.float64, 1e300), (np.float64, 1e-155),
    (np.float64, 1e-160), (np.float64, 1e-300),
    (np.float32, 1e-40),  # subnormal float32
])
def test_extreme_scales(backend, dtype, scale):
    rng = np.random.default_rng(12)
    pts = (rng.random((600, 3)) * scale).astype(dtype)
    assert np.all(np.isfinite(pts)) and np.count_nonzero(pts) > 0
    pts = np.unique(pts, axis=0)  # subnormal float32 rounding makes duplicates
    tree = emst(pts, backend=backend)
    info = check_spanning_tree(tree, pts)
    # relative accuracy of every weight, with no slack but the rounding of a
    # subnormal result: a power-of-two rescaling of the whole cloud must make
    # tiny clouds as exact as unit ones
    src, dst = host(tree.source), host(tree.target)
    np.testing.assert_allclose(host(tree.weight).astype(np.float64), info["w"][src, dst],
                               rtol=WEIGHT_RTOL[np.dtype(dtype)],
                               atol=float(np.finfo(dtype).smallest_subnormal))
    # the same cloud at scale 1 has the same tree (up to rounding)
    unit = emst((pts.astype(np.float64) / scale), backend=backend)
    assert np.isclose(tree.total_weight / scale, unit.total_weight,
                      rtol=1e-5 if dtype is np.float32 else 1e-12)
    assert info["total"] > 0


@pytest.mark.parametrize("dtype,far", [(np.float64, 1e308), (np.float32, 3e38)])
def test_edge_longer_than_the_float_range_is_refused(backend, dtype, far):
    """Two points 2 * far apart: no weight of the input's type holds their
    distance, so the tree is refused, naming the rows, not given an inf."""
    pts = np.array([[far, 0.0], [-far, 0.0], [0.0, far / 2]], dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow warning either
        with pytest.raises(InputError, match=r"rows 0 and 1 are an edge .* largest " +
                           np.dtype(dtype).name):
            emst(pts[:2], backend=backend)
        # with a third point between them: edges 1.118 * far long, which fit
        tree = emst(pts, backend=backend)
    # (the oracle's differences would overflow: the tree is checked here, each
    # distance computed halved in float64, where no difference overflows)
    src, dst = host(tree.source), host(tree.target)
    assert edge_set(src, dst) == {(0, 2), (1, 2)}
    half = pts.astype(np.float64) / 2
    true = [2 * math.hypot(*(half[a] - half[b])) for a, b in zip(src, dst)]
    np.testing.assert_allclose(host(tree.weight).astype(np.float64), true,
                               rtol=WEIGHT_RTOL[np.dtype(dtype)])


@pytest.mark.parametrize("dtype,offset,spread", [
    (np.float32, 1e6, 100.0),     # float32 ulp at 1e6 is 1/16: many near-ties
    (np.float64, 1e6, 1e-3),
    (np.float64, -1e12, 1.0),
    (np.float32, -3e4, 0.01),
])
def test_far_from_origin(backend, dtype, offset, spread):
    rng = np.random.default_rng(13)
    pts = (offset + spread * rng.random((700, 3))).astype(dtype)
    tree = emst(pts, backend=backend)
    check_spanning_tree(tree, pts)
    # translation invariance where the translation is exact
    shifted = (pts.astype(np.float64) - np.float64(pts.min())).astype(dtype)
    ref = emst(shifted, backend=backend)
    assert np.isclose(tree.total_weight, ref.total_weight,
                      rtol=1e-5 if dtype is np.float32 else 1e-9)


def _contrast_cloud(n, scale, dtype, seed=5):
    """Half the points uniform in the unit cube, half in a Gaussian clump of
    width ``scale`` (far below a code cell's 2**-21 in 3-D)."""
    rng = np.random.default_rng(seed)
    half = n // 2
    pts = np.concatenate([rng.random((half, 3)),
                          0.5 + scale * rng.standard_normal((n - half, 3))])
    return pts[rng.permutation(n)].astype(dtype)


@pytest.mark.parametrize("dtype,scale", [(np.float64, 1e-9), (np.float64, 1e-7),
                                         (np.float32, 1e-7), (np.float64, 1e-12)])
def test_density_contrast(backend, dtype, scale):
    """A clump inside a code cell (the crowded cells are split by finer codes)."""
    pts = _contrast_cloud(2000, scale, dtype)
    tree = emst(pts, backend=backend)
    check_spanning_tree(tree, pts)
    mr = emst(pts, min_samples=4, backend=backend)
    check_spanning_tree(mr, pts, 4)


@pytest.mark.parametrize("d", [5, 8])
def test_far_outliers_high_dimension(backend, d):
    """The bulk of a cloud inside one code cell of few bits per axis, beside
    outliers 1e6 times further out (crowded cells get codes of their own)."""
    rng = np.random.default_rng(d)
    pts = rng.standard_normal((1500, d))
    pts[:5] *= 1e6
    tree = emst(pts, backend=backend)
    check_spanning_tree(tree, pts)
    mr = emst(pts, min_samples=5, backend=backend)
    check_spanning_tree(mr, pts, 5)


@pytest.mark.parametrize("c", [1, 255, 256, 257, 3000])
@pytest.mark.parametrize("runs", [1, 3, 40])
def test_run_boxes_are_the_runs_bounds(c, runs):
    """The crowded runs' boxes (block-reduced scatters) against a loop."""
    import sys

    import emst_dask.engine  # noqa: F401  (the module, not its ``boruvka``)
    run_boxes = sys.modules["emst_dask.engine.boruvka"]._run_boxes
    rng = np.random.default_rng(c * runs)
    rid = np.unique(np.sort(rng.integers(0, runs, c)), return_inverse=True)[1].astype(np.int64)
    x = rng.random((c, 3))
    lo, hi = run_boxes(np, x, rid, int(rid.max()) + 1)
    for k in range(int(rid.max()) + 1):
        np.testing.assert_array_equal(lo[:, k], x[rid == k].min(axis=0))
        np.testing.assert_array_equal(hi[:, k], x[rid == k].max(axis=0))


def test_crowded_cells_are_split_spatially():
    """The tree's nodes inside a clump smaller than a code cell are small.

    Without the finer codes, a run of equal codes is split by input row:
    every node of it spans the clump, and each search inside visits all of
    it.  Here the nodes of 8 to 16 clump points must be small."""
    from emst_dask.engine import Timers, construct_bvh
    from emst_dask.kernels import get_kernels

    pts = _contrast_cloud(20_000, 1e-9, np.float64)
    bvh = construct_bvh(get_kernels("cpu"), pts, Timers(enabled=False))
    d = bvh.d
    unit = bvh.points.max() / pts.max()  # the engine's exact power-of-two scaling
    lo, hi = bvh.box[:, :d] / unit, bvh.box[:, d:] / unit
    leaves = bvh.span[:, 1] - bvh.span[:, 0] + 1
    clump = np.linalg.norm(np.ptp(pts[np.abs(pts - 0.5).max(1) < 1e-6], axis=0))
    small = (leaves >= 8) & (leaves <= 16) & (np.abs(lo - 0.5).max(1) < 1e-6)
    assert small.sum() > 200  # about 10,000 clump points in such nodes
    diag = np.linalg.norm(hi[small] - lo[small], axis=1)
    # split in space: 0.04 of the clump's diagonal; split by row: 0.4
    assert np.median(diag) < 0.15 * clump, np.median(diag) / clump


def test_two_tiny_points_float64(backend):
    """Found by hypothesis: [[0], [6e-192]]."""
    pts = np.array([[0.0], [5.98736972e-192]])
    tree = emst(pts, backend=backend)
    check_spanning_tree(tree, pts)
    assert host(tree.weight)[0] == pts[1, 0]  # exact: sqrt(x*x) == x after scaling


def test_subnormal_float32(backend):
    pts = np.array([[0.0], [1e-40], [3e-40]], np.float32)
    tree = emst(pts, backend=backend)
    check_spanning_tree(tree, pts)
    # subnormal differences are exact, and so is sqrt(x*x) once rescaled
    assert sorted(host(tree.weight).tolist()) == sorted([pts[1, 0], pts[2, 0] - pts[1, 0]])
    assert edge_set(tree.source, tree.target) == {(0, 1), (1, 2)}


def test_mixed_magnitudes_float64(backend):
    """A dense blob at 1e-9 spacing beside points 1e3 away."""
    rng = np.random.default_rng(14)
    pts = np.concatenate([rng.random((400, 3)) * 1e-9, 1e3 + rng.random((100, 3))])
    tree = emst(pts, backend=backend)
    check_spanning_tree(tree, pts)


# ---------------------------------------------------------------------------
# determinism, permutation, options
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["random_f32", "lattice", "duplicates"])
def test_deterministic(backend, kind):
    rng = np.random.default_rng(15)
    if kind == "random_f32":
        pts = rng.random((1500, 3), dtype=np.float32)
    elif kind == "lattice":
        pts = np.array(list(itertools.product(range(12), repeat=3)), float)
    else:
        pts = rng.integers(0, 3, (1000, 2)).astype(np.float64)
    a = emst(pts, backend=backend)
    b = emst(pts.copy(), backend=backend)
    assert edge_set(a.source, a.target) == edge_set(b.source, b.target)
    sa, sb = a.sorted_by_weight(), b.sorted_by_weight()
    np.testing.assert_array_equal(host(sa.weight), host(sb.weight))
    np.testing.assert_array_equal(host(sa.source), host(sb.source))
    np.testing.assert_array_equal(host(sa.target), host(sb.target))


@pytest.mark.parametrize("dtype", FLOATS, ids=["f32", "f64"])
@pytest.mark.parametrize("kind", ["random", "lattice"])
def test_permutation_invariance(backend, dtype, kind):
    rng = np.random.default_rng(16)
    if kind == "random":
        pts = rng.standard_normal((1200, 3)).astype(dtype)
    else:
        pts = np.array(list(itertools.product(range(10), repeat=3)), dtype)
    perm = rng.permutation(len(pts))
    a = emst(pts, backend=backend)
    b = emst(pts[perm], backend=backend)
    # all minimum spanning trees share one multiset of weights; the engine's
    # weight of a pair does not depend on row order, so this is exact
    np.testing.assert_array_equal(np.sort(host(a.weight)), np.sort(host(b.weight)))
    assert np.isclose(a.total_weight, b.total_weight, rtol=1e-12, atol=0)
    check_spanning_tree(b, pts[perm])


def test_sort_by_weight(backend):
    rng = np.random.default_rng(17)
    pts = rng.random((900, 2))
    plain = emst(pts, backend=backend)
    srt = emst(pts, backend=backend, sort_by_weight=True)
    w = host(srt.weight)
    assert np.all(np.diff(w) >= 0)
    assert edge_set(plain.source, plain.target) == edge_set(srt.source, srt.target)
    check_spanning_tree(srt, pts)


def test_to_numpy_matches_arrays(backend):
    rng = np.random.default_rng(18)
    pts = rng.random((300, 3), dtype=np.float32)
    tree = emst(pts, backend=backend)
    arr = tree.to_numpy()
    assert arr.dtype == np.float64 and arr.shape == (299, 3)
    np.testing.assert_array_equal(arr[:, 0], host(tree.source))
    np.testing.assert_array_equal(arr[:, 1], host(tree.target))
    np.testing.assert_array_equal(arr[:, 2], host(tree.weight).astype(np.float64))
    assert tree.total_weight == pytest.approx(arr[:, 2].sum(), rel=1e-12)


@pytest.mark.parametrize("layout", ["fortran", "strided", "list"])
def test_input_layouts(backend, layout):
    rng = np.random.default_rng(19)
    base = rng.random((400, 3))
    if layout == "fortran":
        pts = np.asfortranarray(base)
    elif layout == "strided":
        big = np.zeros((800, 6))
        big[::2, ::2] = base
        pts = big[::2, ::2]
    else:
        pts = base.tolist()
    tree = emst(pts, backend=backend)
    ref = emst(base, backend=backend)
    assert edge_set(tree.source, tree.target) == edge_set(ref.source, ref.target)
    check_spanning_tree(tree, base)


def test_input_not_modified(backend):
    rng = np.random.default_rng(20)
    pts = rng.random((300, 3)) * 1e200  # large enough to make the engine rescale
    before = pts.copy()
    emst(pts, backend=backend)
    np.testing.assert_array_equal(pts, before)


def test_progress_callback(backend):
    rng = np.random.default_rng(21)
    pts = rng.random((500, 3))
    calls = []
    tree = emst(pts, backend=backend, progress=lambda phase, **info: calls.append((phase, info)))
    iters = [info for phase, info in calls if phase == "iteration"]
    assert len(iters) == tree.iterations >= 1
    assert iters[-1]["components"] == 1
    comps = [info["components"] for info in iters]
    assert all(a > b for a, b in zip(comps, comps[1:]))  # strictly fewer each time


def test_oracle_self_check():
    """The oracle itself: Prim's total equals scipy's minimum_spanning_tree."""
    scipy_sparse = pytest.importorskip("scipy.sparse.csgraph")
    rng = np.random.default_rng(22)
    pts = rng.random((300, 4))
    dist = distance_matrix(pts)
    from oracle import prim
    total, edges = prim(dist)
    ref = scipy_sparse.minimum_spanning_tree(dist).sum()
    assert np.isclose(total, ref, rtol=1e-12)
    assert len(edges) == 299


# ---------------------------------------------------------------------------
# CPU kernels: the parallel reduce/merge do not depend on how ids are split
# ---------------------------------------------------------------------------
def _chain(n):
    """1-D points with growing gaps: Borůvka hooks them into long chains."""
    return np.cumsum(1.0 + np.arange(n) % 7 + np.arange(n) * 1e-3)[:, None]


@pytest.mark.parametrize("kind", ["random_f32", "lattice_ties", "duplicates", "chain",
                                  "chain_reversed"])
def test_cpu_chunked_reduce_merge_is_exact(kind, monkeypatch):
    from emst_dask.kernels.cpu import kernel_set as cpu_set

    rng = np.random.default_rng(21)
    if kind == "random_f32":
        pts = rng.random((30_000, 3), dtype=np.float32)
    elif kind == "lattice_ties":
        pts = np.array(list(itertools.product(range(180), repeat=2)), np.float32)
    elif kind == "duplicates":
        pts = rng.integers(0, 40, (25_000, 2)).astype(np.float64)
    elif kind == "chain":
        pts = _chain(20_000)
    else:
        pts = _chain(20_000)[::-1].copy()
    results = []
    for chunks in (1, 2, 7):
        monkeypatch.setattr(cpu_set, "_chunks", lambda n, c=chunks: c)
        t = emst(pts, backend="cpu").sorted_by_weight()
        results.append((host(t.source), host(t.target), host(t.weight)))
    for src, dst, w in results[1:]:
        np.testing.assert_array_equal(w, results[0][2])
        assert edge_set(src, dst) == edge_set(results[0][0], results[0][1])
    if kind.startswith("chain"):  # the MST of a 1-D cloud is the sorted path
        order = np.argsort(pts[:, 0], kind="stable")
        assert edge_set(results[0][0], results[0][1]) == edge_set(order[:-1], order[1:])
