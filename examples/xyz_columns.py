"""A snapshot that keeps each coordinate in its own 1-D array (x, y, z), as
many simulation formats do: name the columns and the worker stacks them
block by block while it reads.

    python examples/xyz_columns.py [WORKDIR]
"""
import sys
import tempfile
from pathlib import Path

import numpy as np
import zarr

import emst_dask
from emst_dask import EmbeddedCluster


def main(workdir: Path) -> None:
    rng = np.random.default_rng(1)
    n = 25_000
    pos = rng.normal(size=(n, 3)) * [1.0, 2.0, 0.5]          # float64 coordinates
    snap = workdir / "particles.zarr"
    group = zarr.open_group(snap, mode="w", zarr_format=2)   # Zarr v2 works as well as v3
    for j, name in enumerate("xyz"):
        group.create_array(name, shape=(n,), chunks=(4_096,), dtype="f8")[...] = pos[:, j]
    group.create_array("mass", shape=(n,), chunks=(4_096,), dtype="f4")[...] = 1.0

    with EmbeddedCluster(backend="cpu") as cluster:
        # columns= names the coordinate arrays in order (a group whose only
        # coordinate arrays are x, y[, z] is also found without being told)
        tree = emst_dask.emst(str(snap), columns=("x", "y", "z"), client=cluster.client,
                              min_samples=5)
    print(f"{snap}[x,y,z]: n={tree.n_points} d={tree.n_dims} dtype={tree.weight.dtype} "
          f"min_samples={tree.min_samples} total_weight={tree.total_weight:.6f}")
    ref = emst_dask.emst(pos, min_samples=5)
    assert tree.total_weight == ref.total_weight
    print("same tree as from the stacked array in memory: yes")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="emst-")))
