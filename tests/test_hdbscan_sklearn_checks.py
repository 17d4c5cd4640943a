"""scikit-learn's estimator contract: ``parametrize_with_checks`` on
``emst_dask.HDBSCAN`` (every check scikit-learn runs on a clusterer), with
the checks it cannot pass by its nature declared, with the reason, in
``emst_dask.products._sklearn.EXPECTED_FAILED_CHECKS``."""
from __future__ import annotations

import pytest

pytest.importorskip("sklearn")

from sklearn.utils.estimator_checks import parametrize_with_checks  # noqa: E402

from emst_dask import HDBSCAN  # noqa: E402
from emst_dask.products._sklearn import EXPECTED_FAILED_CHECKS  # noqa: E402


@parametrize_with_checks([HDBSCAN(backend="cpu")],
                         expected_failed_checks=lambda est: EXPECTED_FAILED_CHECKS)
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


def test_what_the_expected_failures_stand_for():
    """The two declared failures use 10 features; in 1 to 8 dimensions
    their inputs work: an object array of numbers is read as float64, and
    one sample is a cloud whose one point is noise."""
    import numpy as np

    rng = np.random.default_rng(0)
    X = rng.uniform(size=(40, 8))
    ref = HDBSCAN(backend="cpu").fit(X)
    got = HDBSCAN(backend="cpu").fit(X.astype(object))
    np.testing.assert_array_equal(got.labels_, ref.labels_)
    with pytest.raises(ValueError, match="X must be numbers"):
        HDBSCAN(backend="cpu").fit(np.array([["a", "b"]] * 10, dtype=object))
    one = HDBSCAN(backend="cpu", min_samples=1).fit(X[:1])
    assert one.labels_.tolist() == [-1] and one.n_features_in_ == 8
    with pytest.raises(ValueError, match="supported dimensions are 1 to 8"):
        HDBSCAN(backend="cpu").fit(rng.uniform(size=(40, 9)))
