"""A job whose workers sit paused at Dask's memory limit is given up with an
error naming them and their memory, not left waiting for good."""
import time
from concurrent.futures import ThreadPoolExecutor

import dask.config
import numpy as np
import pytest

from emst_dask import emst
from emst_dask.distributed.paused import PAUSED_KEY
from emst_dask.errors import WorkerLost, WorkersPaused


@pytest.fixture(scope="module")
def paused_client():
    from distributed import Client, LocalCluster

    # a pause fraction no process is under: the workers pause at once and
    # stay paused (nothing to spill, spilling off)
    with dask.config.set({"distributed.worker.memory.pause": 1e-4,
                          "distributed.worker.memory.target": False,
                          "distributed.worker.memory.spill": False,
                          "distributed.worker.memory.terminate": False}):
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                          dashboard_address=None, memory_limit="64GB") as lc, \
                Client(lc, set_as_default=False) as c:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and any(
                    w.get("status") != "paused"
                    for w in c.scheduler_info(n_workers=-1)["workers"].values()):
                time.sleep(0.1)
            yield c


@pytest.mark.parametrize("source", ["memory", "zarr"])
@pytest.mark.parametrize("partitions", [None, 2])
def test_paused_workers_give_the_job_up(paused_client, partitions, source, tmp_path):
    """In-memory points wait for a worker to scatter to; a snapshot's job
    is submitted and watched: both end in ``WorkersPaused``, no output."""
    import zarr

    pts = np.random.default_rng(0).random((2000, 3))
    src = pts
    if source == "zarr":
        src = str(tmp_path / "in" / "s.zarr")
        g = zarr.open_group(src, mode="w")
        g.create_array("points", shape=pts.shape, chunks=(500, 3), dtype=pts.dtype)[...] = pts
    out = tmp_path / "e.zarr"
    t0 = time.monotonic()
    with dask.config.set({PAUSED_KEY: 2}):
        with pytest.raises(WorkersPaused, match="sat paused at Dask's memory limit for 2 s") \
                as err:
            # bounded: without the check the job would wait for good
            pool = ThreadPoolExecutor(1)
            try:
                pool.submit(emst, src, client=paused_client, partitions=partitions,
                            out=str(out), backend="cpu").result(timeout=90)
            finally:
                pool.shutdown(wait=False)
    assert time.monotonic() - t0 < 60
    assert isinstance(err.value, WorkerLost)
    assert "GB" in str(err.value)
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == (["in"] if source == "zarr" else [])


def test_the_check_can_be_turned_off_and_is_validated():
    from emst_dask.distributed.paused import PauseWatch, paused_timeout

    with dask.config.set({PAUSED_KEY: 0}):
        assert paused_timeout() == 0.0
        PauseWatch(["tcp://nowhere:1"], "job").check(None)   # off: asks nothing
    with dask.config.set({PAUSED_KEY: -1}), pytest.raises(ValueError, match=PAUSED_KEY):
        paused_timeout()
