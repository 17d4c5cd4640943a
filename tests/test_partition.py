"""Exact EMST across P spatial partitions (``emst_dask.partitioned``), in process.

The edge set for every P must equal the P = 1 edge set; P = 1 is the
single-device algorithm, itself checked against brute force elsewhere; the
small clouds here are also checked against the brute-force oracle.
"""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from emst_dask import emst
from emst_dask.datasets import GENERATORS
from emst_dask.partitioned import emst_partitioned
from emst_dask.partitioned.boxes import assign_boxes, choose_partitioning, face_distances
from emst_dask.partitioned.phase1 import solve_box

from oracle import assert_same_edges_and_weights, check_spanning_tree, oracle


def edge_set(u, v):
    return set(zip(np.minimum(u, v).tolist(), np.maximum(u, v).tolist()))


def check_same_as_single(points, P, min_samples=1, certificate="auto"):
    ref = emst(points, min_samples=min_samples, backend="cpu")
    res = emst_partitioned(points, P, min_samples=min_samples, certificate=certificate)
    assert len(res.source) == points.shape[0] - 1
    assert edge_set(res.source, res.target) == edge_set(ref.source, ref.target)
    assert np.isclose(res.total_weight, ref.total_weight, rtol=1e-9)
    return res


@pytest.mark.parametrize("P", [1, 2, 3, 4, 8])
@pytest.mark.parametrize("name,dim", [("uniform", 3), ("normal", 3), ("halos", 3),
                                      ("uniform", 2)])
def test_shared_datasets(name, dim, P):
    pts = GENERATORS[name](20_000, dim, 0)
    res = check_same_as_single(pts, P)
    if P == 1:
        assert res.report.rounds == 0 and res.report.n_super_vertices == 1
    else:
        assert 1 <= res.report.rounds <= 3


@pytest.mark.parametrize("P", [2, 3, 4, 8])
def test_brute_force_small(P):
    pts = np.random.default_rng(P).random((700, 3))
    res = emst_partitioned(pts, P)
    total = res.total_weight
    assert np.isclose(total, oracle(pts)["total"], rtol=1e-12)


@pytest.mark.parametrize("P", [2, 3, 4, 8])
def test_duplicates_and_lattices(P):
    rng = np.random.default_rng(7)
    lattice = rng.integers(0, 7, (4000, 3)).astype(np.float32)   # massive ties + dups
    check_same_as_single(lattice, P)
    dups = np.repeat(rng.random((300, 2)), 5, axis=0)
    check_same_as_single(dups, P)


@pytest.mark.parametrize("P", [2, 4, 8])
def test_clusters_straddling_faces(P):
    """Tight clusters centred on the split planes of the bisection."""
    rng = np.random.default_rng(3)
    base = rng.random((20_000, 3)).astype(np.float32)
    part = choose_partitioning(base, P)
    centres = []
    for axis, v, _, _ in part.splits:
        c = rng.random((4, 3))
        c[:, axis] = v
        centres.append(c)
    centres = np.concatenate(centres)
    blobs = (centres[rng.integers(0, len(centres), 8000)]
             + rng.normal(0, 0.003, (8000, 3))).astype(np.float32)
    check_same_as_single(np.concatenate([base, blobs]), P)


@pytest.mark.parametrize("P", [2, 3, 8])
@pytest.mark.parametrize("k", [2, 5, 16])
def test_mutual_reachability(P, k):
    pts = GENERATORS["halos"](8000, 3, 1)
    check_same_as_single(pts, P, min_samples=k)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(2, 400), d=st.integers(1, 4), P=st.integers(2, 6),
       seed=st.integers(0, 2**31), grid=st.sampled_from([0, 3, 20]),
       k=st.sampled_from([1, 1, 3]))
def test_property_random(n, d, P, seed, grid, k):
    rng = np.random.default_rng(seed)
    pts = rng.random((n, d))
    if grid:
        pts = np.round(pts * grid)
    k = min(k, n)
    P = min(P, n)  # at most a box per point (more is refused: test_partitions_bounded)
    check_same_as_single(pts, P, min_samples=k)


def test_boxes_tile_and_faces_bound_foreign_points():
    pts = GENERATORS["halos"](5000, 3, 0)
    part = choose_partitioning(pts, 5)
    box = assign_boxes(part, pts)
    assert set(np.unique(box)) == set(range(5))
    for k in range(5):
        mine = pts[box == k]
        others = pts[box != k]
        assert np.all((mine >= part.lo[k]) & (mine <= part.hi[k]))
        b = face_distances(part, k, mine)
        # nearest foreign point is never closer than the face distance
        sample = mine[:200]
        dmin = np.sqrt(((sample[:, None, :].astype(np.float64) - others[None]) ** 2)
                       .sum(-1)).min(1)
        assert np.all(dmin >= b[:200] - 1e-12)


@pytest.mark.parametrize("P", [2, 3, 8])
def test_boruvka_certificate_is_exact_and_weaker(P):
    """The GPU's whole-array certificate (run here with numpy): every edge it
    keeps, the Kruskal replay keeps too, and the result is the same tree."""
    pts = GENERATORS["halos"](20_000, 3, 2)
    part = choose_partitioning(pts, P)
    box = assign_boxes(part, pts)
    for k in range(P):
        idx = np.flatnonzero(box == k)
        face = face_distances(part, k, pts[idx])
        kr = solve_box(pts[idx], idx, face, certificate="kruskal")
        bo = solve_box(pts[idx], idx, face, certificate="boruvka")
        assert edge_set(bo.certified.u, bo.certified.v) <= edge_set(kr.certified.u,
                                                                   kr.certified.v)
        assert len(bo.certified) > 0.5 * len(kr.certified)
        assert bo.n_super == np.unique(bo.super_labels).size >= kr.n_super
    check_same_as_single(pts, P, certificate="boruvka")
    lattice = np.random.default_rng(P).integers(0, 6, (3000, 3)).astype(np.float32)
    check_same_as_single(lattice, P, certificate="boruvka")
    check_same_as_single(pts[:5000], P, min_samples=5, certificate="boruvka")


@pytest.mark.parametrize("period", [None, 1.0])
def test_a_box_given_its_walls_solves_as_given_its_face_distances(period):
    """A box keeps the faces it shares (``Walls``), not its points' face
    distances: computed where the engine has the points, they have the
    same bits, and phase 1 keeps the same edges with the same labels."""
    from emst_dask.partitioned.boxes import box_walls, recursive_coordinate_bisection
    from emst_dask.partitioned.steps import Box

    pts = GENERATORS["halos"](20_000, 3, 4) % 1.0
    part = (choose_partitioning(pts, 4) if period is None else
            recursive_coordinate_bisection(pts.astype(np.float64), 4, np.zeros(3), np.ones(3),
                                           np.full(3, period)))
    box = assign_boxes(part, pts)
    for k in range(4):
        idx = np.flatnonzero(box == k)
        face = face_distances(part, k, pts[idx])
        walls = box_walls(part, k)
        assert walls.any
        bx = Box(k, pts[idx], idx, walls, period=part.period)
        np.testing.assert_array_equal(bx.face.view(np.uint64), face.view(np.uint64))
        want = solve_box(pts[idx], idx, face, certificate="boruvka", period=part.period)
        got = solve_box(pts[idx], idx, walls, certificate="boruvka", period=part.period)
        for a in ("u", "v", "w2"):
            np.testing.assert_array_equal(getattr(got.certified, a), getattr(want.certified, a))
            np.testing.assert_array_equal(getattr(got.uncertified, a),
                                          getattr(want.uncertified, a))
        np.testing.assert_array_equal(got.label_rows, want.label_rows)
    alone = choose_partitioning(pts, 1)
    assert not box_walls(alone, 0).any  # one box: no shared face, every edge final
    one = solve_box(pts, np.arange(len(pts)), box_walls(alone, 0))
    assert len(one.certified) == len(pts) - 1 and len(one.uncertified) == 0


def test_the_blocks_are_let_go_once_split():
    """``compute`` empties the caller's list of blocks once they are split
    (a worker holding the whole cloud would otherwise hold it three times
    while the boxes are assembled)."""
    from emst_dask.partitioned import steps
    from emst_dask.partitioned.algorithm import compute
    from emst_dask.partitioned.local import LocalExecutor
    from emst_dask.partitioned.report import PartitionReport

    pts = GENERATORS["uniform"](4000, 3, 0)
    blocks = [steps.Block(a, pts[a:a + 1000]) for a in range(0, 4000, 1000)]
    res = compute(LocalExecutor(2), blocks, 4000, 3, pts.dtype, 2, 1, "cpu",
                  PartitionReport(partitions=2, workers=0))
    assert blocks == []
    assert res.n == 4000


@pytest.mark.parametrize("P", [2, 4])
def test_points_within_an_ulp_of_a_split_plane(P):
    """float32 coordinates on both sides of split values float32 cannot hold:
    boxes are assigned in float64, as the face distances are computed."""
    rng = np.random.default_rng(9)
    base = rng.random((6000, 3)).astype(np.float32)
    part = choose_partitioning(base, P)
    extra = []
    for axis, v, _, _ in part.splits:
        c = np.float32(v)
        near = np.array([np.nextafter(c, np.float32(-1)), c, np.nextafter(c, np.float32(2))],
                        np.float32)
        blob = rng.random((900, 3)).astype(np.float32) * np.float32(0.01) + np.float32(0.5)
        blob[:, axis] = near[rng.integers(0, 3, 900)]
        extra.append(blob)
    pts = np.concatenate([base] + extra)
    same = choose_partitioning(pts, P)
    box = assign_boxes(same, pts)
    for k in range(P):
        mine = pts[box == k].astype(np.float64)
        assert np.all((mine >= same.lo[k]) & (mine <= same.hi[k]))
    check_same_as_single(pts, P)
    check_same_as_single(pts, P, certificate="boruvka")


def test_partitions_bounded():
    """More boxes than points is refused before any work, naming both."""
    from emst_dask import InputError

    pts = np.random.default_rng(0).random((5, 2))
    with pytest.raises(InputError, match="partitions=6 is more than the 5 points"):
        emst_partitioned(pts, 6)
    assert emst_partitioned(pts, 5).n_edges == 4


@pytest.mark.parametrize("scale,dtype", [(1e155, np.float64), (1e-200, np.float64),
                                         (1e24, np.float32), (1e-22, np.float32)])
@pytest.mark.parametrize("k", [1, 3])
def test_clouds_the_engine_must_scale(scale, dtype, k):
    """Squared distances out there overflow or underflow: the partitioned
    algorithm works in the one-box engine's exact power-of-two frame and
    gives its tree, weights scaled back bit for bit."""
    base = np.random.default_rng(3).random((600, 3))
    pts = (base * scale).astype(dtype)
    res = emst_partitioned(pts, 3, min_samples=k)
    ref = emst(pts, min_samples=k, backend="cpu")
    check_spanning_tree(res, pts, k)
    assert_same_edges_and_weights(res, ref)


@pytest.mark.parametrize("k", [1, 3])
def test_float32_cloud_float32_cannot_square(k):
    """1e30 beside 1e-30: no float32 frame holds both, so the boxes are
    computed in float64 and the weights rounded to float32 at the end, as
    the one-box engine does."""
    pts = np.random.default_rng(4).random((500, 3)).astype(np.float32)
    pts[0], pts[1] = 1e30, 1e-30
    res = emst_partitioned(pts, 2, min_samples=k)
    ref = emst(pts, min_samples=k, backend="cpu")
    assert res.weight.dtype == np.float32
    assert_same_edges_and_weights(res, ref)


def test_cloud_no_frame_holds_is_refused_before_work():
    from emst_dask import InputError

    pts = np.random.default_rng(4).random((500, 3))
    pts[0], pts[1] = 1e300, 1e-300
    with pytest.raises(InputError, match="partitions=: the coordinates span magnitudes"):
        emst_partitioned(pts, 2)


def _certificate_every_round_over_the_box(s, t, rank, w2, face2, n):
    """The certificate's rounds as first written, each over the whole box:
    the oracle of the renumbered rounds (the same kept edges and roots)."""
    certified = np.zeros(s.shape[0], bool)
    labels = np.arange(n)
    face_key = face2.astype(np.float64).view(np.int64)
    live = np.arange(s.shape[0])
    big = np.iinfo(np.int64).max
    while True:
        lu, lv = labels[s[live]], labels[t[live]]
        live, lu, lv = live[lu != lv], lu[lu != lv], lv[lu != lv]
        if live.shape[0] == 0:
            break
        r, wk = rank[live], w2[live].astype(np.float64).view(np.int64)
        best = np.full(n, big)
        np.minimum.at(best, lu, r)
        np.minimum.at(best, lv, r)
        low = np.full(n, big)
        np.minimum.at(low, labels, face_key)
        by_u = (best[lu] == r) & (wk < low[lu])
        by_v = (best[lv] == r) & (wk < low[lv])
        keep = by_u | by_v
        if not keep.any():
            break
        certified[live[keep]] = True
        parent = np.arange(n)
        hu = by_u & ~(by_v & (lu < lv))
        hv = by_v & ~(by_u & (lv < lu))
        parent[lu[hu]] = lv[hu]
        parent[lv[hv]] = lu[hv]
        while True:
            nxt = parent[parent]
            if (nxt == parent).all():
                break
            parent = nxt
        labels = parent[labels]
        live = live[~keep]
    return certified, labels


@pytest.mark.parametrize("renumber_at", [4, 0])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("cloud", ["halos", "lattice", "copies"])
def test_certificate_equals_rounds_over_the_box_in_the_strict_order(cloud, dtype, renumber_at,
                                                                   monkeypatch):
    """The certificate's round 1 without an order of the edges (a packed
    (weight, min) word a point, ties by max; float64: ranks), its later
    rounds on the components the uncertified edges touch, renumbered again
    as they thin out (``renumber_at`` 0: after every round): the same
    kept edges and the same roots as rounds over the whole box in the
    strict order, on clouds with ties and duplicates too."""
    from emst_dask.engine.order import strict_edge_order
    from emst_dask.partitioned import certificate
    from emst_dask.partitioned.certificate import boruvka_certificate

    monkeypatch.setattr(certificate, "RENUMBER_AT", renumber_at)
    renumbered = []
    _renumber = certificate._renumber
    monkeypatch.setattr(certificate, "_renumber",
                        lambda *a: renumbered.append(a[-1]) or _renumber(*a))
    from emst_dask.partitioned.phase1 import run_engine

    rng = np.random.default_rng(5)
    if cloud == "halos":
        pts = GENERATORS["halos"](30_000, 3, 4)
    elif cloud == "lattice":
        pts = rng.integers(0, 12, (8000, 3)).astype(np.float32)
    else:
        pts = np.repeat(rng.random((3000, 2)).astype(np.float32), 3, axis=0)
    pts = pts.astype(dtype)
    s, t, w2 = run_engine(pts, "cpu", 1)
    assert w2.dtype == dtype
    n = pts.shape[0]
    order = strict_edge_order(np, s, t, w2)
    rank = np.empty(n - 1, np.int64)
    rank[order] = np.arange(n - 1)
    # face distances of a box cut at the median of x: points far from the
    # face certify at once, many rounds near it
    x = pts[:, 0].astype(np.float64)
    face = np.abs(x - np.median(x))
    face2 = (face * face)
    w2f = w2.astype(np.float64)
    want_c, want_l = _certificate_every_round_over_the_box(s, t, rank, w2f, face2, n)
    got_c, got_l = boruvka_certificate(np, s, t, w2, face2, n)
    assert 0 < want_c.sum() < n - 1
    # renumbered after round 1, and again as the rounds went on
    assert renumbered[0] == n and len(renumbered) >= (3 if renumber_at == 0 else 1)
    np.testing.assert_array_equal(got_c, want_c)
    np.testing.assert_array_equal(got_l, want_l)
    assert np.all(got_l[got_l] == got_l)                 # roots label themselves
    # the edges' order does not matter
    p = np.random.default_rng(1).permutation(n - 1)
    got_c2, got_l2 = boruvka_certificate(np, t[p], s[p], w2[p], face2, n)
    np.testing.assert_array_equal(got_c2, want_c[p])
    np.testing.assert_array_equal(got_l2, want_l)


@pytest.mark.parametrize("m", [1, 5, 4096, 4097, 20_000])
def test_device_axis_bounds_equal_the_host(m):
    """The device summary's bounds (parts of rows reduced first; run here
    with numpy) equal ``axis_bounds``: per-axis extremes, and the smallest
    nonzero magnitude, zeros and negative values included."""
    from emst_dask.kernels.cpu.bvh import axis_bounds
    from emst_dask.partitioned.steps import _device_axis_bounds

    rng = np.random.default_rng(m)
    x = (rng.standard_normal((m, 3)) * 10.0 ** rng.integers(-30, 30, (m, 3))).astype(np.float32)
    x[rng.random((m, 3)) < 0.2] = 0
    lo, hi, small = _device_axis_bounds(x)
    want = axis_bounds(x)
    np.testing.assert_array_equal(lo, want[0])
    np.testing.assert_array_equal(hi, want[1])
    assert small == want[2]
    zeros = np.zeros((m, 2), np.float64)
    assert _device_axis_bounds(zeros)[2] == np.inf == axis_bounds(zeros)[2]
