"""Set-up of a worker process (dask-cuda style: apart from the API).

Two settings reach the workers, and only them: the numba threads of a
worker's jobs and, on GPU workers, a reserved CuPy memory pool.

A CuPy memory pool grows on demand: every new block is a ``cudaMalloc``
of fresh device memory, and a first job of a few hundred million points
spends seconds on it (the first box of a partitioned job at 250M points:
4.0 s in Borůvka against 1.5 s for the second, on an H100).  Reserving a
fraction of the device once, when the worker starts, moves that cost out of
the jobs: the pool splits the reserved block for every later allocation
and merges it back when they are freed.

Used by ``EmbeddedCluster(device_pool=...)`` and, on clusters started with
``dask cuda worker --preload emst_dask.distributed.worker``, by ``dask_setup`` with the
fraction from the ``EMST_DEVICE_POOL`` environment variable.
"""
from __future__ import annotations

import logging
import os

from distributed.diagnostics.plugin import WorkerPlugin

logger = logging.getLogger(__name__)

#: environment variable read by ``dask_setup``: a fraction of the free
#: device memory (0 < f < 1), a byte count, or "none"
ENV = "EMST_DEVICE_POOL"


def parse_pool_size(value, free_bytes: int) -> int:
    """Bytes to reserve from ``value`` ("none", a fraction in (0, 1), or bytes)."""
    if value is None:
        return 0
    s = str(value).strip().lower()
    if s in ("", "none", "0", "off", "false"):
        return 0
    try:
        x = float(s)
    except ValueError:
        raise ValueError(f"{ENV}: expected 'none', a fraction in (0, 1) or a byte count, "
                         f"got {value!r}") from None
    if 0 < x < 1:
        return int(x * free_bytes)
    if x >= 1:
        return int(min(x, free_bytes))
    raise ValueError(f"{ENV}: expected 'none', a fraction in (0, 1) or a byte count, "
                     f"got {value!r}")


def reserve_device_pool(size=0.8) -> int:
    """Grow this process's CuPy default memory pool by one block, once.

    size : fraction of the device's free memory (0 < size < 1), bytes, or
    None/"none" (nothing).  The block is allocated and released at once: the
    pool keeps it and serves later allocations from it.  Returns the pool's
    total bytes afterwards (0 without a GPU).
    """
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() < 1:
            return 0
    except Exception:
        return 0
    pool = cupy.get_default_memory_pool()
    free, _ = cupy.cuda.Device().mem_info
    nbytes = parse_pool_size(size, free) >> 20 << 20  # whole MiB
    if nbytes > pool.total_bytes():
        block = pool.malloc(nbytes - pool.total_bytes())
        del block
    return int(pool.total_bytes())


def dask_setup(worker=None):
    """``--preload emst_dask.distributed.worker``: reserve the pool of
    ``EMST_DEVICE_POOL``."""
    value = os.environ.get(ENV)
    if value is None:
        return
    try:
        got = reserve_device_pool(value)
        logger.info("emst_dask: device pool of %.1f GiB reserved", got / 2**30)
    except Exception as exc:  # the worker still serves jobs, the pool grows as it goes
        logger.warning("emst_dask: could not reserve the device pool (%s): %s", value, exc)


# --------------------------------------------------------------------------
# settings that go to the workers only
# --------------------------------------------------------------------------
#: dask.config key of the numba threads a worker's jobs use
NUMBA_THREADS_KEY = "emst.numba-threads"


class WorkerSettings(WorkerPlugin):
    """A ``distributed.WorkerPlugin`` that gives a worker its settings.

    ``numba_threads``: the numba threads each of this worker's jobs uses
    (``cores // workers`` on a shared machine).  Kept in the worker
    process's dask config (never in any process's environment: the
    client's own numba must stay as it is); each task applies it to its
    thread (``apply_settings``).  ``device_pool``: reserve this much of the
    GPU in the worker's CuPy pool at start (``reserve_device_pool``).
    """

    idempotent = True
    name = "emst-worker-settings"

    def __init__(self, numba_threads: int | None = None, device_pool=None):
        self.numba_threads = numba_threads
        self.device_pool = device_pool

    def setup(self, worker):
        """On the worker: ``numba_threads`` into its dask config and its numba pool
        sized to them; the device pool reserved when ``device_pool`` is given.
        """
        import dask

        if self.numba_threads:
            dask.config.set({NUMBA_THREADS_KEY: int(self.numba_threads)})
            size_numba_pool(int(self.numba_threads))
        if self.device_pool is not None:
            reserve_device_pool(self.device_pool)



def size_numba_pool(threads: int):
    """Launch this worker process's numba pool with ``threads`` threads, if
    numba has not launched it yet: then every task of the worker, the
    user's own too, runs numba code on its share of the cores.  Only this
    process's environment is touched (a worker, never the client)."""
    try:
        import numba
        import numba.np.ufunc.parallel as parallel

        if parallel._is_initialized:  # launched already: tasks lower it per thread
            return
        os.environ["NUMBA_NUM_THREADS"] = str(threads)
        numba.config.reload_config()
        parallel.NUM_THREADS = threads  # read once, when that module was imported
    except Exception:  # pragma: no cover - numba missing or changed: defaults are fine
        logger.debug("could not size the numba pool", exc_info=True)


#: glibc's mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
#: chunk-sized buffers up to this size come from malloc's heaps (glibc's own
#: ceiling for the mmap threshold on 64-bit)
MMAP_THRESHOLD = 32 << 20
#: free memory a heap keeps at its top before returning it to the system
TRIM_THRESHOLD = 64 << 20
_malloc_tuned = False


def keep_large_buffers():
    """Let this worker reuse its chunk-sized buffers (glibc only; once).

    Dask's nanny starts workers with ``MALLOC_TRIM_THRESHOLD_`` set, which
    also fixes glibc's mmap threshold at 128 KiB: then every decoded or
    encoded chunk (megabytes) is a fresh ``mmap`` whose pages fault in one
    by one and an ``munmap`` that serialises the threads, which cost the
    readers and writers a third of their rate (an (n, 3) float32 snapshot
    decoded into pinned memory by 16 threads: 2.9 against 4.5 GB/s on an
    H200 host).  Buffers up to ``MMAP_THRESHOLD`` then come from the heaps,
    which keep up to ``TRIM_THRESHOLD`` free at their tops.
    """
    global _malloc_tuned
    if _malloc_tuned:
        return
    _malloc_tuned = True
    if "MALLOC_TRIM_THRESHOLD_" not in os.environ:  # glibc's dynamic threshold works
        return
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)
        libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    except (OSError, AttributeError):  # not glibc: nothing to tune
        pass


def apply_settings():
    """In a task: use this worker's numba thread count in this thread, and
    let the worker reuse its chunk-sized buffers (``keep_large_buffers``).

    numba's thread count is per calling thread and may only be lowered
    below the pool it launched, so it is set here, in the task's thread,
    never through ``NUMBA_NUM_THREADS`` (which numba checks against its
    launched pool on every compile).
    """
    import dask

    keep_large_buffers()
    want = dask.config.get(NUMBA_THREADS_KEY, None)
    if not want:
        return
    try:
        import numba

        numba.set_num_threads(max(1, min(int(want), numba.config.NUMBA_NUM_THREADS)))
    except Exception:  # pragma: no cover - numba missing or odd: defaults are fine
        logger.debug("could not set numba threads", exc_info=True)
