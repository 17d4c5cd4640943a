"""Exact power-of-two scaling: squared distances without overflow or underflow.

The engine works on squared distances in the input's own precision.
Multiplying every coordinate by ``2**e`` is exact in binary floating point,
so distances computed on the scaled cloud and scaled back are bit-identical
to unscaled ones wherever neither overflows nor underflows.  This module
picks ``e`` from one pass over the points (per-axis bounds and the smallest
nonzero magnitude); a float32 cloud for which no ``e`` works is computed in
float64, and a float64 one is refused before any work.

Why the smallest magnitude: every float of magnitude at least m is an
integer multiple of ulp(m), so two distinct coordinates of a cloud whose
smallest nonzero magnitude is m differ by at least ulp(m), and the computed
difference (monotone rounding) too.  With ``(ulp(m) * 2**e)**2`` in the
normal range, no squared distance between distinct points is zero or
subnormal; with ``max|x| * 2**e`` far enough below the square root of the
largest float, no sum of d <= 8 squared differences overflows.
"""
from __future__ import annotations

import math

import numpy as np

from ..arrays import to_host as _to_host
from ..errors import InputError


def _log2_ulp(m: float, dtype) -> int:
    """log2 of the spacing of ``dtype`` floats at magnitude m (> 0)."""
    finfo = np.finfo(dtype)
    spacing = float(np.spacing(np.asarray(m, dtype)))
    if spacing <= 0 or not math.isfinite(spacing):  # pragma: no cover - defensive
        spacing = float(finfo.smallest_subnormal)
    return math.frexp(spacing)[1] - 1  # spacing is a power of two


def exact_scale(lo: np.ndarray, hi: np.ndarray, smallest: float, dtype,
                what: str = "the coordinates") -> int:
    """Exponent ``e`` such that the cloud times ``2**e`` is safe to square.

    Parameters
    ----------
    lo, hi : (d,) float64
        Per-axis minimum and maximum of the points.
    smallest : float
        The smallest nonzero magnitude of any coordinate (+inf: all zero).
    dtype : float32 or float64
        The precision of the computation.
    what : str
        What ``lo`` and ``hi`` bound, for the error.

    Returns
    -------
    int
        0 when the cloud is safe as it is (no pass over the points needed),
        else the exponent closest to 0 that makes it safe.

    Raises
    ------
    InputError
        When no exponent keeps both the largest squared distance finite and
        the smallest nonzero one normal: the cloud's coordinates span more
        magnitudes than ``dtype`` can square.
    """
    dtype = np.dtype(dtype)
    if lo.size == 0 or not math.isfinite(smallest):
        return 0
    big = float(max(np.max(np.abs(lo)), np.max(np.abs(hi))))
    finfo = np.finfo(dtype)
    # big * 2**e < 2**top leaves room for d <= 8 squared differences of up
    # to 2 * big each below the largest finite value
    top = math.frexp(math.sqrt(float(finfo.max)))[1] - 3
    # (ulp(smallest) * 2**e)**2 >= the smallest normal
    bottom = -((-math.frexp(float(finfo.tiny))[1] + 1) // 2)   # ceil(log2(tiny) / 2)
    e_max = top - math.frexp(big)[1]
    e_min = bottom - _log2_ulp(smallest, dtype)
    if e_min <= 0 <= e_max:
        return 0
    if e_min > e_max:
        raise InputError(
            f"{what} span magnitudes from {smallest:.3g} to {big:.3g}: no "
            f"exact {dtype} computation of their squared distances exists (the "
            f"smallest would underflow or the largest overflow the {dtype} range); "
            + ("convert the points to float64, or " if dtype == np.float32 else "")
            + "move the cloud so that its coordinates do not mix values near 0 with "
            "values that far from it")
    return e_min if e_min > 0 else e_max


def bounds(K, points):
    """``K.bounds(points)`` for n >= 1, else zeros and +inf."""
    if points.shape[0] == 0:
        d = points.shape[1]
        return np.zeros(d), np.zeros(d), math.inf
    return K.bounds(points)


def exact_frame(lo: np.ndarray, hi: np.ndarray, smallest: float, dtype,
                what: str = "the coordinates"):
    """(compute dtype, exponent): ``exact_scale`` in ``dtype``, or, for a
    float32 cloud whose squared distances float32 cannot all hold, in
    float64, which holds every squared distance of float32 coordinates
    (the weights are rounded back to float32 at the end)."""
    dtype = np.dtype(dtype)
    try:
        return dtype, exact_scale(lo, hi, smallest, dtype, what)
    except InputError:
        if dtype != np.float32:
            raise
    return np.dtype(np.float64), exact_scale(lo, hi, smallest, np.float64, what)


def float32_holds(period) -> bool:
    """Whether every length of ``period`` (d,) is a float32: a float32
    cloud in a box with one that is not is computed in float64."""
    period = np.asarray(period, np.float64)
    return bool(np.all(period.astype(np.float32).astype(np.float64) == period))


def periodic_frame(lo, hi, smallest, dtype, period):
    """``exact_frame`` for a periodic box of lengths ``period`` (d,) float64.

    The minimum image adds the way round, ``(L - a) + b`` for coordinates
    a >= b, to the differences: it lies below L, which joins the magnitudes
    to keep finite, and where it is shorter than ``a - b`` (a >= L/2, so
    ``L - a`` is exact) it is at least half the spacing at the smallest
    magnitude, which the underflow bound takes in.  A float32
    cloud whose box length float32 cannot hold exactly is computed in
    float64.
    """
    dtype = np.dtype(dtype)
    top = np.maximum(hi, period)
    half = smallest / 2 if math.isfinite(smallest) else smallest
    if dtype == np.float32 and not float32_holds(period):
        dtype = np.dtype(np.float64)
    return exact_frame(lo, top, half, dtype, "the coordinates and the box lengths")


def scale_exactly(K, points, period=None):
    """Bounds, ``exact_frame`` and the scaling, once per cloud.

    Parameters
    ----------
    K : kernel set
    points : (n, d) float32/float64 array of ``K.xp``
    period : (d,) float64, optional
        The box lengths of a periodic box (every coordinate in [0, L)).

    Returns
    -------
    (scaled points in the compute dtype, exponent, (lo, hi) of the scaled
    points as float64 (d,), the scaled period (d,) float64 or None).
    Power-of-two scaling is exact, so the scaled bounds need no second pass.
    """
    lo, hi, smallest = bounds(K, points)
    if period is None:
        dtype, exponent = exact_frame(lo, hi, smallest, points.dtype)
    else:
        period = np.asarray(period, np.float64)
        dtype, exponent = periodic_frame(lo, hi, smallest, points.dtype, period)
        period = np.ldexp(period, exponent)
    # device arithmetic may flush subnormal inputs: with one, convert on the host
    normal = smallest >= float(np.finfo(points.dtype).tiny)
    if dtype != points.dtype:
        points = points.astype(dtype) if normal else \
            K.to_device(np.asarray(K.to_host(points)).astype(dtype))
        normal = smallest >= float(np.finfo(dtype).tiny)
    if exponent:
        points = ldexp(K, points, exponent, points.dtype, on_device=normal)
        lo, hi = np.ldexp(lo, exponent), np.ldexp(hi, exponent)
    return points, exponent, (lo, hi), period


def ldexp(K, values, exponent: int, dtype, *, on_device: bool = False):
    """``values * 2**exponent`` (exact) in ``dtype``, on the kernel set's device.

    By default on the host: device arithmetic may flush subnormal inputs or
    results to zero.  ``on_device=True`` when neither can occur (every
    nonzero input and result normal), which ``exact_scale`` guarantees for
    the coordinates of a cloud whose smallest magnitude is normal.
    """
    if not exponent:
        return K.xp.asarray(values).astype(dtype, copy=False)
    if on_device:
        return K.xp.ldexp(K.xp.asarray(values), exponent).astype(dtype, copy=False)
    v = np.ldexp(np.asarray(K.to_host(values), np.float64), exponent).astype(dtype)
    return K.to_device(v)


def unscale_weights(K, w2, exponent: int, dtype):
    """(m,) weights in input units from (m,) squared weights in the scaled frame."""
    xp = K.xp
    w = xp.sqrt(w2)
    if exponent or w.dtype != np.dtype(dtype):
        # on the host: device arithmetic may flush subnormal results to zero
        w = K.to_device(_unscale(np.asarray(K.to_host(w)), exponent, dtype))
    return w.astype(dtype, copy=False)


def weights_from_squares(w2: np.ndarray, exponent: int, dtype) -> np.ndarray:
    """``unscale_weights`` of a host array: (m,) ``dtype`` weights in input
    units from (m,) squared weights (the compute dtype) in the frame scaled
    by ``2**exponent``, rounded the way the one-box engine rounds them."""
    w = np.sqrt(w2)
    if exponent or w.dtype != np.dtype(dtype):
        w = _unscale(w, exponent, dtype)
    return w.astype(dtype, copy=False)


def _unscale(w: np.ndarray, exponent: int, dtype) -> np.ndarray:
    with np.errstate(over="ignore"):  # inf beyond the range: the caller refuses it
        return np.ldexp(w.astype(np.float64), -exponent).astype(dtype)


# --------------------------------------------------------------------------
# the same conversions on the device, where they give the host's bits
# --------------------------------------------------------------------------
def bit_range(xp, values):
    """(smallest nonzero, largest) of (m,) float ``values`` >= 0 of ``xp``
    as Python floats, or (None, None) when every value is zero; from their
    bits (integer reductions: no flush of subnormals touches them)."""
    dt = np.dtype(values.dtype)
    u = np.dtype(f"u{dt.itemsize}")
    bits = xp.ascontiguousarray(values).view(u)
    if bits.shape[0] == 0:
        return None, None
    hi = int(bits.max())
    if hi == 0:
        return None, None
    lo = int(xp.where(bits == 0, u.type(np.iinfo(u).max), bits).min())
    pair = np.array([lo, hi], u).view(dt)
    return float(pair[0]), float(pair[1])


def stays_normal(lo, hi, src, exponent: int, dtype) -> bool:
    """Whether values in [lo, hi] (the nonzero ones; ``bit_range``) of
    dtype ``src``, widened to float64, times ``2**exponent`` and cast to
    ``dtype`` are normal and finite at every step.  Then device arithmetic,
    which may flush subnormal operands or results to zero, gives the bits
    the host gives (the products by powers of two are exact, the cast is
    rounded to nearest in both places)."""
    if lo is None:
        return True  # zeros stay zeros
    if not (math.isfinite(hi) and lo >= float(np.finfo(src).tiny)):
        return False
    out = np.finfo(dtype)
    low = int(np.frexp(lo)[1]) - 1 + exponent   # lo * 2**exponent >= 2**low
    high = int(np.frexp(hi)[1]) + exponent      # hi * 2**exponent < 2**high
    return low >= out.minexp and high <= out.maxexp - 1


def rescale_exact(xp, values, exponent: int, dtype, to_host=_to_host):
    """``ldexp(values as float64, exponent)`` cast to ``dtype``, the host's
    bits: on ``xp``'s device when ``stays_normal`` shows it gives them (two
    small reductions decide), else on the host (a numpy array back).

    Parameters
    ----------
    xp : numpy or cupy
    values : (m,) float array of ``xp``, >= 0
    exponent : int
    dtype : float32 or float64
    to_host : callable copying a device array to the host

    Returns
    -------
    (m,) ``dtype`` array of ``xp`` (numpy where the host converted)
    """
    dtype = np.dtype(dtype)
    if not exponent and values.dtype == dtype:
        return values  # no arithmetic
    if xp is not np and stays_normal(*bit_range(xp, values), values.dtype, exponent, dtype):
        return xp.ldexp(values.astype(xp.float64), exponent).astype(dtype, copy=False)
    v = np.asarray(to_host(values)).astype(np.float64)
    with np.errstate(over="ignore"):  # inf beyond the range: the caller refuses it
        return np.ldexp(v, exponent).astype(dtype)


def weights_exact(xp, w2, exponent: int, dtype, to_host=_to_host):
    """``weights_from_squares`` of an array of ``xp``, the host's bits: on
    the device when every nonzero squared weight is normal (a square root
    of a normal value is normal and rounded to nearest) and the rescaling
    stays normal (``rescale_exact``); else on the host (a numpy array back).

    Parameters
    ----------
    xp : numpy or cupy
    w2 : (m,) float array of ``xp``, >= 0, in the frame scaled by
        ``2**exponent``
    exponent : int
    dtype : float32 or float64, the weights' dtype
    to_host : callable copying a device array to the host

    Returns
    -------
    (m,) ``dtype`` weights in input units, of ``xp`` (numpy where the host
    converted)
    """
    if xp is np:
        return weights_from_squares(w2, exponent, dtype)
    lo, hi = bit_range(xp, w2)
    if stays_normal(lo, hi, w2.dtype, 0, w2.dtype):
        return rescale_exact(xp, xp.sqrt(w2), -exponent, dtype, to_host)
    return weights_from_squares(np.asarray(to_host(w2)), exponent, dtype)
