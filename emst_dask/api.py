"""Layer 5, the API: ``emst(points, ...)``.

In-memory points go to the engine's in-memory core in this process; a
path, a zarr object, a dask array, a cluster or an output go to the Dask
service (``emst_dask.distributed``); ``partitions=`` to the partitioned
algorithm.
"""
from __future__ import annotations

from .engine import spanning_tree
from .progress import guarded
from .errors import InputError
from .io.checks import (as_points, check_backend, check_box_size, check_in_box,
                        check_min_samples)
from .io.source import is_in_memory
from .kernels import resolve_backend


def emst(points, *, min_samples: int = 1, box_size=None, backend: str = "auto",
         sort_by_weight: bool = False, progress=None, client=None, out=None,
         columns=None, array=None, partitions=None, hierarchy: bool = False,
         **service_options):
    """Exact Euclidean (or mutual-reachability) minimum spanning tree.

    Parameters
    ----------
    points : (n, d) array-like of float32/float64 (numpy or cupy), 1 <= d <= 8.
        Integer input is converted to float64.  NaN or inf is refused.
        Also (the Dask service, ``emst_dask.distributed.service.emst``): the path or URL
        of a Zarr store (v2 or v3) or .npy file, a ``zarr.Array`` or
        ``zarr.Group``, or a dask array.
    min_samples : int, default 1
        HDBSCAN*'s k_pts, counting the point itself: the core distance of a
        point is the distance to its ``min_samples``-th nearest neighbour,
        itself included.  This is scikit-learn's ``HDBSCAN(min_samples=k)``,
        and ``hdbscan.HDBSCAN(min_samples=k - 1)`` / fast_hdbscan's
        ``min_samples=k - 1``, which do not count the point.  1 gives the
        plain Euclidean MST.
    box_size : float, (d,) floats, "snapshot", or None
        A periodic box (an N-body snapshot's): distances are taken under the
        minimum image (per axis ``min(|dx|, L - |dx|)``) and every coordinate
        must lie in [0, L) (a row outside is refused, by number).  One length
        for a cube, or one per axis.  "snapshot": the ``BoxSize`` attribute
        of the Zarr group or array read (the service path).  None: open
        space.
    backend : {"auto", "cpu", "cuda"}
        "auto" takes CUDA for CuPy input or when a GPU is visible.
    sort_by_weight : bool
        Order the edges by (weight, source, target).
    hierarchy : bool
        In-process CUDA trees only (ignored elsewhere): also record the
        Borůvka iterations' picks (``SpanningTree.hierarchy``, 9 bytes a
        point while the tree is built), from which ``linkage()`` and
        HDBSCAN* build the dendrogram without Borůvka rounds of their own;
        the edges then come in
        the engine's strict order (squared length, min row, max row).
    progress : callable or bool, optional
        True for a progress bar, or ``progress(phase, **info)``, called after the core distances and after every Borůvka iteration.
        It never fails the job: its first exception is logged and it is not
        called again (``emst_dask.progress.guarded``).

    client : distributed.Client, scheduler address or file, False, or None
        Run the job on a Dask worker (``emst_dask.distributed``).  None: in this
        process for in-memory points; for other sources the default Client
        if one exists, else an embedded cluster (LocalCUDACluster with GPUs,
        LocalCluster of CPU workers without) for the call.  False: in this
        process.
    out : path, URL or zarr store, optional
        The worker writes the edges there (a Zarr edge store, or ``.npy``)
        and an ``emst_dask.EdgeStore`` is returned instead of a tree.
        Checked before any work: its parent must be a writable directory,
        and it must not be the input or hold it.
    columns, array : select the coordinate arrays of a Zarr group.
    partitions : "auto", int, or None
        Split the cloud into this many spatial boxes over the cluster's
        workers and compute the exact EMST from them
        (``emst_dask.partitioned``); the edge set is the same as with one
        box.  "auto" splits only when the cloud does not fit one worker (GPU
        memory, or host memory limit on CPU workers: see
        ``partitioned.sizing``).  At most n boxes, and at most 64 per
        worker.  ``client=False``: in this process.  None: one worker.
        The returned tree (or the edge store's ``partitioned`` attribute)
        carries the job's report: rounds, bytes moved, seconds per phase.
    **service_options
        Passed to ``emst_dask.distributed.service.emst``
        (``overwrite``: replace an edge store or edge array this package
        wrote, never anything else; ``name``, ``storage_options``,
        ``out_storage_options``, ``zarr_format``, ``chunk_rows``,
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
        from .distributed.partitioned import emst as partitioned_emst

        return partitioned_emst(points, client=client, out=out, partitions=partitions,
                                min_samples=min_samples, box_size=box_size, backend=backend,
                                sort_by_weight=sort_by_weight, columns=columns, array=array,
                                progress=progress, **service_options)
    if (client is not None or out is not None or columns is not None
            or array is not None or service_options or not is_in_memory(points)):
        from .distributed.service import emst as service_emst

        return service_emst(points, client=client, out=out, min_samples=min_samples,
                            box_size=box_size, backend=backend, sort_by_weight=sort_by_weight,
                            progress=progress, columns=columns, array=array,
                            **service_options)
    check_backend(backend)
    pts = as_points(points)
    n, d = pts.shape
    k = check_min_samples(min_samples, n)
    if isinstance(box_size, str):
        raise InputError(f"box_size={box_size!r} needs a snapshot with attributes; "
                         "in-memory points take the box's lengths")
    box = check_box_size(box_size, d)
    check_in_box(pts, box)
    if progress is True:  # a tqdm bar, as the service shows
        from .progress import ProgressBar

        bar = ProgressBar("emst")
        bar("start", n=n, d=d, backend=resolve_backend(backend, pts))
        bar("tree")
        try:
            tree = spanning_tree(pts, k, backend, box_size=box, sort_by_weight=sort_by_weight,
                                 progress=bar, hierarchy=hierarchy)
            bar("done", seconds=sum(tree.timings.values()), total_weight=tree.total_weight,
                n_edges=tree.n_edges)
        finally:
            bar.close()
        return tree
    return spanning_tree(pts, k, backend, box_size=box, sort_by_weight=sort_by_weight,
                         progress=guarded(progress or None), hierarchy=hierarchy)
