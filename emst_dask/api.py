"""Public entry point: ``emst(points, ...)``."""
from __future__ import annotations

import numpy as np

from . import engine
from .kernels import get_kernels, resolve_backend
from .result import SpanningTree
from .validation import as_points, check_min_samples


def emst(points, *, min_samples: int = 1, backend: str = "auto",
         sort_by_weight: bool = False, progress=None, client=None, out=None,
         columns=None, array=None, partitions=None, **service_options):
    """Exact Euclidean (or mutual-reachability) minimum spanning tree.

    Parameters
    ----------
    points : (n, d) array-like of float32/float64 (numpy or cupy), 1 <= d <= 8.
        Integer input is converted to float64.  NaN or inf is refused.
        Also (the Dask service, ``emst_dask.service.emst``): the path or URL
        of a Zarr store (v2 or v3) or .npy file, a ``zarr.Array`` or
        ``zarr.Group``, or a dask array.
    min_samples : int, default 1
        HDBSCAN*'s k_pts, counting the point itself: the core distance of a
        point is the distance to its ``min_samples``-th nearest neighbour,
        itself included.  This is scikit-learn's ``HDBSCAN(min_samples=k)``,
        and ``hdbscan.HDBSCAN(min_samples=k - 1)`` / fast_hdbscan's
        ``min_samples=k - 1``, which do not count the point.  1 gives the
        plain Euclidean MST.
    backend : {"auto", "cpu", "cuda"}
        "auto" takes CUDA for CuPy input or when a GPU is visible.
    sort_by_weight : bool
        Order the edges by (weight, source, target).
    progress : callable(phase, **info), or True for a progress bar, optional
        Called after the core distances and after every Borůvka iteration.

    client : distributed.Client, scheduler address or file, False, or None
        Run the job on a Dask worker (``emst_dask.service``).  None: in this
        process for in-memory points; for other sources the default Client
        if one exists, else an embedded cluster (LocalCUDACluster with GPUs,
        LocalCluster of CPU workers without) for the call.  False: in this
        process.
    out : path, URL or zarr store, optional
        The worker writes the edges there (a Zarr edge store, or ``.npy``)
        and an ``emst_dask.store.EdgeStore`` is returned instead of a tree.
    columns, array : select the coordinate arrays of a Zarr group.
    partitions : "auto", int, or None
        Split the cloud into this many spatial boxes over the cluster's
        workers and compute the exact EMST from them (``emst_dask.multipart``,
        DESIGN.md section 3); the edge set is the same as with one box.
        "auto" splits only when the cloud does not fit one worker (GPU
        memory, or host memory limit on CPU workers: see
        ``multipart.footprint_bytes_per_point``), then into as many boxes
        as ``multipart.box_footprint_bytes_per_point`` needs.  None: one
        worker.
        The returned tree (or the edge store's ``partitioned`` attribute)
        carries the job's report: rounds, bytes moved, seconds per phase.
    **service_options : passed to ``emst_dask.service.emst`` (``overwrite``,
        ``name``, ``storage_options``, ``zarr_format``, ``chunk_rows``,
        ``threads``, ``timeout``).

    Returns
    -------
    SpanningTree
        ``n - 1`` edges (``source``, ``target``: int64 input rows; ``weight``:
        the input float type); numpy arrays, or cupy arrays for the CUDA
        backend (host arrays when a Dask worker computed them).
    EdgeStore
        With ``out=``.
    """
    if partitions is not None:
        from . import multipart

        return multipart.emst(points, client=client, out=out, partitions=partitions,
                              min_samples=min_samples, backend=backend,
                              sort_by_weight=sort_by_weight, columns=columns, array=array,
                              **service_options)
    if (client is not None or out is not None or columns is not None
            or array is not None or service_options or not _in_memory(points)):
        from . import service

        return service.emst(points, client=client, out=out, min_samples=min_samples,
                            backend=backend, sort_by_weight=sort_by_weight,
                            progress=progress, columns=columns, array=array,
                            **service_options)
    pts = as_points(points)
    n, d = pts.shape
    k = check_min_samples(min_samples, n)
    name = resolve_backend(backend, pts)
    if progress is True or progress is False:
        if not progress:
            progress = None
        else:  # a tqdm bar, as the service shows
            from .progress import ProgressBar

            bar = ProgressBar("emst")
            bar("start", n=n, d=d, backend=name)
            bar("tree")
            tree = emst(pts, min_samples=k, backend=name, sort_by_weight=sort_by_weight,
                        progress=bar)
            bar("done", seconds=sum(tree.timings.values()), total_weight=tree.total_weight,
                n_edges=tree.n_edges)
            return tree
    K = get_kernels(name)
    if name == "cuda" and isinstance(pts, np.ndarray):
        pts = K.xp.asarray(pts)
    elif name == "cpu" and not isinstance(pts, np.ndarray):
        pts = pts.get()
    res = engine.boruvka(K, pts, k, progress=progress)
    xp = K.xp
    weight = _unscale(xp, res.weight2, res.exponent, pts.dtype)
    core = None if res.core2 is None else _unscale(xp, res.core2, res.exponent, pts.dtype)
    tree = SpanningTree(res.source, res.target, weight,
                        core, n, d, k, name, res.iterations, res.components,
                        res.timings)
    return tree.sorted_by_weight() if sort_by_weight else tree


def _in_memory(points) -> bool:
    """numpy/cupy arrays and plain array-likes (lists) take the direct path;
    paths, zarr objects and dask arrays go to the service."""
    import os

    if isinstance(points, (str, os.PathLike)):
        return False
    mod = type(points).__module__ or ""
    return not (mod.startswith("dask") or mod.startswith("zarr"))


def _unscale(xp, w2, exponent, dtype):
    """sqrt of squared weights, back in input units (exact power-of-two scaling)."""
    w = xp.sqrt(w2)
    if exponent:  # on the host: GPU arithmetic may flush subnormals to zero
        host = w if xp is np else w.get()
        w = xp.asarray(np.ldexp(host.astype(np.float64), -exponent).astype(dtype))
    return w.astype(dtype, copy=False)
