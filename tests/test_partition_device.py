"""Phases 1 and 2's device path without a GPU: the partitioned EMST's ``xp
is not np`` branches (the certified edges gathered to global ids and kept
where the engine ran, the weights converted there, the float64 strict order
of one sort and its ties, the Borůvka certificate, phase 2's candidates
chosen and reduced on the device by Borůvka rounds) run with ``cupy_emu``
standing in for CuPy and the CUDA kernels built with g++.  Held to the
host path bit for bit: the same edges, the same bits of every weight, the
same super-vertices.  Races and the real device's arithmetic are the GPU
tests' part (``test_multipart_gpu.py``).
"""
from __future__ import annotations


import numpy as np
import pytest

import emst_dask.partitioned.phase1 as phase1
import emst_dask.partitioned.steps as steps
from emst_dask import emst
from emst_dask.datasets import GENERATORS
from emst_dask.engine.scaling import (rescale_exact, stays_normal, weights_exact,
                                      weights_from_squares)
from emst_dask.kernels import get_kernels
from emst_dask.partitioned.boxes import assign_boxes, choose_partitioning, face_distances
from emst_dask.partitioned.edges import Edges
from emst_dask.partitioned.local import emst_partitioned

from cuda_emu import EmuBackend
from cupy_emu import StableNumpy, emulated_cupy, installed
from oracle import check_spanning_tree, edge_set


@pytest.fixture
def device(monkeypatch):
    """backend="cuda" of the partitioned steps runs the emulated kernels with
    the stand-in CuPy as their array module."""
    fake = emulated_cupy()
    if fake is None:
        pytest.skip("no C++ compiler for the emulated CUDA kernels")
    from emst_dask.kernels.cuda import kernel_set as cuda_set

    class Backend(EmuBackend):
        def __init__(self):
            self.xp = fake

    K = cuda_set.make_kernel_set(Backend(), "EmulatedDeviceKernels")
    real = get_kernels
    for mod in (phase1, steps):
        monkeypatch.setattr(mod, "get_kernels", lambda b: K if b == "cuda" else real(b))
    with installed(fake):
        yield K


def _boxes(pts, P, seed=0):
    part = choose_partitioning(pts, P, seed=seed)
    box = assign_boxes(part, pts)
    for k in range(P):
        idx = np.flatnonzero(box == k)
        yield pts[idx], idx, face_distances(part, k, pts[idx])


def _same_box(dev, host):
    """Two BoxResults of one box: equal edges, weights' bits, super-vertices."""
    for got, want in ((dev.certified, host.certified), (dev.uncertified, host.uncertified)):
        g = {(min(a, b), max(a, b)): w for a, b, w in zip(np.asarray(got.u), np.asarray(got.v),
                                                          np.asarray(got.w2))}
        h = {(min(a, b), max(a, b)): w for a, b, w in zip(want.u, want.v, want.w2)}
        assert g.keys() == h.keys()
        assert np.asarray(got.w2).dtype == want.w2.dtype
        keys = sorted(h)
        np.testing.assert_array_equal(np.array([g[k] for k in keys]).view(np.uint8),
                                      np.array([h[k] for k in keys]).view(np.uint8))
    np.testing.assert_array_equal(dev.super_labels, host.super_labels)
    assert dev.n_super == host.n_super
    assert dev.max_local2 == host.max_local2
    rows = np.arange(0, len(host.gids), 7)
    np.testing.assert_array_equal(dev.super_labels_of(rows), host.super_labels_of(rows))


def _clouds():
    rng = np.random.default_rng(4)
    halos = GENERATORS["halos"](6000, 3, 4).astype(np.float64)
    yield "halos64", halos
    yield "halos32", halos.astype(np.float32)
    yield "lattice", rng.integers(0, 12, (4000, 3)).astype(np.float32)    # ties, duplicates
    yield "lattice64", rng.integers(0, 14, (4000, 2)).astype(np.float64)
    yield "tiny32", (rng.random((3000, 3)) * 1e-37).astype(np.float32)   # subnormal squares
    yield "tiny64", rng.random((3000, 3)) * 1e-160                        # subnormal squares
    yield "float32_in_float64", (rng.random((3000, 2)) * 1e-20).astype(np.float32)
    yield "small64", halos * 1e-30                                        # normal squares
    yield "small32", halos.astype(np.float32) * np.float32(1e-9)


@pytest.mark.parametrize("name,pts", list(_clouds()), ids=lambda v: v if isinstance(v, str) else "")
@pytest.mark.parametrize("certificate", ["boruvka", "kruskal"])
def test_device_phase1_equals_host(device, name, pts, certificate):
    """solve_box on the (emulated) device: the certified edges are global
    ids and weights of the device's array module, equal to the host run's
    bit for bit, as are the candidates and the super-vertices."""
    for P in (2, 5):
        for box_pts, idx, face in _boxes(pts, P):
            dev = phase1.solve_box(box_pts, idx, face, backend="cuda", certificate=certificate)
            host = phase1.solve_box(box_pts, idx, face, backend="cpu", certificate=certificate)
            _same_box(dev, host)
            assert set(dev.seconds) >= {"engine", "order", "certificate", "edges"}


@pytest.fixture
def device_forests(device, monkeypatch):
    """The array modules phase 2's device reductions ran with (a list)."""
    seen = []
    real = steps.minimum_spanning_forest_xp

    def spy(xp, edges, *args, **kw):
        seen.append(xp)
        return real(xp, edges, *args, **kw)

    monkeypatch.setattr(steps, "minimum_spanning_forest_xp", spy)
    return seen


def _records(e: Edges) -> list:
    w = np.asarray(e.w2)
    assert isinstance(w, np.ndarray) and w.dtype.kind == "f"
    return sorted(zip(np.asarray(e.u).tolist(), np.asarray(e.v).tolist(),
                      w.view(np.uint32 if w.dtype == np.float32 else np.uint64).tolist(),
                      np.asarray(e.su).tolist(), np.asarray(e.sv).tolist()))


@pytest.mark.parametrize("name,pts", [c for c in _clouds() if c[0] not in ("halos64", "small32")],
                         ids=lambda v: v if isinstance(v, str) else "")
@pytest.mark.parametrize("min_samples,period", [(1, None), (4, None), (1, 1.0)])
def test_device_connect_box_equals_host(device_forests, name, pts, min_samples, period):
    """``connect_box`` with backend="cuda": the candidates chosen and reduced
    on the (emulated) device give the host path's forest, record for record
    and bit for bit (host arrays), uncertified edges, equal weights, copies
    of an edge and self-loops of super-vertices included."""
    rng = np.random.default_rng(2)
    pts = pts[:700]
    if period is not None:  # the cloud in the unit box
        lo, hi = pts.min(0), pts.max(0)
        pts = ((pts - lo) / np.maximum(hi - lo, 1e-300) * 0.999).astype(pts.dtype)
    m = len(pts)
    gids = np.sort(rng.choice(10 * m, m, replace=False)).astype(np.int64)
    # super-vertices: cells of a coarse grid (labelled by one of their points)
    cell = np.floor((pts - pts.min(0)) / np.maximum(np.ptp(pts, 0), 1e-300) * 3).astype(np.int64)
    _, group = np.unique(cell, axis=0, return_inverse=True)
    first = {}
    for i, g in enumerate(group.reshape(-1).tolist()):
        first.setdefault(g, int(gids[i]))
    labels = np.array([first[g] for g in group.reshape(-1).tolist()], np.int64)
    core = None
    box = None if period is None else np.full(pts.shape[1], period)
    if min_samples > 1:
        core = np.asarray(steps._core2(pts, min_samples, "cpu", box))
    a, b = rng.integers(0, m, (2, 60))
    w2 = rng.integers(0, 3, 60).astype(pts.dtype)
    unc = Edges(gids[a], gids[b], w2, labels[a], labels[b])
    unc = Edges.concat([unc, unc.take(np.arange(10))], pts.dtype)  # copies
    for u in (unc, Edges.empty(pts.dtype)):
        host = steps.connect_box(pts, gids, labels, u, "cpu", min_samples, core, box)
        n = len(device_forests)
        dev = steps.connect_box(pts, gids, labels, u, "cuda", min_samples, core, box)
        assert len(device_forests) == n + 1 and device_forests[-1] is not np
        assert all(isinstance(getattr(dev, f), np.ndarray) for f in ("u", "v", "w2", "su", "sv"))
        assert len(host) > 0 and _records(dev) == _records(host)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_device_spanning_forest_equals_host(device_forests, dtype):
    """``spanning_forest_on("cuda", ...)``: the boxes' forests joined on the
    (emulated) device equal host Kruskal's (``spanning_forest``), host Edges
    back; no forests give none; the CPU backend stays on the host."""
    from test_spanning_forest import random_graph

    rng = np.random.default_rng(int(np.dtype(dtype).itemsize))
    for n_clusters in (1, 4):
        e = random_graph(rng, 3000, 9000, dtype, n_clusters, levels=6)
        parts = [e.take(np.arange(len(e))[k::3]) for k in range(3)] + [Edges.empty(dtype)]
        want = steps.spanning_forest(np.dtype(dtype).str, *parts)
        n = len(device_forests)
        got = steps.spanning_forest_on("cuda", np.dtype(dtype).str, *parts)
        assert len(device_forests) == n + 1 and device_forests[-1] is not np
        assert len(want) > 100 and _records(got) == _records(want)
        assert _records(steps.spanning_forest_on("cpu", np.dtype(dtype).str, *parts)) == \
            _records(want)
        assert len(device_forests) == n + 1
    empty = steps.spanning_forest_on("cuda", np.dtype(dtype).str, Edges.empty(dtype))
    assert len(empty) == 0 and empty.w2.dtype == dtype


@pytest.mark.parametrize("name,pts", [c for c in _clouds() if c[0] not in ("halos64", "small32")],
                         ids=lambda v: v if isinstance(v, str) else "")
def test_device_partitioned_tree_is_the_one_box_tree(device_forests, name, pts):
    """The whole partitioned job on the (emulated) device, phase 2's
    reductions there too: the one-box tree's edges with the same bits of
    every weight; the rows in another order give that order's one-box tree
    (ties are broken by row) and the same weights."""
    pts = pts[:1500]  # the emulated kernels run their threads one by one
    pts = np.unique(pts, axis=0) if name.startswith("tiny") else pts
    perm = np.random.default_rng(1).permutation(len(pts))
    sorted_weights = []
    for rows, P in ((np.arange(len(pts)), 3), (perm, 4)):
        ref = emst(pts[rows], backend="cpu")
        ref_w = dict(zip(zip(ref.source.tolist(), ref.target.tolist()), ref.weight.tolist()))
        tree = emst_partitioned(pts[rows], P, backend="cuda")
        assert {b["backend"] for b in tree.report.boxes} <= {"cuda"}
        check_spanning_tree(tree, pts[rows])
        assert edge_set(tree.source, tree.target) == edge_set(ref.source, ref.target)
        for a, b, w in zip(tree.source.tolist(), tree.target.tolist(), tree.weight.tolist()):
            assert w == ref_w.get((a, b), ref_w.get((b, a)))
        sorted_weights.append(np.sort(tree.weight))
    np.testing.assert_array_equal(*sorted_weights)
    assert device_forests and all(xp is not np for xp in device_forests)


def test_device_mutual_reachability(device_forests):
    pts = GENERATORS["halos"](1500, 3, 2).astype(np.float32)
    ref = emst(pts, min_samples=5, backend="cpu")
    tree = emst_partitioned(pts, 3, min_samples=5, backend="cuda")
    assert device_forests
    assert edge_set(tree.source, tree.target) == edge_set(ref.source, ref.target)
    np.testing.assert_array_equal(np.sort(tree.weight), np.sort(ref.weight))


# --------------------------------------------------------------------------
# the weights' conversions on the device, against the host's
# --------------------------------------------------------------------------
def _values(dtype, rng):
    fin = np.finfo(dtype)
    normal = np.exp(rng.uniform(np.log(fin.tiny), np.log(fin.max) / 2, 2000)).astype(dtype)
    sub = (rng.integers(1, 2**20, 50) * fin.smallest_subnormal).astype(dtype)
    return {"normal": np.r_[normal, 0.0].astype(dtype),
            "zeros": np.zeros(5, dtype),
            "with_subnormals": np.r_[normal, sub].astype(dtype),
            "at_tiny": np.r_[fin.tiny, 2 * fin.tiny].astype(dtype)}


class _Flushing(StableNumpy):
    """An array module whose float32 arithmetic flushes subnormal operands
    and results to zero, as device arithmetic may."""

    @staticmethod
    def _flush(a):
        a = np.array(a)
        if a.dtype == np.float32:
            a[np.abs(a) < np.finfo(np.float32).tiny] = 0
        return a

    def sqrt(self, a):
        return self._flush(np.sqrt(self._flush(a)))

    def ldexp(self, a, e):
        return self._flush(np.ldexp(self._flush(a), e))


@pytest.mark.parametrize("xp", [StableNumpy(), _Flushing()], ids=["numpy", "flushing"])
@pytest.mark.parametrize("src,dst", [(np.float32, np.float32), (np.float64, np.float64),
                                     (np.float64, np.float32)])
@pytest.mark.parametrize("exponent", [0, 5, -5, -100, 100, -250, 250])
def test_device_conversions_have_the_host_bits(xp, src, dst, exponent):
    """``rescale_exact`` and ``weights_exact`` on an array module other than
    numpy give the host's bits (zeros, subnormal inputs and results, results
    beyond the range included): the device does what it can do exactly, the
    host the rest."""
    rng = np.random.default_rng(abs(exponent))
    for name, w2 in _values(src, rng).items():
        want = np.ldexp(w2.astype(np.float64), exponent)
        with np.errstate(over="ignore"):
            want = want.astype(dst)
            got = np.asarray(rescale_exact(xp, w2, exponent, dst))
            np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8), err_msg=name)
            want = weights_from_squares(w2, exponent, dst)
            got = np.asarray(weights_exact(xp, w2, exponent, dst))
        np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8), err_msg=name)


def test_stays_normal_bounds():
    f32 = np.float32
    tiny, big = float(np.finfo(f32).tiny), float(np.finfo(f32).max)
    assert stays_normal(None, None, f32, -500, f32)
    assert stays_normal(tiny, 1.0, f32, 0, f32)
    assert not stays_normal(tiny / 2, 1.0, f32, 0, f32)    # a subnormal input
    assert not stays_normal(tiny, 1.0, f32, -1, f32)       # a subnormal result
    assert stays_normal(2 * tiny, 1.0, f32, -1, f32)
    assert not stays_normal(1.0, big, f32, 1, f32)         # beyond the range
    assert not stays_normal(1.0, float("inf"), f32, 0, f32)
    assert stays_normal(1e-300, 1.0, np.float64, 0, np.float64)
    assert not stays_normal(1e-300, 1.0, np.float64, 0, f32)
