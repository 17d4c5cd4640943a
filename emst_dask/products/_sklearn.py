"""scikit-learn's side of ``emst_dask.HDBSCAN``: its input checks, its
parameters' checks, and its tags.

scikit-learn is not needed to fit: the checks here raise the errors (all
``InputError``, a ``ValueError``; ``TypeError`` for sparse input) with the
wording scikit-learn's own estimators use, and ``__sklearn_tags__`` imports
scikit-learn only when scikit-learn asks for the tags.
"""
from __future__ import annotations

import numbers

import numpy as np

from ..errors import InputError
from ..io.checks import MAX_DIM, check_unmasked

#: metrics a Euclidean tree answers (scikit-learn's and scipy's spellings)
EUCLIDEAN = ("euclidean", "l2", "minkowski")
ALGORITHMS = ("auto", "brute", "kd_tree", "ball_tree")
CENTERS = (None, "centroid", "medoid", "both")


def _is_int(v) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def check_sklearn_params(metric, metric_params, alpha, algorithm, leaf_size, n_jobs,
                         store_centers, copy, prediction_data) -> float:
    """Check the parameters scikit-learn and hdbscan add to the clustering
    ones; return ``alpha`` as a float.

    Raises
    ------
    InputError
        Naming the parameter and the value.
    """
    if metric == "precomputed":
        raise InputError("metric='precomputed' is not supported: HDBSCAN here computes "
                         "the exact Euclidean tree of the points; only Euclidean "
                         "distances are supported (give the points, metric='euclidean')")
    params = metric_params or {}
    if not isinstance(params, dict):
        raise InputError(f"metric_params must be None or a dict, got {metric_params!r}")
    if metric == "minkowski" and params.get("p", 2) != 2:
        raise InputError(f"metric='minkowski' with p={params['p']!r}: only Euclidean "
                         "distances are supported (p=2)")
    if not isinstance(metric, str) or metric not in EUCLIDEAN:
        raise InputError(f"metric={metric!r} is not supported: only Euclidean distances "
                         "are supported (metric='euclidean')")
    extra = set(params) - ({"p"} if metric == "minkowski" else set())
    if extra:
        raise InputError(f"metric_params {sorted(extra)} do not apply to Euclidean "
                         "distances: give metric_params=None")
    if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real) \
            or not np.isfinite(alpha) or alpha <= 0:
        raise InputError(f"alpha must be a finite number > 0, got {alpha!r}")
    if algorithm not in ALGORITHMS:
        raise InputError(f"algorithm must be one of {ALGORITHMS}, got {algorithm!r}")
    if not _is_int(leaf_size) or leaf_size < 1:
        raise InputError(f"leaf_size must be an integer >= 1, got {leaf_size!r}")
    if n_jobs is not None and not _is_int(n_jobs):
        raise InputError(f"n_jobs must be None or an integer, got {n_jobs!r}")
    if store_centers not in CENTERS:
        raise InputError(f"store_centers must be one of {CENTERS}, got {store_centers!r}")
    for name, v in (("copy", copy), ("prediction_data", prediction_data)):
        if not isinstance(v, (bool, np.bool_)):
            raise InputError(f"{name} must be True or False, got {v!r}")
    return float(alpha)


def _is_sparse(X) -> bool:
    mod = type(X).__module__ or ""
    return mod.startswith("scipy.sparse") or hasattr(X, "tocsr")


def validate_points(X, estimator: str = "HDBSCAN"):
    """An in-memory host ``X`` as scikit-learn checks it; return the points
    (float32/float64, C-contiguous; others are converted to float64) and the
    feature names (a pandas DataFrame's string columns, else None).

    Raises
    ------
    TypeError
        Sparse input (the tree needs the points' coordinates).
    InputError
        Complex, non-numeric, non-finite or masked input, or a shape other than (n, d)
        with n >= 1 and 1 <= d <= MAX_DIM, before any work.
    """
    names = None
    if _is_sparse(X):
        raise TypeError(f"{estimator} does not accept sparse input: the exact Euclidean "
                        "tree needs dense points; convert with X.toarray()")
    columns = getattr(X, "columns", None)
    if columns is not None and hasattr(X, "to_numpy"):  # a pandas DataFrame
        cols = np.asarray(list(columns), dtype=object)
        if len(cols) and all(isinstance(c, str) for c in cols):
            names = cols
        X = X.to_numpy()
    check_unmasked(X, "points")  # np.asarray would drop the mask
    try:
        arr = np.asarray(X)
    except Exception as exc:  # ragged lists and the like
        raise InputError(f"X cannot be read as an array: {exc}") from exc
    if np.iscomplexobj(arr):
        raise InputError("Complex data not supported: X must be real")
    if arr.dtype == object or arr.dtype.kind in "USV":
        try:
            arr = arr.astype(np.float64)
        except (TypeError, ValueError) as exc:
            raise InputError(f"X must be numbers: {exc}") from exc
    if arr.ndim != 2:
        raise InputError(f"Expected 2D array, got {arr.ndim}D array instead: X must be "
                         "(n_samples, n_features); reshape 1-D data with "
                         "X.reshape(-1, 1) (one feature) or X.reshape(1, -1) (one sample)")
    n, d = arr.shape
    if d == 0:
        raise InputError(f"0 feature(s) (shape={arr.shape}) while a minimum of 1 is "
                         "required.")
    if n == 0:
        raise InputError(f"0 sample(s) (shape={arr.shape}) while a minimum of 1 is "
                         "required: HDBSCAN* needs at least one point")
    if d > MAX_DIM:
        raise InputError(f"X has {d} features: supported dimensions are 1 to {MAX_DIM}")
    if arr.dtype not in (np.float32, np.float64):
        arr = arr.astype(np.float64)
    if not np.isfinite(arr).all():
        what = "NaN" if np.isnan(arr).any() else "infinity"
        raise InputError(f"Input X contains {what}: every coordinate must be finite")
    return np.ascontiguousarray(arr), names


def sklearn_tags(estimator):
    """scikit-learn's ``Tags`` of the estimator: a clusterer of dense,
    finite, real input, y not used."""
    from sklearn.utils import ClassifierTags, InputTags, RegressorTags, Tags, TargetTags  # noqa: F401

    return Tags(estimator_type="clusterer", target_tags=TargetTags(required=False),
                transformer_tags=None, classifier_tags=None, regressor_tags=None,
                input_tags=InputTags(allow_nan=False, sparse=False, two_d_array=True),
                non_deterministic=False, requires_fit=True)


#: checks of ``sklearn.utils.estimator_checks`` this estimator cannot pass, and why
EXPECTED_FAILED_CHECKS = {
    "check_dtype_object": (
        "its data has 10 features; the exact tree is computed in 1 to 8 dimensions "
        "(object arrays of numbers are accepted: tests/test_hdbscan_sklearn_checks.py)"),
    "check_fit2d_1sample": (
        "its data has 10 features (1 to 8 here); one sample is a valid cloud here: "
        "its one point is noise (tests/test_hdbscan_sklearn_checks.py)"),
}
