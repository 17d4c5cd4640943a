"""The CUDA kernels' logic, without a GPU: the emulator (``cuda_emu``).

The Borůvka kernels (``lbvh.cuh``, ``construction.cu``, ``search.cu``,
``core_distances.cu``) compiled as C++ with sequential threads, driven by the real
``cuda_set`` orchestration on numpy arrays.  This keeps the CUDA backend's
algorithm (tree layout, label walk, certified candidates, tie passes, merge)
under CI, where no GPU exists.  Races are the GPU tests' business
(``test_cuda.py``).  Skipped when no C++ compiler is found.
"""
from __future__ import annotations

import numpy as np
import pytest

import emst_dask.engine.core as api
from emst_dask import InputError, emst
from emst_dask.kernels import get_kernels
from cuda_emu import emulated_kernels
from oracle import check_spanning_tree, edge_set, host

K = emulated_kernels()
pytestmark = pytest.mark.skipif(K is None, reason="no C++ compiler for the CUDA emulator")


@pytest.fixture
def emulated_cuda(monkeypatch):
    real = get_kernels
    monkeypatch.setattr(api, "get_kernels", lambda b: K if b == "cuda" else real(b))


def _cases():
    rng = np.random.default_rng(0)
    yield "uniform3f32", rng.random((400, 3)).astype(np.float32), 1
    yield "uniform2f64", rng.random((400, 2)), 1
    yield "uniform7f64", rng.random((200, 7)), 1
    yield "duplicates", np.repeat(rng.random((50, 3)), 6, axis=0).astype(np.float32), 1
    yield "all_equal", np.zeros((100, 2), np.float32), 1
    g = np.stack(np.meshgrid(np.arange(12), np.arange(12)), -1).reshape(-1, 2)
    yield "lattice", g.astype(np.float64), 1
    yield "collinear", np.outer(rng.random(300), [1.0, 2.0, 3.0]).astype(np.float32), 1
    yield "mrd5", rng.random((300, 3)).astype(np.float32), 5
    yield "mrd16_dups", np.repeat(rng.random((60, 2)), 4, axis=0), 16
    yield "mrd100", rng.random((200, 3)).astype(np.float32), 100  # global-scratch k-NN
    # a clump far inside one code cell: its cell is split by finer codes
    clump = np.concatenate([rng.random((200, 3)), 0.5 + 1e-9 * rng.standard_normal((200, 3))])
    yield "contrast", clump, 1
    yield "contrast_mrd4", clump, 4


@pytest.mark.parametrize("name,pts,min_samples", list(_cases()), ids=lambda v: v if isinstance(v, str) else "")
def test_emulated_cuda_kernels(emulated_cuda, name, pts, min_samples):
    tree = emst(pts, min_samples=min_samples, backend="cuda")
    check_spanning_tree(tree, pts, min_samples)
    cpu = emst(pts, min_samples=min_samples, backend="cpu")
    assert edge_set(tree.source, tree.target) == edge_set(cpu.source, cpu.target)
    if min_samples > 1:
        np.testing.assert_array_equal(host(tree.core_distances), cpu.core_distances)


def test_emulated_crowded_cells_split_like_the_cpu():
    """The CUDA construction orders a crowded cell by finer codes as the CPU
    does, and its ``k_delta`` splits the cell by them (prefix lengths 64 to
    127) before the rows."""
    from emst_dask.engine import Timers, construct_bvh

    rng = np.random.default_rng(3)
    pts = np.concatenate([rng.random((300, 3)), 0.5 + 1e-9 * rng.standard_normal((300, 3))])
    cpu = construct_bvh(get_kernels("cpu"), pts, Timers(enabled=False))
    emu = construct_bvh(K, pts, Timers(enabled=False))
    np.testing.assert_array_equal(cpu.orig, emu.orig)
    # the deltas where the tree's leaves (one point or two) meet: about 190
    # leaves in the cell
    assert emu.delta.shape[0] == emu.n_leaves - 1
    assert ((emu.delta >= 64) & (emu.delta < 128)).sum() > 160


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6, 7])
def test_emulated_few_points(emulated_cuda, n):
    """Trees of one to six nodes: the searches, the k-NN (min_samples up
    to n) and the label walk."""
    pts = np.random.default_rng(n).random((n, 3)).astype(np.float32)
    for ms in sorted({1, 2, n}):
        tree = emst(pts, min_samples=ms, backend="cuda")
        check_spanning_tree(tree, pts, ms)
        cpu = emst(pts, min_samples=ms, backend="cpu")
        assert edge_set(tree.source, tree.target) == edge_set(cpu.source, cpu.target)
        if ms > 1:
            np.testing.assert_array_equal(host(tree.core_distances), cpu.core_distances)


def test_emulated_chain(emulated_cuda):
    n = 50_000
    x = np.concatenate([[0.0], np.cumsum(1.0 + np.arange(n - 1) * 1e-5)])
    pts = np.stack([x, np.zeros(n)], axis=1)
    tree = emst(pts, backend="cuda")
    assert tree.iterations == 1
    assert abs(tree.total_weight - x[-1]) <= 1e-9 * x[-1]


def _same_chains(got, want, n, it, point_children):
    """record_chains' output equals boruvka_chains': the edges' keys, the
    points' places in the children (the recorded array against the
    rounds' slots), the chains' owners, the rounds' ends."""
    m = n - 1
    np.testing.assert_array_equal(got[0], want[0])
    assert got[1].shape == (m, 2) and want[1].shape == (n,)
    np.testing.assert_array_equal(point_children(np, got[1], m, n, it),
                                  point_children(np, want[1], m, n, it))
    np.testing.assert_array_equal(got[2], want[2])
    assert got[3] == want[3]


@pytest.mark.parametrize("name,pts,min_samples", list(_cases()), ids=lambda v: v if isinstance(v, str) else "")
def test_emulated_hierarchy_equals_the_rounds(emulated_cuda, name, pts, min_samples):
    # the picks the engine records are the dendrogram's Borůvka rounds: the
    # same chains, and the same HDBSCAN* clusters without rounds of their own
    from emst_dask.engine.core import spanning_tree
    from emst_dask.products.chains import boruvka_chains, point_children, record_chains
    from emst_dask.products.hdbscan.device import extract_xp

    tree = spanning_tree(pts, min_samples, "cuda", hierarchy=True)
    check_spanning_tree(tree, pts, min_samples)
    h, n = tree.hierarchy, len(pts)
    assert h is not None and np.all(np.diff(tree.weight) >= 0)
    for it in (np.int32, np.int64):
        got = record_chains(np, h, n, it)
        want = boruvka_chains(np, tree.source, tree.target, n, it)
        _same_chains(got, want, n, it, point_children)
    for mcs, method in ((5, "eom"), (12, "leaf")):
        a = extract_xp(np, tree.source, tree.target, tree.weight, n, mcs, method, False,
                       0.0, None, hierarchy=h)
        b = extract_xp(np, tree.source, tree.target, tree.weight, n, mcs, method, False,
                       0.0, None)
        np.testing.assert_array_equal(a.labels, b.labels)
        np.testing.assert_array_equal(a.probabilities, b.probabilities)
        np.testing.assert_array_equal(a.outlier_scores, b.outlier_scores)
    assert spanning_tree(pts, min_samples, "cuda").hierarchy is None
    # the single-linkage matrix from the picks: Kruskal's in the tree's order
    from emst_dask.products._uf import linkage_merges
    from emst_dask.products.linkage import device_linkage

    got = device_linkage(np, tree.source, tree.target, tree.weight, n, hierarchy=h)
    Z, _ = linkage_merges(tree.source, tree.target, tree.weight, np.arange(n - 1), n)
    np.testing.assert_array_equal(got, Z)


def test_emulated_linkage_from_picks_when_square_roots_tie(emulated_cuda):
    # rows 0-1 lie 1 + 2**-23 apart squared and rows 2-3 exactly 1: their
    # float32 weights are both 1.0; the engine orders 2-3 first and so does
    # the matrix from its picks, where the sorted weights put 0-1 first; both
    # are the one hierarchy (scipy's flat clusters at every height)
    from emst_dask.engine.core import spanning_tree
    from emst_dask.products.linkage import device_linkage, single_linkage

    fcluster = pytest.importorskip("scipy.cluster.hierarchy").fcluster
    dy = np.float32(2.0**-11.5)
    pts = np.array([[10, 0], [11, dy], [0, 0], [1, 0], [5, 7]], np.float32)
    tree = spanning_tree(pts, 1, "cuda", hierarchy=True)
    check_spanning_tree(tree, pts, 1)
    s, t, w = tree.source, tree.target, tree.weight
    Z = single_linkage(s, t, w, 5)
    got = device_linkage(np, s, t, w, 5, hierarchy=tree.hierarchy)
    assert Z[0, :2].tolist() == [0, 1] and got[0, :2].tolist() == [2, 3]
    np.testing.assert_array_equal(got[:, 2], Z[:, 2])
    for h in (0.5, 1.0, 5.0, 100.0):
        np.testing.assert_array_equal(fcluster(got, h, "distance"), fcluster(Z, h, "distance"))
    # picks of another tree are refused; edges not listed by weight are sorted
    with pytest.raises(InputError, match="not this tree's"):
        device_linkage(np, s[:3], t[:3], w[:3], 4, hierarchy=tree.hierarchy)
    back = np.arange(4)[::-1]
    np.testing.assert_array_equal(
        device_linkage(np, s[back], t[back], w[back], 5, hierarchy=tree.hierarchy), Z)


@pytest.mark.parametrize("case", ["n2", "n3", "n3dup", "periodic", "periodic_mrd", "far"])
def test_emulated_hierarchy_small_periodic_and_far(emulated_cuda, case):
    from emst_dask.engine.core import spanning_tree
    from emst_dask.products.chains import boruvka_chains, point_children, record_chains

    rng = np.random.default_rng(1)
    pts, k, box = {
        "n2": (rng.random((2, 3)), 1, None), "n3": (rng.random((3, 2)), 1, None),
        "n3dup": (np.zeros((3, 2)), 1, None),
        "periodic": (rng.random((300, 3)).astype(np.float32), 1, np.ones(3)),
        "periodic_mrd": (rng.random((300, 2)), 4, np.ones(2)),
        "far": (1e6 + rng.random((300, 3)), 1, None)}[case]
    tree = spanning_tree(pts, k, "cuda", box_size=box, hierarchy=True)
    if box is None:  # the oracle is open space
        check_spanning_tree(tree, pts, k)
    got = record_chains(np, tree.hierarchy, len(pts), np.int32)
    want = boruvka_chains(np, tree.source, tree.target, len(pts), np.int32)
    _same_chains(got, want, len(pts), np.int32, point_children)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 9])
def test_emulated_queries_of_few_points(n):
    """The queries' walk over a tree of one point (no node) or a few:
    every k-th distance and mutual-reachability neighbour against brute
    force."""
    from emst_dask.engine import Timers, construct_bvh

    rng = np.random.default_rng(n)
    x = rng.random((n, 3)).astype(np.float32)
    X = rng.random((40, 3)).astype(np.float32)
    bvh = construct_bvh(K, x, Timers(enabled=False))
    d2 = np.zeros((40, n), np.float32)
    for a in range(3):  # summed axis by axis, as the kernels do
        t = X[:, None, a] - x[None, :, a]
        d2 = d2 + t * t
    for k in range(1, n + 1):
        np.testing.assert_array_equal(K.query_knn2(bvh, X, k), np.sort(d2, axis=1)[:, k - 1])
    orig = np.asarray(bvh.orig)
    core = rng.random(n).astype(np.float32) * 0.3  # input order
    corex = rng.random(40).astype(np.float32) * 0.3
    nbr, best = K.query_mr_nearest(bvh, core[orig], X, corex)
    mr = np.maximum(np.maximum(np.sqrt(d2), core[None, :]), corex[:, None])
    np.testing.assert_array_equal(best, mr.min(axis=1))
    assert (mr[np.arange(40), nbr] == mr.min(axis=1)).all()
