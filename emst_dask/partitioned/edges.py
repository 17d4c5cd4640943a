"""Edge lists of the partitioned EMST: global ids, squared weights, the
super-vertices they join; the strict edge order; minimum spanning forests
over super-vertices: Kruskal on the host, Borůvka rounds of whole-array
operations where the edges are (numpy or CuPy).

The strict order is (w, min id, max id) on global ids throughout, so every
box, every round and every P agree on which of two equal-weight edges
comes first.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit, prange

from ..arrays import jump_to_roots, scatter_min
from ..engine.order import strict_edge_order


FIELDS = ("u", "v", "w2", "su", "sv")


@dataclass
class Edges:
    """Edge records: global ids ``u``, ``v`` (int64), squared weight ``w2``
    (input dtype) and the super-vertices ``su``, ``sv`` they join."""

    u: np.ndarray
    v: np.ndarray
    w2: np.ndarray
    su: np.ndarray
    sv: np.ndarray

    @classmethod
    def empty(cls, dtype):
        """No edges (``w2`` of ``dtype``)."""
        z = np.zeros(0, np.int64)
        return cls(z, z.copy(), np.zeros(0, dtype), z.copy(), z.copy())

    @classmethod
    def concat(cls, parts, dtype, xp=np):
        """The edges of ``parts`` one after another (``empty(dtype)`` when all
        are empty), arrays of ``xp`` (every part's arrays must be)."""
        parts = [p for p in parts if len(p.u)]
        if not parts:
            e = cls.empty(dtype)
            return e if xp is np else e.to(xp.asarray)
        return cls(*(xp.concatenate([getattr(p, f) for p in parts]) for f in FIELDS))

    def to(self, convert):
        """The edges with ``convert`` applied to every array (``xp.asarray``
        to a device, a ``to_host`` back)."""
        return Edges(*(convert(getattr(self, f)) for f in FIELDS))

    def __len__(self):
        return len(self.u)

    def take(self, mask):
        """The edges selected by ``mask`` (a boolean mask or an index array)."""
        return Edges(self.u[mask], self.v[mask], self.w2[mask], self.su[mask], self.sv[mask])


@njit(cache=True)
def _kruskal(order, a, b, n_vertices):
    parent = np.arange(n_vertices)
    keep = np.zeros(order.shape[0], np.bool_)
    for t in range(order.shape[0]):
        e = order[t]
        x = a[e]
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        y = b[e]
        while parent[y] != y:
            parent[y] = parent[parent[y]]
            y = parent[y]
        if x != y:
            parent[max(x, y)] = min(x, y)
            keep[e] = True
    return keep


@njit(cache=True)
def _rank_sorted(keys, order):
    # dense ranks of keys visited in sorted order
    out = np.empty(keys.shape[0], np.int64)
    r = -1
    prev = np.uint64(0)
    for i in range(order.shape[0]):
        k = keys[order[i]]
        if i == 0 or k != prev:
            r += 1
            prev = k
        out[order[i]] = r
    return out, r + 1


def dense_labels(labels):
    """``np.unique(labels, return_inverse=True)[1]`` and the number of
    distinct labels, for int64 labels >= 0, by a radix sort (several times
    numpy's comparison sort on the millions of phase-2 candidates)."""
    from ..kernels.cpu.bvh import radix_argsort

    keys = np.ascontiguousarray(labels).astype(np.uint64)
    if keys.shape[0] == 0:
        return np.zeros(0, np.int64), 0
    bits = max(1, int(keys.max()).bit_length())
    return _rank_sorted(keys, radix_argsort(keys, bits))


def minimum_spanning_forest(edges: Edges) -> Edges:
    """The MSF of ``edges`` over their super-vertices, strict edge order."""
    if len(edges) == 0:
        return edges
    order = strict_edge_order(np, edges.u, edges.v, edges.w2)
    inv, n_verts = dense_labels(np.concatenate([edges.su, edges.sv]))
    m = len(edges)
    keep = _kruskal(order, inv[:m], inv[m:], n_verts)
    return edges.take(keep)


def minimum_spanning_forest_xp(xp, edges: Edges, max_rounds: int = 128) -> Edges:
    """The MSF of ``edges`` over their super-vertices, strict edge order, by
    Borůvka rounds of whole-array operations of ``xp`` (numpy, or CuPy where
    the edges are on the device: no sequential pass, nothing crosses).

    The strict order (w, min id, max id) ranks the edges apart (two copies
    of one pair are equal in every field, so which one is kept does not
    matter), so the MSF is unique and equals ``minimum_spanning_forest``'s
    (Kruskal's).  Every round each component takes its lightest live edge
    (a scatter-min of the ranks) -- an MSF edge by the cut property -- and
    hooks along it; two components that took the same edge hook the larger
    under the smaller (with distinct ranks no longer cycle forms); pointer
    jumping flattens the hooks.  Components at least halve every round.

    Parameters
    ----------
    xp : numpy or cupy
    edges : Edges
        Arrays of ``xp``: ``u``, ``v`` (m,) int64 global ids, ``w2`` (m,)
        float squared weights >= 0, ``su``, ``sv`` (m,) int64 super-vertices
        (an edge with ``su == sv`` is a self-loop: never kept).
    max_rounds : int
        A guard: more rounds than that is a bug (an error, not a forest).

    Returns
    -------
    Edges
        The forest's edges, arrays of ``xp``, in input order.
    """
    m = len(edges)
    if m == 0:
        return edges
    order = strict_edge_order(xp, edges.u, edges.v, edges.w2)
    rank = xp.empty(m, xp.int64)
    rank[order] = xp.arange(m, dtype=xp.int64)
    del order
    if xp is np:
        inv, n = dense_labels(np.concatenate([edges.su, edges.sv]))
    else:
        inv = xp.unique(xp.concatenate([edges.su, edges.sv]), return_inverse=True)[1]
        inv = inv.reshape(-1).astype(xp.int64, copy=False)
        n = int(inv.max()) + 1
    a, b = inv[:m], inv[m:]
    del inv
    big = np.iinfo(np.int64).max
    keep = xp.zeros(m, xp.bool_)
    label = xp.arange(n, dtype=xp.int64)   # each super-vertex's component
    live = xp.flatnonzero(a != b)          # edges between components
    for _ in range(max_rounds):
        lu, lv = label[a[live]], label[b[live]]
        between = lu != lv
        live, lu, lv = live[between], lu[between], lv[between]
        del between
        if live.shape[0] == 0:
            return edges.take(keep)
        r = rank[live]
        best = xp.full(n, big, xp.int64)
        scatter_min(xp, best, lu, r)
        scatter_min(xp, best, lv, r)
        by_u, by_v = best[lu] == r, best[lv] == r  # the edge is lu's / lv's pick
        del best, r
        keep[live[by_u | by_v]] = True
        # each component hooks along its own pick (one per component: ranks
        # are distinct); a pick of both sides hooks the larger under the smaller
        hu = by_u & ~(by_v & (lu < lv))
        hv = by_v & ~(by_u & (lv < lu))
        parent = xp.arange(n, dtype=xp.int64)
        parent[lu[hu]] = lv[hu]
        parent[lv[hv]] = lu[hv]
        del hu, hv, by_u, by_v, lu, lv
        label = jump_to_roots(xp, parent)[label]  # on CuPy one kernel, not a sync a step
    raise RuntimeError(f"minimum spanning forest: edges left after {max_rounds} Borůvka "
                       "rounds; this is a bug, please report it")


@njit(parallel=True, cache=True)
def _take(values, idx):
    out = np.empty(idx.shape[0], values.dtype)
    for i in prange(idx.shape[0]):
        out[i] = values[idx[i]]
    return out


def take(values, idx) -> np.ndarray:
    """``values[idx]`` (host arrays, 1-D) in parallel."""
    return _take(values, np.ascontiguousarray(idx))


