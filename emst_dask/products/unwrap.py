"""Unwrapping friends-of-friends groups across the faces of a periodic box.

Every member of a group is moved by whole box lengths (its image shift) so
that the group is one piece (see ``_images`` for why the tree's edges make
this exact).  ``image_shifts_xp`` is the device version (on CuPy a few
kernels, ``kernels.cuda.fof_products``; with numpy the same steps as
whole-array operations, the reference), ``image_shifts_host`` the numba
one, ``image_shifts_any`` picks by where the points are.
"""
from __future__ import annotations

import numpy as np

from ..arrays import jump_to_roots, scatter_min, tally
from .order import array_module

def smallest_rows(raw, C=None):
    """(C,) int64: the smallest row of each raw group."""
    xp = array_module(raw)
    n = raw.shape[0]
    C = (int(raw.max()) + 1 if n else 0) if C is None else C
    if xp is not np and n:  # an atomic a warp and group: no queue on a giant group
        return tally(xp, xp.ascontiguousarray(raw, dtype=xp.int64), C, first=True)[1]
    first = xp.full(C, n, xp.int64)
    if n:
        scatter_min(xp, first, raw, xp.arange(n, dtype=xp.int64))
    return first


def group_tally(raw, C=None):
    """(sizes, first): each raw group's member count and smallest row, (C,)
    int64 each, in one pass over ``raw`` (``group_sizes`` and
    ``smallest_rows`` together)."""
    xp = array_module(raw)
    n = raw.shape[0]
    C = (int(raw.max()) + 1 if n else 0) if C is None else C
    if xp is not np and n:
        sizes, first = tally(xp, xp.ascontiguousarray(raw, dtype=xp.int64), C, first=True)
        return sizes, first
    return group_sizes(raw, C), smallest_rows(raw, C)


def group_sizes(raw, C=None):
    """(C,) int64: the member count of each raw group (a ``bincount``; on
    the device one atomic a warp and group, not one a point)."""
    xp = array_module(raw)
    n = raw.shape[0]
    C = (int(raw.max()) + 1 if n else 0) if C is None else C
    if xp is not np and n:
        return tally(xp, xp.ascontiguousarray(raw, dtype=xp.int64), C)[0]
    return xp.bincount(raw, minlength=C).astype(xp.int64, copy=False) if n \
        else xp.zeros(C, xp.int64)


def _edge_images(xp, points, u, v, box):
    """(m, d) int64 per edge: u + box * t is the image of u nearest v."""
    t = xp.empty((u.shape[0], points.shape[1]), xp.int64)
    for j in range(points.shape[1]):
        delta = (points[u, j].astype(xp.float64) - points[v, j].astype(xp.float64)) / box[j]
        t[:, j] = -xp.floor(delta + 0.5).astype(xp.int64)
    return t


def _hooked_shifts(xp, u, v, t, p):
    """Shifts of p nodes joined by edges (u, v) with edge images t, each
    relative to the smallest node of its component: hooking of roots under
    smaller roots (one chosen edge per hooked root) and pointer jumping,
    both carrying the shift of a node relative to its parent."""
    d = t.shape[1]
    label = xp.arange(p, dtype=xp.int64)
    off = xp.zeros((p, d), xp.int64)
    while u.shape[0]:
        lu, lv = label[u], label[v]
        apart = lu != lv
        if not bool(apart.any()):
            break
        u, v, t, lu, lv = u[apart], v[apart], t[apart], lu[apart], lv[apart]
        hi, lo = xp.maximum(lu, lv), xp.minimum(lu, lv)
        target = xp.full(p, p, xp.int64)
        scatter_min(xp, target, hi, lo)
        win = xp.flatnonzero(lo == target[hi])
        pick = xp.full(p, u.shape[0], xp.int64)
        scatter_min(xp, pick, hi[win], win.astype(xp.int64))
        roots = xp.flatnonzero(pick < u.shape[0])
        e = pick[roots]
        from_u = lu[e] == roots  # the hooked root's side of its edge
        a = xp.where(from_u, u[e], v[e])
        b = xp.where(from_u, v[e], u[e])
        tab = xp.where(from_u[:, None], t[e], -t[e])
        off[roots] = tab + off[b] - off[a]
        label[roots] = target[roots]
        while True:  # pointer jumping, shifts summed along the way
            up = label[label]
            if bool((up == label).all()):
                break
            off = off + off[label]
            label = up
    return off


def _piece_roots_np(u, v, join, n, rows):
    """(k,) int64: the smallest row of the component of each of ``rows`` in
    the graph of the edges (u, v) where ``join``: hooking of larger labels
    under smaller ones and pointer jumping, rounds until every edge agrees
    (the device runs one lock-free union-find pass instead,
    ``_image_shifts_device``)."""
    label = np.arange(n, dtype=np.int64)
    u, v = u[join], v[join]
    while u.shape[0]:
        lu, lv = label[u], label[v]
        apart = lu != lv
        if not apart.any():
            break
        u, v, lu, lv = u[apart], v[apart], lu[apart], lv[apart]
        scatter_min(np, label, np.maximum(lu, lv), np.minimum(lu, lv))
        label = jump_to_roots(np, label)
    return label[rows]


def _piece_offsets(xp, shift, points, box, bu, bv, ru, rv):
    """The constant each piece of a wide group is moved by.

    A *piece* is a component of a group's edges that already join nearest
    images under ``shift`` (each member at its image nearest the group's
    smallest row): along its edges the walk changes nothing, so walked
    shifts are ``shift`` plus one constant per piece.  The constants come
    from the few edges between pieces (``bu``, ``bv``: (q,) int64, the
    edges that disagree; ``ru``, ``rv``: the smallest row of their ends'
    pieces): a walk of the small graph of pieces (``_hooked_shifts``), each
    group's constants relative to its piece of smallest row, which holds
    the group's smallest row (shift 0).

    Returns
    -------
    nodes : (p,) int64, increasing, the pieces (by smallest row) that meet
        an edge between pieces (every piece of a wide group does).
    off : (p, d) int64, their constants.
    """
    t = _edge_images(xp, points, bu, bv, box) - (shift[bu] - shift[bv])
    nodes = xp.unique(xp.concatenate([ru, rv]))
    off = _hooked_shifts(xp, xp.searchsorted(nodes, ru), xp.searchsorted(nodes, rv), t,
                         int(nodes.shape[0]))
    return nodes, off


def _join_pieces(xp, shift, points, box, bu, bv, members, roots):
    """Unwrap the wide groups from their pieces (``_piece_offsets``), in
    place: ``members`` (k,) int64, the points of the wide groups, followed
    by ``bu`` and ``bv``; ``roots`` (k + 2q,) int64, the smallest row of
    each one's piece, in the same order."""
    q, k = bu.shape[0], members.shape[0]
    nodes, off = _piece_offsets(xp, shift, points, box, bu, bv, roots[k:k + q], roots[k + q:])
    at = xp.minimum(xp.searchsorted(nodes, roots[:k]), nodes.shape[0] - 1)
    found = nodes[at] == roots[:k]
    shift[members] += xp.where(found[:, None], off[at], 0)


def image_shifts_xp(xp, source, target, weight, points, box, b, raw, keep=None, first=None):
    """The device version of ``_images.image_shifts``.

    Parameters
    ----------
    xp : numpy or cupy.
    source, target : (m,) int64; weight : (m,) float, the tree.
    points : (n, d) float32/float64 in [0, box).
    box : (d,) float64; b : float, the largest linking length (< box / 2).
    raw : (n,) int64, the raw groups at ``b`` (``fof_labels``).
    keep : (n,) bool, optional
        The points to unwrap: whole groups at ``b`` (the others get 0).
    first : (C,) int64, optional, the smallest row of each raw group
        (``group_tally``; computed when not given).

    Returns
    -------
    (n, d) int64, equal to ``_images.image_shifts`` on the kept points:
    each moved to its image nearest the smallest row of its group, then
    the groups in which some edge does not join nearest images (wider than
    half the box) unwrapped along their edges from their pieces
    (``_join_pieces``): one union-find pass over those groups' edges and a
    walk of the few edges between pieces, so the cost does not grow with
    the size of the widest group beyond that one pass.

    With numpy, whole-array operations (the reference the tests hold the
    device to); on CuPy the kernels of ``_image_shifts_device``.
    """
    n, d = points.shape
    if xp is not np and n:
        return _image_shifts_device(xp, source, target, weight, points, box, b, raw, keep,
                                    first)
    shift = xp.zeros((n, d), xp.int64)
    if n == 0:
        return shift
    rows = xp.arange(n, dtype=xp.int64) if keep is None else xp.flatnonzero(keep)
    root = (smallest_rows(raw) if first is None else first)[raw[rows]]
    for j in range(d):
        delta = (points[rows, j].astype(xp.float64) - points[root, j].astype(xp.float64)) \
            / box[j]
        shift[rows, j] = -xp.floor(delta + 0.5).astype(xp.int64)
    inside = weight.astype(xp.float64) <= b
    if keep is not None:
        inside &= keep[source]
    u, v = source[inside], target[inside]
    t = _edge_images(xp, points, u, v, box)
    bad = (shift[u] - shift[v] != t).any(axis=1)
    if bool(bad.any()):
        C = int(raw.max()) + 1
        wide = xp.zeros(C, bool)
        wide[raw[u[bad]]] = True
        sel = wide[raw[u]]
        u, v, bad = u[sel], v[sel], bad[sel]
        members = xp.flatnonzero(wide[raw] if keep is None else wide[raw] & keep)
        bu, bv = u[bad], v[bad]
        roots = _piece_roots_np(u, v, ~bad, n, xp.concatenate([members, bu, bv]))
        _join_pieces(xp, shift, points, box, bu, bv, members, roots)
    return shift


def _image_shifts_device(xp, source, target, weight, points, box, b, raw, keep, first):
    """``image_shifts_xp`` on CuPy: the nearest images in one pass over the
    points and the edges' check in one pass over the edges
    (``kernels.cuda.fof_products``); where an edge disagrees, its group's
    pieces joined by one union-find pass over the edges' states, the few
    edges between pieces walked (``_piece_offsets``) and the wide groups'
    members moved in one pass over the points (``kernels.cuda.union_find``).
    No (n,) or (m,) temporary beyond the shifts and one byte an edge."""
    from ..kernels.cuda import fof_products as kern
    from ..kernels.cuda import union_find as uf

    n = points.shape[0]
    first = smallest_rows(raw) if first is None else first
    box = xp.asarray(box, dtype=xp.float64)
    shift = kern.nearest_shifts(points, raw, first, keep, box)
    state, bad = kern.edge_states(source, target, weight, b, keep, points, box, shift)
    if bad:
        where = xp.flatnonzero(state == 2)
        bu, bv = source[where], target[where]
        wide = xp.zeros(first.shape[0], bool)
        wide[raw[bu]] = True
        nodes = uf.agreeing_pieces(source, target, state, raw, wide, n)
        ends = uf.roots_of(nodes, xp.concatenate([bu, bv]))
        q = bu.shape[0]
        pieces, off = _piece_offsets(xp, shift, points, box, bu, bv, ends[:q], ends[q:])
        uf.add_piece_offsets(nodes, raw, wide, keep, pieces, off, shift)
    return shift


def image_shifts_host(source, target, weight, points, box, b, raw, keep=None, first=None):
    """``image_shifts_xp`` with numba kernels: nearest images to the smallest
    row (parallel), the edges checked (parallel), and on the groups where an
    edge disagrees their pieces joined by a union-find (sequential, no
    shifts carried) and the edges between pieces walked (``_join_pieces``).
    Same arguments and result."""
    from ._images import add_piece_shifts, disagreeing_edges, nearest_image_shifts, piece_forest

    n = points.shape[0]
    if n == 0:
        return np.zeros(points.shape, np.int64)
    if keep is None:
        keep = np.ones(n, bool)
    rows = np.flatnonzero(keep)
    first = smallest_rows(raw) if first is None else first
    shift = nearest_image_shifts(points, rows, first[raw[rows]], box)
    bad = disagreeing_edges(source, target, weight, b, keep, points, box, shift)
    where = np.flatnonzero(bad)
    if where.shape[0]:
        wide = np.zeros(int(raw.max()) + 1, bool)
        wide[raw[source[where]]] = True
        bu, bv = source[where], target[where]
        parent, ru, rv = piece_forest(source, target, weight, b, keep, wide, raw, bad, bu, bv)
        nodes, off = _piece_offsets(np, shift, points, box, bu, bv, ru, rv)
        add_piece_shifts(parent, keep, wide, raw, nodes, off, shift)
    return shift


def image_shifts_any(source, target, weight, points, box, b, raw, min_members=1, *,
                     tally=None, xp=None):
    """Image shifts of the points in groups of at least ``min_members`` at
    ``b`` (the others get 0; the groups at smaller lengths are parts of
    these): ``image_shifts_host`` on the host, ``image_shifts_xp`` on
    CuPy input (or with ``xp`` given: the device path on that module).
    ``tally``: ``group_tally(raw)`` when the caller has it."""
    xp = array_module(points) if xp is None else xp
    sizes, first = group_tally(raw) if tally is None else tally
    keep = None
    if min_members > 1:
        keep = (sizes >= min_members)[raw]
    if xp is np:
        return image_shifts_host(source, target, weight, points, np.asarray(box, np.float64),
                                 float(b), raw, keep, first)
    return image_shifts_xp(xp, source, target, weight, points, xp.asarray(box), float(b), raw,
                           keep, first)
