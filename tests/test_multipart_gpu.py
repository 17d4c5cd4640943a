"""The partitioned EMST on GPU workers (dask-cuda): phase 1 and 2 on the CUDA
backend, edge sets equal to the CPU engine's one-box tree (both backends
implement the same strict order on the same arithmetic)."""
import numpy as np
import pytest

from emst_dask import emst
from emst_dask.datasets import GENERATORS
from emst_dask.kernels import cuda_available

from oracle import edge_set

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def gpu_client():
    if not cuda_available():
        pytest.skip("needs a CUDA GPU")
    from emst_dask.service import EmbeddedCluster

    with EmbeddedCluster(backend="cuda") as emb:
        assert emb.kind == "LocalCUDACluster"
        yield emb.client


@pytest.mark.parametrize("name,dim,n", [("halos", 3, 300_000), ("uniform", 2, 200_000),
                                        ("normal", 3, 100_000)])
def test_every_P_equals_one_box(gpu_client, name, dim, n):
    pts = GENERATORS[name](n, dim, 0)
    ref = emst(pts, backend="cpu")
    for P in (1, 2, 4, 8):
        tree = emst(pts, client=gpu_client, partitions=P)
        assert {b["backend"] for b in tree.report.boxes} == {"cuda"}
        assert tree.n_edges == n - 1
        assert edge_set(tree.source, tree.target) == edge_set(ref.source, ref.target)
        assert np.isclose(tree.total_weight, ref.total_weight, rtol=1e-9)


@pytest.mark.parametrize("k", [2, 5, 16])
def test_mutual_reachability(gpu_client, k):
    pts = GENERATORS["halos"](100_000, 3, 1)
    ref = emst(pts, min_samples=k, backend="cpu")
    tree = emst(pts, client=gpu_client, partitions=3, min_samples=k)
    assert edge_set(tree.source, tree.target) == edge_set(ref.source, ref.target)
    np.testing.assert_allclose(tree.core_distances, ref.core_distances, rtol=1e-6)


def test_ties_and_duplicates(gpu_client):
    rng = np.random.default_rng(5)
    lattice = rng.integers(0, 30, (60_000, 3)).astype(np.float32)
    ref = emst(lattice, backend="cpu")
    tree = emst(lattice, client=gpu_client, partitions=4)
    assert edge_set(tree.source, tree.target) == edge_set(ref.source, ref.target)
