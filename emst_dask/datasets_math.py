"""Elementary functions that give the same bits on every machine, for the
reference clouds (``datasets``, ``datasets_cosmic``).

numpy's float64 ``power``, ``exp``, ``log``, ``log1p``, ``sin`` and ``cos``
take the fastest code the CPU allows (vector libraries on AVX-512 machines,
the C library elsewhere), and the results differ in the last bits between
machines; ``@`` goes through BLAS, whose kernels (and so whose rounding)
depend on the CPU too.  The functions here use only operations IEEE 754
rounds correctly (+, -, *, /, sqrt) and exact ones (``floor``, ``rint``,
``frexp``, ``ldexp``), one numpy ufunc at a time (so nothing is fused into
an FMA), in a fixed order: their results are bit-identical wherever numpy
runs.  They are accurate to a few units in the last place, which is all a
point cloud's statistics need; the bits are what matter.
"""
from __future__ import annotations

import math

import numpy as np

# ln 2 and pi / 2 in two pieces (Cody and Waite): the high parts have
# trailing zero bits, so k * HI is exact for the k used here
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
_PIO2_HI = 1.57079632673412561417e+00
_PIO2_LO = 6.07710050650619224932e-11
_SQRT_HALF = math.sqrt(0.5)
# Taylor coefficients, each a correctly rounded quotient of integers
_EXP = [1.0 / math.factorial(i) for i in range(18)]
_ATANH = [1.0 / (2 * i + 1) for i in range(14)]
_SIN = [(-1.0) ** i / math.factorial(2 * i + 1) for i in range(9)]
_COS = [(-1.0) ** i / math.factorial(2 * i) for i in range(10)]


def _horner(coefs, x):
    """sum(coefs[i] * x**i) by Horner's rule, one rounding per operation."""
    acc = np.full_like(x, coefs[-1])
    for c in reversed(coefs[:-1]):
        np.multiply(acc, x, out=acc)
        np.add(acc, c, out=acc)
    return acc


def log(x) -> np.ndarray:
    """Natural logarithm of positive finite x: float64 array of x's shape."""
    x = np.asarray(x, dtype=np.float64)
    m, e = np.frexp(x)  # x = m 2^e, m in [0.5, 1): exact
    low = m < _SQRT_HALF
    m = np.where(low, m * 2.0, m)  # m in [sqrt(1/2), sqrt(2))
    e = (e - low).astype(np.float64)
    f = (m - 1.0) / (m + 1.0)  # log m = 2 atanh f, |f| < 0.172
    s = f * f
    log_m = (f * 2.0) * _horner(_ATANH, s)
    return e * _LN2_HI + (log_m + e * _LN2_LO)


def exp(x) -> np.ndarray:
    """Exponential of x (|x| < 700): float64 array of x's shape."""
    x = np.asarray(x, dtype=np.float64)
    k = np.rint(x * (1.0 / _LN2_HI))
    r = (x - k * _LN2_HI) - k * _LN2_LO  # |r| <= 0.35
    return np.ldexp(_horner(_EXP, r), k.astype(np.int64))


def power(x, y) -> np.ndarray:
    """x ** y for positive finite x: float64 array (broadcast shape)."""
    return exp(np.asarray(y, dtype=np.float64) * log(x))


def cbrt(x) -> np.ndarray:
    """Cube root of positive finite x: float64 array of x's shape."""
    x = np.asarray(x, dtype=np.float64)
    y = power(x, 1.0 / 3.0)
    return y - (y * y * y - x) / (y * y * 3.0)  # one Newton step to the last bits


def _sine(x, shift):
    """sin(x + shift pi / 2) for |x| < 1e5, an integer shift."""
    x = np.asarray(x, dtype=np.float64)
    k = np.rint(x * (1.0 / _PIO2_HI))
    r = (x - k * _PIO2_HI) - k * _PIO2_LO  # |r| <= pi / 4 (and a hair)
    r2 = r * r
    s = _horner(_SIN, r2)
    np.multiply(s, r, out=s)
    c = _horner(_COS, r2)
    q = (k.astype(np.int64) + shift) & 3  # x + shift pi/2 = r + q pi/2 (mod 2 pi)
    out = np.where(q & 1, c, s)
    np.negative(out, out=out, where=(q & 2).astype(bool))
    return out


def sin(x) -> np.ndarray:
    """Sine of x (|x| < 1e5): float64 array of x's shape."""
    return _sine(x, 0)


def cos(x) -> np.ndarray:
    """Cosine of x (|x| < 1e5): float64 array of x's shape."""
    return _sine(x, 1)


def dot3(a, b) -> np.ndarray:
    """a @ b.T for a (m, 3), b (k, 3) float64, summed in a fixed order
    (no BLAS): (m, k) float64."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    out = a[:, 0:1] * b[:, 0]
    for j in range(1, a.shape[1]):
        out = out + a[:, j:j + 1] * b[:, j]
    return out


def combine(w, v) -> np.ndarray:
    """w @ v for w (m, k), v (k, d) float64, summed term by term in order
    (no BLAS): (m, d) float64."""
    w = np.asarray(w, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    out = np.zeros((w.shape[0], v.shape[1]))
    for j in range(w.shape[1]):
        out = out + w[:, j:j + 1] * v[j]
    return out
