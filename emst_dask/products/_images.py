"""numba kernels of the periodic friends-of-friends catalogue: image shifts.

In a periodic box a group that crosses a face has its members on both
sides of the box.  To take its centre of mass, every member is moved by a
whole number of box lengths (its *image shift*) so that the group is one
connected piece again.  The shifts come from the tree: an edge (u, v) of
weight w <= b < L/2 joins u to the image of v nearest to u, so walking the
group's tree edges from one member, and moving each new member to the
nearest image of the member it hangs from, unwraps the group exactly.

``image_shifts`` does this walk in any edge order with a union-find whose
nodes carry their shift relative to their parent ("union-find with
potentials"); roots are the smallest rows, as in ``_uf.union_min_root``.
It is sequential and reads memory at random, so the host first does what
the device does (``products.unwrap.image_shifts_xp``), in parallel:
``nearest_image_shifts`` moves every member to its image nearest the
group's smallest row, ``disagreeing_edges`` finds the edges that this
does not put at their nearest image (groups wider than half the box), and
in those groups ``piece_roots`` joins the parts whose edges agree, so that
only the few edges between them are walked (``unwrap._join_pieces``).
``image_shifts`` stays as the reference the tests compare with.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit, prange


@njit(cache=True)
def _find(parent, off, x, tot):
    """Root of ``x``; every node on the path is hung from the root with its
    shift relative to the root (``tot``: (d,) int64 work space)."""
    d = off.shape[1]
    for j in range(d):
        tot[j] = 0
    r = x
    while parent[r] != r:
        for j in range(d):
            tot[j] += off[r, j]
        r = parent[r]
    y = x
    while parent[y] != y:
        nxt = parent[y]
        for j in range(d):
            o = off[y, j]
            off[y, j] = tot[j]
            tot[j] -= o
        parent[y] = r
        y = nxt
    return r


@njit(cache=True)
def image_shifts(source, target, weight, points, box, b):
    """Image shifts that unwrap every group of the edges of weight <= b.

    Parameters
    ----------
    source, target : (m,) int64, edge endpoints in [0, n) (a spanning
        tree's edges; any edge list works, edges closing a cycle are
        skipped).
    weight : (m,) float32 or float64, minimum-image edge lengths.
    points : (n, d) float32 or float64, in [0, box) per axis.
    box : (d,) float64, the box lengths; ``b < box / 2`` on every axis.
    b : float64, the largest linking length.

    Returns
    -------
    (n, d) int64
        For every point, the number of box lengths to add per axis to put
        it where it lies relative to the smallest row of its group when the
        group is unwrapped along its edges: ``points[i] + box * shift[i]``
        minus the same of another member is that member's displacement
        along the path of edges between them.  Roots (smallest rows) have
        shift 0; so do the points of no edge.
    """
    n, d = points.shape
    parent = np.arange(n)
    off = np.zeros((n, d), np.int64)
    tot = np.zeros(d, np.int64)
    t = np.zeros(d, np.int64)
    for e in range(source.shape[0]):
        if not np.float64(weight[e]) <= b:
            continue
        u = source[e]
        v = target[e]
        ru = _find(parent, off, u, tot)
        rv = _find(parent, off, v, tot)
        if ru == rv:
            continue
        for j in range(d):  # u + box * t is the image of u nearest v
            delta = (np.float64(points[u, j]) - np.float64(points[v, j])) / box[j]
            t[j] = -np.int64(math.floor(delta + 0.5))
        if ru < rv:  # rv's set moves so that u - v is the edge's minimum image
            parent[rv] = ru
            for j in range(d):
                off[rv, j] = off[u, j] - off[v, j] - t[j]
        else:
            parent[ru] = rv
            for j in range(d):
                off[ru, j] = t[j] + off[v, j] - off[u, j]
    for i in range(n):
        _find(parent, off, i, tot)
    return off


@njit(parallel=True, cache=True)
def nearest_image_shifts(points, rows, roots, box):
    """Each of ``rows`` moved to its image nearest its group's smallest row.

    Parameters
    ----------
    points : (n, d) float32 or float64.
    rows : (k,) int64, the points to shift; roots : (k,) int64, the smallest
        row of each one's group.
    box : (d,) float64.

    Returns
    -------
    (n, d) int64, 0 for the points not in ``rows``.
    """
    n, d = points.shape
    out = np.zeros((n, d), np.int64)
    for q in prange(rows.shape[0]):
        i = rows[q]
        r = roots[q]
        for j in range(d):
            delta = (np.float64(points[i, j]) - np.float64(points[r, j])) / box[j]
            out[i, j] = -np.int64(math.floor(delta + 0.5))
    return out


@njit(parallel=True, cache=True)
def disagreeing_edges(source, target, weight, b, keep, points, box, shift):
    """The edges of weight <= b between kept points whose ends' shifts do not
    put them at each other's nearest image: (m,) bool."""
    m = source.shape[0]
    d = points.shape[1]
    out = np.zeros(m, np.bool_)
    for e in prange(m):
        u = source[e]
        v = target[e]
        if not (np.float64(weight[e]) <= b and keep[u]):
            continue
        for j in range(d):
            delta = (np.float64(points[u, j]) - np.float64(points[v, j])) / box[j]
            t = -np.int64(math.floor(delta + 0.5))
            if shift[u, j] - shift[v, j] != t:
                out[e] = True
    return out


@njit(cache=True)
def _hook_pieces(source, target, weight, b, keep, wide, raw, bad, parent):
    """Join the ends of every edge of weight <= b in a wide group whose ends
    already agree (not ``bad``): a union-find whose roots are the smallest
    rows, so every piece is named by its smallest row; on return every
    point hangs from its root."""
    for e in range(source.shape[0]):
        u = source[e]
        if bad[e] or not (np.float64(weight[e]) <= b and keep[u] and wide[raw[u]]):
            continue
        x = u
        while parent[x] != x:
            g = parent[parent[x]]
            parent[x] = g
            x = g
        y = target[e]
        while parent[y] != y:
            g = parent[parent[y]]
            parent[y] = g
            y = g
        if x < y:
            parent[y] = x
        elif y < x:
            parent[x] = y
    # every parent is a smaller row: in increasing order one step each
    # hangs every point from its root
    for i in range(parent.shape[0]):
        parent[i] = parent[parent[i]]


def piece_forest(source, target, weight, b, keep, wide, raw, bad, bu, bv):
    """The pieces of the wide groups (``wide``: (C,) bool by raw group): the
    components of their edges of weight <= b that join nearest images (not
    ``bad``).  Returns each point's piece ((n,) int64, its smallest row; the
    point itself outside the wide groups) and the piece of each of ``bu``
    and ``bv``."""
    parent = np.arange(raw.shape[0], dtype=np.int64)
    _hook_pieces(source, target, weight, np.float64(b), keep, wide, raw, bad, parent)
    return parent, parent[bu], parent[bv]


@njit(parallel=True, cache=True)
def add_piece_shifts(piece, keep, wide, raw, nodes, off, shift):
    """Every kept point of a wide group moved by its piece's constant
    (``piece``: (n,) int64 from ``piece_forest``; ``nodes``: (p,) int64
    increasing pieces, ``off``: (p, d) int64), in place; one pass over the
    points."""
    n, d = shift.shape
    p = nodes.shape[0]
    for i in prange(n):
        if not (keep[i] and wide[raw[i]]):
            continue
        x = piece[i]
        lo, hi = 0, p
        while lo < hi:
            mid = (lo + hi) >> 1
            if nodes[mid] < x:
                lo = mid + 1
            else:
                hi = mid
        if lo < p and nodes[lo] == x:
            for j in range(d):
                shift[i, j] += off[lo, j]
