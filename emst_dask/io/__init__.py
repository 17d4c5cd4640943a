"""Shared plumbing of every layer above the engine: where points come from
and where results go.

* ``source``, ``zarr_source``, ``hdf5_source``: the *source* contract, and
  ``resolve``, which picks among them (``resolve_source``): a cloud pinned
  down before any task, every problem an ``InputError`` naming its place;
* ``staging``, ``zarr_threads``, ``host_staging``: a source read into host
  or device memory (chunks decoded by many threads), checked; a tree's
  rows copied off the device for the writers;
* ``output``: the *output* contract (``resolve_output``): checked before any
  work, only what this package wrote may be replaced, complete or absent;
* ``edge_store``, ``shared_store``: edge stores written and read;
* ``checks``: checks on points and parameters; ``codecs``,
  ``crc32c_codec``: how arrays are stored (checksummed).
"""
from .checks import as_points, check_backend, check_min_samples
from .edge_store import EdgeStore, open_edges, read_edges, write_edges
from .output import Output, resolve_output
from .resolve import resolve_source
from .source import PointSource, is_in_memory
from .staging import stage

__all__ = ["as_points", "check_backend", "check_min_samples", "EdgeStore", "open_edges",
           "read_edges", "write_edges", "Output", "resolve_output", "PointSource",
           "is_in_memory", "resolve_source", "stage"]
