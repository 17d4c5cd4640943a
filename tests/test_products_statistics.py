"""MST statistics (``emst_dask.products.statistics``) against MiSTree.

Oracles: MiSTree's own functions on the same edges (``get_graph_degree``,
``get_degree_for_edges``, ``get_branch_index``, ``get_branch_end_index``,
``get_branch_edge_count``, the branch length as ``GetMST.get_branches``
sums it, ``get_branch_shape``), its ``HistMST`` binning, a brute-force
periodic MST (a dense minimum-image distance matrix and scipy) with
end-to-end distances minimised over every image shift; the whole-array
(device) algorithm run with numpy against the numba one.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from click.testing import CliRunner

from emst_dask import InputError, SpanningTree, datasets, emst
from emst_dask.products.statistics import (MSTStatistics, check_box_size, mst_statistics,
                                           mst_statistics_xp)

mist = pytest.importorskip("mistree")
csgraph = pytest.importorskip("scipy.sparse.csgraph")
distance = pytest.importorskip("scipy.spatial.distance")


# --- oracles ------------------------------------------------------------------------------

def mistree_stats(s, t, w, n, points=None):
    """MiSTree's statistics of the edges (s, t, w), as GetMST computes them."""
    edge_index = np.array([s, t])
    degree = mist.get_graph_degree(edge_index, n)
    edge_degree = mist.get_degree_for_edges(edge_index, degree)
    branch_index, rejected = mist.get_branch_index(edge_index, edge_degree)
    assert rejected == []
    length = np.array([np.sum(w[i]) for i in branch_index])  # GetMST.get_branches
    out = {"degree": degree, "branch_index": branch_index, "branch_length": length,
           "branch_edge_count": mist.get_branch_edge_count(branch_index)}
    if branch_index:
        out["branch_ends"] = mist.get_branch_end_index(edge_index, edge_degree, branch_index)
        if points is not None and points.shape[1] in (2, 3):
            mode = "2D" if points.shape[1] == 2 else "3D"
            with np.errstate(invalid="ignore", divide="ignore"):
                out["branch_shape"] = mist.get_branch_shape(
                    edge_index, edge_degree, branch_index, length, mode=mode, x=points[:, 0],
                    y=points[:, 1], z=points[:, 2] if mode == "3D" else None)
    return out


def check_against_mistree(s, t, w, n, points=None, xp_too=True):
    """Our statistics of (s, t, w) equal MiSTree's; returns ours."""
    got = mst_statistics(s, t, w, n, points)
    ref = mistree_stats(s, t, w, n, points)
    assert got.degree.dtype == np.int64 and got.degree.shape == (n,)
    np.testing.assert_array_equal(got.degree, ref["degree"])
    # the same branches, each in the same order, listed in the same order
    assert got.branch_index() == ref["branch_index"]
    assert got.branch_offsets.dtype == np.int64 and got.branch_edges.dtype == np.int64
    np.testing.assert_array_equal(got.branch_edge_count, ref["branch_edge_count"])
    assert got.branch_edge_count.dtype == np.int64
    assert got.branch_length.dtype == np.float64
    np.testing.assert_allclose(got.branch_length, ref["branch_length"], rtol=1e-13, atol=0)
    assert got.edge_length is not None and len(got.edge_length) == len(s)
    np.testing.assert_array_equal(got.edge_length, w)
    if ref["branch_index"]:
        np.testing.assert_array_equal(got.branch_ends.T, ref["branch_ends"])
    if "branch_shape" in ref:
        np.testing.assert_allclose(got.branch_shape, ref["branch_shape"], rtol=1e-12, atol=0,
                                   equal_nan=True)
    if points is None:
        assert got.branch_shape is None
    if xp_too:
        check_xp_equals_host(got, s, t, w, n, points)
    return got


def check_xp_equals_host(got, s, t, w, n, points=None, box=None):
    """The whole-array algorithm (numpy) gives the numba one's statistics."""
    other = mst_statistics_xp(np, s, t, w, n, points, box)
    for name in ("degree", "branch_edges", "branch_offsets", "branch_edge_count",
                 "branch_ends"):
        np.testing.assert_array_equal(getattr(other, name), getattr(got, name), err_msg=name)
    np.testing.assert_allclose(other.branch_length, got.branch_length, rtol=1e-13, atol=0)
    if points is not None:
        np.testing.assert_allclose(other.branch_shape, got.branch_shape, rtol=1e-13, atol=0,
                                   equal_nan=True)


def arrays(tree):
    return tree.source, tree.target, tree.weight, tree.n_points


def random_tree(n, rng, chain=0.5):
    """A random labelled tree; ``chain`` is the chance that a node hangs off
    the previous one (long chains of degree-2 nodes); labels permuted,
    edges shuffled and randomly oriented."""
    parent = np.array([i - 1 if rng.random() < chain else rng.integers(0, i)
                       for i in range(1, n)], np.int64)
    child = np.arange(1, n)
    label = rng.permutation(n)
    s, t = label[parent], label[child]
    flip = rng.random(n - 1) < 0.5
    s, t = np.where(flip, t, s), np.where(flip, s, t)
    order = rng.permutation(n - 1)
    return s[order], t[order], rng.random(n - 1), n


def min_image_mst(points, box):
    """Brute-force periodic MST: dense minimum-image distances, scipy's MST."""
    diff = np.abs(points[:, None, :] - points[None, :, :])
    diff = np.minimum(diff, box - diff)
    dist = np.sqrt((diff ** 2).sum(axis=2))
    n = len(points)
    # scipy drops zero entries (duplicates): shift every distance up by one
    mst = csgraph.minimum_spanning_tree(dist + 1.0 - np.eye(n)).tocoo()
    return (mst.row.astype(np.int64), mst.col.astype(np.int64),
            dist[mst.row, mst.col], n)


def brute_min_image(a, b, box):
    """min over every image shift k in {-1, 0, 1}^d of |a - b + k L|."""
    best = np.inf
    for k in itertools.product((-1, 0, 1), repeat=len(a)):
        best = min(best, float(np.sqrt(((a - b + np.array(k) * box) ** 2).sum())))
    return best


# --- clouds and graphs against MiSTree --------------------------------------------------

def cloud(name):
    rng = np.random.default_rng(0)
    if name == "uniform2":
        return rng.random((1500, 2))
    if name == "uniform3":
        return rng.random((2000, 3))
    if name == "halos":
        return datasets.halos(2000, dim=3, seed=3).astype(np.float64)
    if name == "lattice":  # ties everywhere
        g = np.arange(9, dtype=np.float64)
        return np.stack(np.meshgrid(g, g, g[:6], indexing="ij"), -1).reshape(-1, 3)
    if name == "duplicates":  # zero-length edges and branches
        base = rng.random((300, 3))
        return base[rng.integers(0, len(base), 900)]
    if name == "integers":
        return rng.integers(0, 7, (400, 3)).astype(np.float64)
    raise KeyError(name)


@pytest.mark.parametrize("name", ["uniform2", "uniform3", "halos", "lattice", "duplicates",
                                  "integers"])
def test_clouds_against_mistree(name):
    points = cloud(name)
    tree = emst(points, backend="cpu")
    got = check_against_mistree(*arrays(tree), points)
    assert got.n_branches > 10
    st = tree.statistics(points)
    np.testing.assert_array_equal(st.branch_length, got.branch_length)
    if name == "duplicates":
        assert (got.edge_length == 0).sum() >= 500


def test_branch_of_length_zero():
    """Three copies of a point: one branch of length 0, shape 0 / 0 = NaN, as
    MiSTree."""
    points = np.ones((3, 2))
    got = check_against_mistree(*arrays(emst(points, backend="cpu")), points)
    assert got.branch_length.tolist() == [0.0] and np.isnan(got.branch_shape[0])
    assert np.isnan(got.summary()["mean_branch_shape"])


@pytest.mark.parametrize("seed,chain", [(0, 0.0), (1, 0.5), (2, 0.9), (3, 0.99)])
def test_random_trees_against_mistree(seed, chain):
    """Labels, edge order and orientation at random; long chains."""
    rng = np.random.default_rng(seed)
    s, t, w, n = random_tree(2500, rng, chain)
    points = rng.random((n, 3))
    got = check_against_mistree(s, t, w, n, points)
    # every edge with a degree-2 end is in exactly one branch, no other edge is
    on = (got.degree[s] == 2) | (got.degree[t] == 2)
    np.testing.assert_array_equal(np.sort(got.branch_edges), np.flatnonzero(on))
    assert (got.branch_edge_count >= 2).all()


def test_same_result_on_any_thread_count():
    import numba

    rng = np.random.default_rng(11)
    s, t, w, n = random_tree(3000, rng, 0.7)
    points = rng.random((n, 2))
    many = mst_statistics(s, t, w, n, points)
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = mst_statistics(s, t, w, n, points)
    finally:
        numba.set_num_threads(before)
    for name in ("degree", "branch_edges", "branch_offsets", "branch_length", "branch_shape",
                 "branch_ends"):
        np.testing.assert_array_equal(getattr(one, name), getattr(many, name), err_msg=name)


def test_path_graph():
    rng = np.random.default_rng(1)
    n = 1000
    p = rng.permutation(n)
    s, t, w = p[:-1], p[1:], rng.random(n - 1)
    points = rng.random((n, 2))
    got = check_against_mistree(s, t, w, n, points)
    assert got.n_branches == 1 and got.branch_edge_count[0] == n - 1
    assert got.branch_index()[0] == list(range(n - 1))
    assert sorted(got.branch_ends[0].tolist()) == sorted([p[0], p[-1]])
    np.testing.assert_allclose(got.branch_length[0], w.sum(), rtol=1e-13)
    np.testing.assert_allclose(got.branch_shape[0],
                               np.linalg.norm(points[p[0]] - points[p[-1]]) / w.sum(),
                               rtol=1e-12)
    # reversed edge order: one branch, walked from the other end
    rev = check_against_mistree(s[::-1].copy(), t[::-1].copy(), w[::-1].copy(), n, points)
    assert rev.branch_index()[0] == list(range(n - 1))
    np.testing.assert_allclose(rev.branch_length, got.branch_length, rtol=1e-13)


def test_star():
    n = 50
    s, t, w = np.zeros(n - 1, np.int64), np.arange(1, n), np.linspace(1, 2, n - 1)
    got = check_against_mistree(s, t, w, n, np.random.default_rng(0).random((n, 3)))
    assert got.n_branches == 0 and got.degree[0] == n - 1 and (got.degree[1:] == 1).all()
    assert got.branch_offsets.tolist() == [0] and got.branch_shape.shape == (0,)


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4])
def test_tiny_trees(n):
    points = np.random.default_rng(n).random((n, 3))
    tree = emst(points, backend="cpu") if n else SpanningTree(
        np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), None, 0, 3)
    s, t, w, _ = arrays(tree)
    got = mst_statistics(s, t, w, n, points)
    check_xp_equals_host(got, s, t, w, n, points)
    assert got.degree.shape == (n,) and got.edge_length.shape == (max(n - 1, 0),)
    if n >= 1:
        check_against_mistree(s, t, w, n, points, xp_too=False)
    if n <= 2:
        assert got.n_branches == 0
    if n == 3:  # a path of two edges through the middle point
        assert got.n_branches == 1 and got.branch_edge_count.tolist() == [2]
        mid = int(np.flatnonzero(got.degree == 2)[0])
        ends = sorted(set(range(3)) - {mid})
        assert sorted(got.branch_ends[0].tolist()) == ends
        np.testing.assert_allclose(
            got.branch_shape[0], np.linalg.norm(points[ends[0]] - points[ends[1]])
            / (w[0] + w[1]), rtol=1e-13)
    h = got.histograms()  # empty statistics still bin
    assert h.degree.values.shape == (6,) and h.edge_length.values.shape == (100,)


def test_float32_tree():
    points = datasets.uniform(1500, dim=3, seed=2)  # float32
    tree = emst(points, backend="cpu")
    assert tree.weight.dtype == np.float32
    st = tree.statistics(points)
    assert st.edge_length.dtype == np.float32 and st.branch_length.dtype == np.float64
    ref = mistree_stats(*arrays(tree), points.astype(np.float64))
    assert st.branch_index() == ref["branch_index"]
    # MiSTree sums float32 lengths in float32; we sum in float64
    exact = np.array([np.sum(tree.weight[i].astype(np.float64)) for i in ref["branch_index"]])
    np.testing.assert_allclose(st.branch_length, exact, rtol=1e-14)
    np.testing.assert_allclose(st.branch_length, ref["branch_length"], rtol=1e-6)


# --- periodic shapes ----------------------------------------------------------------------

@pytest.mark.parametrize("d,box", [(2, 1.0), (3, (1.0, 0.5, 2.0)), (1, 3.0)])
def test_periodic_shape_against_brute_force(d, box):
    rng = np.random.default_rng(d)
    L = np.broadcast_to(np.asarray(box, np.float64), (d,))
    # clusters straddling the faces, points at 0 and just below L
    centres = rng.random((6, d)) * L
    centres[:2] = 0.0
    points = (centres[rng.integers(0, 6, 400)] + rng.normal(0, 0.03, (400, d)) * L) % L
    points[0] = 0.0
    points[1] = np.nextafter(L, 0)
    s, t, w, n = min_image_mst(points, L)
    st = mst_statistics(s, t, w, n, points, box_size=box)
    np.testing.assert_array_equal(st.box_size, L)
    ref = mistree_stats(s, t, w, n)
    assert st.branch_index() == ref["branch_index"]
    ends = ref["branch_ends"].T
    reach = np.array([brute_min_image(points[a], points[b], L) for a, b in ends])
    np.testing.assert_allclose(st.branch_shape, reach / ref["branch_length"], rtol=1e-12)
    assert (st.branch_shape <= 1 + 1e-12).all()
    plain = mst_statistics(s, t, w, n, points)  # without the box: larger end-to-end
    assert (plain.branch_shape >= st.branch_shape - 1e-15).all()
    if d > 1:  # (the 1-D tree is one path, its ends maybe nearer inside than across)
        assert (plain.branch_shape > st.branch_shape).any()
    check_xp_equals_host(st, s, t, w, n, points, box)


def test_statistics_method_takes_the_trees_box():
    rng = np.random.default_rng(7)
    points = rng.random((300, 3))
    s, t, w, n = min_image_mst(points, np.ones(3))
    tree = SpanningTree(s, t, w, None, n, 3)
    tree.box_size = np.ones(3)  # the attribute periodic trees carry
    got = tree.statistics(points)
    want = mst_statistics(s, t, w, n, points, box_size=1.0)
    np.testing.assert_array_equal(got.branch_shape, want.branch_shape)
    np.testing.assert_array_equal(got.box_size, np.ones(3))
    # another box would measure branches whose edges were not taken in it
    # (shapes above 1): refused
    with pytest.raises(InputError, match="this call asks for box_size"):
        tree.statistics(points, box_size=2.0)
    assert tree.statistics(points, box_size=1.0).box_size.tolist() == [1.0] * 3


# --- invariance ---------------------------------------------------------------------------

def keyed(st, s, t, rows=None):
    """Per branch, keyed by its set of node pairs (in the labels ``rows``
    maps to): (edge count, length, shape, end nodes)."""
    rows = np.arange(len(st.degree)) if rows is None else rows
    out = {}
    for k, edges in enumerate(st.branch_index()):
        key = frozenset(frozenset((int(rows[s[e]]), int(rows[t[e]]))) for e in edges)
        out[key] = (int(st.branch_edge_count[k]), float(st.branch_length[k]),
                    float(st.branch_shape[k]), frozenset(rows[st.branch_ends[k]].tolist()))
    return out


def assert_same_branches(a, b):
    assert a.keys() == b.keys()
    for key in a:
        assert a[key][0] == b[key][0] and a[key][3] == b[key][3]
        np.testing.assert_allclose(a[key][1:3], b[key][1:3], rtol=1e-13)


@pytest.mark.parametrize("name", ["uniform3", "halos"])
def test_row_permutation_invariance(name):
    points = cloud(name)
    n = len(points)
    tree = emst(points, backend="cpu")
    st = tree.statistics(points)
    perm = np.random.default_rng(5).permutation(n)
    ptree = emst(points[perm], backend="cpu")
    pst = ptree.statistics(points[perm])
    np.testing.assert_array_equal(pst.degree, st.degree[perm])
    assert_same_branches(keyed(st, tree.source, tree.target),
                         keyed(pst, ptree.source, ptree.target, rows=perm))


def test_relabelled_lattice_tree_same_statistics():
    """The tied lattice's tree, relabelled, shuffled and flipped: the same
    statistics (whatever the order)."""
    points = cloud("lattice")
    n = len(points)
    s, t, w, _ = arrays(emst(points, backend="cpu"))
    st = mst_statistics(s, t, w, n, points)
    rng = np.random.default_rng(9)
    perm = rng.permutation(n)
    inv = np.argsort(perm)
    order = rng.permutation(len(s))
    flip = rng.random(len(s)) < 0.5
    ps, pt = inv[s[order]], inv[t[order]]
    ps, pt = np.where(flip, pt, ps), np.where(flip, ps, pt)
    pst = check_against_mistree(ps, pt, w[order], n, points[perm])
    np.testing.assert_array_equal(pst.degree, st.degree[perm])
    assert_same_branches(keyed(st, s, t), keyed(pst, ps, pt, rows=perm))


# --- histograms and the plot --------------------------------------------------------------

@pytest.fixture(scope="module")
def halos_statistics():
    points = cloud("halos")
    return emst(points, backend="cpu").statistics(points)


@pytest.mark.parametrize("options", [{}, {"uselog": True}, {"use_sqrt_s": False},
                                     {"usenorm": False}])
def test_histograms_against_histmst(options, halos_statistics):
    st = halos_statistics
    hm = mist.HistMST()
    hm.setup(**options)
    want = hm.get_hist(st.degree.astype(np.float64), st.edge_length, st.branch_length,
                       st.branch_shape)
    mine = {"usenorm": "density"}
    got = st.histograms(**{mine.get(k, k): v for k, v in options.items()})
    got_dict = got.as_mistree()
    assert got_dict.keys() == want.keys()
    for key, value in want.items():
        if isinstance(value, np.ndarray):
            np.testing.assert_array_equal(got_dict[key], value, err_msg=key)
        else:
            assert got_dict[key] == value, key
    assert len(got.degree.edges) == 7 and got.degree.edges[0] == 0.5
    assert len(got.edge_length.values) == 100 and len(got.branch_shape.values) == 50
    if not options.get("usenorm", True):
        assert got.degree.values.sum() == len(st.degree)


def test_plot(tmp_path):
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    points = cloud("uniform2")
    st = emst(points, backend="cpu").statistics(points)
    out = tmp_path / "stats.png"
    assert st.plot(str(out)) == str(out) and out.stat().st_size > 10_000
    fig, axes = plt.subplots(1, 4)
    drawn = st.plot(axes, label="uniform")
    assert all(len(ax.patches) == 1 for ax in drawn)  # one histogram per panel
    plt.close(fig)
    no_shape = emst(points, backend="cpu").statistics()
    assert no_shape.branch_shape is None and no_shape.histograms().branch_shape is None
    assert no_shape.plot() is not None
    with pytest.raises(InputError, match="four panels"):
        st.plot(axes[:2])


# --- bad input ----------------------------------------------------------------------------

def test_cycles_are_refused():
    # a triangle of degree-2 nodes and an isolated node: n - 1 edges, no tree
    with pytest.raises(InputError, match="cycle"):
        mst_statistics([0, 1, 2], [1, 2, 0], [1.0, 1.0, 1.0], 4)
    with pytest.raises(InputError, match="cycle"):
        mst_statistics_xp(np, np.array([0, 1, 2]), np.array([1, 2, 0]), np.ones(3), 4)


@pytest.mark.parametrize("box,match", [
    ((1.0, 1.0), "2 lengths for points of 3 dimensions"), (0.0, "> 0"), (-1.0, "> 0"),
    (np.nan, "> 0"), ((1.0, np.inf, 1.0), "> 0"), ("big", "length"),
    ((1.0, 2.0, 3.0, 4.0), "4 lengths"), (0.5, "outside the periodic box")])
def test_bad_box(box, match):
    points = np.random.default_rng(0).random((50, 3))
    tree = emst(points, backend="cpu")
    with pytest.raises(InputError, match=match):
        tree.statistics(points, box_size=box)


def test_bad_points():
    rng = np.random.default_rng(0)
    points = rng.random((50, 3))
    tree = emst(points, backend="cpu")
    with pytest.raises(InputError, match="50 points but points has 49 rows"):
        tree.statistics(points[:49])
    bad = points.copy()
    bad[17, 1] = np.nan
    with pytest.raises(InputError, match="row 17"):
        tree.statistics(bad)
    outside = points.copy()
    outside[23, 2] = 1.0  # L itself is outside [0, L)
    with pytest.raises(InputError, match="row is 23: .*coordinate 2"):
        tree.statistics(outside, box_size=1.0)
    with pytest.raises(InputError, match=r"\(n, d\)"):
        tree.statistics(np.zeros((50, 3, 1)))
    with pytest.raises(InputError):
        mst_statistics([0], [5], [1.0], 2)  # endpoint beyond n
    assert check_box_size(2.0, 3).tolist() == [2.0] * 3


# --- the command line ---------------------------------------------------------------------

def test_cli(tmp_path):
    from emst_dask.cli import main

    points = cloud("uniform3")
    np.save(tmp_path / "x.npy", points)
    emst(points, backend="cpu", out=str(tmp_path / "e.zarr"))
    emst(points, backend="cpu", out=str(tmp_path / "e.npy"))
    want = emst(points, backend="cpu").statistics(points)
    run = CliRunner().invoke
    r = run(main, ["stats", str(tmp_path / "e.zarr"), "--points", str(tmp_path / "x.npy"),
                   "--plot", str(tmp_path / "s.png"), "--out", str(tmp_path / "s.npz")])
    assert r.exit_code == 0, r.output
    assert f"branches={want.n_branches}" in r.output and "mean degree=" in r.output
    assert (tmp_path / "s.png").stat().st_size > 10_000
    with np.load(tmp_path / "s.npz") as z:
        for name in ("degree", "branch_length", "branch_shape", "branch_edges",
                     "branch_offsets", "branch_edge_count", "branch_ends"):
            np.testing.assert_array_equal(z[name], getattr(want, name), err_msg=name)
        np.testing.assert_array_equal(z["hist_y_s"], want.histograms().branch_shape.values)
    # .npy edges, a periodic box, replacing what we wrote
    r = run(main, ["stats", str(tmp_path / "e.npy"), "-p", str(tmp_path / "x.npy"),
                   "--box-size", "1,1,1", "--out", str(tmp_path / "s.npz"), "--overwrite"])
    assert r.exit_code == 0, r.output
    with np.load(tmp_path / "s.npz") as z:
        np.testing.assert_allclose(z["branch_shape"],
                                   want_box := mst_statistics(
                                       *arrays(emst(points, backend="cpu")), points,
                                       box_size=1.0).branch_shape, rtol=1e-13)
        assert z["box_size"].tolist() == [1.0] * 3
    assert (want_box <= want.branch_shape + 1e-15).all()
    # errors: one line, status 2, before anything is written
    np.save(tmp_path / "short.npy", points[:-1])
    for args in (["--box-size", "1,1"], ["--box-size", "0"], ["--box-size", "-2"],
                 ["--box-size", "a,b"], ["--box-size", "0.5"],
                 ["--out", str(tmp_path / "s.npz")],  # exists, no --overwrite
                 ["--out", str(tmp_path / "x.npy"), "--overwrite"],  # not .npz
                 ["-p", str(tmp_path / "short.npy")]):
        base = ["stats", str(tmp_path / "e.zarr"), "-p", str(tmp_path / "x.npy")]
        r = run(main, base + args)
        assert r.exit_code == 2 and r.output.startswith("Error:"), (args, r.output)
        assert len(r.output.strip().splitlines()) == 1 and "Traceback" not in r.output
    r = run(main, ["stats", str(tmp_path / "e.npy"), "-p", str(tmp_path / "short.npy")])
    assert r.exit_code == 2 and "points" in r.output, r.output
    assert np.array_equal(np.load(tmp_path / "x.npy"), points)  # the input never replaced


# --- the device ---------------------------------------------------------------------------

@pytest.mark.gpu
def test_device_equals_host():
    import cupy

    points = cloud("uniform3")  # in [0, 1)
    tree = emst(points, backend="cpu")
    host = tree.statistics(points, box_size=1.0)
    dev = mst_statistics(cupy.asarray(tree.source), cupy.asarray(tree.target),
                         cupy.asarray(tree.weight), tree.n_points, cupy.asarray(points),
                         box_size=1.0)
    assert isinstance(dev.degree, cupy.ndarray)
    d = dev.to_numpy()
    for name in ("degree", "branch_edges", "branch_offsets", "branch_edge_count",
                 "branch_ends"):
        np.testing.assert_array_equal(getattr(d, name), getattr(host, name), err_msg=name)
    np.testing.assert_allclose(d.branch_length, host.branch_length, rtol=1e-13)
    np.testing.assert_allclose(d.branch_shape, host.branch_shape, rtol=1e-13)
    assert isinstance(host, MSTStatistics)

