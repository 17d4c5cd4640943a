"""Set-up of a GPU worker process (dask-cuda style: apart from the API).

A CuPy memory pool grows on demand: every new block is a ``cudaMalloc``
of fresh device memory, and a first job of a few hundred million points
spends seconds on it (the first box of a partitioned job at 250M points:
4.0 s in Borůvka against 1.5 s for the second, on an H100).  Reserving a
fraction of the device once, when the worker starts, moves that cost out of
the jobs: the pool splits the reserved block for every later allocation
and merges it back when they are freed.

Used by ``EmbeddedCluster(device_pool=...)`` and, on clusters started with
``dask cuda worker --preload emst_dask.worker``, by ``dask_setup`` with the
fraction from the ``EMST_DEVICE_POOL`` environment variable.
"""
from __future__ import annotations

import logging
import os

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
    """``--preload emst_dask.worker``: reserve the pool of ``EMST_DEVICE_POOL``."""
    value = os.environ.get(ENV)
    if value is None:
        return
    try:
        got = reserve_device_pool(value)
        logger.info("emst_dask: device pool of %.1f GiB reserved", got / 2**30)
    except Exception as exc:  # the worker still serves jobs, the pool grows as it goes
        logger.warning("emst_dask: could not reserve the device pool (%s): %s", value, exc)
