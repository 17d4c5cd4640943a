"""Zarr reads and writes from many threads at once.

zarr's synchronous API runs every call on one event-loop thread of its
own: the checksums, the byte-order views and the copy of each decoded chunk
into the result all run there, one chunk after another, which holds a
process near 2 to 3 GB/s whatever the codec and however many threads call
it.  Here each calling thread drives the array's asynchronous API on an
event loop of its own whose executor runs inline, so that a chunk's
fetch, decode, checksum and copy all happen on the thread that asked for
it; the codecs (zstd, blosc, crc32c) release the GIL, so the threads of a
reader or writer pool work side by side.

Only stores that several event loops may share take this path (a local
directory, memory); any other store (a URL, a zip file) goes through
zarr's synchronous API as before.
"""
from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np


class _Inline(ThreadPoolExecutor):
    """An executor that runs each call at once, on the calling thread: the
    store's file reads and the codecs' work stay on the reader's thread
    (a ThreadPoolExecutor only because asyncio accepts no other kind; it
    starts no thread)."""

    def __init__(self):
        super().__init__(max_workers=1)

    def submit(self, fn, /, *args, **kwargs):
        fut = Future()
        try:
            fut.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting coroutine
            fut.set_exception(exc)
        return fut


class _Loop:
    """A thread's event loop, closed when the thread's locals go (its end)."""

    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self.loop.set_default_executor(_Inline())

    def __del__(self):
        try:
            self.loop.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


_local = threading.local()


def _run(coro):
    """Run ``coro`` to its end on this thread's own event loop."""
    holder = getattr(_local, "holder", None)
    if holder is None or holder.loop.is_closed():
        holder = _local.holder = _Loop()
    return holder.loop.run_until_complete(coro)


def shareable(arr) -> bool:
    """Whether the zarr array ``arr`` lives in a store that event loops on
    several threads may use at once (a local directory or memory)."""
    try:
        from zarr.storage import LocalStore, MemoryStore

        return isinstance(arr.store_path.store, (LocalStore, MemoryStore))
    except Exception:  # noqa: BLE001 - an array type we do not know: the plain path
        return False


def read_rows(arr, start: int, stop: int) -> np.ndarray:
    """``arr[start:stop]`` (every other axis whole), decoded on this thread.

    Parameters
    ----------
    arr : zarr.Array, 1-D or 2-D
    start, stop : int, rows

    Returns
    -------
    numpy array of ``arr``'s dtype, ``(stop - start,) + arr.shape[1:]``
    """
    if not shareable(arr):
        return np.asarray(arr[start:stop])
    return np.asarray(_run(arr.async_array.getitem((slice(start, stop),))))


def write_rows(arr, start: int, data) -> None:
    """``arr[start:start + len(data)] = data``, encoded and written on this
    thread (numpy ``data``)."""
    stop = start + int(data.shape[0])
    if not shareable(arr):
        arr[start:stop] = data
        return
    _run(arr.async_array.setitem((slice(start, stop),), data))
