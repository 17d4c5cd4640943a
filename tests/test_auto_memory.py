"""``partitions="auto"`` on CPU workers sizes from their memory limit and
from what the CPU path measured it needs, never from the GPU's figures.

The GPU's 89 and 117 bytes a point let "auto" choose 3 boxes for 20M
float32 points on two workers of 1 GB, whose boxes then ran the workers
out of memory (the CPU path peaks near 200 bytes a point).  Here the sizing
is held to the measured CPU figures, and a job on memory-limited worker
processes runs in the boxes "auto" chose, exactly, without nearing the
limit.
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import emst_dask
from emst_dask.distributed.partitioned import choose_partitions
from service_util import assert_same_tree, cloud, write_snapshot

distributed = pytest.importorskip("distributed")

#: measured on this project's CPU path (benchmarks/NOTES.md): a CPU
#: worker's peak per point of a box (3-D float32), and a CPU worker
#: process's own memory once it has compiled the kernels
BOX_BYTES_F32 = 160
PROCESS_BYTES = 207e6


class Workers:
    """A client of CPU workers with ``memory_limit`` bytes, one thread, each
    process holding ``rss`` bytes already."""

    def __init__(self, n, memory_limit, rss=150e6):
        self.workers = {f"w{i}": {"memory_limit": memory_limit, "nthreads": 1,
                                  "metrics": {"memory": int(rss)}} for i in range(n)}

    def run(self, fn, *args):  # no GPU
        return {}

    def scheduler_info(self, n_workers=-1):
        return {"workers": self.workers}


def test_auto_fits_the_boxes_in_cpu_workers_of_1GB():
    """The case that ran out of memory: 20M float32 points, two 1 GB workers."""
    n, limit = 20_000_000, 1e9
    P = choose_partitions("auto", n, 3, np.float32, Workers(2, limit), "cpu")
    # one box of n / P points at the measured peak, beside the process's own
    # memory, fits the 80 % of the limit at which Dask pauses a worker
    assert PROCESS_BYTES + n / P * BOX_BYTES_F32 <= 0.8 * limit, P
    assert P <= 64
    # more need, more boxes: min_samples > 1, float64, less memory
    assert choose_partitions("auto", n, 3, np.float32, Workers(2, limit), "cpu", 5) >= P
    assert choose_partitions("auto", n, 3, np.float64, Workers(2, limit), "cpu") > P
    assert choose_partitions("auto", n, 3, np.float32, Workers(2, 0.75 * limit), "cpu") > P
    # a cloud that fits one worker's limit by far is one box
    assert choose_partitions("auto", 100_000, 3, np.float32, Workers(2, limit), "cpu") == 1


def test_auto_refuses_what_no_box_count_fits():
    with pytest.raises(emst_dask.InputError, match=r"partitions='auto': .* do not fit 2 "
                                                   r"worker\(s\) of 300 MB"):
        choose_partitions("auto", 50_000_000, 3, np.float32, Workers(2, 300e6, 200e6), "cpu")


def _peak_rss():
    """(runs in a worker) its peak RSS so far, bytes."""
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0  # pragma: no cover - not Linux


def test_auto_on_memory_limited_cpu_workers(tmp_path):
    """Worker processes of 500 MB: "auto" splits a 1M-point cloud whose
    one-box job (about 200 MB beside a worker's own 207 MB) would pass
    Dask's pause at 80 %; the job is exact, no worker was restarted or came
    near the 95 % at which Dask kills it."""
    from distributed import Client, LocalCluster

    if not os.path.exists("/proc/self/status"):
        pytest.skip("reads the workers' peak memory from /proc")
    limit = 500e6
    pts = cloud(1_000_000, 3, seed=37)
    path = write_snapshot(tmp_path / "s.zarr", pts, chunk_rows=100_000)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None, memory_limit=int(limit)) as lc, \
            Client(lc, set_as_default=False) as c:
        c.wait_for_workers(2, timeout=60)
        before = sorted(c.run(os.getpid).values())
        # bounded: a job whose workers sit paused at their memory limit would
        # wait for good (a failure to see, not a CI run that never ends)
        pool = ThreadPoolExecutor(1)
        try:
            tree = pool.submit(emst_dask.emst, path, client=c,
                               partitions="auto").result(timeout=600)
        finally:
            pool.shutdown(wait=False)
        assert sorted(c.run(os.getpid).values()) == before  # nobody restarted
        peaks = c.run(_peak_rss)
    assert tree.report.partitions > 1
    assert_same_tree(tree, pts)
    assert max(peaks.values()) < 0.95 * limit, peaks
