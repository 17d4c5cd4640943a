"""HDF5 point sources: Gadget-2/4, Arepo and SWIFT snapshots, one file or many.

A snapshot in these codes' HDF5 layout is a file with a ``Header`` group
(attributes ``BoxSize``, ``NumPart_ThisFile``, ``NumPart_Total`` and
``NumPart_Total_HighWord``, ``NumFilesPerSnapshot``) and one group per
particle type, ``PartType0`` ... ``PartType5``, holding ``Coordinates``
(n, 3), ``Velocities`` (n, 3), ``ParticleIDs`` (n,) and, where the masses
differ, ``Masses`` (n,).  A large snapshot is split over files
``snap_042.0.hdf5`` ... ``snap_042.N-1.hdf5``, each with its share of every
type; its rows are the files' rows in file order.

It is given by its file (``snap_042.hdf5``), by any file of a set, by the
set's stem (``snap_042``) or by a glob (``snap_042.*.hdf5``).  ``array=``
names what is read: a particle type (``"PartType1"``: its
``Coordinates``), a dataset of a type (``"PartType1/Velocities"``), or a
dataset name (``"Velocities"``) of the type chosen by default: the one
type with coordinates, else an error listing the types.  A file without a
``Header`` is read as plain HDF5: ``array=`` is a dataset path, or the file
holds one 2-D numeric dataset.

What ``resolve`` checks before any work, naming the file and the dataset:
every file of the set present and openable (a truncated file is refused by
HDF5 on opening), their headers in agreement (``NumPart_Total``,
``BoxSize``, ``NumFilesPerSnapshot``), the dataset in every file that
holds particles of the type, its shape and dtype, its rows equal to the
header's count, and its storage allocated (HDF5 reads a dataset or chunk
never written as its fill value; here it is an error).  A read that fails
is an error naming the file, the dataset and the rows.

The source is a ``PointSource``: ``chunks`` are the files' row ranges, cut
into hyperslabs of at most ``SLAB_ROWS`` rows, so staging reads them with
its reader threads like Zarr chunks; file handles are opened where the
source is read and never pickled.
"""
from __future__ import annotations

import glob
import os
import re
import threading

import numpy as np

from ..errors import InputError
from .checks import check_shape_dtype
from .source import PointSource

#: rows per hyperslab: a read unit of the reader threads
SLAB_ROWS = 1 << 19
#: what HDF5 files begin with (at offset 0, 512, 1024, ... for a user block)
HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"
#: file name endings read as HDF5
HDF5_SUFFIXES = (".hdf5", ".h5", ".hdf")
#: the header attributes a multi-file snapshot's files must agree on
AGREED = ("NumPart_Total", "NumPart_Total_HighWord", "BoxSize", "NumFilesPerSnapshot")
_TYPE = re.compile(r"^PartType\d+$")
_NUMBERED = re.compile(r"^(?P<stem>.*)\.(?P<index>\d+)(?P<ext>\.(hdf5|h5|hdf))$")


def _h5py():
    try:
        import h5py
    except ImportError:  # pragma: no cover - the optional extra
        raise InputError("reading HDF5 snapshots needs h5py: pip install 'emst-dask[hdf5]'"
                         ) from None
    return h5py


def is_hdf5_file(path: str) -> bool:
    """A file named ``*.hdf5``/``*.h5``/``*.hdf``, or beginning with HDF5's signature."""
    if path.lower().endswith(HDF5_SUFFIXES):
        return True
    try:
        with open(path, "rb") as fh:
            return fh.read(8) == HDF5_MAGIC
    except OSError:
        return False


def snapshot_files(spec: str) -> list | None:
    """The files of the snapshot ``spec`` names, in order, or None when
    ``spec`` names no HDF5 snapshot (not HDF5, or nothing there).

    ``spec``: a file (of a set: the whole set, found from its header), a
    stem ``snap_042`` (``snap_042.hdf5``, or ``snap_042.0.hdf5`` and the
    rest of its set) or a glob.  Which files a set must have is decided by
    ``resolve`` from the headers.
    """
    if any(c in spec for c in "*?["):
        found = [p for p in glob.glob(spec) if os.path.isfile(p) and is_hdf5_file(p)]
        return _in_order(found) if found else None
    if os.path.isfile(spec):
        if not is_hdf5_file(spec):
            return None
        m = _NUMBERED.match(spec)
        if m is None:
            return [spec]
        return _set_of(m.group("stem"), m.group("ext"), spec)
    if os.path.exists(spec):
        return None
    for ext in HDF5_SUFFIXES:
        if os.path.isfile(spec + ext):
            return [spec + ext]
        if os.path.isfile(f"{spec}.0{ext}"):
            return _set_of(spec, ext, f"{spec}.0{ext}")
    return None


def _set_of(stem, ext, given):
    """Every ``stem.K.ext`` present (the headers then say how many must be)."""
    found = [p for p in glob.glob(f"{glob.escape(stem)}.*{ext}") if _NUMBERED.match(p)
             and _NUMBERED.match(p).group("stem") == stem]
    return _in_order(found or [given])


def _in_order(paths):
    def key(p):
        m = _NUMBERED.match(p)
        return (m.group("stem"), int(m.group("index"))) if m else (p, -1)
    return sorted((os.path.abspath(p) for p in paths), key=lambda p: key(p))


def _index(path):
    m = _NUMBERED.match(path)
    return None if m is None else int(m.group("index"))


def _open(path, dataset=None):
    h5py = _h5py()
    try:
        return h5py.File(path, "r")
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except OSError as exc:
        what = "truncated (shorter than HDF5 says it is)" if "truncated" in str(exc) \
            else "not a readable HDF5 file"
        raise InputError(f"{path}: {what} ({exc}); restore the file") from None


def _header(f, path) -> dict | None:
    if "Header" not in f:
        return None
    try:
        attrs = dict(f["Header"].attrs)
    except Exception as exc:  # noqa: BLE001 - an unreadable header names its file
        raise InputError(f"{path}: its Header cannot be read ({type(exc).__name__}: "
                         f"{exc})") from None
    return {k: (v.tolist() if isinstance(v, np.ndarray) else
                v.item() if isinstance(v, np.generic) else v) for k, v in attrs.items()}


def _total(header, t) -> int | None:
    """``NumPart_Total`` of type ``t``, with its high word."""
    tot = header.get("NumPart_Total")
    if tot is None:
        return None
    tot = np.ravel(tot)
    high = np.ravel(header.get("NumPart_Total_HighWord", np.zeros_like(tot)))
    return int(tot[t]) + (int(high[t]) << 32 if t < len(high) else 0)


def _this_file(header, t) -> int | None:
    v = header.get("NumPart_ThisFile")
    return None if v is None else int(np.ravel(v)[t])


def _types_with(files, name):
    """{type name: total rows} of the types whose groups hold ``name`` in any file."""
    out = {}
    for path, f, _ in files:
        for key in f.keys():
            if _TYPE.match(key) and name in f[key]:
                obj = f[key][name]
                out[key] = out.get(key, 0) + (int(obj.shape[0]) if len(obj.shape) else 0)
    return out


def _types_listing(files):
    seen = {}
    for path, f, _ in files:
        for key in f.keys():
            if _TYPE.match(key):
                seen.setdefault(key, set()).update(f[key].keys())
    return ", ".join(f"{k} ({', '.join(sorted(v))})" for k, v in sorted(seen.items())) \
        or "no PartTypeN groups"


def _check_agree(files):
    """The headers of a multi-file snapshot agree, and every file is there."""
    first_path, _, h0 = files[0]
    for path, _, h in files[1:]:
        for key in AGREED:
            a, b = h0.get(key), h.get(key)
            if a is None and b is None:
                continue
            if a is None or b is None or not np.array_equal(np.ravel(a), np.ravel(b)):
                raise InputError(
                    f"{path}: Header/{key} = {b} disagrees with {first_path} ({a}): the "
                    "files are not of one snapshot")
    want = h0.get("NumFilesPerSnapshot")
    if want is None:
        if len(files) > 1:
            raise InputError(f"{first_path}: has no Header/NumFilesPerSnapshot, so the "
                             f"{len(files)} files cannot be checked as one snapshot")
        return
    want = int(np.ravel(want)[0])
    indices = [_index(p) for p, _, _ in files]
    if want == 1 and len(files) == 1:
        return
    if None in indices:
        raise InputError(f"{files[0][0]}: Header/NumFilesPerSnapshot = {want}, but the "
                         "file is not numbered NAME.K.hdf5: give the set's files")
    stem_ext = _NUMBERED.match(first_path)
    missing = [i for i in range(want) if i not in indices]
    if missing:
        name = f"{stem_ext.group('stem')}.{missing[0]}{stem_ext.group('ext')}"
        raise InputError(f"{name}: missing: the snapshot has {want} files "
                         f"(Header/NumFilesPerSnapshot), {len(missing)} of them absent "
                         f"({', '.join(str(i) for i in missing[:10])})")
    extra = [i for i in indices if i >= want]
    if extra:
        raise InputError(f"{files[-1][0]}: beyond the {want} files the header declares "
                         "(Header/NumFilesPerSnapshot): files of another snapshot?")


def _allocated(dset, path, name):
    """Refuse a dataset whose storage HDF5 never wrote (read as its fill value)."""
    if dset.size == 0 or getattr(dset, "is_virtual", False) or dset.external:
        return  # a virtual (SWIFT's one-file view of a set) or external dataset: no own storage
    dsid = dset.id
    if dset.chunks is None:
        if dsid.get_storage_size() == 0:
            raise InputError(f"{path}: dataset {name} was never written (no storage "
                             "allocated); HDF5 would read it as its fill value")
        return
    per = [-(-s // c) for s, c in zip(dset.shape, dset.chunks)]
    want = int(np.prod(per))
    got = dsid.get_num_chunks()
    if got < want:
        raise InputError(f"{path}: dataset {name} has {want - got} of its {want} chunks "
                         "missing (never written); HDF5 would read them as its fill value")


def resolve(spec: str, array: str | None = None, files: list | None = None) -> "HDF5Points":
    """The ``HDF5Points`` of the snapshot ``spec`` (see the module docstring)."""
    files = files or snapshot_files(spec)
    if not files:
        raise InputError(f"{spec}: no such file or HDF5 snapshot")
    opened = []
    try:
        for p in files:
            f = _open(p)
            opened.append((p, f, _header(f, p) or {}))
        has_header = any("Header" in f for _, f, _ in opened)
        if has_header:
            _check_agree(opened)
            dataset, ptype = _choose(opened, array, spec)
        else:
            if len(opened) > 1:
                raise InputError(f"{spec}: {len(opened)} HDF5 files without a Header: "
                                 "give one file")
            dataset, ptype = _plain_member(opened[0][1], array, spec), None
        return HDF5Points(files, dataset, ptype, _describe(spec, files, dataset),
                          opened=opened)
    finally:
        for _, f, _ in opened:
            f.close()


def _describe(spec, files, dataset):
    first = files[0]
    more = f" (+{len(files) - 1} files)" if len(files) > 1 else ""
    return f"{first}{more}:/{dataset}"


def _choose(opened, array, spec):
    """(dataset path, particle type) of ``array=`` in a Gadget-style snapshot."""
    name = "Coordinates"
    ptype = None
    if array is not None:
        parts = [p for p in str(array).strip("/").split("/") if p]
        if parts and _TYPE.match(parts[0]):
            ptype = parts[0]
            name = "/".join(parts[1:]) or "Coordinates"
        else:
            name = "/".join(parts)
    if ptype is None:
        with_coords = {k: v for k, v in _types_with(opened, "Coordinates").items() if v > 0}
        if len(with_coords) != 1:
            what = "no particle type has" if not with_coords else "several particle types have"
            raise InputError(f"{spec}: {what} Coordinates; name one with array='PartTypeN' "
                             f"(--array PartTypeN); the snapshot holds "
                             f"{_types_listing(opened)}")
        ptype = next(iter(with_coords))
    types = {k for _, f, _ in opened for k in f.keys() if _TYPE.match(k)}
    header = opened[0][2]
    t = int(ptype[len("PartType"):])
    total = _total(header, t)
    if ptype not in types and not total:
        raise InputError(f"{spec}: has no particle type {ptype}; it holds "
                         f"{_types_listing(opened)}")
    if not any(ptype in f and name in f[ptype] for _, f, _ in opened) and (total or 0) > 0:
        raise InputError(f"{spec}: {ptype} has no dataset {name!r}; it holds "
                         f"{_types_listing(opened)}")
    return f"{ptype}/{name}", ptype


def _plain_member(f, array, spec):
    h5py = _h5py()
    if array is not None:
        name = str(array).strip("/")
        if name not in f or not isinstance(f[name], h5py.Dataset):
            raise InputError(f"{spec}: has no dataset {name!r}")
        return name
    found = []
    f.visititems(lambda k, o: found.append(k) if isinstance(o, h5py.Dataset)
                 and len(o.shape) == 2 and o.dtype.kind in "fiu" else None)
    if len(found) != 1:
        raise InputError(f"{spec}: holds {len(found)} 2-D numeric datasets "
                         f"({', '.join(found) or 'none'}); name one with array=NAME")
    return found[0]


class HDF5Points(PointSource):
    """An (n, d) dataset of one HDF5 file or of the files of a snapshot,
    rows in file order (a 1-D dataset, such as ``ParticleIDs``, is (n, 1)).

    Parameters
    ----------
    files : list of str
        Absolute paths, in the snapshot's order.
    dataset : str
        The dataset's path inside each file (``PartType1/Coordinates``).
    ptype : str or None
        The particle type (None: a plain HDF5 file).
    where : str
        The source in messages.
    """

    def __init__(self, files, dataset, ptype, where, *, opened=None):
        self.files = list(files)
        self.dataset = dataset
        self.ptype = ptype
        self._local = threading.local()
        own = opened is None
        opened = opened or [(p, _open(p), None) for p in self.files]
        try:
            rows, dtype, d, header = self._survey(opened, where)
        finally:
            if own:
                for _, f, _ in opened:
                    f.close()
        self.header = header
        self.file_rows = []
        chunks, a = [], 0
        for m in rows:
            self.file_rows.append((a, a + m))
            for s in range(a, a + m, SLAB_ROWS):
                chunks.append((s, min(s + SLAB_ROWS, a + m)))
            a += m
        shape = (a, d)
        dt = check_shape_dtype(shape, dtype, where)
        super().__init__(n=a, d=d, dtype=np.dtype(dtype), compute_dtype=dt, where=where,
                         chunks=chunks or [(0, 0)], kind="slab", location=self.files[0])

    def _survey(self, opened, where):
        """Rows per file, the dtype and columns, the first header; every
        file's dataset checked."""
        h5py = _h5py()
        rows, dtype, d, header = [], None, None, opened[0][2] or {}
        t = None if self.ptype is None else int(self.ptype[len("PartType"):])
        total = None if t is None else _total(header, t)
        for path, f, h in opened:
            expect = None if t is None or not h else _this_file(h, t)
            if self.dataset not in f:
                if expect:
                    raise InputError(f"{path}: dataset {self.dataset} is missing; the "
                                     f"header says this file holds {expect} rows of "
                                     f"{self.ptype}")
                rows.append(0)
                continue
            obj = f[self.dataset]
            if not isinstance(obj, h5py.Dataset):
                raise InputError(f"{path}: {self.dataset} is a group, not a dataset")
            shape = tuple(obj.shape)
            if len(shape) not in (1, 2):
                raise InputError(f"{path}: dataset {self.dataset} has shape {shape}: "
                                 "expected (n, d) or (n,)")
            cols = 1 if len(shape) == 1 else shape[1]
            if d is not None and (cols != d or obj.dtype != dtype):
                raise InputError(f"{path}: dataset {self.dataset} is {shape} {obj.dtype}; "
                                 f"in {opened[0][0]} it has {d} columns, {dtype}")
            d, dtype = cols, obj.dtype
            if expect is not None and shape[0] != expect:
                raise InputError(f"{path}: dataset {self.dataset} has {shape[0]} rows; "
                                 f"Header/NumPart_ThisFile says {expect}")
            _allocated(obj, path, self.dataset)
            rows.append(int(shape[0]))
        if d is None:
            raise InputError(f"{where}: no file holds {self.dataset}")
        if total is not None and len(opened) == int(np.ravel(
                header.get("NumFilesPerSnapshot", [len(opened)]))[0]) and sum(rows) != total:
            raise InputError(f"{where}: the files hold {sum(rows)} rows of {self.ptype}; "
                             f"Header/NumPart_Total says {total}")
        return rows, dtype, d, header

    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("_local", None)
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._local = threading.local()

    def describe(self) -> str:
        """What an edge store records as its input: ``where``."""
        return self.where

    def attribute(self, name: str):
        """A ``Header`` attribute of the first file (``BoxSize``), or None."""
        value = (self.header or {}).get(name)
        return value

    def member(self, name: str) -> "HDF5Points":
        """Another dataset of the same particle type and files (``Velocities``,
        ``ParticleIDs``, ``Masses``)."""
        if self.ptype is None:
            return resolve(self.files[0], name, files=self.files)
        return resolve(self.files[0], f"{self.ptype}/{name}", files=self.files)

    def _handle(self, k):
        """File ``k``, opened once per reading thread (h5py handles are not
        shared between threads)."""
        cache = getattr(self._local, "files", None)
        if cache is None:
            cache = self._local.files = {}
        if k not in cache:
            f = _open(self.files[k])
            # again where it is read: the file may have changed since it was resolved
            a, b = self.file_rows[k]
            dset = f.get(self.dataset)
            if dset is None or dset.shape[0] != b - a:
                got = "no dataset" if dset is None else f"{dset.shape[0]} rows"
                f.close()
                raise InputError(f"{self.files[k]}: dataset {self.dataset}: {got} where "
                                 f"{b - a} rows were found when the snapshot was opened; "
                                 "the file changed")
            _allocated(dset, self.files[k], self.dataset)
            cache[k] = f
        return cache[k]

    def read(self, start: int, stop: int) -> np.ndarray:
        """Rows [start, stop) as stored, (m, d); a failed read names the file,
        the dataset and its rows."""
        out = np.empty((stop - start, self.d), self.dtype)
        for k, (a, b) in enumerate(self.file_rows):
            lo, hi = max(a, start), min(b, stop)
            if hi <= lo:
                continue
            path = self.files[k]
            try:
                dset = self._handle(k)[self.dataset]
                block = dset[lo - a:hi - a]
            except InputError:
                raise
            except Exception as exc:  # noqa: BLE001 - any failure names file and rows
                raise InputError(f"{path}: cannot read dataset {self.dataset} rows "
                                 f"{lo - a}-{hi - a - 1} ({type(exc).__name__}: {exc}); "
                                 "the file may be damaged") from None
            out[lo - start:hi - start] = block.reshape(hi - lo, self.d)
        return out
