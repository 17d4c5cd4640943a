"""Row blocks of a point source read by a pool of threads into one host
array: ``read_host``, the host path of ``staging.stage`` and the whole of
``PointSource.read_all``.  Below both: a source is only read through its
methods (``blocks``, ``read_checked``, ``raise_nonfinite``), so this module
imports neither.
"""
from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor, as_completed

import numpy as np


#: dask.config key: reader and writer threads of a process where a job
#: names none (``threads=``), an int >= 1, or "auto" (``default_threads``);
#: set on the workers (their configuration or environment,
#: ``DASK_EMST_DASK__IO__THREADS``)
THREADS_KEY = "emst_dask.io.threads"


def default_threads() -> int:
    """Reader (and writer) threads: ``THREADS_KEY`` where it is set, else
    ("auto") enough to keep a disk and a codec pipeline busy, at most the
    cores this process may run on (a GPU worker is often pinned to the
    cores near its GPU), and 16."""
    import dask.config

    want = dask.config.get(THREADS_KEY, "auto")
    if want != "auto":
        if isinstance(want, bool) or not isinstance(want, int) or want < 1:
            raise ValueError(f"dask config {THREADS_KEY} must be 'auto' or an integer >= 1, "
                             f"got {want!r}")
        return want
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # no affinity here (macOS, Windows)
        cores = os.cpu_count() or 2
    return max(2, min(16, cores))


def read_host(src, threads: int, report=None, timings: dict | None = None):
    """Every row of the point source ``src`` in one C-contiguous (n, d)
    numpy array of its compute dtype, read and checked by ``threads``
    reader threads (``stage``'s host path).

    NaN/inf: every block is read, then the InputError of the lowest bad
    block is raised; a reader's own error is raised as its block ends.
    ``report`` and ``timings`` (``decode``) as ``staging.stage``.
    """
    timings = {} if timings is None else timings
    n, d = src.shape
    out = np.empty((n, d), src.compute_dtype)
    blocks = [(a, b) for a, b in src.blocks if b > a]
    bad = {}

    spent = []

    def work(j):
        t0 = time.perf_counter()
        a, b = blocks[j]
        first = src.read_checked(a, b, out[a:b])
        if first is not None:
            bad[j] = first
        spent.append(time.perf_counter() - t0)
        return j

    run_blocks(work, blocks, threads, report, n)
    timings["decode"] = float(sum(spent))
    if bad:
        j = min(bad)
        a, b = blocks[j]
        src.raise_nonfinite(out[a:b], a, bad[j])
    return out


class ReadProgress:
    """``("read", rows=, total=, blocks=, block=)`` reports as blocks arrive."""

    def __init__(self, report, n, blocks):
        self.report, self.n, self.blocks, self.rows = report, n, blocks, 0
        if report:
            report("read", rows=0, total=n, blocks=len(blocks), block=-1)

    def arrived(self, j):
        """Count block ``j``'s rows as read and report."""
        a, b = self.blocks[j]
        self.rows += b - a
        if self.report:
            self.report("read", rows=self.rows, total=self.n, blocks=len(self.blocks), block=j)


def run_blocks(work, blocks, threads, report, n):
    """``work(j)`` for every block on a pool of ``threads`` reader threads,
    reported as blocks end; the first error cancels the blocks not begun."""
    progress = ReadProgress(report, n, blocks)
    if not blocks:
        return
    with ThreadPoolExecutor(max_workers=min(threads, len(blocks)),
                            thread_name_prefix="emst-read") as pool:
        futs = [pool.submit(work, j) for j in range(len(blocks))]
        try:
            for f in as_completed(futs):
                progress.arrived(f.result())
        except BaseException:
            for f in futs:
                f.cancel()
            raise
