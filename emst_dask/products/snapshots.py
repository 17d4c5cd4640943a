"""What a friends-of-friends run takes from an N-body snapshot (a Zarr group).

An N-body snapshot keeps its particles' positions and velocities as two
(n, d) arrays of one group (nbodykit's column names are ``Position`` and
``Velocity``; Gadget's HDF5 converted to Zarr has
``PartType1/Coordinates`` and ``PartType1/Velocities``) and the box as an
attribute (``BoxSize``, which ``io.checks.source_box_size`` reads).  Here:

* ``position_member``: which array holds the positions when the user names
  only the velocities (the one other (n, d) array, else ``Position``);
* ``velocities_source`` / ``read_velocities``: the named velocity array,
  checked against the positions' shape, read with the checks of every
  point source (missing chunks, NaN rows).
"""
from __future__ import annotations

import numpy as np

from ..errors import InputError

#: the positions of a group with several (n, d) arrays, when none is named
POSITION = "Position"


def _group(source, storage_options=None):
    """The open Zarr group of ``source`` (a path, URL or zarr node), or None
    when it is not a Zarr group (an array, a .npy file, a dask array)."""
    import zarr

    from ..io.paths import is_pathlike, local_path
    from ..io.zarr_source import _open_node, is_zarr_node

    if is_zarr_node(source):
        return source if isinstance(source, zarr.Group) else None
    if not is_pathlike(source):
        return None
    loc = local_path(source)
    import os

    if loc is not None and (not os.path.isdir(loc)):
        return None
    node = _open_node(loc or str(source), loc or str(source), storage_options)
    return node if isinstance(node, zarr.Group) else None


def position_member(source, array, columns, velocities, storage_options=None):
    """The ``array=`` to read the positions with.

    Parameters
    ----------
    source : the snapshot (path, URL, zarr node) or any other source
    array, columns : what the user gave (returned as they are if given)
    velocities : str or other
        The velocity array's name, left out of the candidates.

    Returns
    -------
    str or None
        ``array`` if given; for a Zarr group without ``array`` and
        ``columns``: its one (n, d) numeric array other than the velocities,
        else ``Position`` if it has one; else None (``resolve_source``
        decides, and says what is ambiguous).
    """
    if array is not None or columns is not None:
        return array
    group = _group(source, storage_options)
    if group is None:
        return None
    from ..io.zarr_source import _arrays_below

    two_d = sorted(k for k, a in _arrays_below(group).items()
                   if len(a.shape) == 2 and np.dtype(a.dtype).kind in "fiu")
    if isinstance(velocities, str):
        two_d = [k for k in two_d if k != velocities.strip("/")]
    if len(two_d) == 1:
        return two_d[0]
    if POSITION in two_d:
        return POSITION
    return None


def _hdf5_positions(source, array):
    """The positions' ``HDF5Points`` when ``source`` is an HDF5 snapshot, else None."""
    from ..io.hdf5_source import HDF5Points, snapshot_files
    from ..io.paths import is_pathlike, local_path

    if isinstance(source, HDF5Points):
        return source
    loc = local_path(source) if is_pathlike(source) else None
    if loc is None or not snapshot_files(loc):
        return None
    from ..io import resolve_source

    return resolve_source(loc, array=array)


def member_source(source, name: str, n: int, *, what: str, array=None, storage_options=None,
                  d: int | None = None):
    """The ``PointSource`` of the snapshot's array ``name`` beside the positions.

    Parameters
    ----------
    source : the snapshot (Zarr group, HDF5 file or files)
    name : str
        ``Velocities``, ``ParticleIDs``, ``Masses``: of an HDF5 snapshot, a
        dataset of the positions' particle type (or ``PartTypeN/NAME``); of
        a Zarr group, a path inside it.  A 1-D array is read as (n, 1).
    n : int
        The positions' rows.
    what : str
        Its role in messages ("velocities", "ids", "masses").
    array : str, optional
        How the positions were chosen (an HDF5 snapshot's particle type).
    d : int, optional
        The columns it must have (None: any).

    Raises
    ------
    InputError
        Not a snapshot, no such array, or another number of rows or columns.
    """
    from ..io import resolve_source

    h5 = _hdf5_positions(source, array)
    if h5 is not None:
        if name.startswith("PartType"):
            src = resolve_source(h5.files[0], array=name)
        else:
            src = h5.member(name)
    else:
        group = _group(source, storage_options)
        if group is None:
            raise InputError(f"{what}={name!r} names an array of a snapshot; the source "
                             "is not a Zarr group nor an HDF5 snapshot: give the "
                             f"{what} as an array")
        from ..io.zarr_source import _member

        one_d = len(_member(group, name.strip("/"), str(source)).shape) == 1
        src = resolve_source(source, array=None if one_d else name,
                             columns=(name.strip("/"),) if one_d else None,
                             storage_options=storage_options)
    if src.n != n or (d is not None and src.d != d):
        raise InputError(f"{what} {src.where} has shape ({src.n}, {src.d}); the "
                         f"positions are ({n}, {d if d is not None else '...'})")
    return src


def velocities_source(source, name: str, n: int, d: int, storage_options=None, array=None):
    """The ``PointSource`` of the velocity array ``name`` of the snapshot
    (``member_source``).

    Raises
    ------
    InputError
        Not a snapshot, no such array, or a shape other than (n, d).
    """
    return member_source(source, name, n, what="velocities", array=array,
                         storage_options=storage_options, d=d)


def read_velocities(source, name: str, n: int, d: int, storage_options=None, array=None):
    """The velocity array ``name`` of the snapshot, read and checked: (n, d)."""
    return velocities_source(source, name, n, d, storage_options, array).read_all()


def read_column(src) -> np.ndarray:
    """Every row of a one-column source as stored: (n,) (particle IDs keep
    their integer type; nothing is converted)."""
    out = np.empty(src.n, src.dtype)
    for a, b in src.blocks:
        out[a:b] = src.read(a, b).reshape(-1)
    return out
