"""emst-dask: exact Euclidean minimum spanning trees, single-tree Borůvka on
GPUs (CuPy) and CPUs (numba), as a Dask service.

Layers, each a subpackage importable on its own: ``kernels`` (one kernel
set per backend), ``engine`` (the Borůvka loop written once), ``io`` (the
source and output contracts, edge stores), ``partitioned`` (the exact
partitioned algorithm), ``distributed`` (the Dask service), ``api`` and
``cli``, and ``products`` (what is computed from a tree).
"""
from .api import emst
from .errors import InputError, InputLost, JobCancelled, OutputError, WorkerLost
from .tree import SpanningTree

from ._version import __version__
__all__ = ["emst", "SpanningTree", "InputError", "OutputError", "WorkerLost", "InputLost",
           "JobCancelled", "__version__",
           "emst_many", "submit", "get_job", "list_jobs", "EmbeddedCluster",
           "open_edges", "read_edges", "EdgeStore", "HDBSCAN", "mst_statistics",
           "MSTStatistics", "mst_statistics_many", "fof", "FoFCatalogue", "open_fof",
           "approximate_predict", "membership_vector", "all_points_membership_vectors"]

#: imported on first use (distributed is a heavy import)
_LAZY = {"emst_many": "distributed.batch", "submit": "distributed.service",
         "get_job": "distributed.service", "list_jobs": "distributed.service",
         "EmbeddedCluster": "distributed.cluster", "open_edges": "io.edge_store",
         "read_edges": "io.edge_store", "EdgeStore": "io.edge_store",
         "HDBSCAN": "products.estimator", "mst_statistics": "products.statistics",
         "MSTStatistics": "products.statistics",
         "mst_statistics_many": "distributed.realisations", "fof": "fof_api",
         "FoFCatalogue": "products.catalogue", "open_fof": "products.catalogue",
         "approximate_predict": "products.hdbscan.prediction",
         "membership_vector": "products.hdbscan.membership",
         "all_points_membership_vectors": "products.hdbscan.membership"}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
