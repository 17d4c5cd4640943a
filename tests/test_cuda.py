"""The CUDA backend on a real GPU: exactness, ties, scale, determinism.

Skipped cleanly without CuPy or a GPU (the ``gpu`` marker; see conftest).
The exactness suite of ``test_exact.py`` / ``test_mutual_reachability.py``
also runs on CUDA through the ``backend`` fixture; this file adds what is
specific to the GPU kernels: the brute-force oracle over every dimension and
dtype on tie-heavy clouds, edge sets identical to the CPU backend's (both
implement the same strict order on the same arithmetic), the CPU/CUDA
agreement on 1M-point shared datasets, repeated runs, and inputs that would
make a careless GPU implementation quadratic (duplicates, chains).
"""
from __future__ import annotations

import time

import numpy as np
import pytest

from emst_dask import datasets, emst, engine
from emst_dask.kernels import cuda_available
from oracle import check_spanning_tree, edge_set, host, oracle

pytestmark = pytest.mark.gpu

if cuda_available():  # pragma: no branch
    import cupy
    from emst_dask.kernels.cuda.kernel_set import CudaKernels
else:  # collected, then skipped by conftest
    cupy = None
    CudaKernels = None


def _cloud(kind, n, d, dtype, seed):
    rng = np.random.default_rng(seed)
    if kind == "uniform":
        x = rng.random((n, d))
    elif kind == "duplicates":  # few distinct points, each many times
        x = np.repeat(rng.random((max(2, n // 7), d)), 7, axis=0)[:n]
        x = x[rng.permutation(len(x))]
    elif kind == "all_equal":
        x = np.full((n, d), 0.375)
    elif kind == "lattice":  # integer grid: many exactly equal distances
        side = int(np.ceil(n ** (1.0 / d)))
        g = np.stack(np.meshgrid(*[np.arange(side)] * d, indexing="ij"), -1).reshape(-1, d)
        x = g[rng.permutation(len(g))[:n]].astype(np.float64)
    elif kind == "lattice_dup":
        side = max(2, int(np.ceil((n / 3) ** (1.0 / d))))
        g = np.stack(np.meshgrid(*[np.arange(side)] * d, indexing="ij"), -1).reshape(-1, d)
        x = np.repeat(g, 3, axis=0)[:n].astype(np.float64)
        x = x[rng.permutation(len(x))]
    elif kind == "collinear":
        t = rng.random(n)
        x = np.outer(t, np.linspace(1, 2, d))
    else:
        raise ValueError(kind)
    return np.ascontiguousarray(x.astype(dtype))


def _gpu_emst(pts, min_samples=1):
    tree = emst(cupy.asarray(pts), min_samples=min_samples, backend="cuda")
    assert tree.backend == "cuda"
    assert isinstance(tree.source, cupy.ndarray)
    return tree


# ---------------------------------------------------------------------------
# brute-force oracle, every dimension and dtype, tie-heavy clouds
# ---------------------------------------------------------------------------
KINDS = ["uniform", "duplicates", "all_equal", "lattice", "lattice_dup", "collinear"]


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("d", range(1, 9))
@pytest.mark.parametrize("kind", KINDS)
def test_oracle_small_clouds(kind, d, dtype):
    pts = _cloud(kind, 300, d, dtype, seed=10 * d + KINDS.index(kind))
    tree = _gpu_emst(pts)
    check_spanning_tree(tree, pts)
    # same strict order, same arithmetic: the CPU backend gives the same edges
    cpu = emst(pts, backend="cpu")
    assert edge_set(tree.source, tree.target) == edge_set(cpu.source, cpu.target)


@pytest.mark.parametrize("min_samples", [2, 5, 16])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("d,kind", [(2, "uniform"), (3, "uniform"), (3, "duplicates"),
                                    (2, "lattice"), (5, "uniform"), (1, "lattice_dup")])
def test_oracle_mutual_reachability(d, kind, dtype, min_samples):
    pts = _cloud(kind, 250, d, dtype, seed=min_samples + d)
    tree = _gpu_emst(pts, min_samples)
    check_spanning_tree(tree, pts, min_samples)
    cpu = emst(pts, min_samples=min_samples, backend="cpu")
    assert edge_set(tree.source, tree.target) == edge_set(cpu.source, cpu.target)
    np.testing.assert_array_equal(host(tree.core_distances), cpu.core_distances)


def test_large_min_samples_uses_global_scratch():
    pts = _cloud("uniform", 400, 3, np.float32, seed=3)
    tree = _gpu_emst(pts, 100)  # k - 1 = 99 > 64: the global-memory k-NN lists
    check_spanning_tree(tree, pts, 100)


@pytest.mark.parametrize("n", [2, 3, 4, 5, 17])
def test_tiny_clouds(n):
    pts = _cloud("uniform", n, 3, np.float32, seed=n)
    check_spanning_tree(_gpu_emst(pts), pts)
    dup = np.zeros((n, 2), np.float64)
    check_spanning_tree(_gpu_emst(dup), dup)


def test_numpy_input_backend_cuda():
    pts = _cloud("uniform", 500, 3, np.float64, seed=5)
    tree = emst(pts, backend="cuda")
    check_spanning_tree(tree, pts)
    assert tree.to_numpy().shape == (499, 3)


# ---------------------------------------------------------------------------
# CPU and CUDA on the shared 1M-point datasets
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("name,d,min_samples", [
    ("uniform", 3, 1), ("halos", 3, 1), ("normal", 3, 1), ("uniform", 2, 1),
    ("halos", 3, 16),
])
def test_cpu_and_cuda_agree_on_1m(name, d, min_samples):
    pts = datasets.GENERATORS[name](1_000_000, dim=d, seed=0)
    gpu = _gpu_emst(pts, min_samples)
    cpu = emst(pts, min_samples=min_samples, backend="cpu")
    assert gpu.n_edges == cpu.n_edges == len(pts) - 1
    tw_gpu, tw_cpu = gpu.total_weight, cpu.total_weight
    assert abs(tw_gpu - tw_cpu) <= 1e-6 * tw_cpu, (tw_gpu, tw_cpu)
    # the strict order makes the MST unique: the edge sets are equal too
    assert edge_set(gpu.source, gpu.target) == edge_set(cpu.source, cpu.target)


def _spans_with_true_weights(tree, pts):
    """n - 1 edges joining every point, each weight the recomputed distance
    (float64 from the input values; the input precision's rounding)."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    n = len(pts)
    s, t, w = host(tree.source), host(tree.target), host(tree.weight)
    assert s.shape == (n - 1,)
    g = coo_matrix((np.ones(n - 1), (s, t)), shape=(n, n))
    assert connected_components(g, directed=False)[0] == 1
    x = pts.astype(np.float64)
    want = np.sqrt(((x[s] - x[t]) ** 2).sum(axis=1))
    rtol = 2e-6 if pts.dtype == np.float32 else 1e-12
    np.testing.assert_allclose(w.astype(np.float64), want, rtol=rtol, atol=0)


@pytest.mark.parametrize("name", ["lattice", "tracks", "copies4", "copies16"])
def test_cpu_and_cuda_agree_on_ties_rows(name):
    """The benchmark's ties rows at 1M: CPU and CUDA give the same edges; the
    GPU's are those of the whole cloud without the collapse, with the same
    weights (no oracle at this size)."""
    import dask.config
    from emst_dask.engine.duplicates import MIN_FRACTION_KEY
    from oracle import assert_same_edges_and_weights

    pts = datasets.TIES[name](1_000_000, dim=3, seed=0)
    gpu = _gpu_emst(pts)
    cpu = emst(pts, backend="cpu")
    _spans_with_true_weights(gpu, pts)
    assert edge_set(gpu.source, gpu.target) == edge_set(cpu.source, cpu.target)
    assert abs(gpu.total_weight - cpu.total_weight) <= 1e-6 * cpu.total_weight
    with dask.config.set({MIN_FRACTION_KEY: 2.0}):  # the whole cloud on the GPU
        whole = _gpu_emst(pts)
    assert_same_edges_and_weights(gpu, whole)


# ---------------------------------------------------------------------------
# determinism
# ---------------------------------------------------------------------------
def test_repeated_runs_identical():
    pts = cupy.asarray(_cloud("duplicates", 300_000, 3, np.float32, seed=1))
    first = _gpu_emst(pts)
    for _ in range(3):
        again = _gpu_emst(pts)
        assert cupy.array_equal(first.source, again.source)
        assert cupy.array_equal(first.target, again.target)
        assert cupy.array_equal(first.weight, again.weight)


def test_repeated_runs_identical_mrd():
    pts = cupy.asarray(datasets.halos(200_000, seed=3))
    first = _gpu_emst(pts, 5)
    again = _gpu_emst(pts, 5)
    assert cupy.array_equal(first.source, again.source)
    assert cupy.array_equal(first.target, again.target)
    assert cupy.array_equal(first.core_distances, again.core_distances)


# ---------------------------------------------------------------------------
# inputs that must not go quadratic
# ---------------------------------------------------------------------------
def test_one_million_equal_points():
    pts = np.full((1_000_000, 3), 0.5, np.float32)
    t = time.perf_counter()
    tree = _gpu_emst(pts)
    assert time.perf_counter() - t < 30
    assert tree.n_edges == 999_999
    assert float(tree.weight.max()) == 0.0
    assert tree.iterations == 0  # one distinct point: its copies need no iteration


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_heavy_duplicates_at_scale(dtype):
    rng = np.random.default_rng(2)
    base = rng.random((1000, 3)).astype(dtype)
    pts = base[rng.integers(0, 1000, 1_000_000)]
    t = time.perf_counter()
    tree = _gpu_emst(pts)
    assert time.perf_counter() - t < 30
    # a cloud of duplicates spans like its distinct points, plus zero edges
    uniq = np.unique(pts, axis=0)
    want = oracle(uniq)["total"]
    assert abs(tree.total_weight - want) <= 1e-5 * want
    assert int((tree.weight == 0).sum()) == len(pts) - len(uniq)


def test_integer_lattice_at_scale():
    side = 100
    g = np.stack(np.meshgrid(*[np.arange(side)] * 3, indexing="ij"), -1).reshape(-1, 3)
    pts = np.repeat(g, 2, axis=0).astype(np.float32)  # 2M points, every site twice
    t = time.perf_counter()
    tree = _gpu_emst(pts)
    assert time.perf_counter() - t < 30
    # every site joins its twin (0) and the lattice is spanned by unit edges
    assert tree.total_weight == float(side**3 - 1)
    assert int((tree.weight == 0).sum()) == side**3


@pytest.mark.parametrize("reverse", [False, True])
def test_chain_is_not_quadratic(reverse):
    # increasing gaps on a line: every point's nearest neighbour is the one on
    # its left, so the first iteration makes one chain of n components
    n = 2_000_000
    gaps = 1.0 + np.arange(n - 1) * 1e-6
    x = np.concatenate([[0.0], np.cumsum(gaps)])
    if reverse:
        x = -x
    pts = np.stack([x, np.zeros(n)], axis=1)
    t = time.perf_counter()
    tree = _gpu_emst(pts)
    assert time.perf_counter() - t < 30
    assert tree.iterations == 1
    assert abs(tree.total_weight - (x.max() - x.min())) <= 1e-9 * (x.max() - x.min())


# ---------------------------------------------------------------------------
# memory
# ---------------------------------------------------------------------------
def test_device_memory_per_point():
    from cupy.cuda import memory_hooks  # noqa: F401

    class Peak(cupy.cuda.MemoryHook):
        name = "Peak"

        def __init__(self):
            self.cur = self.peak = 0

        def malloc_postprocess(self, **kw):
            self.cur += kw["mem_size"]
            self.peak = max(self.peak, self.cur)

        def free_postprocess(self, **kw):
            self.cur -= kw["mem_size"]

    n = 2_000_000
    pts = cupy.asarray(datasets.uniform(n, seed=0))
    _gpu_emst(pts)  # compile and warm up
    hook = Peak()
    with hook:
        res = engine.boruvka(CudaKernels, pts, 1, timers=engine.Timers(enabled=False))
        del res
    assert hook.peak / n <= 96, hook.peak / n
