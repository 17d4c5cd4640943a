"""Edge stores: a spanning tree on disk, whole or not at all.

An edge store is a Zarr group (zarr_format 3 by default, 2 on request) with
arrays ``source``, ``target`` (input rows: int32 below 2**31 points, int64
beyond), ``weight`` (the input's float type) and, under mutual
reachability, ``core_distances`` (n,), each chunk compressed (lz4 after a
byte shuffle) and checksummed (``emst_dask.io.codecs``), plus attributes:
``format``, ``format_version``, ``n``, ``d``, ``n_edges``, ``min_samples``,
``total_weight``, ``input`` (where the points came from), ``version`` (of
emst_dask), the dtype, backend, Borůvka iterations and the seconds per
phase, and last ``complete``.  Stores of format version 1 (no
``format_version``: int64 row ids, zstd) read the same: ``load()`` gives
int64 row ids either way.

A failed job never leaves a store that looks whole: a local store is
written to a temporary sibling and moved into place when complete
(``emst_dask.io.output``); any store carries ``complete: false`` until its
last array is written; ``open_edges`` refuses a store without ``complete:
true``.  An ``.npy`` output is an (n-1, 3) float64 array of (source,
target, weight), also written aside and moved into place.
"""
from __future__ import annotations

import datetime
import os
import time
from concurrent.futures import ThreadPoolExecutor, as_completed

import numpy as np

from ..errors import InputError, OutputError
from ..tree import SpanningTree
from . import npy
from .codecs import EDGE_CODEC, create_array
from .output import EDGE_FORMAT, Output, resolve_output
from .owned import record_written
from .paths import is_pathlike, local_path
from .staging import default_threads
from .zarr_threads import read_rows, write_rows
from .store_checks import check_layout, check_tree
from ..arrays import to_host as host
from .host_staging import HostStaging

#: rows per chunk of the edge arrays (4 MiB of int32)
EDGE_CHUNK_ROWS = 1 << 20
#: the layout this version writes: 2 = row ids int32 up to ``INT32_POINTS``
#: points (int64 beyond), lz4; 1 (stores without the attribute) = int64, zstd
EDGE_FORMAT_VERSION = 2
#: the most points whose row ids (0 .. n-1) a store keeps as int32
INT32_POINTS = 2 ** 31
#: .npy edge arrays up to this many rows are checked whole by ``open_edges``
#: (larger ones on evenly spaced samples of rows)
NPY_CHECK_ROWS = 10_000_000


def _version():
    from .._version import __version__

    return __version__


def host_tree(tree: SpanningTree) -> SpanningTree:
    """``tree`` with numpy arrays."""
    if isinstance(tree.weight, np.ndarray):
        return tree
    return SpanningTree(host(tree.source), host(tree.target), host(tree.weight),
                        host(tree.core_distances), tree.n_points, tree.n_dims,
                        tree.min_samples, tree.backend, tree.iterations,
                        list(tree.components), dict(tree.timings), tree.report,
                        box_size=tree.box_size)


def index_dtype(n: int) -> np.dtype:
    """The dtype of a store's row ids for ``n`` points: int32 while every id
    fits (``n <= INT32_POINTS``), else int64."""
    return np.dtype(np.int32 if int(n) <= INT32_POINTS else np.int64)


def tree_attrs(tree: SpanningTree, input: str = "", extra: dict | None = None) -> dict:
    """The attributes an edge store records for ``tree``."""
    return edge_attrs(n=tree.n_points, d=tree.n_dims, n_edges=tree.n_edges,
                      min_samples=tree.min_samples, total_weight=tree.total_weight,
                      dtype=host(tree.weight[:0]).dtype, backend=tree.backend,
                      iterations=tree.iterations, timings=tree.timings, input=input,
                      extra=extra, box_size=getattr(tree, "box_size", None))


def edge_attrs(*, n, d, n_edges, min_samples, total_weight, dtype, backend, iterations=0,
               timings=None, input: str = "", extra: dict | None = None,
               box_size=None) -> dict:
    """The attributes of an edge store (``complete`` is added when it is)."""
    attrs = {
        "format": EDGE_FORMAT,
        "format_version": EDGE_FORMAT_VERSION,
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
        # the periodic box the weights are minimum-image distances in, or None
        "box_size": None if box_size is None else [float(v) for v in np.ravel(box_size)],
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
    if extra:
        attrs.update(extra)
    return attrs


def store_path(out) -> str:
    """What an edge store at a URL or a zarr store object calls itself."""
    return out if isinstance(out, str) else str(getattr(out, "root", out))


def open_new_group(output: Output, where, fmt: str = EDGE_FORMAT):
    """A new group at ``where`` (a temporary path, or the URL or store
    object itself) carrying the format tag ``fmt`` and ``complete: false``."""
    import zarr

    try:
        if output.local is not None:
            mode, opts = "w-", None
        else:
            mode, opts = ("w" if output.overwrite else "w-"), output.storage_options
        return zarr.open_group(where, mode=mode, zarr_format=output.zarr_format,
                               storage_options=opts,
                               attributes={"format": fmt, "complete": False})
    except (OSError, FileExistsError, ValueError) as exc:
        raise OutputError(f"cannot write {output}: {type(exc).__name__}: {exc}") from None


def finish_attrs(group, attrs) -> dict:
    """Write the attributes, ``complete: true`` last; return them."""
    if "write_seconds" in attrs:
        attrs["timings"]["write"] = attrs.pop("write_seconds")
    group.attrs.update(record_written(group, attrs))  # what overwrite may remove
    group.attrs["complete"] = True
    return dict(group.attrs)


def write_edges(output, tree: SpanningTree, *, input: str = "",
                threads: int | None = None, report=None, extra_attrs: dict | None = None,
                **output_options) -> "EdgeStore":
    """Write ``tree`` (numpy or cupy arrays) to ``output``; the store.

    Parameters
    ----------
    output : Output, or a path, URL or zarr store
        Checked (``resolve_output``, with ``output_options``: overwrite,
        zarr_format, chunk_rows, storage_options); it is checked again
        here, where it is written.
    tree : SpanningTree
    input : str
        What the store records as where the points came from.
    threads : int, optional
        Writer threads.
    report : callable(phase, **info), optional
        Gets ``("write", rows=, total=)``.
    extra_attrs : dict, optional
    """
    if not isinstance(output, Output):
        output = resolve_output(output, **output_options)
    t0 = time.perf_counter()
    attrs = tree_attrs(tree, input, extra_attrs)
    if output.kind == "npy":
        return _write_npy(output, tree, attrs, report)
    if output.local is None:
        group = open_new_group(output, output.target)
        _fill(group, tree, attrs, output, threads, report)
        return EdgeStore(store_path(output.target), finish_attrs(group, attrs),
                         _store=output.target)
    output.check()
    with output.written_aside() as tmp:
        group = open_new_group(output, tmp)
        _fill(group, tree, attrs, output, threads, report)
        t1 = time.perf_counter()
        # the whole write, not only the arrays: checks, attributes, placing
        attrs["timings"]["write_all"] = t1 - t0
        attrs = finish_attrs(group, attrs)
    output.cleanup()
    attrs["timings"]["commit"] = time.perf_counter() - t1  # attributes, move into place
    return EdgeStore(output.local, attrs)


def _fill(group, tree, attrs, output, threads, report):
    m = int(tree.n_edges)
    rows = int(output.chunk_rows or EDGE_CHUNK_ROWS)
    ids = index_dtype(tree.n_points)
    arrays = [("source", tree.source, ids), ("target", tree.target, ids),
              ("weight", tree.weight, tree.weight.dtype)]
    if tree.core_distances is not None:
        arrays.append(("core_distances", tree.core_distances, tree.core_distances.dtype))
    pieces = []
    for name, data, dt in arrays:
        length = int(data.shape[0])
        chunk = max(1, min(rows, length)) if length else 1
        z = create_array(group, name, (length,), (chunk,), dt, output.zarr_format, EDGE_CODEC)
        pieces += write_pieces(z, data, 0, length, 0, chunk)
    total = sum(b - a for _, _, a, b, _ in pieces)
    per_edge = total / m if m else 1.0   # rows of every array, reported as edges
    t0 = time.perf_counter()
    attrs["timings"].update(run_pieces(pieces, threads, report, m, per_edge))
    attrs["write_seconds"] = time.perf_counter() - t0


def write_pieces(z, data, a, b, at, chunk) -> list:
    """Writes of ``data[a:b]`` to ``z[at + a:at + b]``, four chunks each
    (one device-to-host copy and one call per piece; each piece's chunks are
    encoded on its writer thread, ``run_pieces``)."""
    step = chunk * 4
    return [(z, data, i, min(i + step, b), at) for i in range(a, b, step)]


def run_pieces(pieces, threads=None, report=None, m=0, per_edge=1.0) -> dict:
    """Write ``pieces`` (``write_pieces``) with a thread pool, each thread
    copying its piece off the device (through a pinned buffer of its own),
    casting it to the array's dtype, encoding and writing it.

    Returns
    -------
    dict
        Seconds summed over the threads: ``copy_back`` (device to host and
        casts), ``encode_write`` (codecs and files).
    """
    if report:
        report("write", rows=0, total=m)
    spent = {"copy_back": 0.0, "encode_write": 0.0}
    if not pieces:
        return spent
    threads = min(threads or default_threads(), len(pieces))
    staging = HostStaging(max(b - a for _, _, a, b, _ in pieces)
                          * max(z.dtype.itemsize for z, *_ in pieces), threads)

    def work(piece):
        z, data, a, b, at = piece
        t0 = time.perf_counter()
        with staging.buffer() as claim:
            host_rows = staging.to_host(data, a, b, z.dtype, claim)
            t1 = time.perf_counter()
            write_rows(z, at + a, host_rows)
        return b - a, t1 - t0, time.perf_counter() - t1

    done = 0
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="emst-write") as pool:
        futs = [pool.submit(work, p) for p in pieces]
        try:
            for f in as_completed(futs):
                rows, copy, write = f.result()
                done += rows
                spent["copy_back"] += copy
                spent["encode_write"] += write
                if report:
                    report("write", rows=min(m, int(done / per_edge)), total=m)
        except BaseException:
            for f in futs:
                f.cancel()
            raise
    return spent


def check_edge_output(output, min_samples, box_size=None) -> None:
    """Refuse to write a tree an ``.npy`` edge array cannot describe: the
    array records neither ``min_samples`` nor a box, so a
    mutual-reachability tree (``min_samples`` > 1) would be read back as a
    Euclidean one (its cuts and single linkage taken from weights that are
    not distances), and a periodic tree as an open one (its statistics and
    catalogues refused, or made in open space).

    Parameters
    ----------
    output : Output or None, a resolved edge output.
    min_samples : int, the tree's k_pts.
    box_size : the tree's periodic box, or None.

    Raises
    ------
    OutputError
    """
    if output is None or output.kind != "npy":
        return
    what = []
    if int(min_samples) > 1:
        what.append(f"a mutual-reachability tree (min_samples={int(min_samples)}) would be "
                    "read back as a Euclidean one")
    if box_size is not None:
        what.append("a periodic tree would be read back as an open one")
    if what:
        raise OutputError(
            f"{output.local}: an edge .npy records neither min_samples nor a box: "
            f"{'; '.join(what)}; write it to a Zarr edge store (a path ending in .zarr)")


def _write_npy(output: Output, tree, attrs, report):
    check_edge_output(output, attrs.get("min_samples") or 1, attrs.get("box_size"))
    output.check()
    loc = output.local
    if report:
        report("write", rows=0, total=int(tree.n_edges))
    with output.written_aside() as tmp, open(tmp, "wb") as fh:
        npy.save(fh, host_tree(tree).to_numpy(), "edges")
    output.cleanup()
    if report:
        report("write", rows=int(tree.n_edges), total=int(tree.n_edges))
    return EdgeStore(loc, dict(attrs, complete=True))


# --------------------------------------------------------------------------
# reading
# --------------------------------------------------------------------------
class EdgeStore:
    """A complete edge store (``open_edges``) or the one a job just wrote.

    ``path`` (also ``os.fspath(store)``), ``attrs`` (dict), the attributes as
    properties (``n``, ``d``, ``n_edges``, ``min_samples``,
    ``total_weight``, ``input``, ``version``); ``source``, ``target``,
    ``weight`` as lazy zarr arrays; ``load()`` for a ``SpanningTree`` in
    memory (every chunk's checksum verified).
    """

    _ATTRS = ("n", "d", "n_edges", "min_samples", "total_weight", "input", "version",
              "dtype", "backend", "iterations", "timings")

    def __init__(self, path, attrs: dict, _store=None):
        self.path = path
        self.attrs = dict(attrs)
        self._store = _store
        self._group = None

    def __getattr__(self, name):
        if name.startswith("_") or name in ("path", "attrs"):
            raise AttributeError(name)
        if name in self._ATTRS:
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

    @property
    def is_npy(self) -> bool:
        """True for an edge store that is one (n_edges, 3) .npy file."""
        return isinstance(self.path, str) and self.path.endswith(".npy")

    def _arrays(self) -> dict:
        if self.is_npy:
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

    def read_array(self, name: str) -> np.ndarray | None:
        """One array whole; a missing chunk, or one that fails its checksum
        or cannot be decoded, is an InputError naming the array and the
        chunk."""
        arr = self._arrays()[name]
        if arr is None:
            return None
        if not self.is_npy:
            self._check_chunks_present(name, arr)
        try:
            return _read_whole(arr) if not self.is_npy else np.asarray(arr[:])
        except Exception as exc:
            rows = int(arr.chunks[0]) if hasattr(arr, "chunks") else len(arr)
            for k, a in enumerate(range(0, arr.shape[0], rows)):
                try:
                    arr[a:a + rows]
                except Exception as e:  # noqa: BLE001 - name the chunk that fails
                    raise InputError(
                        f"{self.path}: array {name}: cannot read chunk {k} (rows {a}-"
                        f"{min(a + rows, arr.shape[0]) - 1}): {type(e).__name__}: {e}; "
                        "the store may be corrupt") from None
            raise InputError(f"{self.path}: array {name}: cannot be read "
                             f"({type(exc).__name__}: {exc})") from None

    def _check_chunks_present(self, name, arr):
        """An InputError naming the first chunk of ``arr`` absent from the
        store: zarr would read it as zeros, and the package writes every
        chunk (``io.codecs``), so an absent one is damage."""
        from .zarr_source import missing_chunks, storage_rows_of

        try:
            missing = missing_chunks(arr)
        except InputError:
            raise
        except Exception:  # noqa: BLE001 - a store that cannot list: the reads' checks remain
            return
        if missing:
            r, what = missing[0]
            a, b = storage_rows_of(arr, r)
            raise InputError(
                f"{self.path}: array {name}: chunk {r} (rows {a}-{b - 1}) is missing: {what}; "
                f"{len(missing)} missing in all. zarr would read it as zeros; the store is "
                "damaged or incomplete (restore the file, or compute the tree again)")

    def load(self) -> SpanningTree:
        """The tree in memory (numpy arrays)."""
        dt = np.dtype(self.attrs.get("dtype") or "float64")
        src = np.asarray(self.read_array("source"), np.int64)
        tgt = np.asarray(self.read_array("target"), np.int64)
        w = np.asarray(self.read_array("weight")).astype(dt, copy=False)
        core = None if self.is_npy else self.read_array("core_distances")
        n = int(self.attrs["n"]) if self.attrs.get("n") is not None else len(src) + 1
        check_tree(str(self.path), src, tgt, w, n,
                   core if int(self.attrs.get("min_samples") or 1) > 1 else None)
        return SpanningTree(
            src, tgt, w, core, n, int(self.attrs.get("d") or 0),
            int(self.attrs.get("min_samples") or 1), str(self.attrs.get("backend") or "cpu"),
            int(self.attrs.get("iterations") or 0), [], dict(self.attrs.get("timings") or {}),
            box_size=(None if self.attrs.get("box_size") is None
                      else np.asarray(self.attrs["box_size"], np.float64)))

    def to_numpy(self) -> np.ndarray:
        """(n-1, 3) float64 (source, target, weight)."""
        return self.load().to_numpy()


def _read_whole(arr, threads: int | None = None) -> np.ndarray:
    """A 1-D zarr array read whole by a pool of threads, four chunks a read
    (``zarr_threads``: each decodes on its own thread)."""
    n = int(arr.shape[0])
    step = int(arr.chunks[0]) * 4
    if n <= step:
        return np.asarray(arr[:])
    out = np.empty(n, arr.dtype)

    def work(a):
        out[a:a + step] = read_rows(arr, a, min(a + step, n))

    with ThreadPoolExecutor(max_workers=min(threads or default_threads(), -(-n // step)),
                            thread_name_prefix="emst-read") as pool:
        list(pool.map(work, range(0, n, step)))
    return out


def _open_npy_edges(loc) -> EdgeStore:
    if not os.path.exists(loc):
        raise InputError(f"{loc}: no such file")
    try:
        e = np.load(loc, mmap_mode="r", allow_pickle=False)
    except Exception as exc:
        raise InputError(f"{loc}: cannot be read as a .npy array ({exc})") from None
    if e.ndim == 2 and e.shape[1] == 3 and e.dtype == np.dtype(">f8"):
        raise InputError(f"{loc}: an (m, 3) big-endian float64 array; edge arrays are read "
                         "in the machine's byte order: save it as np.asarray(e, '<f8')")
    if e.ndim != 2 or e.shape[1] != 3 or e.dtype != np.float64:
        raise InputError(f"{loc}: not an edge array: expected an (m, 3) float64 array of "
                         f"(source, target, weight), got {e.shape} {e.dtype} (a point "
                         "cloud?)")
    m = e.shape[0]
    rows = e if m <= NPY_CHECK_ROWS else e[np.linspace(0, m - 1, NPY_CHECK_ROWS).astype(np.int64)]
    ids = np.asarray(rows[:, :2])
    w = np.asarray(rows[:, 2])
    if m and not (np.all(ids == np.floor(ids)) and ids.min() >= 0 and ids.max() <= m
                  and np.all(np.isfinite(w)) and w.min() >= 0):
        raise InputError(f"{loc}: not an edge array: its first two columns are not row "
                         f"indices in [0, {m}] or its weights are not finite and >= 0 "
                         "(a point cloud?)")
    total = float(np.asarray(e[:, 2], np.float64).sum())
    attrs = {"n": int(m) + 1, "d": None, "n_edges": int(m), "min_samples": None,
             "total_weight": total, "input": None, "version": None, "dtype": "float64",
             "complete": True}
    return EdgeStore(loc, attrs)


def open_edges(path, *, storage_options=None) -> EdgeStore:
    """Open an edge store (Zarr, or an (m, 3) ``.npy``); refuse anything else.

    Parameters
    ----------
    path : str, os.PathLike or URL
    storage_options : dict, optional

    Raises
    ------
    InputError
        Not an edge store (a point cloud, another Zarr store), incomplete,
        or lacking an array.
    """
    if is_pathlike(path) and os.fspath(path).endswith(".npy"):
        return _open_npy_edges(local_path(path))
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
    if attrs.get("format") != EDGE_FORMAT:
        raise InputError(f"{shown}: not an emst-dask edge store (no format attribute "
                         f"{EDGE_FORMAT!r})")
    if attrs.get("complete") is not True:
        raise InputError(f"{shown}: incomplete edge store (complete is not true): the job "
                         "that wrote it failed or is still running")
    missing = [k for k in ("source", "target", "weight") if k not in group]
    if missing:
        raise InputError(f"{shown}: edge store lacks {', '.join(missing)}")
    check_layout(shown, group, attrs)
    st = EdgeStore(shown, attrs, _store=None if loc is not None else path)
    st._group = group
    return st


def read_edges(path, *, storage_options=None) -> SpanningTree:
    """``open_edges(path).load()``."""
    return open_edges(path, storage_options=storage_options).load()
