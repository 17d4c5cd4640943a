"""Shared plumbing of every layer above the engine: where points come from
and where results go.

* ``source``, ``zarr_source``: the *source* contract (``resolve_source``):
  a cloud pinned down before any task, every problem an ``InputError``
  naming its place;
* ``staging``: a source read into host or device memory, checked;
* ``output``: the *output* contract (``resolve_output``): checked before any
  work, only what this package wrote may be replaced, complete or absent;
* ``edge_store``, ``shared_store``: edge stores written and read;
* ``checks``: checks on points and parameters; ``codecs``: how arrays are
  stored (checksummed).
"""
from .checks import as_points, check_backend, check_min_samples
from .edge_store import EdgeStore, open_edges, read_edges, write_edges
from .output import Output, resolve_output
from .source import PointSource, is_in_memory, resolve_source
from .staging import stage

__all__ = ["as_points", "check_backend", "check_min_samples", "EdgeStore", "open_edges",
           "read_edges", "write_edges", "Output", "resolve_output", "PointSource",
           "is_in_memory", "resolve_source", "stage"]
