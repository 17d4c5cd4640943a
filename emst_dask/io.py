"""Reading point clouds from where they live: Zarr stores, .npy files, dask
arrays, in-memory arrays.

``open_points(source, ...)`` opens and checks a source *lazily*: the rank,
shape, dtype and the store's metadata are checked at once (an error names
the store and what is wrong with it); no coordinates are read.  The result,
a ``PointSource``, is small and picklable, so it can be shipped to a Dask
worker, which then ``stage``\\ s it: reads its row blocks in a thread pool
into one (n, d) array in host memory (CPU backend) or device memory (CUDA:
pinned host buffers, asynchronous copies on a stream of their own, the
read of block k+1 overlapping the copy of block k), checking every block
for NaN/inf before any kernel runs.  A bad value is reported with the chunk
index, the global row and the store path.

Layouts of a Zarr source (zarr_format 2 or 3):

* an (n, d) array (the store itself, or a member of a group);
* a group holding one 2-D array (taken when it is the only one, else named
  by ``array=``);
* a group holding d 1-D coordinate arrays, named by ``columns=("x", "y",
  "z")`` (a group whose only arrays are ``x``, ``y`` [, ``z``] is read that
  way without being told).
"""
from __future__ import annotations

import math
import os
import queue
import threading
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from .validation import InputError, check_finite, check_shape_dtype

#: rows per read block when the source has no chunking of its own (.npy,
#: in-memory) and the least rows a read block is grown to from small chunks
BLOCK_ROWS = 1 << 20


def default_threads() -> int:
    """Reader threads: enough to keep a disk and a codec pipeline busy."""
    return max(2, min(16, os.cpu_count() or 2))


# --------------------------------------------------------------------------
# paths
# --------------------------------------------------------------------------
def is_url(path) -> bool:
    return isinstance(path, str) and "://" in path and not path.startswith("file://")


def local_path(path) -> str | None:
    """The absolute local path of ``path`` (str, os.PathLike, file:// URL),
    or None for remote URLs and store objects."""
    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    if not isinstance(path, str):
        return None
    if path.startswith("file://"):
        path = path[len("file://"):]
    elif "://" in path:
        return None
    return os.path.abspath(os.path.expanduser(path))


def is_pathlike(obj) -> bool:
    return isinstance(obj, (str, os.PathLike))


def parse_columns(columns) -> tuple[str, ...] | None:
    """``"x,y,z"`` or a sequence of names -> a tuple of names (None stays None)."""
    if columns is None:
        return None
    if isinstance(columns, str):
        names = tuple(c.strip() for c in columns.split(",") if c.strip())
    else:
        names = tuple(str(c) for c in columns)
    if not names:
        raise InputError("columns must name at least one coordinate array, e.g. ('x', 'y', 'z')")
    if len(set(names)) != len(names):
        raise InputError(f"columns name an array twice: {names}")
    return names


# --------------------------------------------------------------------------
# sources
# --------------------------------------------------------------------------
@dataclass
class PointSource:
    """A validated, unread (n, d) point cloud.

    ``chunks`` are the storage chunks along the rows, as (start, stop) pairs:
    errors name them.  ``blocks`` are the read units: whole chunks, merged
    while smaller than ``BLOCK_ROWS``.  ``where`` names the source in
    messages; ``describe()`` is what an edge store records as its input.
    """

    n: int
    d: int
    dtype: np.dtype          # as stored
    compute_dtype: np.dtype  # float32 or float64, what the kernels see
    where: str
    chunks: list = field(default_factory=list)
    kind: str = "chunk"      # what messages call a row range: "chunk" (storage), "block"

    # ---- interface for subclasses
    def read(self, start: int, stop: int) -> np.ndarray:  # pragma: no cover
        raise NotImplementedError

    def describe(self) -> str:
        return self.where

    def chunk_kind(self) -> str:
        return self.kind

    # ---- shared
    @property
    def shape(self):
        return (self.n, self.d)

    @property
    def blocks(self) -> list:
        return merge_chunks(self.chunks, BLOCK_ROWS)

    def chunk_of(self, row: int) -> int:
        starts = [a for a, _ in self.chunks]
        return int(np.searchsorted(starts, row, side="right") - 1)

    def chunk_label(self, k: int) -> str:
        a, b = self.chunks[k]
        return f"{self.chunk_kind()} {k} (rows {a}-{b - 1})"

    def read_checked(self, a: int, b: int, dst: np.ndarray):
        """Read rows [a, b) into ``dst`` (cast to its dtype); the first row
        with NaN/inf among them, or None."""
        np.copyto(dst, self.read(a, b), casting="unsafe")
        ok = np.isfinite(dst).all(axis=1)
        return None if ok.all() else a + int(np.argmin(ok))

    def raise_nonfinite(self, block, start: int, first_row: int):
        k = self.chunk_of(first_row)
        a, b = self.chunks[k]
        lo, hi = max(a, start) - start, min(b, start + len(block)) - start
        check_finite(block[lo:hi], row_offset=start + lo,
                     where=f"{self.where}: {self.chunk_label(k)}")
        raise AssertionError("unreachable")  # pragma: no cover

    def read_all(self) -> np.ndarray:
        """Every row in the compute dtype (host memory), checked."""
        return stage(self, "cpu", threads=1)


def merge_chunks(chunks, min_rows: int) -> list:
    """Consecutive chunks joined until each block has at least ``min_rows``."""
    blocks = []
    a0 = None
    for a, b in chunks:
        if a0 is None:
            a0 = a
        if b - a0 >= min_rows:
            blocks.append((a0, b))
            a0 = None
    if a0 is not None:
        blocks.append((a0, chunks[-1][1]))
    return blocks


def regular_chunks(n: int, rows: int) -> list:
    rows = max(1, int(rows))
    return [(a, min(a + rows, n)) for a in range(0, n, rows)] or [(0, 0)]


def irregular_chunks(sizes) -> list:
    out, a = [], 0
    for s in sizes:
        out.append((a, a + int(s)))
        a += int(s)
    return out or [(0, 0)]


def _zarr_rows_per_chunk(arr) -> int:
    shards = getattr(arr, "shards", None)
    return int((shards or arr.chunks)[0])


class ZarrPoints(PointSource):
    """An (n, d) Zarr array, or d 1-D arrays of a group (``columns``)."""

    def __init__(self, store, *, path: str | None, array: str | None,
                 columns: tuple | None, storage_options=None):
        self.store = store            # the user's path/URL (absolute) or a zarr object
        self.path = path              # printable location
        self.array = array            # member name of the (n, d) array, None: the store itself
        self.columns = columns        # member names of the 1-D columns, or None
        self.storage_options = storage_options
        self._arrays = None
        arrays = self._open()
        if columns is None:
            a = arrays[0]
            where = path if array is None else f"{path}/{array}"
            dt = check_shape_dtype(a.shape, _np_dtype(a.dtype, where), where)
            n, d = a.shape
            rows = _zarr_rows_per_chunk(a)
            stored = _np_dtype(a.dtype, where)
        else:
            where = f"{path}[{','.join(columns)}]"
            lengths = {}
            dtypes = []
            for name, a in zip(columns, arrays):
                if len(a.shape) != 1:
                    raise InputError(
                        f"{path}/{name}: a coordinate column must be 1-D, got shape "
                        f"{tuple(a.shape)}")
                lengths[name] = a.shape[0]
                dtypes.append(_np_dtype(a.dtype, f"{path}/{name}"))
            if len(set(lengths.values())) > 1:
                raise InputError(
                    f"{where}: the coordinate columns differ in length: "
                    + ", ".join(f"{k}={v}" for k, v in lengths.items()))
            try:
                stored = np.result_type(*dtypes)
            except TypeError:
                bad = next(t for t in dtypes if t.kind not in "fiub")
                stored = bad
            n, d = next(iter(lengths.values())), len(columns)
            for name, t in zip(columns, dtypes):
                check_shape_dtype((n, d), t, f"{path}/{name}")
            dt = check_shape_dtype((n, d), stored, where)
            rows = _zarr_rows_per_chunk(arrays[0])
        super().__init__(n=int(n), d=int(d), dtype=np.dtype(stored), compute_dtype=dt,
                         where=where, chunks=regular_chunks(int(n), rows))

    # zarr objects are reopened on the worker, not pickled
    def __getstate__(self):
        state = dict(self.__dict__)
        state["_arrays"] = None
        return state

    def _open(self):
        if self._arrays is not None:
            return self._arrays
        node = _open_node(self.store, self.path, self.storage_options)
        if self.columns is not None:
            group = _as_group(node, self.path, "columns=")
            arrays = [_member(group, c, self.path) for c in self.columns]
        elif self.array is not None:
            group = _as_group(node, self.path, "array=")
            arrays = [_member(group, self.array, self.path)]
        else:
            arrays = [node]
        self._arrays = arrays
        return arrays

    def read(self, start: int, stop: int) -> np.ndarray:
        arrays = self._open()
        try:
            if self.columns is None:
                return np.asarray(arrays[0][start:stop])
            out = np.empty((stop - start, self.d), self.dtype)
            for j, a in enumerate(arrays):
                out[:, j] = a[start:stop]
            return out
        except InputError:
            raise
        except Exception as exc:
            k, exc = self._failing_chunk(start, stop, exc)
            raise InputError(f"{self.where}: cannot read {self.chunk_label(k)}: "
                             f"{type(exc).__name__}: {exc}") from exc

    def _failing_chunk(self, start, stop, exc):
        """The first chunk of a multi-chunk read that fails on its own."""
        k0, k1 = self.chunk_of(start), self.chunk_of(stop - 1)
        for k in range(k0, k1 + 1) if k1 > k0 else ():
            a, b = self.chunks[k]
            try:
                for arr in self._open():
                    arr[a:b]
            except Exception as e:  # noqa: BLE001 - any read failure names its chunk
                return k, e
        return k0, exc


class NpyPoints(PointSource):
    """An (n, d) array in a .npy file, read through a memory map."""

    def __init__(self, path: str):
        self.path = path
        self._mm = None
        mm = self._open()
        dt = check_shape_dtype(mm.shape, mm.dtype, path)
        super().__init__(n=int(mm.shape[0]), d=int(mm.shape[1]), dtype=mm.dtype,
                         compute_dtype=dt, where=path,
                         chunks=regular_chunks(int(mm.shape[0]), BLOCK_ROWS))

    def chunk_kind(self) -> str:
        return "block"

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_mm"] = None
        return state

    def _open(self):
        if self._mm is None:
            try:
                self._mm = np.load(self.path, mmap_mode="r", allow_pickle=False)
            except FileNotFoundError:
                raise InputError(f"{self.path}: no such file") from None
            except ValueError as exc:
                raise InputError(f"{self.path}: cannot be read as a numeric .npy array "
                                 f"({exc})") from None
            if self._mm.dtype == object:
                raise InputError(f"{self.path}: has dtype object: expected float32 or float64")
        return self._mm

    def read(self, start, stop):
        return np.asarray(self._open()[start:stop])


class ArrayPoints(PointSource):
    """An in-memory (n, d) array (numpy; cupy is brought to the host)."""

    def __init__(self, data, where: str = "points"):
        if type(data).__module__.startswith("cupy"):
            data = data.get()
        data = np.asarray(data)
        if data.dtype == object:
            raise InputError(f"{where} has dtype object: expected float32 or float64")
        dt = check_shape_dtype(data.shape, data.dtype, where)
        self.data = data
        super().__init__(n=int(data.shape[0]), d=int(data.shape[1]), dtype=data.dtype,
                         compute_dtype=dt, where=where,
                         chunks=regular_chunks(int(data.shape[0]), BLOCK_ROWS))

    def chunk_kind(self) -> str:
        return "block"

    def read(self, start, stop):
        return self.data[start:stop]


class BlockPoints(PointSource):
    """Row blocks already in memory (the computed blocks of a dask array)."""

    def __init__(self, blocks: Sequence, like: PointSource):
        self._data = list(blocks)
        super().__init__(n=like.n, d=like.d, dtype=like.dtype,
                         compute_dtype=like.compute_dtype, where=like.where,
                         chunks=list(like.chunks), kind=like.chunk_kind())

    @property
    def blocks(self) -> list:
        return list(self.chunks)

    def read(self, start, stop):
        k = self.chunk_of(start)
        return _checked_block(self, k, self._data[k])


class DaskPoints(PointSource):
    """A dask array; its row blocks are computed where the job runs (with a
    client: by the cluster, then moved to the job's worker by Dask)."""

    def __init__(self, arr, where: str = "dask array"):
        shape = arr.shape
        if len(shape) != 2:
            check_shape_dtype(shape, arr.dtype, where)
        if any(math.isnan(c) for c in arr.chunks[0]):
            raise InputError(f"{where} has unknown chunk sizes; call "
                             "arr.compute_chunk_sizes() first")
        dt = check_shape_dtype(shape, arr.dtype, where)
        if len(arr.chunks[1]) > 1:
            arr = arr.rechunk({1: -1})
        self.array = arr
        super().__init__(n=int(shape[0]), d=int(shape[1]), dtype=np.dtype(arr.dtype),
                         compute_dtype=dt, where=where,
                         chunks=irregular_chunks(arr.chunks[0]))

    @property
    def blocks(self) -> list:
        return list(self.chunks)

    def delayed_blocks(self) -> list:
        return list(self.array.to_delayed()[:, 0])

    def read(self, start, stop):
        k = self.chunk_of(start)
        blk = self.array.blocks[k].compute(scheduler="sync")
        return _checked_block(self, k, blk)


def _checked_block(src, k, blk):
    if type(blk).__module__.startswith("cupy"):
        blk = blk.get()
    blk = np.asarray(blk)
    a, b = src.chunks[k]
    if blk.shape != (b - a, src.d):
        raise InputError(f"{src.where}: {src.chunk_label(k)} computed to shape "
                         f"{blk.shape}, expected {(b - a, src.d)}")
    return blk


def _np_dtype(dt, where):
    try:
        return np.dtype(dt)
    except TypeError:
        raise InputError(f"{where} has dtype {dt}: expected float32 or float64") from None


def _as_group(node, path, what):
    import zarr

    if isinstance(node, zarr.Group):
        return node
    raise InputError(f"{path}: is a single array, so {what} does not apply; "
                     "give the group that holds it")


def _member(group, name, path):
    import zarr

    try:
        node = group[name]
    except KeyError:
        raise InputError(f"{path}: has no array {name!r}; it holds "
                         f"{_listing(group)}") from None
    if not isinstance(node, zarr.Array):
        raise InputError(f"{path}/{name}: is a group, not an array")
    return node


def _listing(group) -> str:
    items = [f"{k} {tuple(a.shape)} {a.dtype}" for k, a in sorted(group.arrays())]
    return ", ".join(items) if items else "no arrays"


def open_points(source, *, array: str | None = None, columns=None,
                storage_options: dict | None = None) -> PointSource:
    """Open and check a point source without reading its coordinates.

    ``source``: a path or URL of a Zarr store (v2 or v3) or of a .npy file;
    a ``zarr.Array`` or ``zarr.Group``; a dask array; a numpy or cupy array.
    ``array`` names the (n, d) member of a group, ``columns`` its 1-D
    coordinate members (a sequence or ``"x,y,z"``).  Raises ``InputError``
    naming the place for a missing path, a wrong rank or shape, a
    non-numeric dtype, an ambiguous group.
    """
    columns = parse_columns(columns)
    if array is not None and columns is not None:
        raise InputError("give either array= (one (n, d) array) or columns= "
                         "(1-D coordinate arrays), not both")
    if isinstance(source, PointSource):
        return source
    mod = type(source).__module__
    if mod.startswith("dask.array"):
        _no_members(array, columns, "a dask array")
        return DaskPoints(source)
    if isinstance(source, np.ndarray) or mod.startswith("cupy"):
        _no_members(array, columns, "an in-memory array")
        return ArrayPoints(source)
    if is_pathlike(source):
        loc = local_path(source)
        if loc is not None:
            if not os.path.exists(loc):
                raise InputError(f"{loc}: no such file or Zarr store")
            if os.path.isfile(loc):
                if loc.endswith(".npz"):
                    raise InputError(f"{loc}: is an .npz archive; give one (n, d) array "
                                     "as .npy or a Zarr store")
                with open(loc, "rb") as fh:
                    magic = fh.read(6)
                if magic == b"\x93NUMPY":
                    _no_members(array, columns, "a .npy file")
                    return NpyPoints(loc)
                raise InputError(f"{loc}: is a file but neither a .npy array nor a "
                                 "Zarr store (a directory)")
            return _zarr_points(loc, loc, array, columns, None)
        return _zarr_points(str(source), str(source), array, columns, storage_options)
    try:
        import zarr
    except ImportError:  # pragma: no cover
        zarr = None
    if zarr is not None and isinstance(source, (zarr.Array, zarr.Group)):
        path = str(getattr(source, "store_path", "zarr")) or "zarr"
        return _zarr_points(source, path, array, columns, None)
    # anything else array-like (lists): in memory
    try:
        data = np.asarray(source)
    except Exception as exc:
        raise InputError(f"points cannot be read as an array: {exc}") from exc
    return ArrayPoints(data)


def _no_members(array, columns, what):
    if array is not None or columns is not None:
        raise InputError(f"array= and columns= select members of a Zarr group; the "
                         f"source is {what}")


def _open_node(store, path, storage_options):
    import zarr

    if not isinstance(store, (str, os.PathLike)):
        return store
    try:
        return zarr.open(store, mode="r", storage_options=storage_options)
    except FileNotFoundError:
        raise InputError(f"{path}: no Zarr array or group here (no zarr.json, "
                         ".zarray or .zgroup)") from None
    except Exception as exc:
        raise InputError(f"{path}: cannot be opened as a Zarr store "
                         f"({type(exc).__name__}: {exc})") from None


def _zarr_points(store, path, array, columns, storage_options):
    import zarr

    node = _open_node(store, path, storage_options)
    if isinstance(node, zarr.Group) and array is None and columns is None:
        arrays = dict(node.arrays())
        two_d = sorted(k for k, a in arrays.items() if len(a.shape) == 2)
        if len(two_d) == 1:
            array = two_d[0]
        elif len(two_d) > 1:
            raise InputError(f"{path}: holds several 2-D arrays ({', '.join(two_d)}); "
                             "choose one with array=NAME (--array NAME)")
        elif all(c in arrays for c in ("x", "y")):
            columns = tuple(c for c in ("x", "y", "z") if c in arrays)
        else:
            raise InputError(f"{path}: is a group without an (n, d) array; it holds "
                             f"{_listing(node)}. Name the coordinate arrays with "
                             "columns=('x', 'y', 'z') (--columns x,y,z) or the array "
                             "with array=NAME")
    return ZarrPoints(store, path=path, array=array, columns=columns,
                      storage_options=storage_options)


# --------------------------------------------------------------------------
# staging: every block into one array, host or device
# --------------------------------------------------------------------------
def stage(src: PointSource, backend: str = "cpu", *, threads: int | None = None,
          report=None, device=None):
    """Read ``src`` into one C-contiguous (n, d) array of its compute dtype.

    ``backend="cpu"``: a numpy array; the reader threads convert and check
    their blocks in place.  ``backend="cuda"``: a cupy array, filled through
    a ring of pinned host buffers and asynchronous copies (``device`` may
    replace the CuPy device layer, for tests).  NaN/inf raise
    ``InputError`` naming the lowest bad chunk, its first bad row and the
    store, before any kernel runs.  ``report(phase, **info)`` gets
    ``("read", rows=, total=, blocks=, block=)`` as blocks arrive.
    """
    threads = threads or default_threads()
    if backend == "cuda" or device is not None:
        return _stage_device(src, threads, report, device or CupyDevice())
    return _stage_host(src, threads, report)


def _stage_host(src, threads, report):
    n, d = src.shape
    out = np.empty((n, d), src.compute_dtype)
    blocks = [(a, b) for a, b in src.blocks if b > a]
    bad = {}

    def work(j):
        a, b = blocks[j]
        first = src.read_checked(a, b, out[a:b])
        if first is not None:
            bad[j] = first
        return j

    _run_blocks(work, blocks, threads, report, n)
    if bad:
        j = min(bad)
        a, b = blocks[j]
        src.raise_nonfinite(out[a:b], a, bad[j])
    return out


def _run_blocks(work, blocks, threads, report, n):
    done_rows = 0
    if report:
        report("read", rows=0, total=n, blocks=len(blocks), block=-1)
    if not blocks:
        return
    with ThreadPoolExecutor(max_workers=min(threads, len(blocks)),
                            thread_name_prefix="emst-read") as pool:
        futs = [pool.submit(work, j) for j in range(len(blocks))]
        try:
            for f in as_completed(futs):
                j = f.result()
                a, b = blocks[j]
                done_rows += b - a
                if report:
                    report("read", rows=done_rows, total=n, blocks=len(blocks), block=j)
        except BaseException:
            for f in futs:
                f.cancel()
            raise


class CupyDevice:
    """The device side of staging: device arrays, pinned buffers, one
    non-blocking stream for the host-to-device copies."""

    def __init__(self):
        import cupy
        import cupyx

        self.cp = cupy
        self.cupyx = cupyx
        self.stream = cupy.cuda.Stream(non_blocking=True)

    def empty(self, shape, dtype):
        return self.cp.empty(shape, dtype)

    def pinned(self, shape, dtype):
        try:
            return self.cupyx.empty_pinned(shape, dtype)
        except Exception:  # pinned memory exhausted: pageable still works
            return np.empty(shape, dtype)

    def copy_async(self, dev, a, b, buf):
        dev[a:b].set(buf[: b - a], stream=self.stream)
        return self.stream.record()

    def wait(self, event):
        event.synchronize()

    def finish(self):
        self.stream.synchronize()

    def first_bad_row(self, dev) -> int:
        """-1, or the first row with NaN/inf (one pass on the device)."""
        cp = self.cp
        bad = ~cp.isfinite(dev).all(axis=1)
        if not bool(bad.any()):
            return -1
        return int(cp.flatnonzero(bad)[0])

    def to_host(self, dev_rows):
        return self.cp.asnumpy(dev_rows)


def _stage_device(src, threads, report, dev_layer):
    """Pinned ring: readers fill free buffers (reading block k+1 while block
    k is copied), the main thread issues the asynchronous copies, a recycler
    thread hands buffers back once their copy has completed."""
    n, d = src.shape
    dt = src.compute_dtype
    dev = dev_layer.empty((n, d), dt)
    blocks = [(a, b) for a, b in src.blocks if b > a]
    if not blocks:
        if report:
            report("read", rows=0, total=n, blocks=0, block=-1)
        return dev
    rows = max(b - a for a, b in blocks)
    nbuf = min(len(blocks), threads + 2)
    free: queue.Queue = queue.Queue()
    for _ in range(nbuf):
        free.put(dev_layer.pinned((rows, d), dt))
    inflight: queue.Queue = queue.Queue()
    recycle_error = []

    def recycler():
        while True:
            item = inflight.get()
            if item is None:
                return
            event, buf = item
            try:
                dev_layer.wait(event)
            except BaseException as exc:  # pragma: no cover - device fault
                recycle_error.append(exc)
            free.put(buf)

    rec = threading.Thread(target=recycler, name="emst-pinned-recycler", daemon=True)
    rec.start()
    results: queue.Queue = queue.Queue()

    def work(j):
        a, b = blocks[j]
        x = src.read(a, b)       # decode outside the pinned buffer
        buf = free.get()         # wait for a buffer whose copy has finished
        np.copyto(buf[: b - a], x, casting="unsafe")
        results.put((j, buf))
        return j

    done_rows = 0
    if report:
        report("read", rows=0, total=n, blocks=len(blocks), block=-1)
    try:
        with ThreadPoolExecutor(max_workers=min(threads, len(blocks)),
                                thread_name_prefix="emst-read") as pool:
            futs = [pool.submit(work, j) for j in range(len(blocks))]
            try:
                for _ in range(len(blocks)):
                    while True:
                        try:
                            j, buf = results.get(timeout=0.5)
                            break
                        except queue.Empty:
                            for f in futs:  # a reader failed: stop waiting
                                if f.done() and f.exception() is not None:
                                    raise f.exception()
                    a, b = blocks[j]
                    event = dev_layer.copy_async(dev, a, b, buf)
                    inflight.put((event, buf))
                    done_rows += b - a
                    if report:
                        report("read", rows=done_rows, total=n, blocks=len(blocks), block=j)
            except BaseException:
                for f in futs:
                    f.cancel()
                # let blocked readers finish so the pool can shut down
                for _ in range(len(futs)):
                    free.put(np.empty((rows, d), dt))
                raise
        dev_layer.finish()
    finally:
        inflight.put(None)
        rec.join()
    if recycle_error:  # pragma: no cover
        raise recycle_error[0]
    first = dev_layer.first_bad_row(dev)
    if first >= 0:
        k = src.chunk_of(first)
        a, b = src.chunks[k]
        src.raise_nonfinite(dev_layer.to_host(dev[a:b]), a, first)
    return dev
