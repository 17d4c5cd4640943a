"""Checks on points and parameters, run before any work starts.

Every message says what is wrong and where (row, chunk, file), so that a
user with a billion-row snapshot can find the bad value.
"""
from __future__ import annotations

import numpy as np

from ..arrays import array_module
from ..engine.boruvka import MAX_DIM
from ..errors import InputError

#: integers up to this magnitude are exact in float64
EXACT_INTEGER = 2**53


def check_min_samples(min_samples, n: int) -> int:
    """``min_samples`` as an int in [1, n] (n = 0: any k >= 1).

    Parameters
    ----------
    min_samples : int
        k_pts of HDBSCAN*, counting the point itself.
    n : int
        Number of points (0 when not known yet).

    Returns
    -------
    int
    """
    if isinstance(min_samples, bool) or not isinstance(min_samples, (int, np.integer)):
        raise InputError(f"min_samples must be an integer >= 1, got {min_samples!r}")
    k = int(min_samples)
    if k < 1:
        raise InputError(f"min_samples must be >= 1, got {k}")
    if n > 0 and k > n:
        raise InputError(
            f"min_samples={k} is larger than the number of points ({n}); "
            "the core distance counts the point itself, so at most n is allowed")
    return k


def check_backend(backend) -> str:
    """``backend`` if it is one of "auto", "cpu", "cuda"."""
    if backend not in ("auto", "cpu", "cuda"):
        raise InputError(f"unknown backend {backend!r}: expected 'auto', 'cpu' or 'cuda'")
    return backend


def check_shape_dtype(shape, dtype, where: str = "points") -> np.dtype:
    """Check rank, columns and dtype; return the float dtype to compute in.

    Parameters
    ----------
    shape : tuple
    dtype : numpy dtype as stored (any byte order)
    where : str
        What messages call the array.

    Returns
    -------
    numpy.dtype
        float32 or float64 in native byte order.  Integers and booleans are
        computed in float64 (exact up to 2**53: ``check_exact_integers``
        checks the values of 64-bit integer input as it is read).
    """
    try:
        dtype = np.dtype(dtype)
    except TypeError:
        raise InputError(f"{where} has dtype {dtype}: expected float32 or float64") from None
    if len(shape) != 2:
        raise InputError(
            f"{where} must be a 2-D array of shape (n, d), got {len(shape)}-D "
            f"shape {tuple(shape)}")
    d = shape[1]
    if d == 0:
        raise InputError(f"{where} has zero columns: need 1 to {MAX_DIM} coordinates")
    if d > MAX_DIM:
        raise InputError(
            f"{where} has {d} columns: supported dimensions are 1 to {MAX_DIM} "
            "(64-bit Morton codes leave too few bits per axis beyond that)")
    if dtype.kind == "f":
        if dtype.itemsize < 4:
            return np.dtype(np.float32)
        if dtype.itemsize > 8:
            raise InputError(f"{where} has dtype {dtype}: use float32 or float64")
        return np.dtype(np.float32 if dtype.itemsize == 4 else np.float64)
    if dtype.kind in "iub":
        return np.dtype(np.float64)
    raise InputError(
        f"{where} has non-numeric dtype {dtype}: expected float32 or float64 "
        "(integers are converted to float64)")


def needs_integer_check(dtype) -> bool:
    """True for integer dtypes whose values may exceed 2**53 (64-bit)."""
    dtype = np.dtype(dtype)
    return dtype.kind in "iu" and dtype.itemsize >= 8


def check_exact_integers(block, row_offset: int = 0, where: str = "points"):
    """Refuse 64-bit integers that float64 cannot hold exactly.

    Parameters
    ----------
    block : (m, d) integer numpy array, as read
    row_offset : int
        The global row of the block's first row.
    where : str
    """
    if not needs_integer_check(block.dtype) or block.size == 0:
        return
    big = (block > EXACT_INTEGER).any(axis=1)
    if block.dtype.kind == "i":
        big |= (block < -EXACT_INTEGER).any(axis=1)
    if big.any():
        first = int(np.argmax(big))
        raise InputError(
            f"{where} has integer coordinates beyond 2**53 = {EXACT_INTEGER}, which "
            f"float64 cannot hold exactly ({int(big.sum())} row(s); first bad row is "
            f"{row_offset + first}: {block[first].tolist()}); subtract an offset first "
            "or give float coordinates")


def check_finite(block, row_offset: int = 0, where: str = "points", hint: str = ""):
    """Raise InputError naming the count and first row of NaN/inf values.

    Parameters
    ----------
    block : (m, d) numpy or cupy float array
    row_offset : int
        The global row of its first row (for chunked input).
    where : str
    hint : str
        Appended to the message (a stored chunk: "it may be corrupt").
    """
    xp = array_module(block)
    bad_rows = ~xp.isfinite(block).all(axis=1)
    count = int(bad_rows.sum())
    if count:
        first = int(xp.argmax(bad_rows)) + row_offset
        raise InputError(
            f"{where} contains {count} row(s) with NaN or inf; first bad row is "
            f"{first}{hint}")


def check_unmasked(data, where: str, row_offset: int = 0):
    """Refuse a numpy masked array with masked entries: the mask would be
    dropped and the values under it taken as coordinates (and bytes, which
    would be one 0-d array: a path must be a str)."""
    if isinstance(data, (bytes, bytearray)):
        raise InputError(f"{where} is {type(data).__name__}: give a path as a str "
                         "(os.fsdecode) or the points as an (n, d) array")
    if not isinstance(data, np.ma.MaskedArray):
        return
    mask = np.ma.getmaskarray(data)
    if mask.any():
        rows = mask.reshape(mask.shape[0], -1).any(axis=1) if mask.ndim else mask
        raise InputError(f"{where} is a masked array with {int(np.count_nonzero(rows))} "
                         f"masked row(s) (first: row {row_offset + int(np.argmax(rows))}); "
                         "their values would be taken as coordinates: drop those rows "
                         "(X[~X.mask.any(axis=1)]) or fill them first")


def as_points(points):
    """Validate an in-memory (n, d) array; return it C-contiguous, native float.

    Parameters
    ----------
    points : array-like (numpy, cupy, nested lists)

    Returns
    -------
    (n, d) float32 or float64 numpy or cupy array (its own array module),
    finite, native byte order.
    """
    mod = type(points).__module__
    if mod.startswith("cupy"):
        import cupy as xp
    else:
        xp = np
        check_unmasked(points, "points")
        if not isinstance(points, np.ndarray):
            try:
                points = np.asarray(points)
            except Exception as exc:  # ragged lists and the like
                raise InputError(f"points cannot be read as an array: {exc}") from exc
    if points.dtype == object:
        raise InputError("points has dtype object: expected float32 or float64")
    dt = check_shape_dtype(points.shape, points.dtype)
    if xp is np:
        check_exact_integers(points)
    elif needs_integer_check(points.dtype):
        check_exact_integers(points.get())
    points = xp.ascontiguousarray(points, dtype=dt)
    if points.size:
        check_finite(points)
    return points


def check_box_size(box_size, d: int):
    """A periodic box's lengths as (d,) float64, or None for open space.

    Parameters
    ----------
    box_size : None, a real number (a cube), or d real numbers
        Each finite and > 0.
    d : int
        Dimension of the points.

    Returns
    -------
    (d,) float64 numpy array or None
    """
    if box_size is None:
        return None
    try:
        a = np.asarray(box_size)
    except (TypeError, ValueError):
        a = np.asarray(None)
    if a.dtype.kind not in "iuf" or a.ndim > 1 or a.size == 0:
        raise InputError(f"box_size must be a length > 0 or {d} lengths (one per axis); "
                         f"got {box_size!r}")
    a = a.astype(np.float64).reshape(-1)
    if a.size == 1:
        a = np.repeat(a, d)
    if a.size != d:
        raise InputError(f"box_size has {a.size} lengths for points of {d} dimensions: "
                         "give one length, or one per axis")
    if not (np.isfinite(a).all() and (a > 0).all()):
        raise InputError(f"box_size lengths must be finite and > 0; got {a.tolist()}")
    return a


def check_in_box(block, box_size, row_offset: int = 0, where: str = "points"):
    """Refuse coordinates outside [0, L) of a periodic box, naming the first row.

    Parameters
    ----------
    block : (m, d) float numpy or cupy array
    box_size : (d,) float64 numpy array, or None (nothing to check)
    row_offset : int
        The global row of the block's first row.
    where : str
    """
    if box_size is None or block.size == 0:
        return
    xp = array_module(block)
    L = xp.asarray(box_size)
    # compared in float64: a float32 coordinate equal to L after rounding is out
    out = (block < 0) | (block.astype(np.float64, copy=False) >= L)
    bad = out.any(axis=1)
    count = int(bad.sum())
    if count:
        first = int(xp.argmax(bad))
        axis = int(xp.argmax(out[first]))
        row = [float(v) for v in (block[first].get() if xp is not np else block[first])]
        raise InputError(
            f"{where} has {count} row(s) outside the periodic box [0, L) with L = "
            f"{box_size.tolist()}; first bad row is {row_offset + first}: {row} "
            f"(coordinate {axis} is not in [0, {float(box_size[axis])!r})); wrap the "
            "coordinates into the box first, e.g. np.mod(x, L)")


#: the attribute of a snapshot that ``box_size="snapshot"`` reads
BOX_SIZE_ATTR = "BoxSize"


def source_box_size(box_size, source):
    """``check_box_size`` for a point source; "snapshot" reads the source's
    ``BoxSize`` attribute (of a Zarr snapshot's array or group or its
    ``Header`` group; of an HDF5 snapshot's ``Header``), an error if it has
    none.

    Parameters
    ----------
    box_size : None, float, (d,) floats or "snapshot"
    source : PointSource

    Returns
    -------
    (d,) float64 numpy array or None
    """
    if isinstance(box_size, str):
        if box_size != "snapshot":
            raise InputError(f"box_size must be lengths, 'snapshot' or None; got {box_size!r}")
        value = source.attribute(BOX_SIZE_ATTR)
        if value is None:
            raise InputError(f"{source.where}: has no {BOX_SIZE_ATTR} attribute (nor a "
                             f"Header group with one), so box_size='snapshot' has no box "
                             "to take; give the lengths")
        return check_box_size(value, source.d)
    return check_box_size(box_size, source.d)
