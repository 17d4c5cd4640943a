"""Cluster stores: HDBSCAN* (or friends-of-friends) labels on disk, whole or not at all.

A cluster store is a Zarr group with arrays ``labels`` (n,) int64 (-1:
noise), and for HDBSCAN* ``probabilities`` and ``outlier_scores`` (n,)
float64, the condensed tree as four arrays ``condensed/parent``,
``condensed/child``, ``condensed/child_size`` (int64) and
``condensed/lambda_val`` (float64), and ``persistence`` (per cluster); for
friends-of-friends cuts ``labels`` is (K, n), one row per linking length
(and a friends-of-friends catalogue adds ``catalogue/<k>/...``: see
``emst_dask.products.catalogue``).
Attributes: ``format``, ``kind`` ("hdbscan" or "fof"), ``n``, the
parameters, ``input``, ``version``, and ``complete`` last.  Written like an
edge store (``emst_dask.io.output``): aside, checksummed, moved into place
when complete.
"""
from __future__ import annotations

import os

import numpy as np

from ..errors import InputError
from . import npy
from .codecs import create_array
from .edge_store import open_new_group
from .output import CLUSTER_FORMAT, Output, resolve_output
from .owned import record_written
from .paths import is_pathlike, local_path

#: rows per chunk of the arrays
CHUNK_ROWS = 1 << 20


def _write_array(group, name, data, zarr_format, chunks=None):
    data = np.ascontiguousarray(data)
    if chunks is None:
        chunks = (max(1, min(CHUNK_ROWS, data.shape[-1])),) if data.ndim == 1 else \
            (1, max(1, min(CHUNK_ROWS, data.shape[-1])))
    z = create_array(group, name, data.shape, chunks, data.dtype, zarr_format)
    z[...] = data


def write_clusters(output, arrays: dict, attrs: dict, *, chunks: dict | None = None,
                   **output_options):
    """Write a cluster store.

    Parameters
    ----------
    output : Output, or a path, URL or zarr store
        (``resolve_output(..., contents="clusters")`` with
        ``output_options``).
    arrays : dict of name -> numpy array
        ``labels`` and whatever else the kind has; names may contain "/"
        (the condensed tree's ``condensed/parent``, ...).
    attrs : dict
        ``kind``, ``n``, the parameters, ``input``.
    chunks : dict of name -> chunk shape, optional
        For arrays not chunked like labels (a friends-of-friends catalogue's
        (G, d) rows); the others: whole rows of up to ``CHUNK_ROWS``.

    Returns
    -------
    str
        Where the store is.
    """
    from .._version import __version__

    if not isinstance(output, Output):
        output = resolve_output(output, contents="clusters", **output_options)
    attrs = dict(attrs, format=CLUSTER_FORMAT, version=__version__)

    def fill(group):
        for name, data in arrays.items():
            _write_array(group, name, data, output.zarr_format, (chunks or {}).get(name))
        group.attrs.update(record_written(group, attrs))  # what overwrite may remove
        group.attrs["complete"] = True

    if output.local is None:
        fill(_new_group(output, output.target))
        return str(output.target)
    output.check()
    if output.kind == "npy":  # the labels alone
        with output.written_aside() as tmp, open(tmp, "wb") as fh:
            npy.save(fh, np.asarray(arrays["labels"], np.int64), "clusters")
        output.cleanup()
        return output.local
    with output.written_aside() as tmp:
        fill(_new_group(output, tmp))
    output.cleanup()
    return output.local


def _new_group(output, where):
    return open_new_group(output, where, CLUSTER_FORMAT)


def read_clusters(path) -> dict:
    """A complete cluster store: its attributes and arrays (numpy).

    Returns
    -------
    dict
        ``attrs`` and one entry per array (``condensed/...`` included).
    """
    import zarr

    loc = local_path(path) if is_pathlike(path) else None
    shown = loc or path
    if loc is not None and not os.path.exists(loc):
        raise InputError(f"{loc}: no such cluster store")
    try:
        group = zarr.open_group(loc or path, mode="r")
    except Exception as exc:
        raise InputError(f"{shown}: not a cluster store ({type(exc).__name__}: {exc})") from None
    attrs = dict(group.attrs)
    if attrs.get("format") != CLUSTER_FORMAT:
        raise InputError(f"{shown}: not an emst-dask cluster store")
    if attrs.get("complete") is not True:
        raise InputError(f"{shown}: incomplete cluster store: the job that wrote it failed "
                         "or is still running")
    out = {"attrs": attrs}
    for name, arr in group.arrays():
        out[name] = np.asarray(arr[...])
    if "condensed" in group:
        for name, arr in group["condensed"].arrays():
            out[f"condensed/{name}"] = np.asarray(arr[...])
    return out
