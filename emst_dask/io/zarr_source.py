"""Zarr point sources (zarr_format 2 or 3): found, pinned and checked.

Layouts of a Zarr source:

* an (n, d) array (the store itself, or a member of a group);
* a group holding one 2-D numeric array anywhere below it (an N-body
  snapshot's ``PartType1/Coordinates``, say): taken when it is the only one,
  else named by ``array=`` (a path inside the group);
* a group holding d 1-D coordinate arrays, named by ``columns=("x", "y",
  "z")`` (a group whose only arrays are ``x``, ``y`` [, ``z``] is read that
  way without being told).

What ``resolve`` pins down on the client, before any task: the store's
absolute location (a ``zarr.Array`` or ``zarr.Group`` opened with a
relative path is reopened by its absolute one, so workers with another
working directory find it), the member, and every chunk's presence.  zarr
reads a missing chunk as its fill value; here a missing chunk is an error
that names it and its rows, on the client and again on the worker (a chunk
that reads as all fill values is looked up in the store before it is
used).
"""
from __future__ import annotations

import os

import numpy as np

from ..errors import InputError
from .checks import check_shape_dtype
from .paths import local_path
from .source import PointSource, regular_chunks
from .zarr_threads import read_rows


def is_zarr_node(obj) -> bool:
    """A ``zarr.Array`` or ``zarr.Group``."""
    try:
        import zarr
    except ImportError:  # pragma: no cover
        return False
    return isinstance(obj, (zarr.Array, zarr.Group))


def _open_node(store, shown, storage_options=None):
    import zarr

    if not isinstance(store, (str, os.PathLike)):
        return store
    try:
        return zarr.open(store, mode="r", storage_options=storage_options)
    except FileNotFoundError:
        raise InputError(f"{shown}: no Zarr array or group here (no zarr.json, "
                         ".zarray or .zgroup)") from None
    except Exception as exc:
        raise InputError(f"{shown}: cannot be opened as a Zarr store: its metadata is "
                         f"unreadable ({type(exc).__name__}: {exc})") from None


def _np_dtype(dt, where):
    try:
        return np.dtype(dt)
    except TypeError:
        raise InputError(f"{where} has dtype {dt}: expected float32 or float64") from None


def _member(group, name, shown):
    import zarr

    try:
        node = group[name]
    except KeyError:
        raise InputError(f"{shown}: has no array {name!r}; it holds "
                         f"{_listing(group)}") from None
    except Exception as exc:
        raise InputError(f"{shown}/{name}: cannot be opened ({type(exc).__name__}: "
                         f"{exc})") from None
    if not isinstance(node, zarr.Array):
        raise InputError(f"{shown}/{name}: is a group, not an array")
    return node


def _arrays_below(group) -> dict:
    """Every array below ``group``, by its path inside it."""
    import zarr

    try:
        members = dict(group.members(max_depth=None))
    except Exception as exc:
        raise InputError(f"{group.store_path}: cannot list the group ({type(exc).__name__}: "
                         f"{exc})") from None
    return {k: a for k, a in members.items() if isinstance(a, zarr.Array)}


def _listing(group) -> str:
    items = [f"{k} {tuple(a.shape)} {a.dtype}" for k, a in sorted(_arrays_below(group).items())]
    return ", ".join(items) if items else "no arrays"


def _choose_member(node, shown, array, columns):
    """(array, columns) for a group given neither: the only (n, d) numeric
    array below it, else x, y[, z] columns; an error listing the candidates."""
    arrays = _arrays_below(node)
    two_d = sorted(k for k, a in arrays.items()
                   if len(a.shape) == 2 and _np_dtype(a.dtype, f"{shown}/{k}").kind in "fiu")
    if len(two_d) == 1:
        return two_d[0], None
    if len(two_d) > 1:
        raise InputError(f"{shown}: holds several 2-D arrays ({', '.join(two_d)}); "
                         "choose one with array=NAME (--array NAME)")
    if all(c in arrays for c in ("x", "y")):
        return None, tuple(c for c in ("x", "y", "z") if c in arrays)
    raise InputError(f"{shown}: is a group without an (n, d) array; it holds "
                     f"{_listing(node)}. Name the coordinate arrays with "
                     "columns=('x', 'y', 'z') (--columns x,y,z) or the array "
                     "with array=NAME")


def resolve(store, array, columns, storage_options) -> "ZarrPoints":
    """The ``ZarrPoints`` of a Zarr store at an absolute path or a URL."""
    import zarr

    shown = str(store)
    node = _open_node(store, shown, storage_options)
    if isinstance(node, zarr.Group) and array is None and columns is None:
        array, columns = _choose_member(node, shown, array, columns)
    elif isinstance(node, zarr.Array) and (array is not None or columns is not None):
        what = "array=" if array is not None else "columns="
        raise InputError(f"{shown}: is a single array, so {what} does not apply; "
                         "give the group that holds it")
    return ZarrPoints(store, shown=shown, array=array, columns=columns,
                      storage_options=storage_options)


def resolve_node(node, array, columns) -> "ZarrPoints":
    """The ``ZarrPoints`` of an open ``zarr.Array`` or ``zarr.Group``.

    A node on a local store is reopened by its absolute path (what the user
    opened relative to this process's working directory means nothing to a
    worker); other stores travel as they are.
    """
    from zarr.storage import LocalStore

    sp = node.store_path
    if isinstance(sp.store, LocalStore):
        root = os.path.abspath(str(sp.store.root))
        path = os.path.join(root, *sp.path.split("/")) if sp.path else root
        return resolve(path, array, columns, None)
    shown = str(sp) or "zarr"
    import zarr

    if isinstance(node, zarr.Group) and array is None and columns is None:
        array, columns = _choose_member(node, shown, array, columns)
    return ZarrPoints(node, shown=shown, array=array, columns=columns)


class ZarrPoints(PointSource):
    """An (n, d) Zarr array, or d 1-D arrays of a group (``columns``).

    Parameters
    ----------
    store : str or zarr node
        An absolute local path, a URL, or (other stores) the open node.
    shown : str
        The store's name in messages.
    array : str or None
        The path of the (n, d) member inside the group; None: the store
        itself is the array.
    columns : tuple of str or None
        The 1-D coordinate members.
    storage_options : dict, optional
        fsspec options of a URL.
    """

    def __init__(self, store, *, shown: str, array: str | None, columns: tuple | None,
                 storage_options=None):
        self.store = store
        self.shown = shown
        self.array = array
        self.columns = columns
        self.storage_options = storage_options
        self._arrays = None
        arrays = self._open()
        if columns is None:
            a = arrays[0]
            where = shown if array is None else f"{shown}/{array}"
            stored = _np_dtype(a.dtype, where)
            dt = check_shape_dtype(a.shape, stored, where)
            n, d = a.shape
        else:
            where = f"{shown}[{','.join(columns)}]"
            dtypes = []
            lengths = {}
            for name, a in zip(columns, arrays):
                if len(a.shape) != 1:
                    raise InputError(f"{shown}/{name}: a coordinate column must be 1-D, "
                                     f"got shape {tuple(a.shape)}")
                lengths[name] = a.shape[0]
                dtypes.append(_np_dtype(a.dtype, f"{shown}/{name}"))
            if len(set(lengths.values())) > 1:
                raise InputError(f"{where}: the coordinate columns differ in length: "
                                 + ", ".join(f"{k}={v}" for k, v in lengths.items()))
            n, d = next(iter(lengths.values())), len(columns)
            for name, t in zip(columns, dtypes):
                check_shape_dtype((n, d), t, f"{shown}/{name}")
            stored = np.result_type(*dtypes)
            dt = check_shape_dtype((n, d), stored, where)
        rows = min(_storage_rows(a) for a in arrays)
        super().__init__(n=int(n), d=int(d), dtype=np.dtype(stored), compute_dtype=dt,
                         where=where, chunks=regular_chunks(int(n), rows),
                         location=local_path(store) if isinstance(store, str) else None,
                         checksummed=all(_has_checksum(a) for a in arrays))
        self.check_chunks_present()

    # zarr nodes are reopened where the source is read, not pickled
    def __getstate__(self):
        state = dict(self.__dict__)
        state["_arrays"] = None
        return state

    def describe(self) -> str:
        """What an edge store records as its input: ``where``."""
        return self.where

    def attribute(self, name: str):
        """The attribute ``name`` of the coordinate array (the first column),
        else of the group holding it, else of that group's ``Header`` group
        (a Gadget snapshot converted to Zarr); None when none has it."""
        import zarr

        arrays = self._open()
        value = arrays[0].attrs.get(name)
        if value is None and (self.columns is not None or self.array is not None):
            group = _open_node(self.store, self.shown, self.storage_options)
            value = group.attrs.get(name)
            if value is None:
                try:
                    header = group["Header"]
                except Exception:  # noqa: BLE001 - no Header group: no attribute
                    header = None
                if isinstance(header, zarr.Group):
                    value = header.attrs.get(name)
        return value

    def _open(self):
        if self._arrays is not None:
            return self._arrays
        node = _open_node(self.store, self.shown, self.storage_options)
        import zarr

        if self.columns is not None or self.array is not None:
            if not isinstance(node, zarr.Group):
                raise InputError(f"{self.shown}: is a single array, so array=/columns= "
                                 "does not apply; give the group that holds it")
            names = self.columns if self.columns is not None else (self.array,)
            arrays = [_member(node, c, self.shown) for c in names]
        else:
            if not isinstance(node, zarr.Array):
                raise InputError(f"{self.shown}: is a group; name its array with array=")
            arrays = [node]
        self._arrays = [_refusing_missing(a) for a in arrays]
        return self._arrays

    # -- chunk presence ----------------------------------------------------------
    def check_chunks_present(self, row_ranges=None):
        """Raise InputError naming the first missing chunk and its rows.

        ``row_ranges``: the (start, stop) row ranges to check (None: every
        chunk, by one listing of the store; else one lookup per chunk).
        """
        for name, arr in zip(self.columns or (self.array,), self._open()):
            try:
                missing = missing_chunks(arr, row_ranges)
            except InputError:
                raise
            except Exception as exc:  # a store that cannot list: read checks remain
                if row_ranges is None:
                    continue
                raise InputError(f"{self.where}: cannot look up its chunks "
                                 f"({type(exc).__name__}: {exc})") from None
            if missing:
                r, what = missing[0]
                rows = storage_rows_of(arr, r)
                k = self.chunk_of(rows[0])
                member = "" if name is None else f" (of {name})"
                raise InputError(
                    f"{self.where}: {self.chunk_label(k)} is missing: {what}{member}; "
                    f"{len(missing)} missing in all. zarr "
                    "would read it as the fill value; restore the file (if the store "
                    "was written with write_empty_chunks=False and the chunk only held "
                    "the fill value, rewrite it with write_empty_chunks=True)")

    # -- reading -------------------------------------------------------------------
    def read(self, start: int, stop: int) -> np.ndarray:
        """Rows [start, stop) as stored; a missing or unreadable chunk raises an
        InputError that names it.
        """
        arrays = self._open()
        try:
            if self.columns is None:
                out = read_rows(arrays[0], start, stop)
            else:
                out = np.empty((stop - start, self.d), self.dtype)
                for j, a in enumerate(arrays):
                    out[:, j] = read_rows(a, start, stop)
        except InputError:
            raise
        except Exception as exc:
            if type(exc).__name__ == "ChunkNotFoundError":  # zarr refused a missing chunk
                self.check_chunks_present([(start, stop)])
            k, exc = self._failing_chunk(start, stop, exc)
            raise InputError(f"{self.where}: cannot read {self.chunk_label(k)} "
                             f"({type(exc).__name__}: {exc}); the chunk may be "
                             "corrupt") from exc
        self._check_fill(out, start, stop)
        return out

    def _check_fill(self, out, start, stop):
        """A chunk (a shard's inner chunk, if sharded) that reads as all fill
        values may be a missing file, or a chunk its shard never got."""
        arrays = self._open()
        fills = [arr.fill_value for arr in arrays]
        if stop <= start or any(f is None or np.isnan(f) for f in fills):
            return
        fill = np.array([fills[0] if len(fills) == 1 else fills[j] for j in range(self.d)])
        rows = min(int(arr.chunks[0]) for arr in arrays)
        suspects = []
        for a in range(start - start % rows, stop, rows):
            b = min(a + rows, self.n)
            block = out[max(a, start) - start:min(b, stop) - start]
            # the first row decides at once for almost every chunk
            if block.size and np.array_equal(block[0], fill) and np.all(block == fill):
                suspects.append((a, b))
        if suspects:
            self.check_chunks_present(suspects)

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


def missing_chunks(arr, row_ranges=None) -> list:
    """Storage chunks of the zarr array ``arr`` absent from its store, or
    else inner chunks of its shards that were never written: zarr reads
    both as the fill value.

    Parameters
    ----------
    arr : zarr.Array
    row_ranges : list of (start, stop), optional
        The rows to check (None: every chunk, by one listing of the store;
        else one lookup per chunk).

    Returns
    -------
    list of (row chunk index, str saying what is missing where)
    """
    from zarr.core.sync import sync

    store = arr.store_path.store
    prefix = arr.store_path.path
    keys = _storage_keys(arr, row_ranges)
    if row_ranges is None:
        listed = set(sync(_collect(store.list_prefix(f"{prefix}/" if prefix else ""))))
        absent = [(r, f"no chunk file at {k}") for r, k in keys if k not in listed]
    else:
        absent = [(r, f"no chunk file at {k}") for r, k in keys
                  if not sync(store.exists(k))]
    if absent or arr.shards is None:
        return absent
    return _unwritten_inner_chunks(arr, row_ranges)


def storage_rows_of(arr, r):
    """(first, stop) rows of the row chunk ``r`` of ``arr`` (a shard, if
    sharded)."""
    rows = _storage_rows(arr)
    return r * rows, min(arr.shape[0], (r + 1) * rows)


def _has_checksum(arr) -> bool:
    """Whether every chunk of ``arr`` carries a checksum its reads verify
    (a crc32c, crc32, adler32 or fletcher32 codec or filter)."""
    import json

    try:
        meta = json.dumps(arr.metadata.to_dict(), default=str).lower()
    except Exception:  # noqa: BLE001 - metadata we cannot read: assume none
        return False
    return any(f'"{name}"' in meta for name in ("crc32c", "crc32", "adler32", "fletcher32"))


def _refusing_missing(arr):
    """``arr`` reading a missing chunk as an error, where zarr can
    (``array.read_missing_chunks``, zarr >= 3.2); elsewhere the reads'
    fill-value check finds it."""
    import zarr

    if "read_missing_chunks" in zarr.config.get("array", {}):
        return arr.with_config({"read_missing_chunks": False})
    return arr


async def _collect(agen) -> list:
    return [k async for k in agen]


def _storage_rows(arr) -> int:
    """Rows per storage chunk (a shard, if sharded)."""
    return int((arr.shards or arr.chunks)[0])


def _unwritten_inner_chunks(arr, row_ranges=None) -> list:
    """(row chunk, where) of the chunks inside the array's bounds that their
    shard's index lists as never written: zarr reads them as the fill value,
    as it does a missing chunk file (a shard written in part is a file)."""
    import itertools

    from zarr.core.sync import sync

    codec = arr.metadata.codecs[0]  # a sharded array's array-to-bytes codec
    per_shard = tuple(s // c for s, c in zip(arr.shards, arr.chunks))
    shape, shards, inner = arr.shape, arr.shards, arr.chunks
    out = []
    for coords, key in _storage_coords(arr, row_ranges):
        try:
            shard = arr.store_path / arr.metadata.encode_chunk_key(coords)
            index = sync(codec._load_shard_index_maybe(shard, per_shard))
        except Exception as exc:  # zarr's index reader moved, or the index is corrupt
            raise InputError(f"cannot read the index of shard {key} "
                             f"({type(exc).__name__}: {exc}); the shard may be corrupt") from None
        written = (np.zeros(per_shard, bool) if index is None
                   else np.asarray(index.get_full_chunk_map()).reshape(per_shard))
        for local in itertools.product(*[range(p) for p in per_shard]):
            start = [c * sh + i * ch for c, sh, i, ch in zip(coords, shards, local, inner)]
            if all(st < n for st, n in zip(start, shape)) and not written[local]:
                rows = f"{start[0]}-{min(shape[0], start[0] + inner[0]) - 1}"
                out.append((coords[0], f"the shard {key} holds no chunk {local} (rows "
                                       f"{rows}): it was never written"))
    return out


def _storage_coords(arr, row_ranges=None) -> list:
    """(storage chunk coordinates, store key) of ``arr``'s storage chunks
    (those covering ``row_ranges``, a list of (start, stop), or all)."""
    import itertools

    shape = arr.shape
    per = arr.shards or arr.chunks
    if any(s == 0 for s in shape):
        return []
    grid = [max(1, -(-s // c)) for s, c in zip(shape, per)]
    if row_ranges is None:
        rows = range(grid[0])
    else:
        rows = sorted({r for a, b in row_ranges for r in range(a // per[0], (b - 1) // per[0] + 1)})
    prefix = arr.store_path.path
    out = []
    for r in rows:
        for rest in itertools.product(*[range(g) for g in grid[1:]]):
            key = arr.metadata.encode_chunk_key((r,) + rest)
            out.append(((r,) + rest, f"{prefix}/{key}" if prefix else key))
    return out


def _storage_keys(arr, row_ranges=None) -> list:
    """(row chunk index, store key) of the storage chunks of ``arr`` (those
    covering ``row_ranges``, a list of (start, stop), or all)."""
    return [(coords[0], key) for coords, key in _storage_coords(arr, row_ranges)]
