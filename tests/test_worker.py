"""GPU worker set-up: the reserved CuPy pool (``emst_dask.distributed.worker``)."""
import numpy as np
import pytest

from emst_dask.kernels import cuda_available
from emst_dask.distributed.worker import parse_pool_size, reserve_device_pool


def test_parse_pool_size():
    free = 10 * 2**30
    assert parse_pool_size(None, free) == 0
    assert parse_pool_size("none", free) == 0
    assert parse_pool_size("0.5", free) == 5 * 2**30
    assert parse_pool_size(0.25, free) == free // 4
    assert parse_pool_size(2**30, free) == 2**30
    assert parse_pool_size(100 * 2**30, free) == free  # never more than is free
    for bad in ("lots", -1, "-0.5"):
        with pytest.raises(ValueError, match="EMST_DEVICE_POOL"):
            parse_pool_size(bad, free)


def test_reserve_without_gpu_is_a_no_op(monkeypatch):
    if cuda_available():
        pytest.skip("a GPU is visible")
    assert reserve_device_pool(0.5) == 0


@pytest.mark.gpu
def test_reserved_pool_serves_a_job_without_growing():
    """After the reservation, a 2M-point EMST allocates only from the pool,
    and its tree equals the CPU engine's."""
    if not cuda_available():
        pytest.skip("needs a CUDA GPU")
    import cupy

    from emst_dask import emst
    from emst_dask.datasets import halos

    pool = cupy.get_default_memory_pool()
    got = reserve_device_pool(2 * 2**30)
    assert got >= 2 * 2**30 and pool.used_bytes() < got
    pts = halos(2_000_000, 3, 0)
    tree = emst(pts, client=False, backend="cuda")
    assert pool.total_bytes() == got  # split from the reserved block, not grown
    ref = emst(pts, client=False, backend="cpu")
    assert tree.n_edges == pts.shape[0] - 1
    np.testing.assert_allclose(tree.total_weight, ref.total_weight, rtol=1e-9)
