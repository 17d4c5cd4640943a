"""numba union-find kernels of the products (single linkage, cuts).

All kernels take int64 endpoints and float32/float64 weights, C-contiguous;
they compile once per signature (``cache=True``).  The loops over edges are
sequential (a union-find is), the passes over points parallel.
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

_BLOCK = 1 << 16  # points per block of the parallel prefix count


@njit(cache=True)
def _find(parent, x):
    """Root of ``x``, halving the path on the way."""
    while parent[x] != x:
        g = parent[parent[x]]
        parent[x] = g
        x = g
    return x


@njit(cache=True)
def _root(parent, x):
    """Root of ``x``, read-only (safe in parallel loops)."""
    while parent[x] != x:
        x = parent[x]
    return x


@njit(cache=True)
def linkage_merges(source, target, weight, order, n):
    """Kruskal's merges in the given edge order, as a scipy linkage matrix.

    Parameters
    ----------
    source, target : (m,) int64, endpoints in [0, n).
    weight : (m,) float32 or float64.
    order : (m,) int64, the edges in merge order.
    n : int, number of points (>= 1).

    Returns
    -------
    Z : (n-1, 4) float64, rows [smaller id, larger id, height, size]; cluster
        n + k is the one formed by row k.
    k : int, number of merges done (n - 1 when the edges span).
    """
    parent = np.arange(n)
    size = np.ones(n, np.int64)
    cluster = np.arange(n)  # id of the cluster each root stands for
    Z = np.empty((n - 1, 4), np.float64)
    k = 0
    for q in range(order.shape[0]):
        if k == n - 1:
            break
        e = order[q]
        a = _find(parent, source[e])
        b = _find(parent, target[e])
        if a == b:
            continue
        ca = cluster[a]
        cb = cluster[b]
        if size[a] < size[b]:  # union by size: a is the larger
            a, b = b, a
        parent[b] = a
        size[a] += size[b]
        cluster[a] = n + k
        Z[k, 0] = min(ca, cb)
        Z[k, 1] = max(ca, cb)
        Z[k, 2] = weight[e]
        Z[k, 3] = size[a]
        k += 1
    return Z, k


@njit(parallel=True, cache=True)
def edge_buckets(weight, cuts):
    """For each edge, the first cut it belongs to.

    Parameters
    ----------
    weight : (m,) float32 or float64.
    cuts : (K,) float64, increasing.

    Returns
    -------
    (m,) int32: the number of cuts below the weight, i.e. the first j with
    ``weight <= cuts[j]`` compared in float64 (K: none; NaN: K).
    """
    m = weight.shape[0]
    k = cuts.shape[0]
    out = np.empty(m, np.int32)
    for e in prange(m):
        x = np.float64(weight[e])
        lo = 0
        hi = k
        while lo < hi:
            mid = (lo + hi) >> 1
            if cuts[mid] < x:
                lo = mid + 1
            else:
                hi = mid
        if x != x:
            lo = k
        out[e] = lo
    return out


@njit(cache=True)
def group_by_bucket(source, target, bucket, k):
    """Counting sort of the edges by bucket; bucket ``k`` (no cut) dropped.

    Returns
    -------
    es, et : (m',) int64, the endpoints of the kept edges, bucket by bucket.
    offsets : (k+1,) int64, bucket j holds ``es[offsets[j]:offsets[j+1]]``.
    """
    m = bucket.shape[0]
    offsets = np.zeros(k + 2, np.int64)
    for e in range(m):
        offsets[bucket[e] + 1] += 1
    for j in range(k + 1):
        offsets[j + 1] += offsets[j]
    es = np.empty(offsets[k], np.int64)
    et = np.empty(offsets[k], np.int64)
    pos = offsets[:k].copy()
    for e in range(m):
        b = bucket[e]
        if b < k:
            es[pos[b]] = source[e]
            et[pos[b]] = target[e]
            pos[b] += 1
    return es, et, offsets[:k + 1]


@njit(cache=True)
def union_min_root(parent, es, et, lo, hi):
    """Join the endpoints of edges ``lo:hi``; the smaller root becomes the
    root, so every root is the smallest row of its set."""
    for q in range(lo, hi):
        a = _find(parent, es[q])
        b = _find(parent, et[q])
        if a < b:
            parent[b] = a
        elif b < a:
            parent[a] = b


@njit(parallel=True, cache=True)
def write_labels(parent, out, scratch):
    """Group labels of the current sets, numbered by smallest row.

    Parameters
    ----------
    parent : (n,) int64 union-find forest whose roots are the smallest rows
        of their sets; compressed in place (every point then points at its
        root).
    out : (n,) int64, receives the labels: the rank of the point's root
        among the roots.
    scratch : (n,) int64 work space.
    """
    n = parent.shape[0]
    for i in prange(n):  # (a prange index is unsigned: cast it for the walk)
        out[i] = _root(parent, np.int64(i))
    nb = (n + _BLOCK - 1) // _BLOCK
    counts = np.zeros(nb + 1, np.int64)
    for b in prange(nb):
        start = np.int64(b) * _BLOCK
        c = 0
        for i in range(start, min(n, start + _BLOCK)):
            if out[i] == i:
                c += 1
        counts[b + 1] = c
    for b in range(nb):
        counts[b + 1] += counts[b]
    for b in prange(nb):
        start = np.int64(b) * _BLOCK
        c = counts[b]
        for i in range(start, min(n, start + _BLOCK)):
            if out[i] == i:
                scratch[i] = c
                c += 1
    for i in prange(n):
        r = out[i]
        parent[i] = r
        out[i] = scratch[r]
