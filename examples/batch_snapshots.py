"""Many snapshots, one call: the jobs are spread over the cluster's workers,
one job per worker (one per GPU on a dask-cuda cluster) at a time, and each
worker writes its own edge store.

    python examples/batch_snapshots.py [WORKDIR]
"""
import sys
import tempfile
from pathlib import Path

import zarr

import emst_dask
from emst_dask import EmbeddedCluster, datasets, emst_many


def write_snapshot(path: Path, n: int, seed: int) -> str:
    points = datasets.halos(n, dim=3, seed=seed)
    group = zarr.open_group(path, mode="w")
    group.create_array("points", shape=points.shape, chunks=(10_000, 3),
                       dtype=points.dtype)[...] = points
    group.attrs["seed"] = seed
    return str(path)


def main(workdir: Path) -> None:
    snapshots = [write_snapshot(workdir / f"snap_{k:03d}.zarr", 30_000 + 5_000 * k, seed=k)
                 for k in range(4)]
    outs = [s.replace(".zarr", ".edges.zarr") for s in snapshots]
    # two workers here; on a GPU node, EmbeddedCluster() takes every GPU
    with EmbeddedCluster(n_workers=2, backend="cpu") as cluster:
        stores = emst_many(snapshots, outs, client=cluster.client, overwrite=True,
                           progress=True)
        for snap, store in zip(snapshots, stores):
            print(f"{Path(snap).name}: n={store.n} edges={store.n_edges} "
                  f"total_weight={store.total_weight:.6f} -> {store.path}")
        # without outs the trees come back; errors="return" keeps going past
        # a bad snapshot and puts its error in its place
        res = emst_many([snapshots[0], workdir / "missing.zarr"], client=cluster.client,
                        errors="return")
    print(f"with a missing snapshot: {type(res[0]).__name__}, {type(res[1]).__name__}: {res[1]}")
    assert isinstance(res[0], emst_dask.SpanningTree)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="emst-")))
