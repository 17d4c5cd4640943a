"""The GPU data path: snapshots decoded by many threads and staged through
pinned buffers, compact edge stores copied off the device through pinned
buffers, the total weight reduced on the device, CuPy blocks persisted on
a worker staged by a copy on the device."""
from __future__ import annotations

import numpy as np
import pytest

import emst_dask
from emst_dask.io import open_edges, write_edges
from emst_dask.io.staging import stage
from emst_dask.io import resolve_source

from oracle import check_spanning_tree

pytestmark = pytest.mark.gpu


def _cloud(n, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.random((n, 3)).astype(np.float32)
    x[: n // 5] = np.round(x[: n // 5] * 16) / 16  # ties and duplicates
    return x


def test_snapshot_staged_on_the_device_equals_the_points(tmp_path):
    import cupy

    from emst_dask.io.snapshot import write_points

    x = _cloud(300_000)
    path = str(tmp_path / "s.zarr")
    write_points(path, x, chunk_rows=7_000)
    timings = {}
    dev = stage(resolve_source(path), "cuda", threads=8, timings=timings)
    assert isinstance(dev, cupy.ndarray)
    np.testing.assert_array_equal(cupy.asnumpy(dev), x)
    assert {"decode", "copy_in", "check"} <= set(timings)


def test_cuda_tree_written_compact_through_pinned_buffers(tmp_path):
    import cupy

    x = _cloud(6_000, 1)  # the oracle is brute force
    tree = emst_dask.emst(cupy.asarray(x))
    assert tree.backend == "cuda"
    host_total = float(cupy.asnumpy(tree.weight).sum(dtype=np.float64))
    assert tree.total_weight == pytest.approx(host_total, rel=1e-12)
    out = str(tmp_path / "e.zarr")
    st = write_edges(out, tree, chunk_rows=500, threads=6)
    assert {"copy_back", "encode_write", "commit"} <= set(st.attrs["timings"])
    back = open_edges(out).load()
    assert open_edges(out).source.dtype == np.int32
    np.testing.assert_array_equal(back.source, cupy.asnumpy(tree.source))
    np.testing.assert_array_equal(back.target, cupy.asnumpy(tree.target))
    np.testing.assert_array_equal(back.weight, cupy.asnumpy(tree.weight))
    check_spanning_tree(back, x, certify=False)
    cpu = emst_dask.emst(x, backend="cpu", client=False)
    assert back.total_weight == pytest.approx(cpu.total_weight, rel=1e-12)


def test_service_on_cupy_blocks_persisted_on_the_worker(tmp_path):
    import cupy
    import dask.array as da
    from distributed import wait

    from emst_dask import EmbeddedCluster
    from emst_dask.distributed.service import emst as service_emst

    x = _cloud(6_000, 2)
    with EmbeddedCluster(n_workers=1, backend="cuda") as emb:
        c = emb.client
        arr = c.persist(da.from_array(x, chunks=(1_000, 3)).map_blocks(cupy.asarray,
                                                                     dtype=x.dtype))
        with c.as_current():
            wait(arr)
        st = service_emst(arr, client=c, out=str(tmp_path / "e.zarr"), backend="cuda")
    tree = open_edges(st.path).load()
    ref = emst_dask.emst(x, backend="cpu", client=False)
    check_spanning_tree(tree, x, certify=False)
    assert tree.total_weight == pytest.approx(ref.total_weight, rel=1e-12)
    assert st.attrs["timings"]["decode"] == 0.0  # copied on the device, nothing decoded
