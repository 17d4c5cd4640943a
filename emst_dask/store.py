"""Edge stores: a spanning tree on disk, whole or not at all.

An edge store is a Zarr group (zarr_format 3 by default, 2 on request) with
arrays ``source``, ``target`` (int64, input rows), ``weight`` (the input's
float type) and, under mutual reachability, ``core_distances`` (n,), plus
attributes: ``n``, ``d``, ``n_edges``, ``min_samples``, ``total_weight``,
``input`` (where the points came from), ``version`` (of emst_dask), the
dtype, backend, Borůvka iterations and the seconds per phase, and last
``complete``.

A failed job never leaves a store that looks whole:

* a local path is written to a hidden temporary sibling
  (``.NAME.emst-tmp-XXXXXXXX``) that is renamed into place only when
  complete (and removed on failure); an existing store is replaced only
  with ``overwrite=True`` and only by a complete one;
* any store (remote URLs, store objects) carries ``complete: false`` from
  the moment it is created until its last array is written, and ``complete:
  true`` is the last thing written;
* ``open_edges`` refuses a store without ``complete: true``.

``.npy`` output (an (n-1, 3) float64 array of source, target, weight) is
written to a temporary sibling and renamed into place, too.
"""
from __future__ import annotations

import datetime
import os
import shutil
import time
import uuid
from concurrent.futures import ThreadPoolExecutor, as_completed

import numpy as np

from .io import default_threads, is_pathlike, local_path
from .result import SpanningTree
from .validation import InputError

#: rows per chunk of the edge arrays (8 MiB of int64)
EDGE_CHUNK_ROWS = 1 << 20
#: format tag of the store layout
FORMAT = "emst-dask edges 1"
TMP_TAG = ".emst-tmp-"


def _version():
    from . import __version__

    return __version__


def _host(a):
    if a is None or isinstance(a, np.ndarray):
        return a
    return a.get()


def tree_attrs(tree: SpanningTree, input: str = "", extra: dict | None = None) -> dict:
    """The attributes an edge store records for ``tree``."""
    return edge_attrs(n=tree.n_points, d=tree.n_dims, n_edges=tree.n_edges,
                      min_samples=tree.min_samples, total_weight=tree.total_weight,
                      dtype=_host(tree.weight[:0]).dtype, backend=tree.backend,
                      iterations=tree.iterations, timings=tree.timings, input=input,
                      extra=extra)


def edge_attrs(*, n, d, n_edges, min_samples, total_weight, dtype, backend, iterations=0,
               timings=None, input: str = "", extra: dict | None = None) -> dict:
    """The attributes of an edge store (``complete`` is added when it is)."""
    attrs = {
        "format": FORMAT,
        "n": int(n),
        "d": int(d),
        "n_edges": int(n_edges),
        "min_samples": int(min_samples),
        "total_weight": float(total_weight),
        "dtype": str(np.dtype(dtype)),
        "input": str(input),
        "version": _version(),
        "backend": str(backend),
        "iterations": int(iterations),
        "timings": {k: float(v) for k, v in (timings or {}).items()},
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
    if extra:
        attrs.update(extra)
    return attrs


def out_exists(out) -> bool:
    loc = local_path(out) if is_pathlike(out) else None
    return loc is not None and os.path.exists(loc)


def check_out(out, overwrite: bool):
    """Refuse an existing local output unless ``overwrite`` (before any work)."""
    if out is None:
        return
    loc = local_path(out) if is_pathlike(out) else None
    if loc is None:
        return
    if os.path.exists(loc) and not overwrite:
        raise InputError(f"{loc}: already exists; pass overwrite=True (--overwrite) "
                         "to replace it")
    parent = os.path.dirname(loc)
    if not os.path.isdir(parent):
        raise InputError(f"cannot write {loc}: no directory {parent}")


def is_npy(out) -> bool:
    return is_pathlike(out) and os.fspath(out).endswith(".npy")


def write_edges(out, tree: SpanningTree, *, input: str = "", overwrite: bool = False,
                chunk_rows: int | None = None, zarr_format: int = 3,
                threads: int | None = None, report=None, storage_options=None,
                extra_attrs: dict | None = None) -> "EdgeStore":
    """Write ``tree`` (numpy or cupy arrays) to ``out`` and return the store.

    ``out``: a local path (``.npy`` for a plain (n-1, 3) array, anything
    else a Zarr store), a URL (fsspec) or a zarr store object.
    ``report(phase, **info)`` gets ``("write", rows=, total=)``.
    """
    attrs = tree_attrs(tree, input, extra_attrs)
    if is_npy(out):
        return _write_npy(local_path(out), tree, attrs, overwrite, report)
    loc = local_path(out) if is_pathlike(out) else None
    if loc is None:
        import zarr

        group = zarr.open_group(out, mode="w" if overwrite else "w-",
                                zarr_format=zarr_format, storage_options=storage_options,
                                attributes={"format": FORMAT, "complete": False})
        _fill(group, tree, attrs, chunk_rows, threads, report)
        return EdgeStore(_store_path(out), _finish_attrs(group, attrs), _store=out)

    check_out(loc, overwrite)
    tmp = _tmp_sibling(loc)
    try:
        import zarr

        group = zarr.open_group(tmp, mode="w-", zarr_format=zarr_format,
                                attributes={"format": FORMAT, "complete": False})
        _fill(group, tree, attrs, chunk_rows, threads, report)
        attrs = _finish_attrs(group, attrs)
        _replace(tmp, loc, overwrite)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return EdgeStore(loc, attrs)


def _tmp_sibling(loc) -> str:
    """The hidden temporary sibling a local output is written to first."""
    parent, base = os.path.split(loc)
    return os.path.join(parent, f".{base}{TMP_TAG}{uuid.uuid4().hex[:8]}")


def _store_path(out) -> str:
    """What an edge store at a URL or a zarr store object calls itself."""
    return out if isinstance(out, str) else str(getattr(out, "root", out))


def _finish_attrs(group, attrs) -> dict:
    # every array is written: the attributes, ``complete`` last
    if "write_seconds" in attrs:
        attrs["timings"]["write"] = attrs.pop("write_seconds")
    group.attrs.update(attrs)
    group.attrs["complete"] = True
    return dict(group.attrs)


def _replace(tmp, loc, overwrite):
    if os.path.exists(loc):
        if not overwrite:  # appeared while we computed
            raise InputError(f"{loc}: appeared while the job ran; pass overwrite=True "
                             "to replace it")
        trash = f"{loc}{TMP_TAG}old-{uuid.uuid4().hex[:8]}"
        os.rename(loc, trash)
        try:
            os.rename(tmp, loc)
        except BaseException:
            os.rename(trash, loc)
            raise
        if os.path.isdir(trash):
            shutil.rmtree(trash, ignore_errors=True)
        else:
            os.remove(trash)
    else:
        os.rename(tmp, loc)


def _fill(group, tree, attrs, chunk_rows, threads, report):
    t0 = time.perf_counter()
    _fill_arrays(group, tree, chunk_rows, threads, report)
    attrs["write_seconds"] = time.perf_counter() - t0


def _fill_arrays(group, tree, chunk_rows, threads, report):
    m = int(tree.n_edges)
    rows = int(chunk_rows or EDGE_CHUNK_ROWS)
    rows = max(1, min(rows, m)) if m else 1
    arrays = [("source", tree.source), ("target", tree.target), ("weight", tree.weight)]
    if tree.core_distances is not None:
        arrays.append(("core_distances", tree.core_distances))
    pieces = []
    for name, data in arrays:
        length = int(data.shape[0])
        chunk = max(1, min(rows, length)) if length else 1
        dt = np.dtype(str(data.dtype))
        z = group.create_array(name, shape=(length,), chunks=(chunk,), dtype=dt,
                               fill_value=0)
        pieces += _pieces(z, data, 0, length, 0, chunk)
    total = sum(b - a for _, _, a, b, _ in pieces)
    per_edge = total / m if m else 1.0   # rows of every array, reported as edges
    _write_pieces(pieces, threads, report, m, per_edge)


def _pieces(z, data, a, b, at, chunk):
    """Writes of ``data[a:b]`` to ``z[at + a:at + b]``, several chunks each
    (fewer calls; zarr encodes the chunks of one call concurrently)."""
    step = chunk * 4
    return [(z, data, i, min(i + step, b), at) for i in range(a, b, step)]


def _write_pieces(pieces, threads, report=None, m=0, per_edge=1.0):
    if report:
        report("write", rows=0, total=m)
    if not pieces:
        return

    def work(piece):
        z, data, a, b, at = piece
        z[at + a:at + b] = _host(data[a:b])  # device-to-host per piece, overlapped
        return b - a

    done = 0
    threads = threads or default_threads()
    with ThreadPoolExecutor(max_workers=min(threads, len(pieces)),
                            thread_name_prefix="emst-write") as pool:
        futs = [pool.submit(work, p) for p in pieces]
        try:
            for f in as_completed(futs):
                done += f.result()
                if report:
                    report("write", rows=min(m, int(done / per_edge)), total=m)
        except BaseException:
            for f in futs:
                f.cancel()
            raise


# --------------------------------------------------------------------------
# one store written by several processes (the partitioned EMST)
# --------------------------------------------------------------------------
def create_shared_store(out, *, n_edges: int, dtype, overwrite: bool = False,
                        chunk_rows: int | None = None, zarr_format: int = 3,
                        storage_options=None) -> dict:
    """Create the edge arrays of a store that several processes fill.

    A local path is created as the hidden temporary sibling that
    ``finish_shared_store`` renames into place; any store carries
    ``complete: false`` until then.  Returns a small picklable spec for
    ``write_shared_rows``, ``finish_shared_store`` and ``abort_shared_store``.
    """
    import zarr

    m = int(n_edges)
    chunk = shared_chunk_rows(m, chunk_rows)
    loc = local_path(out) if is_pathlike(out) else None
    if loc is not None:
        check_out(loc, overwrite)
        where = _tmp_sibling(loc)
        group = zarr.open_group(where, mode="w-", zarr_format=zarr_format,
                                attributes={"format": FORMAT, "complete": False})
    else:
        where = out
        group = zarr.open_group(out, mode="w" if overwrite else "w-", zarr_format=zarr_format,
                                storage_options=storage_options,
                                attributes={"format": FORMAT, "complete": False})
    for name, dt in (("source", np.int64), ("target", np.int64), ("weight", dtype)):
        group.create_array(name, shape=(m,), chunks=(chunk,), dtype=np.dtype(dt),
                           fill_value=0)
    return dict(out=out, loc=loc, where=where, chunk=chunk, n_edges=m, overwrite=overwrite,
                storage_options=None if loc is not None else storage_options)


def _shared_group(spec):
    import zarr

    return zarr.open_group(spec["where"], mode="r+",
                           storage_options=spec["storage_options"])


def write_shared_rows(spec, at: int, source, target, weight, threads=None) -> list:
    """Write edges to rows [at, at + m) of a shared store: the chunks lying
    wholly inside, so that writers of neighbouring ranges never touch one
    chunk.  Returns the rest, at most two pieces ``(at, source, target,
    weight)`` shorter than a chunk each, for ``finish_shared_store``."""
    m = int(len(source))
    C = spec["chunk"]
    a, b = _whole_chunks(at, m, C)
    if a >= b:
        return [(at, source, target, weight)] if m else []
    group = _shared_group(spec)
    pieces = []
    for name, data in (("source", source), ("target", target), ("weight", weight)):
        pieces += _pieces(group[name], data, a - at, b - at, at, C)
    _write_pieces(pieces, threads)
    rest = []
    if a > at:
        rest.append((at, source[:a - at], target[:a - at], weight[:a - at]))
    if b < at + m:
        rest.append((b, source[b - at:], target[b - at:], weight[b - at:]))
    return rest


def _whole_chunks(at, m, C):
    """[a, b): the rows of whole chunks inside rows [at, at + m) (a >= b: none)."""
    return -(-at // C) * C, (at + m) // C * C


def shared_rest_rows(at: int, m: int, chunk: int) -> int:
    """Rows of [at, at + m) that ``write_shared_rows`` leaves to the finisher."""
    a, b = _whole_chunks(at, m, chunk)
    return m if a >= b else m - (b - a)


def shared_chunk_rows(n_edges: int, chunk_rows: int | None = None) -> int:
    """The chunk length ``create_shared_store`` gives an edge array."""
    return max(1, min(int(chunk_rows or EDGE_CHUNK_ROWS), int(n_edges))) if n_edges else 1


def finish_shared_store(spec, rests, attrs: dict, core_distances=None) -> "EdgeStore":
    """Write the pieces ``write_shared_rows`` left (one process, so chunks
    shared by two ranges are written in turn), the core distances and the
    attributes, ``complete`` last; then rename a local store into place."""
    group = _shared_group(spec)
    for at, u, v, w in rests:
        for name, data in (("source", u), ("target", v), ("weight", w)):
            group[name][at:at + len(data)] = data
    if core_distances is not None:
        n = int(core_distances.shape[0])
        z = group.create_array("core_distances", shape=(n,),
                               chunks=(max(1, min(spec["chunk"], n)),),
                               dtype=core_distances.dtype, fill_value=0)
        _write_pieces(_pieces(z, core_distances, 0, n, 0, z.chunks[0]), None)
    attrs = _finish_attrs(group, dict(attrs))
    if spec["loc"] is None:
        return EdgeStore(_store_path(spec["out"]), attrs, _store=spec["out"])
    _replace(spec["where"], spec["loc"], spec["overwrite"])
    return EdgeStore(spec["loc"], attrs)


def abort_shared_store(spec):
    """Remove a local shared store that will not be finished."""
    if spec and spec.get("loc") is not None:
        shutil.rmtree(spec["where"], ignore_errors=True)


def _write_npy(loc, tree, attrs, overwrite, report):
    check_out(loc, True)  # .npy files are replaced, as `emst-dask run` always did
    tmp = _tmp_sibling(loc)
    if report:
        report("write", rows=0, total=int(tree.n_edges))
    try:
        with open(tmp, "wb") as fh:
            np.save(fh, _host_tree(tree).to_numpy())
        os.replace(tmp, loc)
    except OSError as exc:
        _silent_remove(tmp)
        raise InputError(f"cannot write {loc}: {exc.strerror or exc}") from None
    except BaseException:
        _silent_remove(tmp)
        raise
    if report:
        report("write", rows=int(tree.n_edges), total=int(tree.n_edges))
    attrs = dict(attrs, complete=True)
    return EdgeStore(loc, attrs)


def _silent_remove(path):
    try:
        os.remove(path)
    except OSError:
        pass


def _host_tree(tree: SpanningTree) -> SpanningTree:
    if isinstance(tree.weight, np.ndarray):
        return tree
    return SpanningTree(_host(tree.source), _host(tree.target), _host(tree.weight),
                        _host(tree.core_distances), tree.n_points, tree.n_dims,
                        tree.min_samples, tree.backend, tree.iterations,
                        list(tree.components), dict(tree.timings))


# --------------------------------------------------------------------------
# reading
# --------------------------------------------------------------------------
class EdgeStore:
    """A complete edge store (``open_edges``) or the one a job just wrote.

    ``path`` (also ``os.fspath(store)``), ``attrs`` (dict), the attributes as
    properties (``n``, ``d``, ``n_edges``, ``min_samples``,
    ``total_weight``, ``input``, ``version``); ``source``, ``target``,
    ``weight`` as lazy zarr arrays; ``load()`` for a ``SpanningTree`` in
    memory.
    """

    def __init__(self, path, attrs: dict, _store=None):
        self.path = path
        self.attrs = dict(attrs)
        self._store = _store
        self._group = None

    # -- attributes
    def __getattr__(self, name):
        if name.startswith("_") or name in ("path", "attrs"):
            raise AttributeError(name)
        if name in ("n", "d", "n_edges", "min_samples", "total_weight", "input",
                    "version", "dtype", "backend", "iterations", "timings"):
            return self.attrs.get(name)
        if name in ("source", "target", "weight", "core_distances"):
            return self._arrays().get(name)
        raise AttributeError(name)

    def __getstate__(self):
        return {"path": self.path, "attrs": self.attrs, "_store": self._store, "_group": None}

    def __setstate__(self, state):
        self.__dict__.update(state)

    def __fspath__(self):
        if not isinstance(self.path, str):
            raise TypeError("this edge store is not at a path")
        return self.path

    def __str__(self):
        return str(self.path)

    def __repr__(self):
        return (f"EdgeStore({self.path!r}, n={self.n}, d={self.d}, n_edges={self.n_edges}, "
                f"min_samples={self.min_samples}, total_weight={self.total_weight!r})")

    def __eq__(self, other):
        return isinstance(other, EdgeStore) and self.path == other.path

    def __hash__(self):
        return hash(str(self.path))

    def _arrays(self) -> dict:
        if is_npy(self.path):
            e = np.load(self.path, mmap_mode="r")
            return {"source": e[:, 0].astype(np.int64), "target": e[:, 1].astype(np.int64),
                    "weight": e[:, 2], "core_distances": None}
        if self._group is None:
            import zarr

            self._group = zarr.open_group(self._store or self.path, mode="r")
        g = self._group
        out = {k: g[k] for k in ("source", "target", "weight")}
        out["core_distances"] = g["core_distances"] if "core_distances" in g else None
        return out

    def load(self) -> SpanningTree:
        """The tree in memory (numpy arrays)."""
        arr = self._arrays()
        dt = np.dtype(self.attrs.get("dtype") or "float64")
        core = arr["core_distances"]
        return SpanningTree(
            np.asarray(arr["source"][:], np.int64), np.asarray(arr["target"][:], np.int64),
            np.asarray(arr["weight"][:]).astype(dt, copy=False),
            None if core is None else np.asarray(core[:]),
            int(self.attrs.get("n") or arr["source"].shape[0] + 1), int(self.attrs.get("d") or 0),
            int(self.attrs.get("min_samples") or 1), str(self.attrs.get("backend") or "cpu"),
            int(self.attrs.get("iterations") or 0), [], dict(self.attrs.get("timings") or {}))

    def to_numpy(self) -> np.ndarray:
        return self.load().to_numpy()


def open_edges(path, *, storage_options=None) -> EdgeStore:
    """Open an edge store (Zarr, or an (m, 3) ``.npy``); refuse an incomplete one."""
    if is_npy(path):
        loc = local_path(path)
        if not os.path.exists(loc):
            raise InputError(f"{loc}: no such file")
        e = np.load(loc, mmap_mode="r")
        if e.ndim != 2 or e.shape[1] != 3:
            raise InputError(f"{loc}: not an edge array: expected shape (m, 3), got {e.shape}")
        w = np.asarray(e[:, 2], np.float64)
        attrs = {"n": int(e.shape[0]) + 1, "d": None, "n_edges": int(e.shape[0]),
                 "min_samples": None, "total_weight": float(w.sum()), "input": None,
                 "version": None, "dtype": "float64", "complete": True}
        return EdgeStore(loc, attrs)
    import zarr

    loc = local_path(path) if is_pathlike(path) else None
    shown = loc or path
    if loc is not None and not os.path.exists(loc):
        raise InputError(f"{loc}: no such edge store")
    try:
        group = zarr.open_group(path if loc is None else loc, mode="r",
                                storage_options=storage_options)
    except Exception as exc:
        raise InputError(f"{shown}: not an edge store ({type(exc).__name__}: {exc})") from None
    attrs = dict(group.attrs)
    if attrs.get("format") != FORMAT:
        raise InputError(f"{shown}: not an emst-dask edge store (no format attribute "
                         f"{FORMAT!r})")
    if attrs.get("complete") is not True:
        raise InputError(f"{shown}: incomplete edge store (complete is not true): the job "
                         "that wrote it failed or is still running")
    missing = [k for k in ("source", "target", "weight") if k not in group]
    if missing:
        raise InputError(f"{shown}: edge store lacks {', '.join(missing)}")
    st = EdgeStore(shown, attrs, _store=None if loc is not None else path)
    st._group = group
    return st


def read_edges(path) -> SpanningTree:
    """``open_edges(path).load()``."""
    return open_edges(path).load()
