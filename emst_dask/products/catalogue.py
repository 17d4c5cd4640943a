"""Friends-of-friends halo catalogues: the result type and its Zarr group.

``FoFCatalogue`` holds what ``emst_dask.fof`` computes: the group of every
point at one or several linking lengths, and per length one row per group
(member count, centre of mass, mean velocity).  ``FoFCatalogue.to_zarr``
writes it as a cluster store (``emst_dask.io.cluster_store``) of kind
"fof", complete or absent; ``FoFStore`` is the small handle of such a
store (what a job with ``out=`` returns) and ``open_fof`` opens one.

Layout of the group::

    labels                     (n,) int64, or (K, n) for K linking lengths
    catalogue/<k>/length       (G_k,) int64      member count
    catalogue/<k>/position     (G_k, d) float64  centre of mass
    catalogue/<k>/velocity     (G_k, d) float64  mean velocity (when given)

and the same under the names of Gadget's FoF tables (``fof_tab``), as halo
finders write them::

    catalogue/<k>/GroupLen     (G_k,) int64      = length
    catalogue/<k>/GroupPos     (G_k, d) float64  = position
    catalogue/<k>/GroupVel     (G_k, d) float64  = velocity (when given)
    catalogue/<k>/GroupMass    (G_k,) float64    sum of the members' masses
                                                 (when masses are given)
    catalogue/<k>/GroupOffset  (G_k,) int64      where the group's members
                                                 start in IDs (when IDs are given)
    catalogue/<k>/IDs          (sum G_k lengths,) the members' particle IDs,
                                                 group by group (the IDs' dtype)

Groups are in label order (by decreasing length, ties by smallest row);
within a group the members are in row order.  The IDs of group g are
``IDs[GroupOffset[g]:GroupOffset[g] + GroupLen[g]]``.

k = 0 .. K-1 in the order the lengths were given; the attributes ``kind``
("fof"), ``n``, ``d``, ``linking_length`` (the absolute lengths),
``linking_length_given``, ``relative``, ``box_size`` (a list, or None),
``min_members``, ``n_groups`` (per length), ``velocities``, ``ids`` and
``masses`` (where they came from, or None), ``input``, ``format``,
``version`` and ``complete``.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import InputError
from ..arrays import to_host as _host

#: rows per chunk of the catalogue arrays
CATALOGUE_ROWS = 1 << 18


@dataclass
class FoFCatalogue:
    """Friends-of-friends groups and their catalogue.

    Attributes
    ----------
    labels : (n,) int64, or (K, n) int64 for a sequence of K lengths
        The group of every point, -1 for points in no group of at least
        ``min_members`` members.  Groups are numbered 0, 1, ... by
        decreasing member count, ties by their smallest row.
    linking_length : (K,) float64
        The absolute linking lengths, in the order given.
    length : (G,) int64, or a list of K such arrays
        Member count of every group (nbodykit's ``Length``), decreasing.
    position : (G, d) float64, or a list of K
        Centre of mass (nbodykit's ``CMPosition``): the mean of the members
        unwrapped across the periodic faces, wrapped back into [0, L).
    velocity : (G, d) float64, a list of K, or None
        Mean velocity of the members (nbodykit's ``CMVelocity``), when
        velocities were given.
    box_size : (d,) float64 or None
        The periodic box, or None.
    min_members : int
    relative : bool
        Whether ``linking_length_given`` is in units of the mean separation.
    linking_length_given : (K,) float64
        The linking lengths as given.
    timings : dict
        Seconds per phase (``tree``, ``labels``, ``unwrap``, ``catalogue``,
        ``members``).
    offset : (G,) int64, a list of K, or None
        Where each group's members start in ``ids`` (Gadget's
        ``GroupOffset``), when IDs or masses were given.
    ids : (sum(length),) integer array, a list of K, or None
        The members' particle IDs, group by group, each group's members in
        row order, when IDs were given.
    mass : (G,) float64, a list of K, or None
        The members' total mass (``GroupMass``), when masses were given;
        ``position`` and ``velocity`` are then mass-weighted.

    The arrays are numpy, or cupy when the computation ran on a GPU in
    this process (``to_host`` brings them to numpy).
    """

    labels: Any
    linking_length: np.ndarray
    length: Any
    position: Any
    velocity: Any = None
    box_size: Any = None
    min_members: int = 20
    relative: bool = True
    linking_length_given: Any = None
    timings: dict = field(default_factory=dict)
    offset: Any = None
    ids: Any = None
    mass: Any = None

    @property
    def single(self) -> bool:
        """True when one linking length was given (then ``labels`` is (n,))."""
        return self.labels.ndim == 1

    @property
    def n_points(self) -> int:
        """n, the number of points."""
        return int(self.labels.shape[-1])

    @property
    def n_groups(self):
        """Number of groups: an int, or a list of K ints."""
        counts = [int(len(x)) for x in self._per_length(self.length)]
        return counts[0] if self.single else counts

    def _per_length(self, a):
        return [a] if self.single else list(a)

    def groups(self, k: int = 0) -> dict:
        """The catalogue at the k-th linking length.

        Returns
        -------
        dict
            ``length`` (G,) int64, ``position`` (G, d) float64, ``velocity``
            (G, d) float64 or None, ``labels`` (n,) int64 and
            ``linking_length`` (float, absolute).
        """
        K = len(self.linking_length)
        if not -K <= k < K:
            raise IndexError(f"linking length {k} of {K}")
        k %= K
        def at(a):
            return None if a is None else self._per_length(a)[k]

        return {"length": self._per_length(self.length)[k],
                "position": self._per_length(self.position)[k], "velocity": at(self.velocity),
                "labels": self.labels if self.single else self.labels[k],
                "linking_length": float(self.linking_length[k]),
                "offset": at(self.offset), "ids": at(self.ids), "mass": at(self.mass)}

    def members(self, group: int, k: int = 0):
        """The particle IDs of group ``group`` at the k-th linking length
        (in row order), from ``ids`` and ``offset``.

        Raises
        ------
        InputError
            The catalogue was made without IDs.
        """
        got = self.groups(k)
        if got["ids"] is None:
            raise InputError("the catalogue was made without particle IDs: give ids= "
                             "(an array, or the snapshot's ParticleIDs)")
        a = int(got["offset"][group])
        return got["ids"][a:a + int(got["length"][group])]

    def summary(self) -> list:
        """Per linking length: ``linking_length`` (absolute), ``groups``,
        ``largest`` (member count, 0 without groups) and ``fraction`` (of the
        points in groups)."""
        return _summary(self.linking_length, [_host(x) for x in self._per_length(self.length)],
                        self.n_points)

    def to_host(self) -> "FoFCatalogue":
        """The same catalogue with numpy arrays."""
        def h(a):
            return [_host(x) for x in a] if isinstance(a, list) else _host(a)

        return FoFCatalogue(_host(self.labels), np.asarray(self.linking_length),
                            h(self.length), h(self.position), h(self.velocity),
                            self.box_size, self.min_members, self.relative,
                            self.linking_length_given, dict(self.timings), h(self.offset),
                            h(self.ids), h(self.mass))

    def arrays(self) -> dict:
        """The store's arrays (numpy) by name (see the module docstring)."""
        out = {"labels": _host(self.labels)}
        lengths = self._per_length(self.length)
        positions = self._per_length(self.position)
        velocities = None if self.velocity is None else self._per_length(self.velocity)
        def per(a):
            return None if a is None else self._per_length(a)

        offsets, ids, masses = per(self.offset), per(self.ids), per(self.mass)
        for k in range(len(lengths)):
            c = f"catalogue/{k}"
            out[f"{c}/length"] = out[f"{c}/GroupLen"] = _host(lengths[k])
            out[f"{c}/position"] = out[f"{c}/GroupPos"] = _host(positions[k])
            if velocities is not None:
                out[f"{c}/velocity"] = out[f"{c}/GroupVel"] = _host(velocities[k])
            if masses is not None:
                out[f"{c}/GroupMass"] = _host(masses[k])
            if ids is not None:
                out[f"{c}/GroupOffset"] = _host(offsets[k])
                out[f"{c}/IDs"] = _host(ids[k])
        return out

    def attrs(self, **extra) -> dict:
        """The store's attributes (JSON values)."""
        box = None if self.box_size is None else [float(x) for x in self.box_size]
        given = self.linking_length if self.linking_length_given is None \
            else self.linking_length_given
        n_groups = self.n_groups
        return dict(kind="fof", n=self.n_points, d=int(self._per_length(self.position)[0].shape[1]),
                    linking_length=[float(x) for x in self.linking_length],
                    linking_length_given=[float(x) for x in np.ravel(given)],
                    relative=bool(self.relative), box_size=box,
                    min_members=int(self.min_members),
                    n_groups=[n_groups] if self.single else n_groups, single=self.single,
                    velocities=extra.pop("velocities", self.velocity is not None or None),
                    ids=extra.pop("ids", self.ids is not None or None),
                    masses=extra.pop("masses", self.mass is not None or None),
                    **extra)

    def to_zarr(self, out, *, overwrite: bool = False, input: str = "points",
                velocities=None, ids=None, masses=None, **output_options) -> "FoFStore":
        """Write the catalogue as a Zarr group, complete or absent.

        Parameters
        ----------
        out : path, URL or zarr store (not ``.npy``: the catalogue is a group)
        overwrite : bool
            Replace a cluster store this package wrote (nothing else).
        input : str
            What the store records as its input.
        velocities, ids, masses : str, optional
            Where the velocities, IDs and masses came from (attributes).
        **output_options : for ``emst_dask.io.resolve_output`` (``zarr_format``,
            ``storage_options``).

        Returns
        -------
        FoFStore
        """
        from ..io.output import Output, resolve_output

        output = out if isinstance(out, Output) else \
            resolve_output(out, overwrite=overwrite, contents="clusters", **output_options)
        return write_fof(output, self, input=input, velocities=velocities, ids=ids,
                         masses=masses)


def check_catalogue_output(output):
    """Refuse an ``.npy`` output: the catalogue is a Zarr group."""
    if output is not None and getattr(output, "kind", None) == "npy":
        raise InputError(f"{output}: a friends-of-friends catalogue is a Zarr group of "
                         "labels and catalogue arrays; give a directory name such as "
                         "HALOS.zarr, not .npy")
    return output


def write_fof(output, cat: FoFCatalogue, *, input: str, velocities=None, ids=None,
              masses=None, **extra) -> "FoFStore":
    """Write ``cat`` to the checked ``Output`` (a cluster store of kind "fof").

    Returns
    -------
    FoFStore
    """
    from ..io.cluster_store import write_clusters

    check_catalogue_output(output)
    arrays = cat.arrays()
    chunks = {name: (max(1, min(CATALOGUE_ROWS, a.shape[0])),) + a.shape[1:]
              for name, a in arrays.items() if name.startswith("catalogue/")}
    attrs = cat.attrs(input=input, velocities=velocities if velocities is not None
                      else (cat.velocity is not None or None),
                      ids=ids if ids is not None else (cat.ids is not None or None),
                      masses=masses if masses is not None else (cat.mass is not None or None),
                      **extra)
    path = write_clusters(output, arrays, attrs, chunks=chunks)
    from .._version import __version__

    return FoFStore(str(path), dict(attrs, version=__version__, complete=True))


@dataclass
class FoFStore:
    """A friends-of-friends catalogue on disk (what a job with ``out=`` returns).

    Attributes
    ----------
    path : str, or the zarr store object it was written to
    attrs : dict
        The store's attributes (``n``, ``linking_length``, ``n_groups``, ...).
    """

    path: Any
    attrs: dict

    @property
    def n_groups(self):
        """Number of groups: an int, or a list of K ints for several lengths."""
        g = list(self.attrs.get("n_groups") or [])
        return g[0] if self.attrs.get("single", len(g) == 1) else g

    def summary(self) -> list:
        """As ``FoFCatalogue.summary``, from the member counts alone."""
        import zarr

        group = zarr.open_group(self.path, mode="r")
        b = self.attrs["linking_length"]
        return _summary(b, [np.asarray(group[f"catalogue/{k}/length"][...])
                            for k in range(len(b))], int(self.attrs["n"]))

    def load(self) -> FoFCatalogue:
        """The whole catalogue, read back (numpy arrays)."""
        import zarr

        from ..io.cluster_store import read_clusters

        got = read_clusters(self.path)
        a = got["attrs"]
        labels = got["labels"]
        group = zarr.open_group(self.path, mode="r")
        length, position, velocity, offset, ids, mass = [], [], [], [], [], []

        def opt(sub, name):
            return np.asarray(sub[name][...]) if name in sub else None

        for k in range(len(a["linking_length"])):
            sub = group[f"catalogue/{k}"]
            length.append(np.asarray(sub["length"][...]))
            position.append(np.asarray(sub["position"][...]))
            velocity.append(opt(sub, "velocity"))
            offset.append(opt(sub, "GroupOffset"))
            ids.append(opt(sub, "IDs"))
            mass.append(opt(sub, "GroupMass"))
        single = labels.ndim == 1

        def one(v):
            return None if any(x is None for x in v) else (v[0] if single else v)

        velocity, offset, ids, mass = one(velocity), one(offset), one(ids), one(mass)
        box = None if a.get("box_size") is None else np.asarray(a["box_size"], np.float64)
        return FoFCatalogue(labels, np.asarray(a["linking_length"], np.float64),
                            length[0] if single else length,
                            position[0] if single else position, velocity, box,
                            int(a["min_members"]), bool(a["relative"]),
                            np.asarray(a["linking_length_given"], np.float64), {},
                            offset, ids, mass)

    def __repr__(self):
        return f"FoFStore({self.path!r}, n={self.attrs.get('n')}, n_groups={self.n_groups})"


def _summary(lengths, counts, n) -> list:
    return [{"linking_length": float(b), "groups": int(len(c)),
             "largest": int(c[0]) if len(c) else 0,
             "fraction": float(c.sum()) / n if n else 0.0} for b, c in zip(lengths, counts)]


def open_fof(path) -> FoFStore:
    """Open a friends-of-friends catalogue store written by this package.

    ``open_fof(path).load()`` reads it back as a ``FoFCatalogue``: labels,
    and per linking length the groups' ``length``, ``position``,
    ``velocity`` and, when they were given, the members' particle ``ids``
    with each group's ``offset`` and ``mass`` (the store's ``IDs``,
    ``GroupOffset``, ``GroupMass``; see the module docstring for the
    layout, which zarr reads directly too)::

        cat = open_fof("halos.zarr").load()
        cat.members(0)            # the IDs of the largest group

    Parameters
    ----------
    path : path, URL or zarr store

    Returns
    -------
    FoFStore

    Raises
    ------
    InputError
        Not a complete cluster store, or not of kind "fof".
    """
    from ..io.output import CLUSTER_FORMAT, zarr_group_attrs
    from ..io.paths import is_pathlike, local_path

    loc = local_path(path) if is_pathlike(path) else None
    shown = loc or str(path)
    if loc is not None and not os.path.exists(loc):
        raise InputError(f"{loc}: no such catalogue")
    attrs = zarr_group_attrs(loc) if loc is not None else None
    if attrs is None:
        import zarr

        try:
            attrs = dict(zarr.open_group(loc or path, mode="r").attrs)
        except Exception as exc:
            raise InputError(f"{shown}: not a friends-of-friends catalogue "
                             f"({type(exc).__name__}: {exc})") from None
    if attrs.get("format") != CLUSTER_FORMAT or attrs.get("kind") != "fof":
        raise InputError(f"{shown}: not an emst-dask friends-of-friends catalogue")
    if attrs.get("complete") is not True:
        raise InputError(f"{shown}: incomplete catalogue: the job that wrote it failed or "
                         "is still running")
    if "linking_length" not in attrs:  # the labels of `emst-dask cut`
        raise InputError(f"{shown}: friends-of-friends labels without a catalogue (as "
                         "emst-dask cut writes them); read its labels array with zarr, or "
                         "write a catalogue with emst_dask.fof / emst-dask fof")
    return FoFStore(loc if loc is not None else path, attrs)
