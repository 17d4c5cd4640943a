"""Input checks, run before any work starts.

Every message says what is wrong and where (row, column, chunk), so that a
user with a billion-row snapshot can find the bad value.
"""
from __future__ import annotations

import numpy as np

from .engine import MAX_DIM


class InputError(ValueError):
    """The point cloud or a parameter cannot be used as given."""


def check_min_samples(min_samples, n: int) -> int:
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


def check_shape_dtype(shape, dtype, where: str = "points"):
    """Check rank, columns and dtype; return the float dtype to compute in."""
    dtype = np.dtype(dtype)
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
        return dtype
    if dtype.kind in "iub":
        # integers (lattices, quantised GPS) are exact in float64 up to 2**53
        return np.dtype(np.float64)
    raise InputError(
        f"{where} has non-numeric dtype {dtype}: expected float32 or float64 "
        "(integers are converted to float64)")


def check_finite(block, row_offset: int = 0, where: str = "points"):
    """Raise InputError naming the count and first row of NaN/inf values.

    ``block`` is a numpy or cupy array; ``row_offset`` is the global row of its
    first row (for chunked input).
    """
    xp = np if isinstance(block, np.ndarray) else _array_module(block)
    bad_rows = ~xp.isfinite(block).all(axis=1)
    count = int(bad_rows.sum())
    if count:
        first = int(xp.argmax(bad_rows)) + row_offset
        raise InputError(
            f"{where} contains {count} row(s) with NaN or inf; first bad row is "
            f"{first}")


def _array_module(a):
    try:
        import cupy

        return cupy.get_array_module(a)
    except ImportError:  # pragma: no cover
        return np


def as_points(points):
    """Validate an in-memory (n, d) array and return it as C-contiguous float.

    numpy and cupy inputs stay in their own array module.
    """
    mod = type(points).__module__
    if mod.startswith("cupy"):
        import cupy as xp
    else:
        xp = np
        if not isinstance(points, np.ndarray):
            try:
                points = np.asarray(points)
            except Exception as exc:  # ragged lists and the like
                raise InputError(f"points cannot be read as an array: {exc}") from exc
    if points.dtype == object:
        raise InputError("points has dtype object: expected float32 or float64")
    dt = check_shape_dtype(points.shape, points.dtype)
    points = xp.ascontiguousarray(points, dtype=dt)
    if points.size:
        check_finite(points)
    return points
