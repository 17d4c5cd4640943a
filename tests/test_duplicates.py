"""Duplicates are one point (``engine.duplicates``): exact duplicates are
collapsed before the tree, and the tree is the one the engine computes on
the whole cloud, edge for edge.

Every cloud here is checked three ways: against the brute-force oracle
(spanning, true weights, total, cycle property), against the strict-order
Kruskal on exact integer keys where the coordinates are integers (the tree
is then determined edge by edge), and against the engine with the collapse
turned off (same edges, bit-identical weights).  On the CPU backend, the
CUDA backend (GPU) and the CUDA kernels run by the emulator.
"""
from __future__ import annotations

import dask.config
import numpy as np
import pytest
from hypothesis import given, strategies as st

import emst_dask.engine.core as core_module
import emst_dask.engine.duplicates as duplicates_module
from emst_dask import emst
from emst_dask.engine import Timers, boruvka
from emst_dask.engine.boruvka import morton_order
from emst_dask.engine.duplicates import MIN_FRACTION_KEY, find_duplicates
from emst_dask.kernels import get_kernels
from cuda_emu import emulated_kernels
from oracle import (assert_same_edges_and_weights, check_spanning_tree, edge_set, host,
                    kruskal_tie_ordered)

EMU = emulated_kernels()
RUNNERS = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu),
           pytest.param("cuda_emu", marks=pytest.mark.skipif(
               EMU is None, reason="no C++ compiler for the CUDA emulator"))]
ALWAYS = {MIN_FRACTION_KEY: 0.0}   # collapse whenever there is a copy
NEVER = {MIN_FRACTION_KEY: 2.0}    # the engine on the whole cloud


@pytest.fixture(params=RUNNERS)
def run(request, monkeypatch):
    """emst(points, **kw) on one backend (the emulator stands in for CUDA)."""
    name = request.param
    if name == "cuda_emu":
        real = get_kernels
        monkeypatch.setattr(core_module, "get_kernels",
                            lambda b: EMU if b == "cuda" else real(b))
        name = "cuda"

    def go(pts, **kw):
        return emst(pts, backend=name, **kw)
    return go


@pytest.fixture(params=["host", "device"])
def crowded_on(request, monkeypatch):
    """Both ways of handling the crowded points (``HOST_ROWS``): with numpy on
    the host (a few of them, the default here) and with the kernel set's
    arrays (many).  Only clouds with a code cell holding distinct points
    reach them (``set_aside``); clouds whose copies fill pure runs (the
    lattices, the tracks here) are marked and compacted in two passes
    (``test_pure_runs_skip_the_general_grouping``)."""
    if request.param == "device":
        monkeypatch.setattr(duplicates_module, "HOST_ROWS", 0)
    return request.param


def _strict_tree(points):
    """Kruskal under (d^2, min row, max row) on exact squared distances of
    integer-valued points."""
    x = np.asarray(points).astype(np.int64)
    diff = x[:, None, :] - x[None, :, :]
    return kruskal_tie_ordered((diff * diff).sum(axis=2))


def _check(run, pts, box_size=None, integer=False):
    """The collapsed tree: exact, equal to the uncollapsed one, and (integer
    coordinates) the strict order's tree."""
    with dask.config.set(ALWAYS):
        tree = run(pts, box_size=box_size)
    check_spanning_tree(tree, pts, box_size=box_size)
    with dask.config.set(NEVER):
        whole = run(pts, box_size=box_size)
    assert_same_edges_and_weights(tree, whole)
    if integer:
        assert edge_set(tree.source, tree.target) == _strict_tree(pts)
    return tree


def _lattice(sites_per_axis, d, n, seed, dtype):
    """n points on the sites of an integer lattice (about n / sites each)."""
    rng = np.random.default_rng(seed)
    return rng.integers(0, sites_per_axis, (n, d)).astype(dtype)


def _tracks(n, seed, dtype=np.float64):
    """GPS-like tracks rounded to 1e-5: random walks of steps ~1e-5."""
    rng = np.random.default_rng(seed)
    starts = rng.random((8, 2)) * 1e-3 + np.array([45.0, 7.0])
    steps = rng.normal(0, 1.2e-5, (8, n // 8, 2))
    x = starts[:, None, :] + np.cumsum(steps, axis=1)
    return np.round(x.reshape(-1, 2), 5).astype(dtype)


# ---------------------------------------------------------------------------
# the clouds of the task
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_lattice_two_points_per_site(run, dtype):
    pts = _lattice(30, 2, 1800, 0, dtype)  # 900 sites, ~2 points each
    tree = _check(run, pts, integer=True)
    n_distinct = np.unique(pts, axis=0).shape[0]
    assert int((host(tree.weight) == 0).sum()) == len(pts) - n_distinct


def test_lattice_3d_duplicates_far_from_origin(run):
    for dtype in (np.float64, np.float32):  # 1e6 + integers: exact in both
        pts = _lattice(12, 3, 2500, 1, np.int64) + 1_000_000
        _check(run, pts.astype(dtype), integer=True)
        tree = _check(run, (pts - 1_000_000).astype(dtype), integer=True)
        shifted = run(pts.astype(dtype))
        assert edge_set(tree.source, tree.target) == edge_set(shifted.source, shifted.target)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_quantised_tracks(run, dtype):
    pts = _tracks(2400, 2, dtype)
    assert np.unique(pts, axis=0).shape[0] < 0.8 * len(pts)  # many duplicates
    _check(run, pts)


def test_all_points_identical(run):
    pts = np.full((500, 3), 0.25, np.float32)
    tree = _check(run, pts)
    # the star from row 0
    assert edge_set(tree.source, tree.target) == {(0, i) for i in range(1, 500)}
    assert tree.iterations == 0


def test_one_point_repeated_among_distinct(run):
    rng = np.random.default_rng(4)
    pts = rng.random((700, 3))
    where = np.sort(rng.choice(700, 150, replace=False))
    pts[where] = pts[where[3]]  # 150 copies, the smallest row not the first copy
    tree = _check(run, pts)
    star = {(int(where[0]), int(i)) for i in where[1:]}
    assert star <= edge_set(tree.source, tree.target)


def test_few_copies_collapsed_or_not(run):
    """Below the default fraction the cloud is not collapsed; both trees are
    the same."""
    rng = np.random.default_rng(5)
    pts = rng.random((1000, 2))
    pts[[10, 500, 999]] = pts[700]
    _check(run, pts)
    tree = run(pts)  # default: 3 copies of 1000 are not worth it
    check_spanning_tree(tree, pts)
    assert tree.components[1] != 997


def test_periodic_box(run):
    """In a box only equal values are duplicates: 0 and near L are distinct
    points, one grid step apart across the face."""
    rng = np.random.default_rng(6)
    pts = rng.integers(0, 16, (1500, 3)) / 16.0  # [0, 1) on a grid of 1/16
    pts[:40, 0] = 15 / 16
    pts[40:80, 0] = 0.0
    box = np.ones(3)
    tree = _check(run, pts, box_size=box)
    # the same lattice in integer units: minimum-image squared distances
    x = (pts * 16).astype(np.int64)
    diff = np.abs(x[:, None, :] - x[None, :, :])
    diff = np.minimum(diff, 16 - diff)
    assert edge_set(tree.source, tree.target) == kruskal_tie_ordered((diff * diff).sum(axis=2))


def test_negative_zero_is_zero(run):
    """-0.0 and 0.0 are equal values at distance 0: one group."""
    pts = np.array([[0.0, 1.0], [-0.0, 1.0], [0.0, -0.0], [1.0, 1.0], [-0.0, 0.0],
                    [2.0, 2.0], [-0.0, -0.0]] * 40)
    tree = _check(run, pts, integer=True)
    K = get_kernels("cpu")
    codes, perm = morton_order(K, pts, Timers(enabled=False))
    dup = find_duplicates(K, pts, codes, perm)
    # four distinct values: every other row a copy
    assert dup.copy.shape[0] == len(pts) - 4
    assert int((host(tree.weight) == 0).sum()) == len(pts) - 4


def test_clump_in_one_code_cell_with_copies(run, crowded_on):
    """Distinct points and copies in one Morton cell: the run is sorted by
    coordinates to find the groups."""
    rng = np.random.default_rng(7)
    clump = 0.5 + 1e-9 * rng.standard_normal((150, 3))
    pts = np.concatenate([rng.random((300, 3)), clump, clump[::2], clump[::3]])
    pts = pts[rng.permutation(len(pts))]
    _check(run, pts)


@pytest.mark.parametrize("d", [1, 2, 5])
def test_copies_in_other_dimensions(run, d):
    pts = _lattice(7, d, 1200, 8 + d, np.float64)
    _check(run, pts, integer=True)


def test_row_permutations(run):
    """Every order of the rows gives the tree of the strict order on that
    order's rows (the same total), collapsed or not."""
    base = _lattice(10, 2, 600, 9, np.float32)
    totals = []
    for seed in range(3):
        perm = np.random.default_rng(seed).permutation(len(base))
        tree = _check(run, base[perm], integer=True)
        totals.append(tree.total_weight)
    assert totals[0] == totals[1] == totals[2]


def test_mutual_reachability_is_not_collapsed(run):
    pts = np.repeat(np.random.default_rng(10).random((100, 2)), 3, axis=0)
    with dask.config.set(ALWAYS):
        tree = run(pts, min_samples=4)
    check_spanning_tree(tree, pts, 4)
    assert "duplicates" not in tree.timings
    assert tree.components[1] != 100


# ---------------------------------------------------------------------------
# what the collapse buys: m sites with k copies run the tree of m points
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("k", [4, 16])
def test_k_copies_cost_what_m_points_cost(run, k):
    rng = np.random.default_rng(11)
    sites = rng.random((300, 3)).astype(np.float32)
    pts = np.tile(sites, (k, 1))  # row i + j * 300 is a copy of site i
    tree = run(pts)
    alone = run(sites)
    # the Boruvka iterations are those of the 300 sites, on the same tree
    assert tree.iterations == alone.iterations
    assert tree.components == [len(pts)] + list(alone.components)
    want = edge_set(alone.source, alone.target) | {
        (i, i + j * 300) for i in range(300) for j in range(1, k)}
    assert edge_set(tree.source, tree.target) == want
    assert tree.total_weight == alone.total_weight


def test_engine_result_maps_back_to_rows():
    """``boruvka`` itself: input rows and squared weights in the scaled frame."""
    K = get_kernels("cpu")
    pts = np.repeat(np.arange(6.0)[:, None] * [1.0, 0.0], 3, axis=0)
    with dask.config.set(ALWAYS):
        res = boruvka(K, pts)
    got = sorted(zip(np.minimum(res.source, res.target).tolist(),
                     np.maximum(res.source, res.target).tolist(), res.weight2.tolist()))
    want = sorted([(3 * i, 3 * i + j, 0.0) for i in range(6) for j in (1, 2)]
                  + [(3 * i, 3 * i + 3, 4.0 ** res.exponent) for i in range(5)])
    assert got == want


@given(st.integers(1, 3), st.integers(2, 60), st.integers(0, 2**31))
def test_small_integer_clouds_property(d, n, seed):
    """Tiny integer clouds (ties and copies everywhere), CPU backend."""
    pts = np.random.default_rng(seed).integers(0, 4, (n, d)).astype(np.float64)
    with dask.config.set(ALWAYS):
        tree = emst(pts, backend="cpu")
    assert edge_set(tree.source, tree.target) == _strict_tree(pts)
    w = np.sqrt(((pts[host(tree.source)] - pts[host(tree.target)]) ** 2).sum(axis=1))
    np.testing.assert_array_equal(host(tree.weight), w)


def test_ties_clouds_are_deterministic_with_copies():
    """The benchmarks' ties clouds: float32, (n, d), the same for a seed, and
    full of exact copies."""
    from emst_dask import datasets

    for name, make in datasets.TIES.items():
        x = make(5000, 3, 1)
        assert x.dtype == np.float32 and x.shape == (5000, 3) and x.flags.c_contiguous
        np.testing.assert_array_equal(x, make(5000, 3, 1))
        assert np.unique(x, axis=0).shape[0] <= 0.6 * len(x), name


# ---------------------------------------------------------------------------
# the kernel sets' passes: mark_copies and compact_copies against numpy
# ---------------------------------------------------------------------------
KERNEL_SETS = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu),
               pytest.param("cuda_emu", marks=pytest.mark.skipif(
                   EMU is None, reason="no C++ compiler for the CUDA emulator"))]


def _kernel_set(name):
    return EMU if name == "cuda_emu" else get_kernels(name)


def _clump_with_copies(seed):
    """Copies among distinct points inside one code cell; in a second cell,
    distinct points that share their first coordinates (only the last
    tells them apart)."""
    rng = np.random.default_rng(seed)
    clump = 0.5 + 1e-9 * rng.standard_normal((60, 3))
    flat = np.full((40, 3), 0.25)
    flat[:, 2] += 1e-9 * rng.standard_normal(40)
    pts = np.concatenate([rng.random((200, 3)), clump, clump[::2], flat, flat[::4]])
    return pts[rng.permutation(len(pts))]


def _groups_oracle(pts):
    """{row: smallest row of its group of identical values} (-0.0 == 0.0)."""
    first = {}
    rep = {}
    for r, p in enumerate((np.asarray(pts) + 0.0).tolist()):
        rep[r] = first.setdefault(tuple(p), r)
    return rep


@pytest.mark.parametrize("kernels", KERNEL_SETS)
@pytest.mark.parametrize("cloud", ["lattice", "copies", "negzero", "distinct", "clump"])
def test_mark_and_compact_copies(kernels, cloud):
    """The copies marked in tree order, the counts, and (no run holding
    distinct points) the distinct points and each copy's representative."""
    K = _kernel_set(kernels)
    xp = K.xp
    rng = np.random.default_rng(3)
    pts = {"lattice": lambda: _lattice(9, 3, 2000, 4, np.float32),
           "copies": lambda: np.tile(rng.random((250, 2)), (5, 1))[rng.permutation(1250)],
           "negzero": lambda: np.array([[0.0, 1.0], [-0.0, 1.0], [-0.0, -0.0], [0.0, 0.0],
                                        [3.0, 1.0]] * 30),
           "distinct": lambda: rng.random((700, 3)),
           "clump": lambda: _clump_with_copies(5)}[cloud]()
    n = len(pts)
    x = xp.asarray(pts)
    codes, perm = morton_order(K, x, Timers(enabled=False))
    keep_tree, (copies, shared, mixed) = K.mark_copies(x, codes, perm)
    c, p = host(codes), host(perm).astype(np.int64)
    same = np.concatenate([[False], c[1:] == c[:-1]])
    eq = np.concatenate([[False], (pts[p[1:]] == pts[p[:-1]]).all(axis=1)]) & same
    np.testing.assert_array_equal(host(keep_tree), (~eq).astype(np.uint8))
    assert (copies, shared, mixed) == (int(eq.sum()), int(same.sum()), int((same & ~eq).sum()))
    groups = _groups_oracle(pts)
    n_distinct = len(set(groups.values()))
    if cloud == "clump":
        assert mixed > 0 and copies < n - n_distinct  # the general path's business
        return
    assert mixed == 0 and copies == n - n_distinct
    if cloud == "distinct":
        assert copies == 0
        return
    rows, kcodes, kperm, copy, rep = (host(a) for a in K.compact_copies(
        x, codes, perm, keep_tree, n - copies))
    np.testing.assert_array_equal(rows, np.array(sorted(set(groups.values()))))
    np.testing.assert_array_equal(kcodes, c[~eq])
    np.testing.assert_array_equal(rows[kperm.astype(np.int64)], p[~eq])
    np.testing.assert_array_equal(np.sort(copy), np.sort(p[eq]))
    np.testing.assert_array_equal(rep, [groups[int(r)] for r in copy])
    assert all(rep < copy)


@pytest.mark.parametrize("kernels", KERNEL_SETS)
def test_pure_runs_skip_the_general_grouping(kernels, monkeypatch):
    """A lattice (every run of equal codes one group) never reaches the
    coordinate grouping nor the finer codes; a clump in one cell does."""
    import sys

    boruvka_module = sys.modules["emst_dask.engine.boruvka"]  # the package exports the function
    K = _kernel_set(kernels)
    calls = []
    real_find, real_refine = duplicates_module.find_duplicates, boruvka_module.refine_crowded_cells
    monkeypatch.setattr(duplicates_module, "find_duplicates",
                        lambda *a: calls.append("find") or real_find(*a))
    monkeypatch.setattr(boruvka_module, "refine_crowded_cells",
                        lambda *a: calls.append("refine") or real_refine(*a))
    for pts, want in ((_lattice(9, 3, 2000, 4, np.float32), []),
                      (_clump_with_copies(6), ["find", "refine"])):
        calls.clear()
        with dask.config.set(ALWAYS):
            res = boruvka(K, K.xp.asarray(pts))
        assert calls == want
        tree_w = host(res.weight2)
        assert len(tree_w) == len(pts) - 1
        assert int((tree_w == 0).sum()) == len(pts) - len(set(_groups_oracle(pts).values()))
