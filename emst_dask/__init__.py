"""emst-dask: exact Euclidean minimum spanning trees, single-tree Borůvka on
GPUs (CuPy) and CPUs (numba), as a Dask service."""
from .api import emst
from .result import SpanningTree
from .validation import InputError

__version__ = "0.1.0"
__all__ = ["emst", "SpanningTree", "InputError", "__version__"]
