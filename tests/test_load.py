"""Load on a real cluster (a ``dask scheduler`` and two ``dask worker``
processes on 127.0.0.1): two clients submitting 20 small jobs each at once,
all exact; 200 small jobs in a row leave the workers' memory (RSS; and the
device pool on GPU workers) where it started, within a stated tolerance, and
leave no task or data behind on the scheduler or the workers."""
from __future__ import annotations

import gc
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import cloudpickle
import numpy as np
import pytest

import emst_dask
from service_util import ProcessCluster, assert_same_tree, cloud, write_snapshot

distributed = pytest.importorskip("distributed")

# the probes below run in the workers, which cannot import this test module
cloudpickle.register_pickle_by_value(sys.modules[__name__])

#: RSS a worker may keep after 200 jobs, above its baseline (MiB): allocator
#: slack and Dask's bounded logs; a leak of the jobs' arrays (200 x 2000
#: points x (3 coordinates + 3 edge columns) x 8 bytes ~ 20 MiB, plus the
#: trees' work arrays) would exceed it
RSS_TOLERANCE_MIB = 48


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    pc = ProcessCluster(tmp_path_factory.mktemp("load"), n_workers=2, timeout=120)
    try:
        yield pc.start()
    finally:
        pc.stop()


def _job(i):
    """The i-th small job: (points, min_samples)."""
    rng = np.random.default_rng(1000 + i)
    n = int(rng.integers(150, 600))
    d = int(rng.integers(2, 4))
    dtype = np.float32 if i % 2 else np.float64
    return cloud(n, d, seed=1000 + i, dtype=dtype), (1 if i % 3 else 3)


def test_two_clients_concurrent_jobs(cluster, tmp_path):
    from distributed import Client

    jobs = [_job(i) for i in range(40)]
    # a few jobs read Zarr snapshots and write edge stores on the workers
    paths = {i: write_snapshot(tmp_path / f"s{i}.zarr", jobs[i][0], chunk_rows=100)
             for i in range(0, 40, 5)}
    clients = [Client(cluster.address, set_as_default=False, timeout="30s") for _ in range(2)]
    try:
        def run(i):
            c = clients[i % 2]
            pts, k = jobs[i]
            if i in paths:
                return emst_dask.emst(paths[i], client=c, min_samples=k,
                                      out=tmp_path / f"e{i}.zarr", timeout=300)
            return emst_dask.emst(pts, client=c, min_samples=k, timeout=300)

        t0 = time.monotonic()
        with ThreadPoolExecutor(max_workers=40) as pool:
            results = list(pool.map(run, range(40)))
        seconds = time.monotonic() - t0
        for i, (res, (pts, k)) in enumerate(zip(results, jobs)):
            assert_same_tree(res, pts, k)
        print(f"\n[load] 2 clients x 20 concurrent jobs (n 150-600): all exact, {seconds:.1f} s")
    finally:
        for c in clients:
            c.close()


def _memory():
    """(runs in a worker) RSS and device-pool bytes after a garbage collection."""
    import gc as _gc

    import psutil

    _gc.collect()
    try:  # glibc: give freed heap back, as the nanny's MALLOC_TRIM_THRESHOLD_ intends
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except Exception:
        pass
    device = None
    try:
        from emst_dask.kernels import cuda_available

        if cuda_available():
            import cupy

            device = int(cupy.get_default_memory_pool().used_bytes())
    except Exception:
        pass
    return psutil.Process().memory_info().rss, device


def _leftovers(dask_worker=None):
    return len(dask_worker.data) + len(dask_worker.state.tasks)


def test_many_small_jobs_memory(cluster):
    from distributed import Client

    with Client(cluster.address, set_as_default=False, timeout="30s") as c:
        pts = [cloud(2000, 3, seed=2000 + i) for i in range(8)]
        refs = [emst_dask.emst(p, backend="cpu") for p in pts]
        for i in range(10):       # warm-up: imports, numba caches, connections
            emst_dask.emst(pts[i % 8], client=c)
        gc.collect()
        base = c.run(_memory)
        t0 = time.monotonic()
        for i in range(200):
            tree = emst_dask.emst(pts[i % 8], client=c)
            assert tree.total_weight == refs[i % 8].total_weight
        seconds = time.monotonic() - t0
        del tree
        gc.collect()
        time.sleep(1.0)           # the workers release the last keys
        after = c.run(_memory)
        left_sched = c.run_on_scheduler(
            lambda dask_scheduler: sum(1 for k in dask_scheduler.tasks
                                       if str(k).startswith("emst-")))
        left_workers = c.run(_leftovers)
    mib = 2 ** 20
    lines = []
    for w in sorted(base):
        (r0, d0), (r1, d1) = base[w], after[w]
        dev = "n/a (CPU worker)" if d0 is None else f"{d0 / mib:.1f} -> {d1 / mib:.1f} MiB"
        lines.append(f"{w}: RSS {r0 / mib:.1f} -> {r1 / mib:.1f} MiB "
                     f"({(r1 - r0) / mib:+.1f}), device pool {dev}")
    report = (f"200 jobs of 2000 points in {seconds:.1f} s ({seconds / 200 * 1000:.0f} ms "
              f"each); tolerance +{RSS_TOLERANCE_MIB} MiB per worker\n  " + "\n  ".join(lines))
    print(f"\n[load] {report}")
    assert left_sched == 0, f"{left_sched} emst tasks left on the scheduler"
    assert sum(left_workers.values()) == 0, left_workers
    for w in base:
        (r0, d0), (r1, d1) = base[w], after[w]
        assert r1 - r0 < RSS_TOLERANCE_MIB * mib, report
        if d0 is not None:
            assert d1 <= d0 + 16 * mib, report
