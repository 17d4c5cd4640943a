"""Checks on the HDBSCAN* extraction's parameters and on the tree it is
given, run before any work (``InputError`` on anything unusable)."""
from __future__ import annotations

import math
from numbers import Integral, Real

import numpy as np

from ...arrays import to_host
from ...errors import InputError

#: the cluster selection methods (scikit-learn's and hdbscan's names)
METHODS = ("eom", "leaf")


def _smallest_invertible() -> np.float64:
    """The smallest float64 w > 0 whose lambda, 1 / w, is finite (about
    5.6e-309, a subnormal)."""
    w = np.float64(1.0) / np.finfo(np.float64).max
    with np.errstate(over="ignore"):
        while not np.isfinite(np.float64(1.0) / w):
            w = np.nextafter(w, np.float64(1.0))
    return w


#: weights in (0, SMALLEST_WEIGHT) have no float64 lambda
SMALLEST_WEIGHT = _smallest_invertible()


def _is_int(x) -> bool:
    return isinstance(x, (Integral, np.integer)) and not isinstance(x, (bool, np.bool_))


def check_min_cluster_size(m) -> int:
    """``min_cluster_size`` as an int >= 2."""
    if not _is_int(m) or int(m) < 2:
        raise InputError(f"min_cluster_size must be an integer >= 2, got {m!r}")
    return int(m)


def check_method(method) -> str:
    """``cluster_selection_method``, one of "eom", "leaf"."""
    if not isinstance(method, str) or method not in METHODS:
        raise InputError(f"cluster_selection_method must be 'eom' or 'leaf', got {method!r}")
    return method


def check_epsilon(eps) -> float:
    """``cluster_selection_epsilon`` as a finite float >= 0."""
    if isinstance(eps, (bool, np.bool_)) or not isinstance(eps, (Real, np.floating, np.integer)):
        raise InputError(f"cluster_selection_epsilon must be a number >= 0, got {eps!r}")
    e = float(eps)
    if not math.isfinite(e) or e < 0.0:
        raise InputError(f"cluster_selection_epsilon must be finite and >= 0, got {eps!r}")
    return e


def check_max_cluster_size(size):
    """``max_cluster_size``: None or an int >= 1."""
    if size is None:
        return None
    if not _is_int(size) or int(size) < 1:
        raise InputError(f"max_cluster_size must be None or an integer >= 1, got {size!r}")
    return int(size)


def check_allow_single_cluster(flag) -> bool:
    """``allow_single_cluster`` as a bool."""
    if not isinstance(flag, (bool, np.bool_)):
        raise InputError(f"allow_single_cluster must be True or False, got {flag!r}")
    return bool(flag)


def check_edges(source, target, weight, n):
    """The edges of a spanning tree of ``n`` points, on the host.

    Parameters
    ----------
    source, target : (n-1,) integer array-like, rows in [0, n).
    weight : (n-1,) float array-like, finite and >= 0.
    n : int >= 1

    Returns
    -------
    source, target : (n-1,) int64; weight : (n-1,) float64 or float32
        (float32 kept as is: equal weights are compared in the type the tree
        was computed in).
    """
    _check_count(n)
    return _checked(np, *(np.asarray(to_host(a)) for a in (source, target, weight)), int(n))


def check_device_edges(source, target, weight, n):
    """``check_edges`` for CuPy edges, left on the device: (cupy, source,
    target, weight) with the same checks and messages."""
    from ..order import array_module

    _check_count(n)
    xp = array_module(weight)
    if array_module(source) is not xp or array_module(target) is not xp:
        raise InputError("source, target and weight must be arrays of one kind "
                         "(all numpy or all cupy)")
    return (xp, *_checked(xp, source, target, weight, int(n)))


def _check_count(n):
    if not _is_int(n) or int(n) < 1:
        raise InputError(f"n must be an integer >= 1, got {n!r}")


def _checked(xp, s, t, w, n):
    """The checks of ``check_edges`` on arrays of ``xp``."""
    for name, a in (("source", s), ("target", t), ("weight", w)):
        if a.ndim != 1 or a.shape[0] != n - 1:
            raise InputError(f"{name} must have shape ({n - 1},) for n={n}, got {a.shape}")
    if n > 1 and (s.dtype.kind not in "iu" or t.dtype.kind not in "iu"):
        raise InputError("source and target must be integer arrays")
    if w.dtype not in (np.float32, np.float64):
        if w.dtype.kind not in "iuf":
            raise InputError(f"weight must be a float array, got {w.dtype}")
        w = w.astype(np.float64)
    s = xp.ascontiguousarray(s, dtype=np.int64)
    t = xp.ascontiguousarray(t, dtype=np.int64)
    w = xp.ascontiguousarray(w)
    if n > 1:
        if min(int(s.min()), int(t.min())) < 0 or max(int(s.max()), int(t.max())) >= n:
            raise InputError(f"edge endpoints must be rows in [0, {n})")
        if not bool(xp.isfinite(w).all()) or not bool(w.min() >= 0):
            raise InputError("edge weights must be finite and >= 0")
        if w.dtype == np.float64:  # float32 weights' lambdas, in float64, all fit
            _check_lambdas_fit(xp, w, n)
    return s, t, w


def _check_lambdas_fit(xp, w, n):
    """An InputError if a weight's lambda, 1 / w, times n overflows float64
    (0 < w < n * 5.6e-309 or so: a cloud whose distances are that small):
    the condensed tree could not hold the lambdas, or the stabilities, sums
    of lambdas over at most n points, would be infinite."""
    limit = float(n) * float(SMALLEST_WEIGHT)
    tiny = (w > 0) & (w < limit)
    if bool(tiny.any()):
        least = float(w[tiny].min())
        raise InputError(
            f"{int(tiny.sum())} edge weight(s) lie below {limit:.4g} (the smallest, "
            f"{least:.4g}): their lambda, 1 / weight, summed over the {n} points overflows "
            "float64. Multiply the points by a power of two (HDBSCAN*'s clusters, "
            "probabilities and outlier scores do not change; its lambdas scale by the "
            "inverse)")
