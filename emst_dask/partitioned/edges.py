"""Edge lists of the partitioned EMST: global ids, squared weights, the
super-vertices they join; the strict edge order; Kruskal over small
candidate sets.

The strict order is (w, min id, max id) on global ids throughout, so every
box, every round and every P agree on which of two equal-weight edges
comes first.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit, prange

from ..engine.order import strict_edge_order


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
    def concat(cls, parts, dtype):
        """The edges of ``parts`` one after another (``empty(dtype)`` when all are empty)."""
        parts = [p for p in parts if len(p.u)]
        if not parts:
            return cls.empty(dtype)
        return cls(*(np.concatenate([getattr(p, f) for p in parts])
                     for f in ("u", "v", "w2", "su", "sv")))

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


@njit(parallel=True, cache=True)
def _take(values, idx):
    out = np.empty(idx.shape[0], values.dtype)
    for i in prange(idx.shape[0]):
        out[i] = values[idx[i]]
    return out


def take(values, idx) -> np.ndarray:
    """``values[idx]`` (host arrays, 1-D) in parallel."""
    return _take(values, np.ascontiguousarray(idx))


