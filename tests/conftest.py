"""Shared fixtures: the backends every exactness test runs on.

Tests marked ``gpu`` (and the ``cuda`` parameter of the ``backend`` fixture)
are skipped when ``emst_dask.kernels.cuda_available()`` is False.
"""
from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))  # tests/oracle.py as ``oracle``

from emst_dask.kernels import cuda_available  # noqa: E402

#: every backend the exactness suite runs on; "cuda" only where a GPU is
BACKENDS = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


def pytest_collection_modifyitems(config, items):
    if cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (emst_dask.kernels.cuda_available() is False)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session", params=BACKENDS)
def backend(request):
    """The backend name, "cpu" or "cuda"; session-scoped so hypothesis accepts it."""
    return request.param
