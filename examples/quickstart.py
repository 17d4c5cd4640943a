"""Quickstart: the EMST of a point cloud in memory, then of a Zarr snapshot
on a Dask cluster, with the edges written to an edge store by the worker.

    python examples/quickstart.py [WORKDIR]

Runs on CPU as is (a LocalCluster of CPU workers); on a machine with GPUs and
the ``cuda`` extra the same code runs on a LocalCUDACluster.
"""
import sys
import tempfile
from pathlib import Path

import numpy as np
import zarr

import emst_dask
from emst_dask import EmbeddedCluster, open_edges


def main(workdir: Path) -> None:
    # 1. in memory: an (n, d) float32/float64 array in, n - 1 edges out
    points = np.random.default_rng(0).random((20_000, 3), dtype=np.float32)
    tree = emst_dask.emst(points)
    print(f"in memory: {tree.n_edges} edges, total weight {tree.total_weight:.6f}, "
          f"{tree.iterations} Boruvka iterations")

    # 2. a snapshot on disk: a Zarr group with one (n, d) array, rows chunked
    snap = workdir / "snapshot.zarr"
    group = zarr.open_group(snap, mode="w")
    group.create_array("points", shape=points.shape, chunks=(5_000, 3),
                       dtype=points.dtype)[...] = points

    # 3. on a Dask cluster: a worker reads the chunks, computes, writes the store.
    #    EmbeddedCluster() is the default cluster (LocalCUDACluster with GPUs,
    #    else a LocalCluster); any distributed.Client, or a scheduler address,
    #    works the same way.
    with EmbeddedCluster() as cluster:
        print(f"cluster: {cluster.kind}, dashboard {cluster.dashboard_link}")
        store = emst_dask.emst(str(snap), client=cluster.client,
                               out=workdir / "edges.zarr", overwrite=True)
    print(f"edge store: {store.path}")

    # 4. read it back: attributes, lazy arrays, or the whole tree
    edges = open_edges(workdir / "edges.zarr")
    print(f"  n={edges.n} d={edges.d} edges={edges.n_edges} "
          f"total_weight={edges.total_weight:.6f} input={edges.input}")
    again = edges.load()
    assert again.total_weight == tree.total_weight
    print("  same tree as in memory: yes")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="emst-")))
