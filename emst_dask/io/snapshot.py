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
