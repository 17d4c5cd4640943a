"""The checks of ``emst_dask.fof``, all run before any work: linking
lengths, member counts, the periodic box, velocities, and the absolute
linking length from a relative one (b times the mean separation)."""
from __future__ import annotations

import numbers

import numpy as np

from ..arrays import to_host as _host
from ..errors import InputError
from .cuts import check_lengths
from .order import array_module


def check_linking_lengths(linking_length):
    """The linking lengths as a (K,) float64 array, and whether one was given.

    Raises
    ------
    InputError
        Not a real number, NaN, inf, <= 0, an empty sequence.
    """
    try:
        values, single = check_lengths(linking_length)
    except InputError:
        values = None
    if values is None or not (np.isfinite(values).all() and (values > 0).all()):
        raise InputError(f"linking_length must be a finite number > 0 (or a sequence of "
                         f"them); got {linking_length!r}")
    if values.size == 0:
        raise InputError("linking_length: give at least one length")
    return values, single


def check_min_members(min_members) -> int:
    """``min_members`` as an int >= 1."""
    if isinstance(min_members, (bool, np.bool_)) or not isinstance(min_members, numbers.Integral) \
            or min_members < 1:
        raise InputError(f"min_members must be an integer >= 1, got {min_members!r}")
    return int(min_members)


def check_box_size(box_size, d: int):
    """The periodic box as (d,) float64, or None (``io.checks.check_box_size``,
    the package's one check; "snapshot" is resolved by the caller)."""
    from ..io.checks import check_box_size as check

    if isinstance(box_size, str):
        raise InputError(f"box_size must be a number, d numbers or None; got {box_size!r} "
                         "('snapshot' takes the BoxSize attribute of a Zarr snapshot)")
    return check(box_size, d)


def check_in_box(points, box):
    """Refuse a point outside [0, L) on some axis, naming the first such row
    (``io.checks.check_in_box``)."""
    from ..io.checks import check_in_box as check

    check(points, None if box is None else np.asarray(box, np.float64))


def mean_separation(points, box):
    """(V / n)^(1/d): V the box's volume, or that of the points' bounding box.

    Raises
    ------
    InputError
        No points, or a bounding box of zero extent along some axis.
    """
    n, d = points.shape
    if n == 0:
        raise InputError("relative=True takes the mean separation (V / n)^(1/d), and there "
                         "are no points; give absolute lengths (relative=False)")
    if box is not None:
        volume = float(np.prod(box))
    else:
        lo = np.asarray(_host(points.min(axis=0)), np.float64)
        hi = np.asarray(_host(points.max(axis=0)), np.float64)
        extent = hi - lo
        flat = np.flatnonzero(extent <= 0)
        if flat.size:
            j = int(flat[0])
            raise InputError(
                f"relative=True without a box takes the volume of the points' bounding "
                f"box, which is 0: every point has coordinate {j} equal to "
                f"{float(lo[j])!r}; give box_size=, or absolute lengths (relative=False)")
        volume = float(np.prod(extent))
    return (volume / n) ** (1.0 / d)


def absolute_lengths(values, relative, points, box):
    """The absolute linking lengths (K,) float64, checked against the box.

    Raises
    ------
    InputError
        No volume to take (``mean_separation``), or a length >= half the
        box on some axis (the minimum image, and the unwrapping of the
        groups, need b < L/2).
    """
    b = values * mean_separation(points, box) if relative else values.copy()
    if box is not None:
        half = float(np.min(box)) / 2
        if float(b.max()) >= half:
            raise InputError(
                f"linking length {float(b.max())!r} (absolute) is not below half the "
                f"smallest box length ({half!r}): the minimum image, and the unwrapping of "
                "the groups across the faces, need b < L/2")
    return b


def check_velocities(velocities, n: int, d: int):
    """Velocities as an (n, d) array (numpy or cupy), finite.

    Raises
    ------
    InputError
        Another shape, a non-numeric dtype, NaN or inf (naming the row).
    """
    xp = array_module(velocities)
    v = velocities if xp is not np else np.asarray(velocities)
    if v.dtype.kind not in "iuf":
        raise InputError(f"velocities must be real numbers; got dtype {v.dtype}")
    if v.shape != (n, d):
        raise InputError(f"velocities must have shape (n, d) = ({n}, {d}), one row per "
                         f"point; got {tuple(v.shape)}")
    if v.size and not bool(xp.isfinite(v).all()):  # rows only when something is wrong
        bad = ~xp.isfinite(v).all(axis=1)
        if bool(bad.any()):
            raise InputError(f"velocities row {int(xp.argmax(bad))} is NaN or inf "
                             f"({int(bad.sum())} row(s))")
    return v


#: ``box_size`` for groups in open space on purpose, in a snapshot with a box
OPEN = "open"


def check_stated_box(box_size, src):
    """``box_size`` with ``"open"`` made None; refuse None for a snapshot
    that declares a periodic box (``BoxSize``).

    Groups in open space in a periodic snapshot are cut at the faces: a
    halo across a face becomes two.  That is never what the snapshot
    means, so it must be asked for by name.

    Parameters
    ----------
    box_size : None, lengths, "snapshot" or "open"
    src : PointSource or None (an in-memory array: nothing to read)

    Returns
    -------
    box_size, or None for "open"
    """
    if isinstance(box_size, str) and box_size == OPEN:
        return None
    if box_size is None and src is not None:
        from ..io.checks import BOX_SIZE_ATTR

        try:
            box = src.attribute(BOX_SIZE_ATTR)
        except InputError:
            box = None
        # a BoxSize of 0 (a non-periodic run's header) declares no box
        try:
            declared = box is not None and bool(np.size(box)) and \
                bool(np.all(np.asarray(box, float) > 0))
        except (TypeError, ValueError):  # not lengths: box_size="snapshot" says so
            declared = True
        if declared:
            raise InputError(
                f"{src.where}: the snapshot has a periodic box ({BOX_SIZE_ATTR} = {box}), "
                "but no box_size was given: its groups would be cut at the faces. Give "
                "box_size='snapshot' (--box-size snapshot) for periodic groups, or "
                "box_size='open' (--box-size open) for groups in open space")
    return box_size


def check_ids(ids, n: int):
    """Particle IDs as an (n,) integer array (numpy or cupy), as given.

    Raises
    ------
    InputError
        Another shape, or not integers.
    """
    return _one_per_point(ids, n, "ids", "iu", "integers (particle IDs)")[1]


def check_masses(masses, n: int):
    """Particle masses as an (n,) float64 array (numpy or cupy), finite and >= 0.

    Raises
    ------
    InputError
        Another shape, a non-numeric dtype, NaN, inf or < 0 (naming the row).
    """
    xp, a = _one_per_point(masses, n, "masses", "iuf", "real numbers")
    a = a.astype(xp.float64, copy=False)
    bad = ~(xp.isfinite(a) & (a >= 0))
    if a.size and bool(bad.any()):
        raise InputError(f"masses row {int(xp.argmax(bad))} is NaN, inf or negative "
                         f"({int(bad.sum())} row(s))")
    return a


def _one_per_point(values, n: int, name: str, kinds: str, meaning: str):
    """(xp, ``values`` as an (n,) array of ``xp``, as given): an (n, 1)
    column flattened; another shape, or a dtype kind not in ``kinds``,
    refused naming ``name`` and what it must be (``meaning``)."""
    xp = array_module(values)
    a = values if xp is not np else np.asarray(values)
    if a.ndim == 2 and a.shape[1:] == (1,):
        a = a.reshape(-1)
    if a.dtype.kind not in kinds:
        raise InputError(f"{name} must be {meaning}; got dtype {a.dtype}")
    if a.shape != (n,):
        raise InputError(f"{name} must have shape (n,) = ({n},), one per point; got "
                         f"{tuple(a.shape)}")
    return xp, a


def read_ids_masses(source, ids, masses, n, *, array=None, storage_options=None):
    """``ids`` and ``masses`` as arrays: names of the snapshot's arrays
    (``ParticleIDs``, ``Masses``) read here, arrays checked.

    Returns
    -------
    (ids or None, masses or None, {"ids": label, "masses": label})
    """
    from .snapshots import member_source, read_column

    labels = {}
    if isinstance(ids, str):
        src = member_source(source, ids, n, what="ids", array=array,
                            storage_options=storage_options, d=1)
        labels["ids"] = ids
        ids = check_ids(read_column(src), n)
    elif ids is not None:
        labels["ids"] = "array"
        ids = check_ids(ids, n)
    if isinstance(masses, str):
        src = member_source(source, masses, n, what="masses", array=array,
                            storage_options=storage_options, d=1)
        labels["masses"] = masses
        masses = check_masses(read_column(src), n)
    elif masses is not None:
        labels["masses"] = "array"
        masses = check_masses(masses, n)
    return ids, masses, labels
