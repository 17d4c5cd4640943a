"""Friends-of-friends halo catalogues (``emst_dask.fof``).

The friends-of-friends (FoF) groups at linking length b are the connected
components of the graph joining every two points at distance <= b; in a
periodic box the distance is the minimum-image one.  On a minimum spanning
tree they are the components of the tree's edges of weight <= b
(``products.cuts``), so one tree gives the groups at every b, and several
lengths at once cost one pass over the edges.

From the tree's raw groups (numbered by their smallest row) this module
makes a halo catalogue, on the host (numpy and numba) or on the device
(CuPy, whole-array operations that also run with numpy):

1. *labels*: groups of fewer than ``min_members`` points are dropped
   (label -1); the others are numbered 0, 1, ... by decreasing member
   count, ties by their smallest row.  The partition never depends on the
   row order; the numbering only through those ties.
2. *unwrapping* (periodic box): every member is moved by whole box lengths
   so that its group is one piece (``_images``): along the group's tree
   edges, each of weight <= b < L/2, the nearest image is the neighbour.
   Each member is first moved to its image nearest the group's smallest
   row, every edge is checked to join nearest images, and only the groups
   where an edge does not (groups wider than half the box) are unwrapped
   from their *pieces*: the parts joined by edges that already agree
   (one union-find pass: sequential on the host, lock-free on the device)
   are each moved as a whole, by a walk of the few edges between pieces.
   Exact: the result is the unwrapping along the tree's edges, whatever
   the group's extent; a group that wraps around the whole box (it
   percolates) is unwrapped along its tree edges from its smallest row,
   and its centre is the mean of its members so placed.  Only the groups
   that can reach ``min_members`` are unwrapped.
3. *catalogue*: per group the member count, the centre of mass (the mean
   of the unwrapped members, wrapped back into [0, L)) and the mean
   velocity; sums in float64 of the displacements from the group's
   smallest row, so that the centre keeps the precision of the
   coordinates, each group's pairwise in (label, row) order
   (``group_sums``): the same bits on the host and the device, and no
   atomics queued on the address of one large group.

The convention is nbodykit's (``nbodykit.algorithms.fof.FOF``): the
linking length relative to the mean separation (V / n)^(1/d), the centre
of mass unwrapped across the faces, the catalogue sorted by decreasing
length.  ``fof``'s docstring lists the differences.
"""
from __future__ import annotations

import time

import numpy as np

from ..errors import InputError
from .catalogue import FoFCatalogue
from .unwrap import group_sizes, group_tally, image_shifts_any
from .cuts import fof_labels
from .group_sums import member_rows, segment_sums
from .tree_checks import check_same_box
from .order import array_module
from ..arrays import to_host as _host


# --------------------------------------------------------------------------
# the algorithm
# --------------------------------------------------------------------------
def group_labels(raw, min_members, sizes=None):
    """Labels of the groups of at least ``min_members`` points.

    Parameters
    ----------
    raw : (n,) int64 numpy or cupy array
        Raw groups numbered 0 .. C-1 by their smallest row (``fof_labels``).
    min_members : int >= 1
    sizes : (C,) int64, optional, the raw groups' member counts
        (``group_sizes``; counted when not given).

    Returns
    -------
    labels : (n,) int64, -1 for points of smaller groups, else 0 .. G-1 by
        decreasing member count, ties by smallest row.
    kept : (G,) int64, the raw group of each label.
    length : (G,) int64, member counts.
    """
    xp = array_module(raw)
    if sizes is None:
        n = raw.shape[0]
        sizes = group_sizes(raw, int(raw.max()) + 1 if n else 0)
    C = int(sizes.shape[0])
    ids = xp.flatnonzero(sizes >= min_members)
    # the raw ids increase with the smallest row: a stable order by size
    order = xp.lexsort(xp.stack([ids, -sizes[ids].astype(xp.int64)]))
    kept = ids[order].astype(xp.int64)
    rank = xp.full(C, -1, xp.int64)
    rank[kept] = xp.arange(kept.shape[0], dtype=xp.int64)
    return rank[raw], kept, sizes[kept].astype(xp.int64)



def group_catalogue(points, raw, min_members, box=None, shift=None, velocities=None,
                    masses=None, *, tally=None, xp=None):
    """Labels and catalogue at one linking length.

    Parameters
    ----------
    points : (n, d) float32/float64, numpy or cupy.
    raw : (n,) int64, raw groups numbered by smallest row.
    min_members : int >= 1.
    box : (d,) float64 or None.
    shift : (n, d) int64 image shifts (``image_shifts``) consistent within
        every raw group, or None (no box).
    velocities : (n, d) array or None.
    masses : (n,) float array or None
        With masses, the centre and the velocity are mass-weighted means
        (Gadget's ``GroupPos``, ``GroupVel``); without, plain means.
    tally : (sizes, first), optional, ``unwrap.group_tally(raw)``.
    xp : numpy or cupy, optional (default: the module of ``points``); the
        device path also runs on the tests' emulated CuPy.

    Returns
    -------
    labels : (n,) int64; length : (G,) int64; position : (G, d) float64;
    velocity : (G, d) float64 or None; rows : (M,) int64, the members by
    (label, row) (``group_sums.member_rows``); mass : (G,) float64 or None,
    the sum of the members' masses (arrays of the module of ``points``).
    The sums are ``group_sums.segment_sums``: in a fixed order, the same
    bits on the host and the device (there ``fof_products.member_sums``,
    the members' values formed in registers).
    """
    xp = array_module(points) if xp is None else xp
    d = points.shape[1]
    sizes, first = group_tally(raw) if tally is None else tally
    labels, kept, length = group_labels(raw, min_members, sizes)
    G = int(kept.shape[0])
    position = xp.empty((G, d), xp.float64)
    velocity = None if velocities is None else xp.empty((G, d), xp.float64)
    if G == 0:
        mass = None if masses is None else xp.zeros(0, xp.float64)
        return labels, length, position, velocity, xp.zeros(0, xp.int64), mass
    top = first[kept]  # each group's smallest row
    rows = member_rows(xp, labels, int(length.sum()), G)
    if xp is not np:
        from ..kernels.cuda.fof_products import member_sums

        sums = member_sums(points, rows, length, top, shift, box, velocities, masses)
    else:
        sums = _host_sums(points, rows, labels, length, top, box, shift, velocities, masses)
    mass = None if masses is None else sums[:, -1]
    count = length.astype(xp.float64) if mass is None else mass
    for j in range(d):
        c = points[top, j].astype(xp.float64) + sums[:, j] / count
        if box is not None:
            L = float(box[j])
            c = c - L * xp.floor(c / L)
            c = xp.where(c >= L, c - L, c)  # c a hair below 0 rounds to L
        position[:, j] = c
        if velocities is not None:
            velocity[:, j] = sums[:, d + j] / count
    return labels, length, position, velocity, rows, mass


def _host_sums(points, rows, labels, length, top, box, shift, velocities, masses):
    """``group_catalogue``'s sums on the host: the members' columns
    (displacements from the group's smallest row unwrapped, velocities,
    each times the mass, the mass) and ``segment_sums``; (G, c) float64."""
    xp = np
    d = points.shape[1]
    ref = top[labels[rows]]
    weight = None if masses is None else masses[rows].astype(xp.float64)
    cols = []
    for j in range(d):
        # displacement from the group's smallest row, unwrapped: small
        # numbers, so the mean keeps the coordinates' precision
        dx = points[rows, j].astype(xp.float64) - points[ref, j].astype(xp.float64)
        if shift is not None:
            dx += (shift[rows, j] - shift[ref, j]).astype(xp.float64) * float(box[j])
        cols.append(dx if weight is None else dx * weight)
    for j in range(0 if velocities is None else d):
        w = velocities[rows, j].astype(xp.float64)
        cols.append(w if weight is None else w * weight)
    if weight is not None:
        cols.append(weight)
    return segment_sums(xp.stack(cols, axis=1), length)


def group_members(labels, length, ids=None, masses=None, rows=None, mass=None):
    """The members of every group in a halo finder's order.

    Parameters
    ----------
    labels : (n,) int64, -1 or 0 .. G-1 (``group_labels``)
    length : (G,) int64, member counts
    ids : (n,) integer array or None
        The particles' IDs (a snapshot's ``ParticleIDs``).
    masses : (n,) float array or None
    rows, mass : what ``group_catalogue`` returned for these labels, or
        None (computed here).

    Returns
    -------
    offset : (G,) int64
        Where each group's members start in ``members`` (Gadget's
        ``GroupOffset``): groups in label order, so by decreasing length.
    members : (sum(length),) the IDs of the members (``ids``' dtype), or
        their rows (int64) without ``ids``: group by group, each group's
        members by increasing row.
    mass : (G,) float64 or None
        The sum of the members' masses (``GroupMass``).
    """
    xp = array_module(labels)
    offset = xp.cumsum(length) - length if length.shape[0] else xp.zeros(0, xp.int64)
    if rows is None:  # a stable sort by label: each group's rows in order
        rows = member_rows(xp, labels, int(length.sum()))
    members = rows if ids is None else ids[rows]
    if masses is not None and mass is None:
        mass = segment_sums(masses[rows].astype(xp.float64)[:, None], length)[:, 0] \
            if length.shape[0] else xp.zeros(0, xp.float64)
    return offset.astype(xp.int64), members, None if masses is None else mass


def catalogue_of_tree(points, tree, lengths, single, min_members, box=None, velocities=None,
                      *, relative=True, given=None, timings=None, ids=None,
                      masses=None, xp=None) -> FoFCatalogue:
    """The catalogue from points and their (periodic) Euclidean tree.

    Parameters
    ----------
    points : (n, d) float32/float64 numpy or cupy, checked (in the box).
    tree : SpanningTree of ``points`` (min_samples 1; minimum-image
        weights with a box).
    lengths : (K,) float64, absolute linking lengths (< box / 2).
    single : bool, one length given (labels (n,)).
    min_members : int; box : (d,) float64 or None;
    velocities : (n, d) array or None.
    ids : (n,) integer array or None
        Particle IDs: the catalogue lists each group's members' IDs.
    masses : (n,) float array or None
        Particle masses: mass-weighted centres and velocities, group masses.
    xp : numpy or cupy, optional: where the catalogue is made (default the
        tree's array module).

    Returns
    -------
    FoFCatalogue (arrays of the tree's array module).
    """
    timings = dict(timings or {})
    xp = array_module(tree.weight) if xp is None else xp
    if xp is not np:
        points = xp.asarray(points)
        velocities = None if velocities is None else xp.asarray(velocities)
    elif not isinstance(points, np.ndarray):
        points = points.get()
        velocities = None if velocities is None else _host(velocities)
    n = points.shape[0]
    t0 = time.perf_counter()
    raw = fof_labels(tree.source, tree.target, tree.weight, n, list(lengths)).reshape(
        len(lengths), n)
    _sync(xp)
    timings["labels"] = time.perf_counter() - t0
    shift = None
    tallies = [None] * len(lengths)  # each raw group's size and smallest row, counted once
    t0 = time.perf_counter()
    if box is not None and n:
        top = int(np.argmax(lengths))
        tallies[top] = group_tally(raw[top])
        shift = image_shifts_any(xp.asarray(tree.source, dtype=xp.int64),
                                 xp.asarray(tree.target, dtype=xp.int64), tree.weight,
                                 points, box, float(lengths[top]), raw[top], min_members,
                                 tally=tallies[top], xp=xp)
    _sync(xp)
    timings["unwrap"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    if ids is not None or masses is not None:
        ids = None if ids is None else xp.asarray(ids)
        masses = None if masses is None else xp.asarray(masses)
    out = [group_catalogue(points, raw[k], min_members, box, shift, velocities, masses,
                           tally=tallies[k], xp=xp) for k in range(len(lengths))]
    _sync(xp)
    timings["catalogue"] = time.perf_counter() - t0
    extra = {}
    if ids is not None or masses is not None:
        t0 = time.perf_counter()
        got = [group_members(o[0], o[1], ids, masses, o[4], o[5]) for o in out]
        _sync(xp)
        timings["members"] = time.perf_counter() - t0
        each = (lambda i: got[0][i]) if single else (lambda i: [g[i] for g in got])
        extra = dict(offset=each(0), ids=None if ids is None else each(1),
                     mass=None if masses is None else each(2))
    labels = out[0][0] if single else xp.stack([o[0] for o in out])
    pick = (lambda i: out[0][i]) if single else (lambda i: [o[i] for o in out])
    velocity = None if velocities is None else pick(3)
    return FoFCatalogue(labels, np.asarray(lengths, np.float64), pick(1), pick(2), velocity,
                        None if box is None else np.asarray(box, np.float64), int(min_members),
                        bool(relative), None if given is None else np.asarray(given, np.float64),
                        timings, **extra)


def _sync(xp):
    if xp is not np:
        xp.cuda.Device().synchronize()


# --------------------------------------------------------------------------
# the tree
# --------------------------------------------------------------------------
def load_tree(tree):
    """A SpanningTree from a SpanningTree, an EdgeStore or an edge store path."""
    from ..io import EdgeStore, open_edges

    if isinstance(tree, (str, EdgeStore)) or hasattr(tree, "__fspath__"):
        store = tree if isinstance(tree, EdgeStore) else open_edges(tree)
        loaded = store.load()
        if getattr(loaded, "box_size", None) is None and store.attrs.get("box_size"):
            loaded.box_size = np.asarray(store.attrs["box_size"], np.float64)
        return loaded
    if not all(hasattr(tree, a) for a in ("source", "target", "weight", "n_points")):
        raise InputError(f"tree must be a SpanningTree, an EdgeStore or the path of an edge "
                         f"store; got {type(tree).__name__}")
    return tree


def check_tree(tree, n: int, d: int, box):
    """Refuse a tree that is not the Euclidean tree of these (n, d) points in
    this box."""
    if int(tree.n_points) != n:
        raise InputError(f"the tree has {tree.n_points} points, the source {n}")
    td = getattr(tree, "n_dims", None)
    if td and int(td) != d:  # 0: not recorded (an .npy edge array)
        raise InputError(f"the tree was computed in {td} dimensions, the source has {d}")
    if int(getattr(tree, "min_samples", 1)) != 1:
        raise InputError(f"the tree is a mutual-reachability tree (min_samples="
                         f"{tree.min_samples}); friends-of-friends needs the Euclidean tree "
                         "(min_samples=1)")
    if tree.n_edges != max(n - 1, 0):
        raise InputError(f"the tree has {tree.n_edges} edges for {n} points: not a "
                         "spanning tree")
    check_same_box(tree, box, d)
