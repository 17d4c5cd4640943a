"""What a user passes, pinned down as a point source (``resolve_source``).

Above the kinds of source (``io.source``: arrays, ``.npy``, dask arrays;
``io.zarr_source``; ``io.hdf5_source``): each of those imports only
``io.source``, and this module chooses among them.
"""
from __future__ import annotations

import os

import numpy as np

from ..errors import InputError
from .checks import check_unmasked
from .paths import is_pathlike, local_path
from .source import ArrayPoints, DaskPoints, NpyPoints, PointSource, parse_columns


def resolve_source(source, *, array: str | None = None, columns=None,
                   storage_options: dict | None = None) -> PointSource:
    """Pin down a point source without reading its coordinates.

    Parameters
    ----------
    source : path or URL (Zarr v2/v3 store, .npy file), an HDF5 file or
        snapshot (its file, the stem or a glob of its files: ``io.hdf5_source``), zarr.Array,
        zarr.Group, dask array, numpy/cupy array, or a PointSource
    array : str, optional
        The (n, d) member of a Zarr group (a path inside it, e.g.
        ``"PartType1/Coordinates"``); of an HDF5 snapshot, a particle type
        (``"PartType1"``) or a dataset (``"PartType1/Coordinates"``).
    columns : sequence of str or "x,y,z", optional
        The 1-D coordinate members of a Zarr group, in order.
    storage_options : dict, optional
        fsspec options of a URL.

    Returns
    -------
    PointSource

    Raises
    ------
    InputError
        Naming the place: a missing path, a broken store, a wrong rank or
        shape, a non-numeric dtype, an ambiguous group, a missing chunk.
    """
    from . import zarr_source

    columns = parse_columns(columns)
    if array is not None and columns is not None:
        raise InputError("give either array= (one (n, d) array) or columns= "
                         "(1-D coordinate arrays), not both")
    if isinstance(source, PointSource):
        return source
    mod = type(source).__module__ or ""
    if mod.startswith("dask.array"):
        _no_members(array, columns, "a dask array")
        return DaskPoints(source)
    if isinstance(source, np.ndarray) or mod.startswith("cupy"):
        _no_members(array, columns, "an in-memory array")
        return ArrayPoints(source)
    if is_pathlike(source):
        loc = local_path(source)
        if loc is None:
            return zarr_source.resolve(str(source), array, columns, storage_options)
        from . import hdf5_source

        files = hdf5_source.snapshot_files(loc)
        if files:  # an HDF5 file, or a snapshot's files by a stem or a glob
            if columns is not None:
                raise InputError(f"{loc}: is HDF5: name its dataset or particle type "
                                 "with array= (columns= selects Zarr arrays)")
            return hdf5_source.resolve(loc, array, files=files)
        if not os.path.exists(loc):
            raise InputError(f"{loc}: no such file or Zarr store (nor HDF5 snapshot files)")
        if os.path.isfile(loc):
            if loc.endswith(".npz"):
                raise InputError(f"{loc}: is an .npz archive; give one (n, d) array "
                                 "as .npy or a Zarr store")
            with open(loc, "rb") as fh:
                magic = fh.read(6)
            if magic == b"\x93NUMPY":
                _no_members(array, columns, "a .npy file")
                _not_a_result(loc)
                return NpyPoints(loc)
            raise InputError(f"{loc}: is neither a .npy array nor a Zarr store: a file, "
                             "but not a .npy file (numpy.save format)")
        return zarr_source.resolve(loc, array, columns, None)
    if zarr_source.is_zarr_node(source):
        return zarr_source.resolve_node(source, array, columns)
    check_unmasked(source, "points")
    try:
        data = np.asarray(source)
    except Exception as exc:
        raise InputError(f"points cannot be read as an array: {exc}") from exc
    return ArrayPoints(data)


def visible_here(loc: str) -> bool:
    """Whether the local path ``loc`` names something here: a file or
    directory, or an HDF5 snapshot's files by their stem or a glob."""
    from . import hdf5_source

    return os.path.exists(loc) or bool(hdf5_source.snapshot_files(loc))


def _not_a_result(loc):
    """Refuse a .npy result of this package (edges, labels, a linkage
    matrix) given as points: its rows are no cloud."""
    from . import npy
    from .output import is_edge_array

    held = npy.written_here(loc)
    if held in ("clusters", "linkage") or (held == "edges" and is_edge_array(loc)):
        what = {"edges": "an edge array", "clusters": "labels",
                "linkage": "a linkage matrix"}[held]
        raise InputError(f"{loc}: is {what} emst-dask wrote, not a point cloud"
                         + ("; give its points, or cluster a Zarr edge store (edge "
                            "arrays do not record their min_samples)" if held == "edges"
                            else ""))


def _no_members(array, columns, what):
    if array is not None or columns is not None:
        raise InputError(f"array= and columns= select members of a Zarr group; the "
                         f"source is {what}")
