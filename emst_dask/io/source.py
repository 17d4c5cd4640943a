"""Point sources: where the points come from, pinned down before any work.

``resolve_source(points, array=, columns=, storage_options=)`` (``io.resolve``)
turns what a user passes (an array, a .npy path, a Zarr path or URL, a ``zarr.Array`` or
``zarr.Group``, a dask array) into a ``PointSource``: its location made
absolute, the array or columns of a group chosen, the shape, the stored
dtype and the dtype the kernels compute in (float32 or float64, native byte
order) known, and for Zarr every chunk's presence checked.  No coordinates
are read.  A ``PointSource`` is small and picklable (store handles are
reopened where it is read), so it travels to a Dask worker as it is.

Reading (``read_checked``) converts a row range to the compute dtype and
checks it: 64-bit integers beyond 2**53 and NaN/inf are errors naming the
chunk, its rows and the first bad row.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from ..arrays import is_device_array
from ..errors import InputError
from .checks import (check_exact_integers, check_finite, check_shape_dtype, check_unmasked,
                     needs_integer_check)
from .reading import read_host

#: rows per read block when the source has no chunking of its own (.npy,
#: in-memory) and the least rows a read block is grown to from small chunks
BLOCK_ROWS = 1 << 20


@dataclass
class PointSource:
    """A validated, unread (n, d) point cloud.

    Attributes
    ----------
    n, d : int
    dtype : numpy.dtype
        As stored (any byte order).
    compute_dtype : numpy.dtype
        float32 or float64, native byte order: what the kernels see.
    where : str
        The source in messages (a path, with the member chosen).
    chunks : list of (start, stop)
        The storage chunks along the rows: errors name them.
    kind : {"chunk", "block"}
        What messages call a row range: a stored chunk, or a block of an
        in-memory or .npy array.
    location : str or None
        The absolute local path of the file or store the points live in.
    checksummed : bool
        Every stored chunk carries a checksum (read checks it): a NaN in it
        was written so, not damage.
    """

    n: int
    d: int
    dtype: np.dtype
    compute_dtype: np.dtype
    where: str
    chunks: list = field(default_factory=list)
    kind: str = "chunk"
    location: str | None = None
    checksummed: bool = False

    # ---- what each kind of source supplies
    def read(self, start: int, stop: int) -> np.ndarray:
        """Rows [start, stop) as stored: an (m, d) numpy array."""
        raise NotImplementedError  # pragma: no cover

    def describe(self) -> str:
        """What an edge store records as its input."""
        return self.where

    def attribute(self, name: str):
        """A metadata attribute stored with the points (a snapshot's
        ``BoxSize``), or None: only Zarr sources have them."""
        return None

    # ---- shared
    @property
    def shape(self) -> tuple[int, int]:
        """(n, d)."""
        return (self.n, self.d)

    @property
    def blocks(self) -> list:
        """Read units: whole chunks, merged while smaller than ``BLOCK_ROWS``."""
        return merge_chunks(self.chunks, BLOCK_ROWS)

    def chunk_of(self, row: int) -> int:
        """Index of the chunk holding ``row``."""
        starts = [a for a, _ in self.chunks]
        return int(np.searchsorted(starts, row, side="right") - 1)

    def chunk_label(self, k: int) -> str:
        """``"chunk K (rows A-B)"``."""
        a, b = self.chunks[k]
        return f"{self.kind} {k} (rows {a}-{b - 1})"

    def read_exact(self, a: int, b: int) -> np.ndarray:
        """Rows [a, b) as stored, refusing 64-bit integers beyond 2**53
        (float64, the compute dtype, would round them)."""
        raw = self.read(a, b)
        if needs_integer_check(raw.dtype):
            for k in range(self.chunk_of(a), self.chunk_of(b - 1) + 1 if b > a else 0):
                lo, hi = max(self.chunks[k][0], a), min(self.chunks[k][1], b)
                check_exact_integers(raw[lo - a:hi - a], lo,
                                     f"{self.where}: {self.chunk_label(k)}")
        return raw

    def read_checked(self, a: int, b: int, dst: np.ndarray):
        """Read rows [a, b) into ``dst`` (cast to its dtype, native order).

        Returns
        -------
        The first row among them with NaN/inf, or None.

        Raises
        ------
        InputError
            64-bit integer coordinates beyond 2**53.
        """
        np.copyto(dst, self.read_exact(a, b), casting="unsafe")
        ok = np.isfinite(dst).all(axis=1)
        return None if ok.all() else a + int(np.argmin(ok))

    def raise_nonfinite(self, block, start: int, first_row: int):
        """Raise the InputError of a NaN/inf at ``first_row`` of ``block``
        (rows [start, start + len(block)) in the compute dtype)."""
        k = self.chunk_of(first_row)
        a, b = self.chunks[k]
        lo, hi = max(a, start) - start, min(b, start + len(block)) - start
        hint = ("; the chunk may be corrupt (a damaged compressed chunk often "
                "decodes to NaN)") if self.kind == "chunk" and not self.checksummed else ""
        check_finite(block[lo:hi], row_offset=start + lo,
                     where=f"{self.where}: {self.chunk_label(k)}", hint=hint)
        raise AssertionError("unreachable")  # pragma: no cover

    def read_all(self) -> np.ndarray:
        """Every row in the compute dtype (host memory), checked."""
        return read_host(self, 1)

    def metadata(self) -> "PointSource":
        """The source without its data (what travels beside scattered blocks)."""
        return PointSource(n=self.n, d=self.d, dtype=self.dtype,
                           compute_dtype=self.compute_dtype, where=self.where,
                           chunks=list(self.chunks), kind=self.kind, location=self.location,
                           checksummed=self.checksummed)


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
    """[(0, rows), (rows, 2 rows), ...] covering n rows."""
    rows = max(1, int(rows))
    return [(a, min(a + rows, n)) for a in range(0, n, rows)] or [(0, 0)]


def irregular_chunks(sizes) -> list:
    """Row ranges of consecutive chunks of the given sizes."""
    out, a = [], 0
    for s in sizes:
        out.append((a, a + int(s)))
        a += int(s)
    return out or [(0, 0)]


# --------------------------------------------------------------------------
# in memory, .npy, dask
# --------------------------------------------------------------------------
class ArrayPoints(PointSource):
    """An in-memory (n, d) array (numpy; cupy is brought to the host)."""

    def __init__(self, data, where: str | None = None):
        if type(data).__module__.startswith("cupy"):
            data = data.get()
        check_unmasked(data, where or "points")
        data = np.asarray(data)
        if data.dtype == object:
            raise InputError("points has dtype object: expected float32 or float64")
        dt = check_shape_dtype(data.shape, data.dtype, where or "points")
        self.data = data
        super().__init__(n=int(data.shape[0]), d=int(data.shape[1]), dtype=data.dtype,
                         compute_dtype=dt,
                         where=where or f"points ({data.shape[0]}, {data.shape[1]}) {data.dtype}",
                         chunks=regular_chunks(int(data.shape[0]), BLOCK_ROWS), kind="block")

    def read(self, start, stop):
        """Rows [start, stop) of the in-memory array (a view)."""
        return self.data[start:stop]


class NpyPoints(PointSource):
    """An (n, d) array in a .npy file, read through a memory map."""

    def __init__(self, path: str):
        self.path = path
        self._mm = None
        mm = self._open()
        dt = check_shape_dtype(mm.shape, mm.dtype, path)
        super().__init__(n=int(mm.shape[0]), d=int(mm.shape[1]), dtype=mm.dtype,
                         compute_dtype=dt, where=path,
                         chunks=regular_chunks(int(mm.shape[0]), BLOCK_ROWS), kind="block",
                         location=path)

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
            except (ValueError, OSError) as exc:
                raise InputError(f"{self.path}: cannot be read as a numeric .npy array "
                                 f"({exc})") from None
            if self._mm.dtype == object:
                raise InputError(f"{self.path}: has dtype object: expected float32 or float64")
        return self._mm

    def read(self, start, stop):
        """Rows [start, stop) of the memory map, as an ndarray (pages read on access)."""
        return np.asarray(self._open()[start:stop])


class BlockPoints(PointSource):
    """Row blocks already in memory: the scattered blocks of an in-memory
    array or the computed blocks of a dask array, on the worker."""

    def __init__(self, blocks: Sequence, like: PointSource):
        self._data = list(blocks)
        super().__init__(n=like.n, d=like.d, dtype=like.dtype,
                         compute_dtype=like.compute_dtype, where=like.where,
                         chunks=list(like.chunks), kind=like.kind, location=like.location)

    @property
    def blocks(self) -> list:
        """The row blocks as they arrived: one read unit each."""
        return list(self.chunks)

    def read(self, start, stop):
        """The block holding row ``start``, as stored, its shape checked (whole blocks)."""
        k = self.chunk_of(start)
        return _checked_block(self, k, self._data[k])

    def device_block(self, k: int):
        """Block ``k`` where it is, when it is a float array on a GPU (its
        shape and dtype checked), else None: such blocks are staged by a
        copy on the device."""
        blk = self._data[k]
        if not is_device_array(blk) or np.dtype(blk.dtype).kind != "f":
            return None
        a, b = self.chunks[k]
        if tuple(blk.shape) != (b - a, self.d) or np.dtype(blk.dtype) != self.dtype:
            return None  # the host path names what is wrong
        return blk


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
        if any(math.isnan(c) for c in arr.chunks[1]):
            raise InputError(f"{where} has an unknown number of columns (a boolean column "
                             "selection?); call arr.compute_chunk_sizes() first")
        dt = check_shape_dtype(shape, arr.dtype, where)
        if len(arr.chunks[1]) > 1:
            arr = arr.rechunk({1: -1})
        self.array = arr
        super().__init__(n=int(shape[0]), d=int(shape[1]), dtype=np.dtype(arr.dtype),
                         compute_dtype=dt, where=where,
                         chunks=irregular_chunks(arr.chunks[0]), kind="block")

    @property
    def blocks(self) -> list:
        """The dask array's row blocks: one read unit each."""
        return list(self.chunks)

    def delayed_blocks(self) -> list:
        """One dask.delayed per row block."""
        return list(self.array.to_delayed()[:, 0])

    def read(self, start, stop):
        """The block holding row ``start``, computed here (sync scheduler), its shape checked."""
        k = self.chunk_of(start)
        blk = self.array.blocks[k].compute(scheduler="sync")
        return _checked_block(self, k, blk)


def _checked_block(src, k, blk):
    """A computed block of a dask source: the shape and dtype its array
    declared, no masked entries."""
    if type(blk).__module__.startswith("cupy"):
        blk = blk.get()
    check_unmasked(blk, f"{src.where}: {src.chunk_label(k)}", src.chunks[k][0])
    blk = np.asarray(blk)
    a, b = src.chunks[k]
    if blk.shape != (b - a, src.d):
        raise InputError(f"{src.where}: {src.chunk_label(k)} computed to shape "
                         f"{blk.shape}, expected {(b - a, src.d)}")
    if blk.dtype != src.dtype:  # the declared dtype's checks (integers, complex) were made
        raise InputError(f"{src.where}: {src.chunk_label(k)} computed to dtype {blk.dtype}, "
                         f"but the array declares {src.dtype}")
    return blk


# --------------------------------------------------------------------------
# what a user passes, read as a source: io.resolve
# --------------------------------------------------------------------------
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


def is_in_memory(points) -> bool:
    """numpy/cupy arrays and plain array-likes (lists), not paths, zarr or dask."""
    if isinstance(points, (str, os.PathLike, PointSource)):
        return False
    mod = type(points).__module__ or ""
    return not (mod.startswith("dask") or mod.startswith("zarr"))
