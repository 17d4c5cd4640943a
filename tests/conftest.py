"""Shared fixtures: the backends every exactness test runs on.

Tests marked ``gpu`` (and the ``cuda`` parameter of the ``backend`` fixture)
are skipped when ``emst_dask.kernels.cuda_available()`` is False.
"""
from __future__ import annotations

import os
import sys

# Test processes share the cores (pytest -n, and the Dask workers tests
# start), each with its numba pool: OpenMP threads that spin while they
# wait for work take the cores from the other processes' threads (the
# partitioned tests, many short parallel calls, ran 12 times slower on two
# cores).  Set before numba launches its pool; inherited by child processes.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))  # tests/oracle.py as ``oracle``

from emst_dask.kernels import cuda_available  # noqa: E402

# hypothesis: 40 examples per property in CI (a few seconds each); set
# HYPOTHESIS_PROFILE=thorough for a long bug hunt
_common = dict(deadline=None, print_blob=True,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("default", max_examples=40, **_common)
settings.register_profile("thorough", max_examples=3000, **_common)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

#: every backend the exactness suite runs on; "cuda" only where a GPU is
BACKENDS = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


def pytest_collection_modifyitems(config, items):
    if cuda_available():
        # one test process runs every GPU test (``--dist loadgroup``, the
        # default in pyproject.toml): test processes sharing the device,
        # each with its memory pool and its Dask workers, run it out of memory
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(pytest.mark.xdist_group("gpu"))
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (emst_dask.kernels.cuda_available() is False)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session", params=BACKENDS)
def backend(request):
    """The backend name, "cpu" or "cuda"; session-scoped so hypothesis accepts it."""
    return request.param


@pytest.fixture
def fake_cupy():
    """The CuPy stand-in (``cupy_emu``) installed for one test: the device
    paths run on the CPU, their kernels built with g++ (skipped without a
    C++ compiler)."""
    from cupy_emu import emulated_cupy, installed

    fake = emulated_cupy()
    if fake is None:
        pytest.skip("no C++ compiler for the emulated CUDA kernels")
    with installed(fake):
        yield fake


@pytest.fixture(params=["emulated", pytest.param("cupy", marks=pytest.mark.gpu)])
def device_xp(request):
    """The device module a device path runs on: the emulated CuPy on any
    machine, and CuPy itself on a GPU (``gpu``-marked, skipped without one)."""
    if request.param == "emulated":
        yield request.getfixturevalue("fake_cupy")
        return
    import cupy  # the gpu marker skips this parameter where there is no GPU

    yield cupy

