"""Peak device memory of the CUDA engine, counted on the emulator.

``pool_emu`` counts every array the emulated kernel set allocates as
CuPy's memory pool does (512-byte blocks, from allocation to release); the
input is excluded, as ``benchmarks/gpu.py`` excludes it on a GPU.  The
allocation pattern is proportional to n, so a cloud of 200k points shows
the bytes per point of the large benchmark rows (85.0 B/pt on the H200
at 0.6M-2.5M uniform points before this budget, 85.0 here).
"""
from __future__ import annotations

import numpy as np
import pytest

from emst_dask import datasets, engine

pool_emu = pytest.importorskip("pool_emu")
if not pool_emu.available():  # pragma: no cover - no compiler or headers
    pytest.skip("no C++ compiler or Python/numpy headers for the pool tracker",
                allow_module_level=True)

from cuda_emu import emulated_kernels  # noqa: E402

#: bytes per point beyond the input, 3-D float32 (see benchmarks/NOTES.md):
#: 63.5 with min_samples 1 (a node of two points of the tree is one leaf;
#: each node's far end for the label pass; the first search's second
#: candidates until the second iteration), 63.5 with 16 (no second
#: candidates; the core distances)
BUDGET = {1: 63.75, 16: 63.75}
#: the goal of the benchmark rows
GOAL = {1: 64.0, 16: 100.0}


def test_tracker_counts_as_the_pool():
    with pool_emu.PoolTracker() as pool:
        a = np.empty(1000, np.uint8)      # 1024 in the pool
        b = np.empty(10, np.float64)      # 512
        del a
        c = np.zeros(2000, np.int32)      # 8192: the peak, with b
        del b, c
        np.arange(10)
    assert pool.peak == 512 + 8192
    assert sorted(b for b, _ in pool.at_peak) == [512, 8192]
    assert pool.live_after == 0


def test_emulated_argsort_holds_what_cupy_holds():
    codes = np.random.default_rng(0).integers(0, 2**63, 100_000, dtype=np.uint64)
    with pool_emu.PoolTracker() as pool:
        perm = pool_emu.cupy_argsort(codes)
    assert np.array_equal(perm, np.argsort(codes, kind="stable"))
    # a copy of the keys, the int64 result, thrust's second keys and values
    assert pool.peak >= 4 * 8 * codes.shape[0]


def _peak(name, n, min_samples):
    K = emulated_kernels()
    if K is None:  # pragma: no cover
        pytest.skip("no C++ compiler for the emulated CUDA kernels")
    x = np.ascontiguousarray(datasets.GENERATORS.get(name, datasets.TIES.get(name))(
        n, dim=3, seed=0), dtype=np.float32)
    with pool_emu.PoolTracker() as pool, pool_emu.track_engine_phases(pool):
        res = engine.boruvka(K, x, min_samples)
        assert res.source.shape[0] == x.shape[0] - 1
        del res
    return pool.summary(x.shape[0])


@pytest.mark.parametrize("min_samples", [1, 16])
def test_uniform_peak_within_budget(min_samples):
    s = _peak("uniform", 200_000, min_samples)
    assert s["peak_bytes_per_point"] <= BUDGET[min_samples], s


@pytest.mark.parametrize("name", ["lattice", "tracks", "copies4"])
def test_ties_peak_within_goal(name):
    s = _peak(name, 200_000, 1)
    assert s["peak_bytes_per_point"] <= GOAL[1], s


@pytest.mark.parametrize("name, n, over", [("uniform", 6_250, 0.25), ("uniform", 25_000, 0.0),
                                           ("uniform", 200_000, 0.0), ("halos", 200_000, 0.0)])
def test_smooth_peak_within_goal(name, n, over):
    """Small clouds pay the pool's 512-byte blocks and the small arrays on
    top: from 25k points under the goal (the benchmark rows start at 625k),
    at 6,250 points at most a quarter byte a point above it."""
    s = _peak(name, n, 1)
    assert s["peak_bytes_per_point"] <= GOAL[1] + over, s
