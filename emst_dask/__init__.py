"""emst-dask: exact Euclidean minimum spanning trees, single-tree Borůvka on
GPUs (CuPy) and CPUs (numba), as a Dask service."""
from .api import emst
from .result import SpanningTree
from .validation import InputError

__version__ = "0.1.0"
__all__ = ["emst", "SpanningTree", "InputError", "__version__",
           "emst_many", "submit", "get_job", "list_jobs", "EmbeddedCluster",
           "open_edges", "read_edges", "EdgeStore"]

#: the Dask service, imported on first use (distributed is a heavy import)
_LAZY = {"emst_many": "service", "submit": "service", "get_job": "service",
         "list_jobs": "service", "EmbeddedCluster": "service",
         "open_edges": "store", "read_edges": "store", "EdgeStore": "store"}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
