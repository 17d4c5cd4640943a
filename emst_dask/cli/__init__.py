"""Layer 5, the ``emst-dask`` command (click).

    emst-dask generate NAME N --out FILE.npy|SNAPSHOT.zarr [--dim D] [--seed S]
    emst-dask run SOURCE [--out EDGES.npy|EDGES.zarr] [--scheduler ADDRESS | --scheduler-file FILE]
    emst-dask job NAME --scheduler-file FILE [--wait]
    emst-dask info EDGES
    emst-dask plot EDGES --points SOURCE --out mst.png
    emst-dask demo [--dir DIR] [--n N]
    emst-dask hdbscan SOURCE --min-cluster-size M [--min-samples K] --out LABELS
    emst-dask cut EDGES --linking-length B [-b B ...] --out LABELS
    emst-dask linkage EDGES --out Z.npy
    emst-dask plot-clusters LABELS --points SOURCE --out clusters.png
    emst-dask fof SOURCE [-b B ...] [--box-size L|snapshot] [--velocities NAME] --out HALOS.zarr
    emst-dask stats EDGES --points SOURCE [--box-size L] [--plot stats.png] [--out STATS.npz]
    emst-dask clean DIRECTORY [--older-than HOURS] [--dry-run]

Commands call the API and the service; ``errors`` turns what they raise
into ``Error:`` lines.
"""
from __future__ import annotations

import sys

# the group lives in ``group`` so that the command modules, which register
# their commands on it, import downward; importing them here completes it
from . import fof as _fof  # noqa: F401
from . import products as _products  # noqa: F401
from . import run as _run  # noqa: F401
from . import stats as _stats  # noqa: F401
from . import tools as _tools  # noqa: F401
from .group import Count, main

__all__ = ["Count", "main"]

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
