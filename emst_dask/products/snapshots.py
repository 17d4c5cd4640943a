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


def velocities_source(source, name: str, n: int, d: int, storage_options=None):
    """The ``PointSource`` of the velocity array ``name`` of the snapshot.

    Raises
    ------
    InputError
        Not a Zarr group, no such array, or a shape other than (n, d).
    """
    from ..io import resolve_source

    if _group(source, storage_options) is None:
        raise InputError(f"velocities={name!r} names an array of a Zarr snapshot; the "
                         "source is not a Zarr group: give the velocities as an (n, d) array")
    src = resolve_source(source, array=name, storage_options=storage_options)
    if (src.n, src.d) != (n, d):
        raise InputError(f"velocities {src.where} has shape ({src.n}, {src.d}); the "
                         f"positions are ({n}, {d})")
    return src


def read_velocities(source, name: str, n: int, d: int, storage_options=None):
    """The velocity array ``name`` of the snapshot, read and checked: (n, d)."""
    return velocities_source(source, name, n, d, storage_options).read_all()
