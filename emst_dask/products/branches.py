"""Degrees and branches of a tree, as MiSTree defines them.

A *branch* (Naidoo et al. 2020, MiSTree's ``get_branch_index``) is a chain
of edges joined at degree-2 nodes: it starts and ends at an edge with
exactly one degree-2 end (an *end edge*) and passes only through degree-2
nodes.  An edge whose two ends both have a degree other than 2 belongs to
no branch; every branch has at least two edges.  MiSTree lists a branch's
edges from its end edge with the smaller edge id to the other, and the
branches in the order of those first edges; so do we.

Host (numba, ``branches_host``), linear time in four parallel passes:

1. the 2m edge ends are partitioned by node range (a one-pass radix
   partition: per-chunk bucket counts, an exclusive scan, a scatter of
   packed (edge, node) entries), then each node range is owned by one
   thread, which counts the degrees and records the sum of each node's
   first two edge ids (for a degree-2 node, one edge gives the other): no
   atomics, no sort, and the same result for any thread count; then every
   edge gets its two *links*, the next edge of its branch through each end
   (-1 where the end's degree is not 2), so that a walk reads one row per
   step;
2. from every end edge, a walk along the links finds the other end edge
   and the edge count;
3. a branch is numbered by the rank of its first edge (the smaller end
   edge) among the first edges (a parallel prefix count), which gives the
   offsets of the branches' edge lists;
4. from every first edge, a walk writes the branch's edges in order, sums
   their lengths and, given the points, measures the end-to-end distance
   (under the minimum image in a periodic box).

Each walk is sequential along one branch; branches are walked in parallel
(a tree's branches are short: a few edges on average).

The device version is ``branches_xp`` (``products.branches_xp``).
"""
from __future__ import annotations

import numba
import numpy as np
from numba import njit, prange

from ..errors import InputError

_BLOCK = 1 << 16  # items per block of the parallel prefix counts
_BUCKETS = 512  # node ranges of the degree pass (at most)


# ----------------------------------------------------------------------------
# host: degrees and the edges of each degree-2 node


@njit(parallel=True, cache=True)
def _bucket_counts(source, target, shift, n_buckets, n_chunks):
    """Per chunk of edge ends, how many fall in each node range."""
    total = 2 * source.shape[0]
    step = (total + n_chunks - 1) // n_chunks
    counts = np.zeros((n_chunks, n_buckets), np.int64)
    for c in prange(n_chunks):
        lo = np.int64(c) * step
        hi = min(total, lo + step)
        for j in range(lo, hi):
            e = j >> 1
            v = source[e] if (j & 1) == 0 else target[e]
            counts[c, v >> shift] += 1
    return counts


@njit(parallel=True, cache=True)
def _bucket_scatter(source, target, shift, offsets, n_chunks):
    """The edge ends grouped by node range, each packed as ``e << shift |
    (v - range start)`` (the next pass then reads them in order, touching
    only its own range's nodes); within a range in edge order (chunks are
    consecutive and scanned in order)."""
    total = 2 * source.shape[0]
    step = (total + n_chunks - 1) // n_chunks
    mask = (np.int64(1) << shift) - 1
    out = np.empty(total, np.int64)
    for c in prange(n_chunks):
        pos = offsets[c].copy()
        lo = np.int64(c) * step
        hi = min(total, lo + step)
        for j in range(lo, hi):
            e = j >> 1
            v = source[e] if (j & 1) == 0 else target[e]
            b = v >> shift
            out[pos[b]] = (e << shift) | (v & mask)
            pos[b] += 1
    return out


@njit(parallel=True, cache=True)
def _bucket_degrees(packed, starts, shift, n):
    """Degrees, and for each degree-2 node the sum of its two edge ids (-1
    for other nodes), one node range per thread."""
    n_buckets = starts.shape[0] - 1
    mask = (np.int64(1) << shift) - 1
    degree = np.empty(n, np.int64)
    pair_sum = np.empty(n, np.int64)
    for b in prange(n_buckets):
        lo = np.int64(b) << shift
        hi = min(n, (np.int64(b) + 1) << shift)
        for v in range(lo, hi):
            degree[v] = 0
            pair_sum[v] = 0
        for q in range(starts[b], starts[b + 1]):
            x = packed[q]
            v = lo + (x & mask)
            k = degree[v]
            if k < 2:
                pair_sum[v] += x >> shift
            degree[v] = k + 1
        for v in range(lo, hi):
            if degree[v] != 2:
                pair_sum[v] = -1
    return degree, pair_sum


def degrees_host(source, target, n):
    """Degrees, and the two edges of every degree-2 node, in parallel.

    Parameters
    ----------
    source, target : (m,) int64, C-contiguous, endpoints in [0, n).
    n : int, the number of nodes.

    Returns
    -------
    degree : (n,) int64, edges at each node (a self-loop counts twice).
    pair_sum : (n,) int64, the sum of the two edge ids of a degree-2 node
        (one of them known, the sum gives the other), -1 for other nodes.
    """
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    shift = max(0, int(n - 1).bit_length() - (_BUCKETS.bit_length() - 1))
    if max(1, len(source) - 1).bit_length() + shift > 62:  # packed entries fit int64
        raise InputError(f"{n} points: too many for the host statistics (at most 2^36)")
    n_buckets = ((n - 1) >> shift) + 1
    n_chunks = max(1, min(4 * numba.get_num_threads(), (2 * len(source)) // 4096 + 1))
    counts = _bucket_counts(source, target, shift, n_buckets, n_chunks)
    # exclusive scan in range-major order: range b's ends come before range
    # b + 1's, chunk c's before chunk c + 1's within a range
    before = np.concatenate(([0], np.cumsum(counts.T.ravel())))
    offsets = np.ascontiguousarray(before[:-1].reshape(n_buckets, n_chunks).T)
    starts = np.ascontiguousarray(before[::n_chunks])
    packed = _bucket_scatter(source, target, shift, offsets, n_chunks)
    return _bucket_degrees(packed, starts, shift, n)


# ----------------------------------------------------------------------------
# host: branches


@njit(parallel=True, cache=True)
def _edge_links(source, target, pair_sum):
    """For each edge and each of its ends, the next edge of its branch
    through that end (the end's other edge when its degree is 2), else -1;
    and how many edges have a degree-2 end.  A walk then reads one row of
    ``link`` per step."""
    m = source.shape[0]
    link = np.empty((m, 2), np.int64)
    members = 0
    for i in prange(m):
        e = np.int64(i)
        pa = pair_sum[source[e]]
        pb = pair_sum[target[e]]
        la = pa - e if pa >= 0 else -1  # (a select, not a branch)
        lb = pb - e if pb >= 0 else -1
        link[e, 0] = la
        link[e, 1] = lb
        members += (la >= 0) | (lb >= 0)
    return link, members


@njit(cache=True)
def _step(link, f, prev):
    """The edge after ``f`` when ``f`` was entered from ``prev`` (-1: ``f``
    ends the branch)."""
    x = link[f, 0]
    return link[f, 1] if x == prev else x


@njit(parallel=True, cache=True)
def _walk_from_ends(link):
    """From every end edge, the end edge at the other end of its branch.

    Returns
    -------
    partner : (m,) int64, the other end edge (-1: not an end edge).
    count : (m,) int64, the branch's edge count (0: not an end edge).
    bad : int, an end edge whose walk did not end (a cycle: not a tree),
        or -1.
    """
    m = link.shape[0]
    partner = np.empty(m, np.int64)
    count = np.zeros(m, np.int64)
    bad = np.full(1, -1, np.int64)
    for i in prange(m):
        e = np.int64(i)
        partner[e] = -1
        la = link[e, 0]
        lb = link[e, 1]
        if (la >= 0) == (lb >= 0):  # a middle edge, or in no branch
            continue
        prev = e
        f = la if la >= 0 else lb
        k = 2
        while True:
            g = _step(link, f, prev)
            if g < 0 or k > m:
                break
            prev = f
            f = g
            k += 1
        if k > m:
            bad[0] = e
            continue
        partner[e] = f
        count[e] = k
    return partner, count, bad[0]


@njit(parallel=True, cache=True)
def _block_counts(partner):
    """Per block of ``_BLOCK`` edges, the number of first edges (end edges
    with a larger partner), prefixed by 0."""
    m = partner.shape[0]
    nb = (m + _BLOCK - 1) // _BLOCK
    counts = np.zeros(nb + 1, np.int64)
    for b in prange(nb):
        lo = np.int64(b) * _BLOCK
        c = 0
        for i in range(lo, min(m, lo + _BLOCK)):
            if partner[i] > i:
                c += 1
        counts[b + 1] = c
    return counts


@njit(parallel=True, cache=True)
def _number_branches(partner, count, before):
    """The first edges in edge order and the branches' edge counts.

    A branch's first edge is its end edge with the smaller id; ``before``
    holds the number of first edges before each block.
    """
    m = partner.shape[0]
    nb = before.shape[0] - 1
    n_branches = before[nb]
    first_edge = np.empty(n_branches, np.int64)
    sizes = np.empty(n_branches, np.int64)
    for b in prange(nb):
        lo = np.int64(b) * _BLOCK
        k = before[b]
        for i in range(lo, min(m, lo + _BLOCK)):
            if partner[i] > i:
                first_edge[k] = i
                sizes[k] = count[i]
                k += 1
    return first_edge, sizes


@njit(cache=True)
def _outer_node(source, target, link, e):
    """The end of end edge ``e`` that leaves the branch (degree != 2)."""
    return source[e] if link[e, 0] < 0 else target[e]


@njit(parallel=True, cache=True)
def _walk_branches(source, target, weight, link, first_edge, partner, offsets,
                   points, box, periodic, with_points):
    """From every first edge: the branch's edges in order, its length and
    end nodes, and (given points) its end-to-end distance."""
    n_branches = first_edge.shape[0]
    edges = np.empty(offsets[n_branches], np.int64)
    length = np.empty(n_branches, np.float64)
    ends = np.empty((n_branches, 2), np.int64)
    reach = np.empty(n_branches if with_points else 0, np.float64)
    d = points.shape[1]
    for k in prange(n_branches):
        e = first_edge[k]
        q = offsets[k]
        edges[q] = e
        total = np.float64(weight[e])
        prev = e
        f = link[e, 0] if link[e, 0] >= 0 else link[e, 1]
        while f >= 0:
            q += 1
            edges[q] = f
            total += np.float64(weight[f])
            g = _step(link, f, prev)
            prev = f
            f = g
        length[k] = total
        start = _outer_node(source, target, link, e)
        end = _outer_node(source, target, link, partner[e])
        ends[k, 0] = start
        ends[k, 1] = end
        if with_points:
            s2 = 0.0
            for j in range(d):
                dx = abs(np.float64(points[start, j]) - np.float64(points[end, j]))
                if periodic:
                    dx = min(dx, box[j] - dx)
                s2 += dx * dx
            reach[k] = np.sqrt(s2)
    return edges, length, ends, reach


def branches_host(source, target, weight, n, points=None, box=None):
    """Degrees and branches on the host (numba, parallel, linear time).

    Parameters
    ----------
    source, target : (m,) int64, C-contiguous, endpoints in [0, n); the
        edges of a tree (any edge list whose degree-2 nodes lie on no cycle).
    weight : (m,) float32 or float64, C-contiguous, the edge lengths.
    n : int, the number of nodes.
    points : (n, d) float array or None; the end-to-end distances need it.
    box : (d,) float64 or None, the periodic box's lengths (minimum image).

    Returns
    -------
    dict with ``degree`` (n,) int64; ``branch_edges`` (q,) int64, each
    branch's edges in order from its first edge; ``branch_offsets`` (B+1,)
    int64; ``branch_length`` (B,) float64, the lengths summed in float64
    along the branch; ``branch_ends`` (B, 2) int64, the end nodes (that of
    the first edge first); ``branch_reach`` (B,) float64 end-to-end
    distances, or None without points.

    Raises
    ------
    InputError
        Edges on a cycle of degree-2 nodes (not a tree).
    """
    degree, pair_sum = degrees_host(source, target, n)
    link, members = _edge_links(source, target, pair_sum)
    del pair_sum
    partner, count, bad = _walk_from_ends(link)
    if bad >= 0:
        raise InputError(f"edge {bad} starts a branch that does not end: the edges are not "
                         "a tree (a cycle)")
    before = np.cumsum(_block_counts(partner))
    first_edge, sizes = _number_branches(partner, count, before)
    del count
    offsets = np.zeros(len(sizes) + 1, np.int64)
    np.cumsum(sizes, out=offsets[1:])
    if members != offsets[-1]:  # degree-2 edges no end edge leads to: a cycle
        raise InputError(f"{members - int(offsets[-1])} edges lie on a cycle of degree-2 "
                         "nodes: the edges are not a tree")
    with_points = points is not None
    pts = points if with_points else np.zeros((0, 1), np.float64)
    periodic = box is not None
    bx = np.asarray(box, np.float64) if periodic else np.zeros(max(1, pts.shape[1]), np.float64)
    edges, length, ends, reach = _walk_branches(source, target, weight, link, first_edge,
                                                partner, offsets, pts, bx, periodic,
                                                with_points)
    return dict(degree=degree, branch_edges=edges, branch_offsets=offsets,
                branch_length=length, branch_ends=ends,
                branch_reach=reach if with_points else None)
