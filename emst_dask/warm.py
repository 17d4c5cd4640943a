"""Compile the numba CPU kernels ahead of time (``emst-dask warm``).

numba compiles each kernel once per signature (the axis loops are unrolled
per dimension: about 16 s per signature on one core) and keeps the result
in its cache, beside the package.  A first run of a (dtype, dimension)
would otherwise spend a minute or two compiling before its tree build
moves; this fills the cache for the signatures asked for, one process per
signature, on every core at once.
"""
from __future__ import annotations

import itertools
import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor

#: what ``warm()`` compiles by default: the clouds most runs see
DEFAULT_DIMS = (2, 3)
DEFAULT_DTYPES = ("float32", "float64")


def compile_signature(sig):
    """Compile the kernels of one signature by running them on a small cloud.

    Parameters
    ----------
    sig : tuple (kind, d)
        kind "float32" or "float64": the tree's kernels for (200, d) points
        of that dtype (mutual reachability runs the same kernels);
        "products": the kernels of what is computed from a tree (clusters,
        cuts, friends-of-friends, statistics, the partitioned algorithm)
        on 3-D points.

    Returns
    -------
    (sig, seconds)
    """
    import logging

    import numpy as np

    # this is the compiling the first-run notice tells of: it says nothing here
    logging.getLogger("emst_dask").setLevel(logging.ERROR)

    from .api import emst

    kind, d = sig
    t0 = time.perf_counter()
    x = np.random.default_rng(d).random((200, d))
    if kind == "products":
        from . import HDBSCAN, fof
        from .products.hdbscan.device import extract_xp
        from .products.order import check_edges

        HDBSCAN(min_cluster_size=5, min_samples=3, backend="cpu").fit(x)
        mr = emst(x, min_samples=3, backend="cpu")  # the device formulation, run with numpy
        extract_xp(np, *check_edges(mr.source, mr.target, mr.weight, len(x))[1:], len(x), 5,
                   "eom", False, 0.0, None)
        tree = emst(x, backend="cpu", box_size=1.0)
        tree.statistics(x)
        tree.linkage()
        fof(x, 0.5, box_size=1.0, min_members=2, tree=tree, backend="cpu")
        emst(x.astype("float32"), partitions=3, client=False, min_samples=3, backend="cpu")
        emst(x, partitions=2, client=False, backend="cpu", box_size=1.0)
    else:
        emst(x.astype(kind), min_samples=1, backend="cpu")
        # every point twice: the passes that set the copies aside
        emst(np.repeat(x, 2, axis=0).astype(kind), min_samples=1, backend="cpu")
    return sig, time.perf_counter() - t0


def signatures(dims=DEFAULT_DIMS, dtypes=DEFAULT_DTYPES, products=True) -> list:
    """The ``compile_signature`` arguments for these dimensions and dtypes
    (the products' kernels first: they take longest)."""
    return ([("products", 3)] if products else []) + [
        (t, int(d)) for t, d in itertools.product(dtypes, dims)]


def warm(dims=DEFAULT_DIMS, dtypes=DEFAULT_DTYPES, *, products=True, jobs=None,
         extra=(), report=None) -> float:
    """Fill numba's cache with the CPU kernels, one process per signature.

    Parameters
    ----------
    dims : iterable of int
        Dimensions, 1 to 8.
    dtypes : iterable of {"float32", "float64"}
    products : bool
        Also the kernels of clusters, cuts, FoF, statistics, partitions.
    jobs : int, optional
        Processes at once (default: every core).
    extra : iterable
        Further ``(callable, argument)`` pairs run in the same pool (the
        benchmark script adds the tests' emulator builds).
    report : callable(str), optional
        Called with a line per signature as it finishes.

    Returns
    -------
    float
        Seconds in all.
    """
    sigs = [(compile_signature, s) for s in signatures(dims, dtypes, products)] + list(extra)
    t0 = time.perf_counter()
    # fresh processes: a fork of a process with threads (a client, numba's
    # pool) may die before it starts
    with ProcessPoolExecutor(max_workers=jobs or os.cpu_count() or 1,
                             mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(f, a) for f, a in sigs]
        for fut in futures:
            sig, seconds = fut.result()
            if report is not None:
                report(f"{' '.join(map(str, sig))}: {seconds:.1f} s")
    return time.perf_counter() - t0
