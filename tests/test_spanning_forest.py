"""Minimum spanning forests over super-vertices: Borůvka rounds of
whole-array operations (``minimum_spanning_forest_xp``, numpy and the
emulated CuPy) against Kruskal (``minimum_spanning_forest``) and against a
plain-Python Kruskal over the strict order (w, min id, max id): equal
weights everywhere, parallel edges, exact copies of an edge, self-loops of
super-vertices, disconnected graphs, empty and one-edge inputs.  The
``cupy`` variants (``gpu``) run the same on a GPU; larger graphs there are
``test_multipart_gpu.py``'s part.
"""
from __future__ import annotations


import numpy as np
import pytest

from emst_dask.partitioned.edges import (Edges, minimum_spanning_forest,
                                         minimum_spanning_forest_xp)

from cupy_emu import on_host


@pytest.fixture(params=["numpy", "emulated", pytest.param("cupy", marks=pytest.mark.gpu)])
def xp(request):
    """numpy, the CuPy stand-in (its device branches: the strict order's
    one-sort device path, ``unique``, ``minimum.at`` over the bits), or CuPy on a
    GPU."""
    if request.param == "numpy":
        return np
    if request.param == "cupy":
        from emst_dask.kernels import cuda_available

        if not cuda_available():
            pytest.skip("needs a CUDA GPU")
        import cupy

        return cupy
    return request.getfixturevalue("fake_cupy")


def random_graph(rng, n_points, m, dtype, n_clusters=1, levels=4, copies=0.1, loops=0.2,
                 offset=0):
    """m edges between random points (global ids from ``offset``), each point
    in a super-vertex (labelled by one of its points' ids), edges only within
    ``n_clusters`` clusters of points (a disconnected graph for more than
    one), squared weights from ``levels`` values (ties everywhere), a share
    of exact copies and a share of edges inside one super-vertex."""
    ids = offset + rng.permutation(n_points * 3)[:n_points].astype(np.int64)
    n_super = max(1, n_points // 3)
    group = rng.integers(0, n_super, n_points)
    root = {}
    for i, g in zip(ids.tolist(), group.tolist()):
        root.setdefault(g, i)
    label = np.array([root[g] for g in group.tolist()], np.int64)
    cluster = rng.integers(0, n_clusters, n_super)[group]
    u, v = [], []
    while len(u) < m:
        a, b = rng.integers(0, n_points, 2)
        if a == b or cluster[a] != cluster[b]:
            continue
        if group[a] == group[b] and rng.random() > loops:
            continue
        u.append(a)
        v.append(b)
    u, v = np.array(u, np.int64), np.array(v, np.int64)
    w2 = (rng.integers(0, levels, m) ** 2).astype(dtype)
    dup = rng.random(m) < copies                 # exact copies of earlier edges
    src = rng.integers(0, np.arange(m) + 1)      # an earlier (or the same) edge
    u, v, w2 = np.where(dup, u[src], u), np.where(dup, v[src], v), np.where(dup, w2[src], w2)
    return Edges(ids[u], ids[v], w2.astype(dtype), label[u], label[v])


def python_kruskal(e: Edges) -> list:
    """The MSF's records by a plain-Python Kruskal over the strict order."""
    items = sorted(range(len(e)), key=lambda i: (float(e.w2[i]), min(e.u[i], e.v[i]),
                                                 max(e.u[i], e.v[i])))
    parent = {}

    def find(x):
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    out = []
    for i in items:
        x, y = find(int(e.su[i])), find(int(e.sv[i]))
        if x != y:
            parent[max(x, y)] = min(x, y)
            out.append(i)
    return records(e.take(np.array(out, np.int64)))


def records(e: Edges) -> list:
    """The forest's edges as sorted tuples (a multiset of records)."""
    e = e.to(on_host)
    return sorted(zip(e.u.tolist(), e.v.tolist(), e.w2.tolist(), e.su.tolist(), e.sv.tolist()))


def components(e: Edges) -> int:
    """Connected components of the super-vertex graph (vertices: the labels
    that appear)."""
    verts = set(e.su.tolist()) | set(e.sv.tolist())
    parent = {x: x for x in verts}

    def find(x):
        while parent[x] != x:
            x = parent[x]
        return x

    for a, b in zip(e.su.tolist(), e.sv.tolist()):
        parent[find(a)] = find(b)
    return len({find(x) for x in verts})


def on(xp, e: Edges) -> Edges:
    return e.to(xp.asarray)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n_clusters", [1, 3])
@pytest.mark.parametrize("seed", range(4))
def test_boruvka_equals_kruskal(xp, dtype, n_clusters, seed):
    rng = np.random.default_rng(seed)
    for n_points, m, levels in ((40, 100, 2), (300, 1200, 5), (2000, 6000, 40)):
        e = random_graph(rng, n_points, m, dtype, n_clusters, levels)
        got = minimum_spanning_forest_xp(xp, on(xp, e))
        want = minimum_spanning_forest(e)
        assert records(got) == records(want)
        if m <= 1200:
            assert records(want) == python_kruskal(e)
        n_verts = len(set(e.su.tolist()) | set(e.sv.tolist()))
        assert len(got) == n_verts - components(e)
        assert on_host(got.w2).dtype == dtype


def test_ids_beyond_32_bits(xp):
    """Global ids past 2**32: the strict order's general (lexsort) branch."""
    rng = np.random.default_rng(9)
    for dtype in (np.float32, np.float64):
        e = random_graph(rng, 500, 2000, dtype, levels=3, offset=1 << 33)
        got = minimum_spanning_forest_xp(xp, on(xp, e))
        assert records(got) == records(minimum_spanning_forest(e)) == python_kruskal(e)


def test_small_inputs(xp):
    empty = Edges.empty(np.float32)
    assert len(minimum_spanning_forest_xp(xp, on(xp, empty))) == 0
    one = Edges(np.array([5]), np.array([2]), np.array([4.0], np.float32),
                np.array([5]), np.array([1]))
    assert records(minimum_spanning_forest_xp(xp, on(xp, one))) == records(one)
    loop = Edges(np.array([5]), np.array([2]), np.array([4.0]), np.array([1]), np.array([1]))
    assert len(minimum_spanning_forest_xp(xp, on(xp, loop))) == 0
    # two copies of one edge, and the same pair of super-vertices joined by
    # edges of equal weight: the smaller smaller id wins
    e = Edges(np.array([7, 7, 3, 9]), np.array([4, 4, 8, 2]), np.array([1.0, 1.0, 1.0, 1.0]),
              np.array([4, 4, 2, 2]), np.array([2, 2, 4, 4]))
    got = records(minimum_spanning_forest_xp(xp, on(xp, e)))
    assert got == records(minimum_spanning_forest(e)) == [(9, 2, 1.0, 2, 4)]


def test_a_path_needs_many_rounds(xp):
    """A path whose weights fall and rise (each vertex's lightest edge
    shared with one neighbour only): many hooks chain in one round."""
    n = 4097
    w2 = np.abs(np.arange(n - 1) - 1234.5).astype(np.float64)
    ids = np.arange(n, dtype=np.int64)
    e = Edges(ids[:-1], ids[1:], w2, ids[:-1], ids[1:])
    got = minimum_spanning_forest_xp(xp, on(xp, e))
    assert len(got) == n - 1
    assert records(got) == records(minimum_spanning_forest(e))


def test_round_guard():
    e = Edges(np.arange(3), np.arange(1, 4), np.ones(3), np.arange(3), np.arange(1, 4))
    with pytest.raises(RuntimeError, match="Borůvka rounds"):
        minimum_spanning_forest_xp(np, e, max_rounds=0)
