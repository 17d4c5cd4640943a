"""Rows of a device array copied to the host the fast way, for writers.

A copy from the device into pageable memory runs near 2.5 GB/s; into
pinned (page-locked) memory near 55 GB/s (H200).  ``HostStaging`` keeps
one pinned buffer per writer thread; a thread casts its rows on the device
(int64 row ids to the store's int32, say), copies them into its buffer on
a stream of its own and hands the buffer's view to the encoder.  Host
(numpy) rows are cast where needed and passed on without a copy.
"""
from __future__ import annotations

import contextlib
import queue
import threading

import numpy as np

from ..arrays import is_device_array


class HostStaging:
    """Pinned host buffers of ``nbytes`` each, one per thread (``count``),
    each with a copy stream of its own, allocated when a device array first
    needs one.

    Parameters
    ----------
    nbytes : int
        The largest piece in bytes.
    count : int
        Buffers (threads that copy at once).
    """

    def __init__(self, nbytes: int, count: int):
        self.nbytes = int(nbytes)
        self.count = max(1, int(count))
        self._free: queue.Queue | None = None
        self._lock = threading.Lock()

    def _pool(self) -> queue.Queue:
        with self._lock:
            if self._free is None:
                import cupy
                import cupyx

                free = queue.Queue()
                for _ in range(self.count):
                    try:
                        buf = cupyx.empty_pinned((self.nbytes,), np.uint8)
                    except Exception:  # noqa: BLE001 - pinned memory exhausted: pageable
                        buf = np.empty(self.nbytes, np.uint8)
                    free.put((buf, cupy.cuda.Stream(non_blocking=True)))
                self._free = free
        return self._free

    @contextlib.contextmanager
    def buffer(self):
        """The calling thread's claim on a buffer (taken when a device array
        first needs it), handed back on exit."""
        claim = _Claim(self)
        try:
            yield claim
        finally:
            if claim.item is not None:
                self._free.put(claim.item)

    def to_host(self, data, a: int, b: int, dtype, claim) -> np.ndarray:
        """``data[a:b]`` as a numpy array of ``dtype``: for a device array a
        view of the claimed pinned buffer (valid while the claim lasts),
        cast on the device first; else ``data``'s rows, cast only where
        the dtype differs.

        Parameters
        ----------
        data : (m,) numpy or cupy array
        a, b : int
        dtype : numpy dtype
        claim : what ``buffer()`` gave
        """
        dtype = np.dtype(dtype)
        if not is_device_array(data):
            return np.asarray(data[a:b], dtype=dtype)
        buf, stream = claim.take()
        out = buf[:(b - a) * dtype.itemsize].view(dtype)
        with stream:
            data[a:b].astype(dtype, copy=False).get(out=out, stream=stream)
        stream.synchronize()
        return out


class _Claim:
    """A thread's claim on one (pinned buffer, stream), taken when needed."""

    def __init__(self, staging: HostStaging):
        self.staging = staging
        self.item = None

    def take(self):
        if self.item is None:
            self.item = self.staging._pool().get()
        return self.item
