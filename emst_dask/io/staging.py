"""Staging: a point source read into one array, in host or device memory.

The row blocks are read by a thread pool into one (n, d) array of the
compute dtype: in host memory (CPU backend), or on the device (CUDA: pinned
host buffers, asynchronous copies on a stream of their own, the read of
block k+1 overlapping the copy of block k).  Every block is checked for
NaN/inf (and 64-bit integers beyond 2**53) before any kernel runs; a bad
value is reported with the chunk index, its rows, the first bad row and the
store.
"""
from __future__ import annotations

import queue
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from typing import TYPE_CHECKING

import numpy as np

from .reading import ReadProgress, default_threads, read_host

if TYPE_CHECKING:
    from .source import PointSource

__all__ = ["CupyDevice", "default_threads", "stage"]


def stage(src: PointSource, backend: str = "cpu", *, threads: int | None = None,
          report=None, device=None, timings: dict | None = None):
    """Read ``src`` into one C-contiguous (n, d) array of its compute dtype.

    ``backend="cpu"``: a numpy array; the reader threads convert and check
    their blocks in place.  ``backend="cuda"``: a cupy array, filled through
    a ring of pinned host buffers and asynchronous copies (``device`` may
    replace the CuPy device layer, for tests).  NaN/inf raise
    ``InputError`` naming the lowest bad chunk, its first bad row and the
    store, before any kernel runs.  ``report(phase, **info)`` gets
    ``("read", rows=, total=, blocks=, block=)`` as blocks arrive.
    ``timings``, when given, gets seconds: ``decode`` (the reader threads'
    fetching and decoding, summed over them), ``copy_in`` (waiting for the
    last host-to-device copies, CUDA) and ``check`` (the NaN/inf scan on the
    device, CUDA).
    """
    threads = threads or default_threads()
    timings = {} if timings is None else timings
    if backend == "cuda" or device is not None:
        return _stage_device(src, threads, report, device or CupyDevice(), timings)
    return read_host(src, threads, report, timings)


class CupyDevice:
    """The device side of staging: device arrays, pinned buffers, one
    non-blocking stream for the host-to-device copies."""

    def __init__(self):
        import cupy
        import cupyx

        self.cp = cupy
        self.cupyx = cupyx
        self.stream = cupy.cuda.Stream(non_blocking=True)

    def empty(self, shape, dtype):
        """An uninitialised device array."""
        return self.cp.empty(shape, dtype)

    def pinned(self, shape, dtype):
        """A pinned host buffer (pageable memory when pinned memory runs out)."""
        try:
            return self.cupyx.empty_pinned(shape, dtype)
        except Exception:  # pinned memory exhausted: pageable still works
            return np.empty(shape, dtype)

    def copy_async(self, dev, a, b, buf):
        """Copy ``buf``'s first ``b - a`` rows to ``dev[a:b]`` on the copy stream; the
        event that marks the copy's end.
        """
        dev[a:b].set(buf[: b - a], stream=self.stream)
        return self.stream.record()

    def wait(self, event):
        """Wait for ``event`` (the end of one copy)."""
        event.synchronize()

    def finish(self):
        """Wait for every copy on the copy stream."""
        self.stream.synchronize()

    def first_bad_row(self, dev) -> int:
        """-1, or the first row with NaN/inf (one pass on the device)."""
        cp = self.cp
        bad = ~cp.isfinite(dev).all(axis=1)
        if not bool(bad.any()):
            return -1
        return int(cp.flatnonzero(bad)[0])

    def to_host(self, dev_rows):
        """``dev_rows`` as a numpy array."""
        return self.cp.asnumpy(dev_rows)


def _stage_device(src, threads, report, dev_layer, timings):
    """Pinned ring: readers fill free buffers (reading block k+1 while block
    k is copied), the main thread issues the asynchronous copies, a recycler
    thread hands buffers back once their copy has completed."""
    n, d = src.shape
    dt = src.compute_dtype
    dev = dev_layer.empty((n, d), dt)
    blocks = [(a, b) for a, b in src.blocks if b > a]
    if not blocks:
        if report:
            report("read", rows=0, total=n, blocks=0, block=-1)
        return dev
    t0 = time.perf_counter()
    if _copy_device_blocks(src, blocks, dev, report, n):
        timings["copy_in"] = time.perf_counter() - t0
        timings["decode"] = 0.0
        return _checked_on_device(src, dev, dev_layer, timings)
    rows = max(b - a for a, b in blocks)
    nbuf = min(len(blocks), threads + 2)
    free: queue.Queue = queue.Queue()
    for _ in range(nbuf):
        free.put(dev_layer.pinned((rows, d), dt))
    inflight: queue.Queue = queue.Queue()
    recycle_error = []

    def recycler():
        while True:
            item = inflight.get()
            if item is None:
                return
            event, buf = item
            try:
                dev_layer.wait(event)
            except BaseException as exc:  # pragma: no cover - device fault
                recycle_error.append(exc)
            free.put(buf)

    rec = threading.Thread(target=recycler, name="emst-pinned-recycler", daemon=True)
    rec.start()
    results: queue.Queue = queue.Queue()

    spent = []

    def work(j):
        a, b = blocks[j]
        t0 = time.perf_counter()
        x = src.read_exact(a, b)  # decode outside the pinned buffer
        t1 = time.perf_counter()
        buf = free.get()         # wait for a buffer whose copy has finished
        t2 = time.perf_counter()
        np.copyto(buf[: b - a], x, casting="unsafe")
        spent.append(time.perf_counter() - t2 + t1 - t0)
        results.put((j, buf))
        return j

    progress = ReadProgress(report, n, blocks)
    try:
        with ThreadPoolExecutor(max_workers=min(threads, len(blocks)),
                                thread_name_prefix="emst-read") as pool:
            futs = [pool.submit(work, j) for j in range(len(blocks))]
            try:
                for _ in range(len(blocks)):
                    while True:
                        try:
                            j, buf = results.get(timeout=0.5)
                            break
                        except queue.Empty:
                            for f in futs:  # a reader failed: stop waiting
                                if f.done() and f.exception() is not None:
                                    raise f.exception()
                    a, b = blocks[j]
                    inflight.put((dev_layer.copy_async(dev, a, b, buf), buf))
                    progress.arrived(j)
            except BaseException:
                for f in futs:
                    f.cancel()
                # let blocked readers finish so the pool can shut down
                for _ in range(len(futs)):
                    free.put(np.empty((rows, d), dt))
                raise
        t0 = time.perf_counter()
        dev_layer.finish()
        timings["copy_in"] = time.perf_counter() - t0
    finally:
        inflight.put(None)
        rec.join()
    timings["decode"] = float(sum(spent))
    if recycle_error:  # pragma: no cover
        raise recycle_error[0]
    return _checked_on_device(src, dev, dev_layer, timings)


def _copy_device_blocks(src, blocks, dev, report, n) -> bool:
    """Blocks already on the device (a dask array of CuPy blocks persisted on
    this worker) copied into ``dev`` there, cast on the device; False (and
    nothing copied) unless every block is such a block."""
    device_block = getattr(src, "device_block", None)
    if device_block is None:
        return False
    found = [device_block(j) for j in range(len(blocks))]
    if any(b is None for b in found):
        return False
    progress = ReadProgress(report, n, blocks)
    for j, ((a, b), blk) in enumerate(zip(blocks, found)):
        dev[a:b] = blk
        progress.arrived(j)
    return True


def _checked_on_device(src, dev, dev_layer, timings):
    """``dev``, after one pass for NaN/inf (an InputError naming the chunk)."""
    t0 = time.perf_counter()
    first = dev_layer.first_bad_row(dev)
    timings["check"] = time.perf_counter() - t0
    if first >= 0:
        k = src.chunk_of(first)
        a, b = src.chunks[k]
        src.raise_nonfinite(dev_layer.to_host(dev[a:b]), a, first)
    return dev
