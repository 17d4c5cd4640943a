"""Outputs: where results go, checked before any work.

``resolve_output(out, ...)`` pins down an output before a job starts and
refuses, with an ``OutputError``, everything that would fail or destroy
something after the computation:

* a parent directory that is missing, is not a directory, or is not
  writable;
* the input itself, a directory holding it, or a place inside it (inside
  the Zarr store that holds the array read), symbolic links resolved
  (``check_apart``, the one rule every job and command applies);
* something already there, unless ``overwrite=True`` and it is something
  this package wrote: an edge store (a Zarr group carrying the package's
  format tag, complete or not), or a .npy file of the kind asked for that
  carries the package's header (``npy``: an edge array, labels, a linkage
  matrix, a generated cloud).  A directory of other files, a point cloud, a
  snapshot, a .npy that ``numpy.save`` wrote are never replaced;
* a store of the package's that holds anything the package did not write
  there -- a file, an array, a group, a group attribute someone added
  (``io.owned``): replacing it would remove them, so it is refused, the
  message naming each.

Results are written to a hidden temporary sibling named after the job
(``.NAME.emst-tmp-<job>-<attempt>``) and moved into place when complete,
so an output is complete or absent.  When the job ends, whether it
succeeded or failed, ``cleanup`` removes the temporaries of all its
attempts (a worker killed while writing leaves one behind), and nothing
else: only names carrying the job's token are touched.
"""
from __future__ import annotations

import contextlib
import logging
import os
import uuid
from dataclasses import dataclass, field

import numpy as np

from ..errors import OutputError
from . import npy
from .leftovers import clean, stale_after
# the marks live in ``marks``, below ``leftovers`` and ``picture``, which
# judge by them too; they stay importable from here
from .marks import (CLUSTER_FORMAT, EDGE_FORMAT, SET_ASIDE, SNAPSHOT_ATTR, TMP_TAG, drawn_here,
                    owned_names, remove, zarr_group_attrs)
from .owned import WRITTEN_ATTR, describe_foreign, foreign_content
from .paths import contains, input_root, is_pathlike, local_path

log = logging.getLogger(__name__)


def new_token() -> str:
    """A job's token: names its tasks and its temporaries."""
    return uuid.uuid4().hex[:8]


@dataclass
class Output:
    """A checked output: a local path, a URL, or a zarr store object.

    Attributes
    ----------
    target : str or store
        The absolute local path, the URL, or the store object.
    kind : {"npy", "zarr", "picture"}
        A .npy file, a Zarr store, or a picture file (``io.picture``).
    overwrite : bool
        Replace an edge store or edge array that is already there.
    zarr_format : {2, 3}
    chunk_rows : int or None
        Rows per chunk of the edge arrays (None: the default).
    storage_options : dict or None
        fsspec options of a URL.
    token : str
        The job's token (temporary names carry it).
    contents : {"edges", "points", "clusters", "linkage", "picture"}
        What is written: an edge store or edge array; a point cloud
        (``generate``), which may replace only a point cloud (a .npy file,
        or a snapshot ``generate`` wrote); labels (a cluster store, or an
        int64 .npy), which may replace only labels; a linkage matrix
        (an (m, 4) float64 .npy), which may replace only one; or a picture
        (``io.picture``), which may replace only a picture drawn here.
    sources : tuple of str
        The inputs' local paths: every ``check`` keeps the output apart
        from them (``check_apart``), on the client and where it is written.
    """

    target: object
    kind: str = "zarr"
    overwrite: bool = False
    zarr_format: int = 3
    chunk_rows: int | None = None
    storage_options: dict | None = None
    token: str = field(default_factory=new_token)
    contents: str = "edges"
    #: the inputs' local paths this output is kept apart from (``check_apart``)
    sources: tuple = ()

    @property
    def local(self) -> str | None:
        """The absolute local path, or None (URL, store object)."""
        return local_path(self.target) if is_pathlike(self.target) else None

    def __str__(self) -> str:
        return str(self.local or self.target)

    # -- checks ----------------------------------------------------------------
    def check(self, source_location: str | None = None) -> "Output":
        """Refuse, before any work, an output that cannot or may not be
        written (see the module docstring).  Returns ``self``.

        Parameters
        ----------
        source_location : str or sequence of str, optional
            The inputs' absolute local paths: never replaced, nor a
            directory holding one, nor a place inside one (``check_apart``).
        """
        loc = self.local
        if loc is None:
            self._check_remote()
            return self
        parent = os.path.dirname(loc)
        if not os.path.exists(parent):
            raise OutputError(f"cannot write {loc}: no directory {parent}")
        if not os.path.isdir(parent):
            raise OutputError(f"cannot write {loc}: {parent} is not a directory")
        if not os.access(parent, os.W_OK | os.X_OK):
            raise OutputError(f"cannot write {loc}: the directory {parent} is not writable")
        if source_location is not None:  # kept: every later check applies them too
            given = [source_location] if isinstance(source_location, (str, os.PathLike)) \
                else source_location
            self.sources = tuple(dict.fromkeys(
                self.sources + tuple(os.fspath(s) for s in given if s is not None)))
        check_apart(loc, self.sources)
        self._check_leftovers()
        if os.path.lexists(loc):
            if not self.overwrite:
                raise OutputError(f"{loc}: already exists; pass overwrite=True (--overwrite) "
                                  "to replace it")
            why = self.why_not_replaceable(loc)
            if why:
                raise OutputError(f"{loc}: {why}; not replacing it (only a store or .npy "
                                  "file of this kind that emst-dask wrote may be replaced)")
        return self

    def _check_leftovers(self):
        """What jobs that died left beside the output: a former output set
        aside while it was being replaced, the output itself absent, is the
        user's and must come back first (an OutputError saying how); stale
        temporaries that are provably the package's (``io.leftovers``:
        marked, untouched for ``emst.temporaries.stale-after``, 24 h by
        default) are removed; others are only said in the log (a job
        writing them may live)."""
        loc = self.local
        parent, base = os.path.dirname(loc), os.path.basename(loc)
        prefix = f".{base}{TMP_TAG}"
        try:
            names = sorted(n for n in os.listdir(parent) if n.startswith(prefix)
                           and not n.startswith(self._temporary_prefix()))
        except OSError:
            return
        aside = [n for n in names if n[len(prefix):].split("-", 1)[-1].startswith(SET_ASIDE)]
        if aside and not os.path.lexists(loc):
            held = os.path.join(parent, aside[0])
            raise OutputError(f"{loc} is absent, but a job that died while replacing it left "
                              f"the former {base} at {held}: move it back "
                              f"(mv '{held}' '{loc}') or remove it, then run again")
        if names:
            removed, _kept = clean(parent, stale_after(), output_base=base,
                                   skip_token=self.token)
            for t in removed:
                log.warning("%s: removed %s, a temporary a dead job left %.3g h ago", loc,
                            t.path, t.age / 3600)
            gone = {os.path.basename(t.path) for t in removed}
            names = [n for n in names if n not in gone]
        if names:
            log.warning("%s: %d temporar%s of earlier jobs beside it (%s); a job killed while "
                        "writing leaves one: `emst-dask clean %s` removes %s once no job "
                        "writes %s", loc, len(names), "y" if len(names) == 1 else "ies",
                        ", ".join(names[:3]) + (", ..." if len(names) > 3 else ""), parent,
                        "it" if len(names) == 1 else "them", base)

    def why_not_replaceable(self, loc: str) -> str | None:
        """None when ``loc`` holds something this package wrote and this
        output may replace it; else why not."""
        if os.path.islink(loc):
            return "is a symbolic link"
        points = self.contents == "points"
        clusters = self.contents == "clusters"
        if self.kind == "picture":
            if not os.path.isfile(loc):
                return "is not a file"
            return None if drawn_here(loc) else \
                "is not a picture emst-dask drew (remove it yourself to reuse the name)"
        if self.kind == "npy":
            if not os.path.isfile(loc):
                return "is not a file"
            held = npy.written_here(loc)
            if held is None:
                return "is a .npy file that emst-dask did not write (remove it yourself to " \
                    "reuse the name)"
            # files of 0.2.0 carry the edges' header whatever they hold
            if points:
                return None if held == "points" else \
                    "is not a point cloud emst-dask generated (remove it yourself to reuse " \
                    "the name)"
            if clusters:
                return None if held in ("clusters", "edges") and is_label_array(loc) else \
                    "is not a label array (int64 .npy)"
            if self.contents == "linkage":
                return None if held in ("linkage", "edges") and is_linkage_array(loc) else \
                    "is not a linkage matrix ((m, 4) float64 .npy)"
            return None if held == "edges" and is_edge_array(loc) else \
                "is not an edge array ((m, 3) float64 .npy)"
        if not os.path.isdir(loc):
            return "is a file, not a Zarr store"
        attrs = zarr_group_attrs(loc)
        if attrs is None:
            return "is a directory that is not a Zarr store"
        if points:
            if SNAPSHOT_ATTR not in attrs:
                return "is not a snapshot emst-dask generated"
        elif clusters:
            if attrs.get("format") != CLUSTER_FORMAT:
                return "is not a cluster store emst-dask wrote"
        elif attrs.get("format") != EDGE_FORMAT:
            what = "a snapshot" if SNAPSHOT_ATTR in attrs else "a Zarr store"
            return f"is {what}, not an edge store"
        owns, own_keys = self._owned(attrs)
        found = foreign_content(loc, owns, attrs, own_keys)
        return describe_foreign(found) if found else None

    def _owned(self, attrs: dict):
        """(owns(path), own_key(key)): what of a store of this output's kind
        with attributes ``attrs`` the package wrote (its record, else the
        names its writers use)."""
        return owned_names(attrs, self.contents)

    def _check_remote(self):
        """A URL or store object: anything there may be replaced only with
        ``overwrite`` and only if it is a store of the kind written (an edge
        store, or a cluster store) that this package wrote: zarr's
        overwrite removes whatever the location holds."""
        import zarr

        if not self._remote_holds_something():
            return
        if not self.overwrite:
            raise OutputError(f"{self}: already exists; pass overwrite=True to replace it")
        want, what = ((CLUSTER_FORMAT, "a cluster store") if self.contents == "clusters"
                      else (EDGE_FORMAT, "an edge store"))
        try:
            node = zarr.open_group(self.target, mode="r",
                                   storage_options=self.storage_options)
            fmt = dict(node.attrs).get("format")
        except Exception:
            fmt = None
        if fmt != want:
            raise OutputError(f"{self}: holds something that is not {what} emst-dask wrote; "
                              "not replacing it (zarr's overwrite would remove all it holds)")
        # the arrays, groups and attributes someone added (zarr lists no
        # other objects: a remote store is judged by its nodes)
        attrs = dict(node.attrs)
        owns, own_keys = self._owned(attrs)
        try:
            found = [n for n, _ in node.members(max_depth=None) if not owns(n)]
        except Exception as exc:  # noqa: BLE001 - what it holds is unknown: not provably ours
            raise OutputError(f"{self}: cannot list what it holds ({type(exc).__name__}: "
                              f"{exc}); not replacing it") from None
        found += [f"attribute {k}" for k in sorted(attrs)
                  if k != WRITTEN_ATTR and not own_keys(k)]
        if found:
            raise OutputError(f"{self}: {describe_foreign(sorted(found))}")

    def _remote_holds_something(self) -> bool:
        """Anything at the URL or in the store object (True when unknown)."""
        from zarr.core.sync import sync

        try:
            if isinstance(self.target, str):
                import fsspec

                fs, path = fsspec.core.url_to_fs(self.target, **(self.storage_options or {}))
                return bool(fs.exists(path))
            return not sync(self.target.is_empty(""))
        except Exception:
            return True

    # -- temporaries -----------------------------------------------------------
    def temporary(self, tag: str | None = None) -> str:
        """A hidden temporary sibling of the local output: a new one per
        call, or the job's own one named ``tag`` (several tasks of one job
        fill it, and a task run again finds it)."""
        return os.path.join(os.path.dirname(self.local),
                            self._temporary_prefix() + (tag or uuid.uuid4().hex[:8]))

    def _temporary_prefix(self) -> str:
        """The start of the names of this job's temporaries."""
        return f".{os.path.basename(self.local)}{TMP_TAG}{self.token}-"

    def temporaries(self) -> list:
        """Every temporary sibling of this job's attempts that exists now."""
        loc = self.local
        if loc is None:
            return []
        parent = os.path.dirname(loc)
        prefix = self._temporary_prefix()
        try:
            names = os.listdir(parent)
        except OSError:
            return []
        return [os.path.join(parent, n) for n in names if n.startswith(prefix)]

    def cleanup(self, keep: str | None = None) -> int:
        """Remove this job's temporaries (but ``keep``); how many.

        A replaced output set aside by ``place`` (tag ``old-...``) goes back
        into place when nothing took its place: the process died between
        the two renames, and the user's former output must not be lost."""
        if self.local is None:  # written in place: no temporaries
            return 0
        count = 0
        prefix = len(self._temporary_prefix())
        for path in self.temporaries():
            if path == keep:
                continue
            tag = os.path.basename(path)[prefix:]
            if tag.startswith(SET_ASIDE) and not os.path.lexists(self.local):
                os.rename(path, self.local)
            else:
                remove(path)
            count += 1
        return count

    @contextlib.contextmanager
    def written_aside(self):
        """Yield a new temporary sibling to write; move it into place when
        the block ends, remove it if the block fails (an OSError becomes an
        OutputError naming the output)."""
        tmp = self.temporary()
        try:
            yield tmp
        except OSError as exc:
            remove(tmp)
            raise OutputError(f"cannot write {self}: {exc.strerror or exc}") from None
        except BaseException:
            remove(tmp)
            raise
        self.place(tmp)

    def place(self, tmp: str):
        """Move the complete temporary ``tmp`` into place.

        Without ``overwrite`` an output that appeared meanwhile (another job)
        is an OutputError and ``tmp`` is removed; with it, what is there is
        replaced only if ``why_not_replaceable`` allows.
        """
        loc = self.local
        try:
            if not self.overwrite:
                _place_new(tmp, loc)
                return
            if os.path.lexists(loc):
                why = self.why_not_replaceable(loc)
                if why:
                    raise OutputError(f"{loc}: {why}; it appeared while the job ran and is "
                                      "not replaced")
                trash = self.temporary(f"{SET_ASIDE}{uuid.uuid4().hex[:8]}")
                os.rename(loc, trash)
                try:
                    os.rename(tmp, loc)
                except BaseException:
                    os.rename(trash, loc)
                    raise
                remove(trash)
            else:
                _place_new(tmp, loc)
        except BaseException:
            remove(tmp)
            raise


def _place_new(tmp: str, loc: str):
    """Move ``tmp`` to ``loc``, which must not exist (atomic for files: a
    hard link fails if the name is taken; a directory rename fails onto a
    non-empty directory)."""
    if os.path.isdir(tmp):
        if os.path.lexists(loc):
            raise OutputError(f"{loc}: appeared while the job ran (another job?); not "
                              "replacing it")
        try:
            os.rename(tmp, loc)
        except OSError as exc:
            raise OutputError(f"{loc}: appeared while the job ran (another job?); not "
                              f"replacing it ({exc.strerror})") from None
        return
    try:
        os.link(tmp, loc)
    except FileExistsError:
        raise OutputError(f"{loc}: appeared while the job ran (another job?); not "
                          "replacing it") from None
    os.remove(tmp)


def check_apart(loc: str, sources) -> None:
    """Refuse, with an OutputError, the local output ``loc`` when it is an
    input, holds one, or lies inside one: writing it would change the input
    (or, replacing it, remove it).  Symbolic links are resolved, and an
    input inside a Zarr store (the array of a snapshot) stands for the whole
    store.  The one rule every job and command applies to its outputs.

    Parameters
    ----------
    loc : str
        The output's absolute local path.
    sources : str, sequence of str (None entries skipped), or None
        The inputs' absolute local paths.
    """
    if sources is None:
        return
    for src in [sources] if isinstance(sources, (str, os.PathLike)) else sources:
        if src is None:
            continue
        src = os.fspath(src)
        if os.path.realpath(loc) == os.path.realpath(src):
            raise OutputError(f"{loc}: is the input; choose another output")
        if contains(loc, src):
            raise OutputError(f"{loc}: holds the input {src}; choose another output")
        root = input_root(src)
        if contains(root, loc):
            raise OutputError(f"{loc}: lies inside the input {root}; writing it would change "
                              "the input: choose a place outside it")


def _npy_array(path: str):
    """The memory-mapped array of a .npy file, or None."""
    try:
        return np.load(path, mmap_mode="r", allow_pickle=False)
    except Exception:
        return None


def is_label_array(path: str) -> bool:
    """An .npy file holding a 1-D or 2-D int64 array (labels)."""
    a = _npy_array(path)
    return a is not None and a.ndim in (1, 2) and a.dtype == np.int64


def is_linkage_array(path: str) -> bool:
    """An .npy file holding an (m, 4) float64 array (a linkage matrix)."""
    a = _npy_array(path)
    return a is not None and a.ndim == 2 and a.shape[1] == 4 and a.dtype == np.float64


def is_edge_array(path: str) -> bool:
    """An .npy file holding an (m, 3) float64 array (an edge array)."""
    a = _npy_array(path)
    return a is not None and a.ndim == 2 and a.shape[1] == 3 and a.dtype == np.float64


def resolve_output(out, *, overwrite: bool = False, zarr_format: int = 3,
                   chunk_rows=None, storage_options=None, source_location=None,
                   token: str | None = None, check: bool = True,
                   contents: str = "edges") -> Output | None:
    """Check ``out`` and describe it (None stays None).

    Parameters
    ----------
    out : path, URL, zarr store object, or None
        A path ending in ``.npy`` is an edge array; anything else a Zarr
        edge store.
    overwrite : bool
    zarr_format : {2, 3}
    chunk_rows : int, optional
    storage_options : dict, optional
    source_location : str, optional
        The input's absolute local path (never replaced).
    token : str, optional
        The job's token (default: a new one).
    check : bool
        Run ``Output.check`` now (False: the caller runs it where the
        output is visible, on a worker).
    contents : {"edges", "points", "clusters", "linkage", "picture"}

    Returns
    -------
    Output or None
    """
    if out is None:
        return None
    if isinstance(out, Output):
        return out.check(source_location) if check else out
    if zarr_format not in (2, 3):
        raise OutputError(f"zarr_format must be 2 or 3, got {zarr_format!r}")
    if chunk_rows is not None:
        if isinstance(chunk_rows, bool) or not isinstance(chunk_rows, (int, np.integer)) \
                or chunk_rows < 1:
            raise OutputError(f"chunk_rows must be an integer >= 1, got {chunk_rows!r}")
        chunk_rows = int(chunk_rows)
    if is_pathlike(out):
        s = os.fspath(out)
        kind = "picture" if contents == "picture" else "npy" if s.endswith(".npy") else "zarr"
        target = local_path(s) or s
    else:
        kind, target = "zarr", out
    o = Output(target, kind=kind, overwrite=bool(overwrite), zarr_format=int(zarr_format),
               chunk_rows=chunk_rows, storage_options=storage_options,
               token=token or new_token(), contents=contents)
    if not check and source_location is not None:  # kept for the check where it is written
        o.sources = (source_location,) if isinstance(source_location, str) \
            else tuple(s for s in source_location if s is not None)
    return o.check(source_location) if check else o
