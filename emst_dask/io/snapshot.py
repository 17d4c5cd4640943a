"""Point clouds written by this package (``emst-dask generate``, the demo).

A snapshot is a Zarr group with one (n, d) array ``points`` (or d 1-D
coordinate arrays), checksummed like every array the package writes, and
the attribute ``generator``; a ``.npy`` is a plain (n, d) array.  Both are
written aside and moved into place (``Output``): complete or absent; an
existing output is replaced only with ``overwrite`` and only if it is a
point cloud (a .npy file, or a snapshot this package generated) holding
nothing else: the snapshot records the arrays and attributes it wrote
(``io.owned``), and an array or attribute added since is named and refused.
"""
from __future__ import annotations

import numpy as np

from ..errors import OutputError
from . import npy
from .codecs import create_array
from .output import SNAPSHOT_ATTR, Output, resolve_output
from .owned import record_written


def write_points(out, pts: np.ndarray, *, chunk_rows: int = 1_000_000, zarr_format: int = 3,
                 columns=None, attrs: dict | None = None, overwrite: bool = False) -> Output:
    """Write (n, d) ``pts`` to ``out`` (``.npy``, or a Zarr snapshot).

    Parameters
    ----------
    out : path
    pts : (n, d) array
    chunk_rows : int
        Zarr: rows per chunk.
    zarr_format : {2, 3}
    columns : sequence of d names, optional
        Zarr: write d 1-D arrays instead of one (n, d) array "points".
    attrs : dict, optional
        Zarr: group attributes (``generator`` is always set).
    overwrite : bool

    Returns
    -------
    Output
    """
    import zarr

    output = resolve_output(out, overwrite=overwrite, zarr_format=zarr_format,
                            contents="points")
    if output.local is None:
        raise OutputError(f"{out}: generate writes local files only")
    n, d = pts.shape
    if output.kind == "npy" and columns:
        raise OutputError("columns need a Zarr output (not .npy)")
    if columns is not None and len(columns) != d:
        raise OutputError(f"columns names {len(columns)} arrays for {d} coordinates")
    with output.written_aside() as tmp:
        if output.kind == "npy":
            with open(tmp, "wb") as fh:
                npy.save(fh, pts, "points")
        else:
            rows = max(1, min(int(chunk_rows), max(n, 1)))
            # the mark from the start: an unfinished temporary is provably ours
            group = zarr.open_group(tmp, mode="w-", zarr_format=zarr_format,
                                    attributes={SNAPSHOT_ATTR: "emst-dask"})
            if columns is None:
                create_array(group, "points", (n, d), (rows, d), pts.dtype,
                             zarr_format)[...] = pts
            else:
                for j, c in enumerate(columns):
                    create_array(group, c, (n,), (rows,), pts.dtype, zarr_format)[...] = pts[:, j]
            group.attrs.update(record_written(group, {SNAPSHOT_ATTR: "emst-dask",
                                                      **(attrs or {})}))
    return output


def write_chunked(out, name: str, n: int, *, dim: int = 3, seed: int = 0,
                  chunk_rows: int = 1 << 24, processes: int | None = None,
                  zarr_format: int = 3, overwrite: bool = False) -> Output:
    """The chunked variant of the reference cloud ``name`` (n points) as a
    Zarr snapshot, chunk by chunk from ``processes`` processes: a cloud
    beyond one process's memory, made at the rate of the machine.

    Chunk i is ``datasets.CHUNK_GENERATORS[name](n, dim, seed, i,
    chunk_rows)`` and is one storage chunk, so the cloud depends on (name,
    n, dim, seed, chunk_rows), all recorded in the attributes (with
    ``generator`` "<name>-chunked").  Complete or absent, as
    ``write_points``.

    Parameters
    ----------
    out : path of the snapshot (a Zarr group)
    name : {"uniform", "halos"}
    n : int
    dim : int
    seed : int
    chunk_rows : int
    processes : int, optional
        Worker processes (default: the machine's cores).
    zarr_format : {2, 3}
    overwrite : bool
    """
    import os
    from concurrent.futures import ProcessPoolExecutor
    import multiprocessing

    import zarr

    from ..datasets import CHUNK_GENERATORS, n_chunks

    if name not in CHUNK_GENERATORS:
        raise ValueError(f"no chunked variant of {name!r}; there are "
                         f"{sorted(CHUNK_GENERATORS)}")
    n, rows = int(n), max(1, min(int(chunk_rows), max(int(n), 1)))
    output = resolve_output(out, overwrite=overwrite, zarr_format=zarr_format,
                            contents="points")
    if output.local is None or output.kind == "npy":
        raise OutputError(f"{out}: the chunked variants are written as local Zarr snapshots")
    attrs = {SNAPSHOT_ATTR: "emst-dask", "generator": f"{name}-chunked", "n": n,
             "d": int(dim), "seed": int(seed), "chunk_rows": rows}
    with output.written_aside() as tmp:
        group = zarr.open_group(tmp, mode="w-", zarr_format=zarr_format,
                                attributes={SNAPSHOT_ATTR: "emst-dask"})
        create_array(group, "points", (n, dim), (rows, dim), np.float32, zarr_format)
        jobs = [(os.path.join(tmp, "points"), name, n, dim, seed, i, rows)
                for i in range(n_chunks(n, rows))]
        workers = max(1, min(len(jobs), int(processes or os.cpu_count() or 1)))
        if workers == 1:
            list(map(_write_chunk, jobs))
        else:  # spawned: the caller's threads (a cluster, a GUI) are not forked
            with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) \
                    as pool:
                list(pool.map(_write_chunk, jobs))
        group.attrs.update(record_written(group, attrs))
    return output


def _write_chunk(job) -> None:
    """One chunk of ``write_chunked``, generated and written in this process."""
    import zarr

    from ..datasets import CHUNK_GENERATORS  # (this module's import registered the codecs)

    path, name, n, dim, seed, i, rows = job
    z = zarr.open_array(path, mode="r+")
    z[i * rows:i * rows + rows] = CHUNK_GENERATORS[name](n, dim, seed, i, rows)
