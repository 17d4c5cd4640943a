"""One edge store written by several processes (the partitioned EMST).

Every box's worker writes its certified edges into one store: the chunks
lying wholly inside its row range, so that writers of neighbouring ranges
never touch one chunk.  One finishing task writes the rest (the chunks two
ranges share, the phase-2 edges, the core distances), the attributes with
``complete`` last, and moves a local store into place.  Like any edge
store it is complete or absent; the temporaries of dead attempts are
removed when the job ends (``Output.cleanup``).
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from ..arrays import to_host
from .codecs import EDGE_CODEC, create_array
from .edge_store import (EDGE_CHUNK_ROWS, EdgeStore, finish_attrs, index_dtype,
                         open_new_group, run_pieces, store_path, write_pieces)
from .output import EDGE_FORMAT, Output, remove


@dataclass
class SharedStore:
    """A store being filled: its output, where the arrays are (the
    temporary sibling, or the URL/store itself), the chunk length and the
    number of edges."""

    output: Output
    where: object
    chunk: int
    n_edges: int


def shared_chunk_rows(n_edges: int, chunk_rows: int | None = None) -> int:
    """The chunk length of a shared store's edge arrays."""
    return max(1, min(int(chunk_rows or EDGE_CHUNK_ROWS), int(n_edges))) if n_edges else 1


def create_shared_store(output: Output, n_edges: int, dtype) -> SharedStore:
    """Create the (n_edges,) source, target, weight arrays of a store that
    several processes fill; ``complete: false`` until finished.  Run again
    for the same job (its worker died), it returns the store already begun."""
    m = int(n_edges)
    chunk = shared_chunk_rows(m, output.chunk_rows)
    store = SharedStore(output, output.target, chunk, m)
    if output.local is not None:
        store.where = output.temporary("shared")
        if os.path.isdir(store.where):  # this task ran before (a worker died): keep it
            _group(store)
            return store
        output.check()
    elif _unfinished(store):
        return store
    try:
        group = open_new_group(output, store.where)
        ids = index_dtype(m + 1)
        for name, dt in (("source", ids), ("target", ids), ("weight", dtype)):
            create_array(group, name, (m,), (chunk,), dt, output.zarr_format, EDGE_CODEC)
    except BaseException:
        if output.local is not None:
            remove(store.where)
        raise
    return store


def _unfinished(store: SharedStore) -> bool:
    """A remote store this job began and did not finish (a rerun finds it)."""
    try:
        attrs = dict(_group(store).attrs)
    except Exception:
        return False
    return attrs.get("format") == EDGE_FORMAT and attrs.get("complete") is False \
        and all(k in _group(store) for k in ("source", "target", "weight"))


def _group(store: SharedStore):
    import zarr

    opts = None if store.output.local is not None else store.output.storage_options
    return zarr.open_group(store.where, mode="r+", storage_options=opts)


def _writable(group, name):
    """``group[name]`` writing every chunk, one equal to the fill value too
    (``io.codecs``): the setting is not stored with the array, and a
    reopened one would skip a chunk of zeros, which readers then refuse as
    missing."""
    return group[name].with_config({"write_empty_chunks": True})


def whole_chunks(at: int, m: int, chunk: int) -> tuple[int, int]:
    """[a, b): the rows of whole chunks inside rows [at, at + m) (a >= b: none)."""
    return -(-at // chunk) * chunk, (at + m) // chunk * chunk


def shared_rest_rows(at: int, m: int, chunk: int) -> int:
    """Rows of [at, at + m) that ``write_shared_rows`` leaves to the finisher."""
    a, b = whole_chunks(at, m, chunk)
    return m if a >= b else m - (b - a)


def write_shared_rows(store: SharedStore, at: int, source, target, weight,
                      threads=None) -> list:
    """Write edges to rows [at, at + m): the whole chunks inside.

    Parameters
    ----------
    store : SharedStore
    at : int
        The store row of the first edge.
    source, target : (m,) int64 arrays
    weight : (m,) float array
    threads : int, optional
        Writer threads.

    Returns
    -------
    list of (at, source, target, weight)
        The rest: at most two pieces shorter than a chunk, for
        ``finish_shared_store``.
    """
    m = int(len(source))
    C = store.chunk
    a, b = whole_chunks(at, m, C)
    if a >= b:
        return [(at, source, target, weight)] if m else []
    group = _group(store)
    pieces = []
    for name, data in (("source", source), ("target", target), ("weight", weight)):
        pieces += write_pieces(_writable(group, name), data, a - at, b - at, at, C)
    run_pieces(pieces, threads)
    rest = []
    if a > at:
        rest.append((at, source[:a - at], target[:a - at], weight[:a - at]))
    if b < at + m:
        rest.append((b, source[b - at:], target[b - at:], weight[b - at:]))
    return rest


def finish_shared_store(store: SharedStore, rests, attrs: dict,
                        core_distances=None) -> EdgeStore:
    """Write the pieces the writers left (one process, so chunks shared by
    two ranges are written in turn), the core distances and the attributes,
    ``complete`` last; then move a local store into place."""
    group = _group(store)
    for at, u, v, w in rests:
        for name, data in (("source", u), ("target", v), ("weight", w)):
            z = _writable(group, name)
            z[at:at + len(data)] = np.asarray(to_host(data), dtype=z.dtype)
    if core_distances is not None:
        n = int(core_distances.shape[0])
        z = create_array(group, "core_distances", (n,), (max(1, min(store.chunk, n)),),
                         core_distances.dtype, store.output.zarr_format, EDGE_CODEC)
        run_pieces(write_pieces(z, core_distances, 0, n, 0, z.chunks[0]))
    attrs = finish_attrs(group, dict(attrs))
    out = store.output
    if out.local is None:
        return EdgeStore(store_path(out.target), attrs, _store=out.target)
    out.place(store.where)
    out.cleanup()
    return EdgeStore(out.local, attrs)


def abort_shared_store(store: SharedStore):
    """Remove a local shared store that will not be finished."""
    if store is not None and store.output.local is not None:
        remove(store.where)
