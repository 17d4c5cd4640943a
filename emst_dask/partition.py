"""Exact EMST of one cloud split into P spatial partitions (DESIGN.md §3).

The pieces here are pure functions over arrays, so the same code runs in one
process (``emst_partitioned``, the reference and the tests) and as Dask tasks
on several workers (``emst_dask.multipart``).

Facts used (strict edge order (w, min id, max id) on global ids throughout):

* Restriction: a global MST edge whose two ends lie in a point set S is an
  edge of MST(S).
* Local certificate: with b(x) the distance from x to the nearest face its
  box shares with another box, nothing outside the box is closer to x than
  b(x); an edge chosen by a local component C with weight w < min_C b(x) is
  a global MST edge.

Phase 1 (``solve_box``): each box runs Borůvka with the certificate until
every component is frozen, then completes its own MST(B) uncertified.  Its
certified edges are final; the uncertified ones are candidates.

Phase 2 (``connect_boxes``): with a radius R, every box B takes its shell
(points with b(x) <= R) and the ghosts (other boxes' points within R of B),
computes MST(shell + ghosts), keeps the edges between different
super-vertices, adds its uncertified edges and reduces all of them to a
minimum spanning forest over super-vertices.  A Kruskal over the union of
these small forests gives T'.  Every global MST edge missing from the
candidates is a cross-box edge longer than R, so if T' spans and its longest
edge is <= R, T' is exact; otherwise R grows to T''s longest edge and the
phase runs again (at most once more, since the longest edge of an MSF of a
superset cannot grow).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit, prange

from . import engine
from .kernels import get_kernels


# --------------------------------------------------------------------------
# boxes
# --------------------------------------------------------------------------
@dataclass
class Partitioning:
    """P axis-aligned boxes tiling the global bounding box.

    lo, hi : (P, d) float64 corners.  ``splits`` is the bisection tree as
    rows (axis, value, left, right) with children < 0 meaning box ``~child``.
    """

    lo: np.ndarray
    hi: np.ndarray
    global_lo: np.ndarray
    global_hi: np.ndarray
    splits: list

    @property
    def n_boxes(self) -> int:
        return self.lo.shape[0]


def recursive_coordinate_bisection(sample: np.ndarray, n_boxes: int,
                                   global_lo, global_hi) -> Partitioning:
    """Split the bounding box into ``n_boxes`` boxes of about equal counts.

    Each split halves the box's longest side at the sample quantile that
    divides the box's share of boxes (so P need not be a power of two).
    """
    d = sample.shape[1]
    glo = np.asarray(global_lo, np.float64)
    ghi = np.asarray(global_hi, np.float64)
    los, his, splits = [], [], []

    def split(s, p, lo, hi):
        if p == 1:
            los.append(lo)
            his.append(hi)
            return ~(len(los) - 1)
        axis = int(np.argmax(hi - lo))
        pl = p // 2
        if s.shape[0] >= 2:
            v = float(np.quantile(s[:, axis], pl / p))
        else:
            v = 0.5 * (lo[axis] + hi[axis])
        if not lo[axis] < v < hi[axis]:
            v = 0.5 * (lo[axis] + hi[axis])
        row = len(splits)
        splits.append([axis, v, 0, 0])
        left_hi = hi.copy()
        left_hi[axis] = v
        right_lo = lo.copy()
        right_lo[axis] = v
        on_left = s[:, axis] < v
        splits[row][2] = split(s[on_left], pl, lo, left_hi)
        splits[row][3] = split(s[~on_left], p - pl, right_lo, hi)
        return row

    split(np.asarray(sample, np.float64), n_boxes, glo.copy(), ghi.copy())
    return Partitioning(np.array(los).reshape(-1, d), np.array(his).reshape(-1, d),
                        glo, ghi, splits)


def _split_arrays(part: Partitioning):
    rows = part.splits or [[0, 0.0, -1, -1]]
    return (np.array([r[0] for r in rows], np.int64), np.array([r[1] for r in rows], np.float64),
            np.array([r[2] for r in rows], np.int64), np.array([r[3] for r in rows], np.int64))


@njit(parallel=True, cache=True)
def _box_of(points, axes, values, left, right):
    n = points.shape[0]
    out = np.empty(n, np.int64)
    for i in prange(n):
        node = 0
        while True:
            # compared in float64, like the face distances: a float32
            # coordinate and a split value that float32 cannot hold must not
            # round onto the same side
            if np.float64(points[i, axes[node]]) < values[node]:
                child = left[node]
            else:
                child = right[node]
            if child < 0:
                out[i] = ~child
                break
            node = child
    return out


def assign_boxes(part: Partitioning, points) -> np.ndarray:
    """(n,) int64 box of each point (``x < split`` goes left, in float64)."""
    n = points.shape[0]
    if not part.splits or n == 0:
        return np.zeros(n, np.int64)
    return _box_of(np.ascontiguousarray(points), *_split_arrays(part))


@njit(parallel=True, cache=True)
def _group_rows(points, box, n_boxes, n_chunks, row_offset):
    n, d = points.shape
    step = (n + n_chunks - 1) // n_chunks
    counts = np.zeros((n_chunks, n_boxes), np.int64)
    for c in prange(n_chunks):
        for i in range(c * step, min(n, (c + 1) * step)):
            counts[c, box[i]] += 1
    # box-major, chunk-minor offsets: each chunk scatters its rows of box b
    # after the rows of b from earlier chunks, so the grouping is stable
    offsets = np.empty((n_chunks, n_boxes), np.int64)
    starts = np.zeros(n_boxes + 1, np.int64)
    acc = 0
    for b in range(n_boxes):
        starts[b] = acc
        for c in range(n_chunks):
            offsets[c, b] = acc
            acc += counts[c, b]
    starts[n_boxes] = acc
    grouped = np.empty_like(points)
    rows = np.empty(n, np.int64)
    for c in prange(n_chunks):
        pos = offsets[c].copy()
        for i in range(c * step, min(n, (c + 1) * step)):
            b = box[i]
            p = pos[b]
            pos[b] = p + 1
            for a in range(d):
                grouped[p, a] = points[i, a]
            rows[p] = i + row_offset
    return grouped, rows, starts


def group_by_box(points, box, n_boxes, row_offset=0):
    """The rows of ``points`` grouped by box, stably, in one parallel pass.

    points : (n, d) float; box : (n,) int64 in [0, n_boxes).  Returns
    ``grouped`` (n, d) (box k's rows are ``grouped[starts[k]:starts[k+1]]``,
    in their input order), ``rows`` (n,) int64 (input row of each grouped
    row plus ``row_offset``) and ``starts`` (n_boxes + 1,) int64.
    """
    pts = np.ascontiguousarray(points)
    return _group_rows(pts, np.ascontiguousarray(box, np.int64), n_boxes,
                       _n_chunks(pts.shape[0]), np.int64(row_offset))


def _n_chunks(n: int) -> int:
    """Stretches of rows the two-pass (count, then place) kernels split n
    rows into: at least 64K rows each, at most 256."""
    return max(1, min(256, n // 65536))


@njit(parallel=True, cache=True)
def _copy_rows(dst, src, at):
    # in blocks of rows: one thread per block, few page faults contended
    n = src.shape[0]
    step = 1 << 16
    for c in prange((n + step - 1) // step):
        for i in range(c * step, min(n, (c + 1) * step)):
            for a in range(src.shape[1]):
                dst[at + i, a] = src[i, a]


def concat_rows(arrays):
    """``np.concatenate(arrays)`` along axis 0, copied in parallel.

    arrays : sequence of (m_i, ...) arrays of one dtype and equal trailing
    shapes.  The output is allocated once and filled by numba threads, so
    its pages are faulted in by all cores rather than one (the
    single-threaded concatenate of a box's gigabytes was most of the
    shuffle).
    """
    arrays = [np.ascontiguousarray(a) for a in arrays]
    total = sum(a.shape[0] for a in arrays)
    out = np.empty((total,) + arrays[0].shape[1:], arrays[0].dtype)
    flat = out.reshape(total, -1)
    at = 0
    for a in arrays:
        if a.shape[0]:
            _copy_rows(flat, a.reshape(a.shape[0], -1), at)
        at += a.shape[0]
    return out


@njit(parallel=True, cache=True)
def _face_distances(points, lo, hi, use_lo, use_hi):
    n, d = points.shape
    out = np.empty(n)
    for i in prange(n):
        b = np.inf
        for a in range(d):
            x = np.float64(points[i, a])
            if use_lo[a]:
                b = min(b, x - lo[a])
            if use_hi[a]:
                b = min(b, hi[a] - x)
        out[i] = max(b, 0.0)
    return out


def face_distances(part: Partitioning, k: int, points) -> np.ndarray:
    """(n,) float64 distance from each point of box k to its nearest face
    shared with another box (+inf when the box shares none); one parallel
    pass, in float64."""
    lo, hi = part.lo[k], part.hi[k]
    return _face_distances(np.ascontiguousarray(points), lo, hi,
                           lo > part.global_lo, hi < part.global_hi)


def certificate_distances(b: np.ndarray, dtype, d: int) -> np.ndarray:
    """Face distances shrunk so the certificate survives rounding.

    A squared distance in ``dtype`` is within (2d + 4) ulps of the truth, so
    comparing against ``b * (1 - (2d + 4) eps)`` (rounded down) keeps the
    proof valid in finite precision.
    """
    eps = float(np.finfo(dtype).eps)
    safe = (b * (1.0 - (2 * d + 4) * eps)).astype(dtype)
    return np.nextafter(safe, dtype.type(0)) if np.issubdtype(dtype, np.floating) else safe


def distance_to_box(part: Partitioning, k: int, points) -> np.ndarray:
    """(n,) float64 Euclidean distance from points to box k (0 inside)."""
    x = np.asarray(points, np.float64)
    gap = np.maximum(np.maximum(part.lo[k] - x, x - part.hi[k]), 0.0)
    return np.sqrt((gap * gap).sum(axis=1))


# --------------------------------------------------------------------------
# Kruskal over small candidate sets
# --------------------------------------------------------------------------
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
        z = np.zeros(0, np.int64)
        return cls(z, z.copy(), np.zeros(0, dtype), z.copy(), z.copy())

    @classmethod
    def concat(cls, parts, dtype):
        parts = [p for p in parts if len(p.u)]
        if not parts:
            return cls.empty(dtype)
        return cls(*(np.concatenate([getattr(p, f) for p in parts])
                     for f in ("u", "v", "w2", "su", "sv")))

    def __len__(self):
        return len(self.u)

    def take(self, mask):
        return Edges(self.u[mask], self.v[mask], self.w2[mask], self.su[mask], self.sv[mask])


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
    from .kernels.cpu import radix_argsort

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


# --------------------------------------------------------------------------
# phase 1 and phase 2 per box
# --------------------------------------------------------------------------
@dataclass
class BoxResult:
    """Phase 1 output of one box (global ids).

    The super-vertex of point i is the global id ``gids[label_rows[i]]``
    (its root's); phase 2 needs it for the shell only, so the per-point
    labels stay local (int32 where they fit: half the bytes, no gather of
    the whole box).
    """

    certified: Edges          # final global MST edges
    uncertified: Edges        # the rest of MST(box): candidates
    label_rows: np.ndarray    # (n_box,) int32/int64 box row of each point's root
    gids: np.ndarray          # (n_box,) int64 the box's global ids (shared)
    max_local2: float         # longest squared edge of MST(box)
    n_super: int = 1          # distinct super-vertices
    seconds: dict = None      # per step: engine (and engine.<phase>), order,
                              # certificate, edges

    def super_labels_of(self, idx) -> np.ndarray:
        """(len(idx),) int64 super-vertex (a global id) of box rows ``idx``."""
        return self.gids[self.label_rows[idx]]

    @property
    def super_labels(self) -> np.ndarray:
        """(n_box,) int64 super-vertex (a global id) of every point."""
        return take(self.gids, self.label_rows)


def _run_engine(points, backend, min_samples, core=None):
    """The single-device engine on one point set: (res, source, target,
    unscaled squared weights) on the host."""
    K = get_kernels(backend)
    pts = K.xp.asarray(points)
    res = engine.boruvka(K, pts, min_samples,
                         core_distances2=None if core is None else K.xp.asarray(core))
    to = K.to_host
    w2 = to(res.weight2)
    if res.exponent:
        w2 = np.ldexp(w2.astype(np.float64), -2 * res.exponent).astype(points.dtype)
    return res, to(res.source), to(res.target), w2


@njit(cache=True)
def _find(parent, x):
    r = x
    while parent[r] != r:
        r = parent[r]
    while parent[x] != r:  # path compression
        t = parent[x]
        parent[x] = r
        x = t
    return r


@njit(cache=True)
def kruskal_certificate(order, a, b, w2, face2):
    """Which edges of a box's MST are edges of the global MST, and the
    super-vertices they leave.

    Replays Kruskal over the box's MST edges (``order``: strict edge order)
    keeping, per component, the smallest squared face distance of its points.
    When edge e of weight w joins components A and B of the edges before it,
    A is closed under edges before e inside the box (restriction) and no
    foreign point lies within min_A b(x) of A; so if w < min_A b(x) (or the
    same for B) nothing outside can undercut e on the cut around A, and e is
    in the global MST (cut property).  This certifies every edge the
    Borůvka-time certificate of DESIGN.md section 3 would, and more.

    order : (m,) int64, a, b : (m,) int64 local point indices of the edges,
    w2 : (m,) float64 squared weights, face2 : (n,) float64 squared (safe)
    face distances.  Returns ``certified`` (m,) bool and ``super_labels``
    (n,) int64, the smallest local index of each point's component under the
    certified edges.
    """
    n = face2.shape[0]
    parent = np.arange(n)
    low = face2.copy()
    certified = np.zeros(order.shape[0], np.bool_)
    for t in range(order.shape[0]):
        e = order[t]
        x = _find(parent, a[e])
        y = _find(parent, b[e])
        if w2[e] < low[x] or w2[e] < low[y]:
            certified[e] = True
        lo, hi = min(x, y), max(x, y)
        parent[hi] = lo
        low[lo] = min(low[x], low[y])
    for i in range(n):
        parent[i] = i
    for e in range(a.shape[0]):
        if certified[e]:
            x = _find(parent, a[e])
            y = _find(parent, b[e])
            parent[max(x, y)] = min(x, y)
    labels = np.empty(n, np.int64)
    for i in range(n):
        labels[i] = _find(parent, i)
    return certified, labels


def boruvka_certificate(xp, s, t, rank, w2, face2, n, scatter_min, max_rounds=256):
    """The local certificate by Borůvka rounds over a box's MST edges, with
    whole-array operations (CuPy on the GPU: no sequential pass).

    Every round, each component takes its minimum incident tree edge in the
    strict order (``rank``; the minimum edge leaving a component is a tree
    edge, so this is its minimum outgoing edge among all the box's pairs) and
    keeps it if its squared weight is below the component's smallest squared
    face distance: then no foreign point can undercut it and it is a global
    MST edge.  Kept edges merge their components (hooks plus pointer
    jumping); rounds stop when no component can keep its edge.  It certifies
    a subset of what ``kruskal_certificate`` does; every edge it leaves is a
    phase-2 candidate, so stopping early (``max_rounds``) costs no exactness.

    s, t : (m,) int64 local indices; rank : (m,) int64 strict-order rank;
    w2, face2 : (m,) and (n,) float64 squared (scaled) weights and safe face
    distances, both >= 0; ``scatter_min(a, idx, v)`` is ``np.minimum.at``
    (``cupyx.scatter_min``).  Returns ``certified`` (m,) bool and ``labels``
    (n,) int64 (a component's root index).
    """
    m = s.shape[0]
    certified = xp.zeros(m, xp.bool_)
    labels = xp.arange(n, dtype=xp.int64)
    face_key = face2.astype(xp.float64).view(xp.int64)  # order-preserving for >= 0
    # round 1 takes every edge as it is (each point its own component):
    # no gathered copies of the box's m edges at the memory peak
    live = None                                          # edges between components
    big = xp.iinfo(xp.int64).max
    for _ in range(max_rounds):
        if live is None:
            lu, lv, r = s, t, rank
            wk = w2.astype(xp.float64, copy=False).view(xp.int64)
        else:
            lu, lv = labels[s[live]], labels[t[live]]
            between = lu != lv
            live, lu, lv = live[between], lu[between], lv[between]
            del between
            if live.shape[0] == 0:
                break
            r = rank[live]
            wk = w2[live].astype(xp.float64).view(xp.int64)
        best = xp.full(n, big, xp.int64)
        scatter_min(best, lu, r)
        scatter_min(best, lv, r)
        low = xp.full(n, big, xp.int64)
        scatter_min(low, labels, face_key)
        by_u = (best[lu] == r) & (wk < low[lu])
        by_v = (best[lv] == r) & (wk < low[lv])
        del best, wk, r
        keep = by_u | by_v
        if not bool(keep.any()):
            break
        certified[keep if live is None else live[keep]] = True
        parent = xp.arange(n, dtype=xp.int64)
        # a component hooks along its own kept edge; an edge kept by both
        # sides hooks the larger root under the smaller (no 2-cycles)
        hu = by_u & ~(by_v & (lu < lv))
        hv = by_v & ~(by_u & (lv < lu))
        parent[lu[hu]] = lv[hu]
        parent[lv[hv]] = lu[hv]
        while True:
            nxt = parent[parent]
            if not bool((nxt != parent).any()):
                break
            parent = nxt
        labels = parent[labels]
        del parent, keep, by_u, by_v, hu, hv, lu, lv
        if live is None:  # certified edges are inside a component from now on
            live = xp.flatnonzero(~certified)
    return certified, labels


def _scatter_min(xp):
    if xp is np:
        return np.minimum.at
    import cupyx

    return cupyx.scatter_min


@njit(parallel=True, cache=True)
def _take(values, idx):
    out = np.empty(idx.shape[0], values.dtype)
    for i in prange(idx.shape[0]):
        out[i] = values[idx[i]]
    return out


def take(values, idx) -> np.ndarray:
    """``values[idx]`` (host arrays, 1-D) in parallel."""
    return _take(values, np.ascontiguousarray(idx))


def strict_edge_order(xp, s, t, w2):
    """Indices of the edges in the strict order (w2, min(s, t), max(s, t)).

    s, t : (m,) int64 endpoints; w2 : (m,) float >= 0.  With float32
    weights and endpoints below 2**32 this is two radix sorts of uint64
    keys: the pair packed in one word, then the weight's bits
    (order-preserving for values >= 0) above the pair's rank; otherwise a
    three-key lexsort (a comparison sort on the GPU).  A pair listed twice
    (the same candidate from two sources) is one edge: its copies are equal
    in every field, so their relative order does not matter.
    """
    m = s.shape[0]
    lo, hi = xp.minimum(s, t), xp.maximum(s, t)
    if w2.dtype != np.float32 or m == 0 or int(hi.max()) >= 1 << 32:
        return xp.lexsort(xp.stack([hi.astype(xp.float64), lo.astype(xp.float64),
                                    w2.astype(xp.float64)]))
    if xp is np:
        from .kernels.cpu import radix_argsort

        def argsort(k):
            return radix_argsort(k, 64)
    else:
        argsort = xp.argsort
    pair = (lo.astype(xp.uint64) << xp.uint64(32)) | hi.astype(xp.uint64)
    by_pair = argsort(pair)
    del pair
    rank = xp.empty(m, xp.uint64)
    rank[by_pair] = xp.arange(m, dtype=xp.uint64)
    del by_pair
    key = (xp.ascontiguousarray(w2).view(xp.uint32).astype(xp.uint64) << xp.uint64(32)) | rank
    return argsort(key)


def solve_box(points, gids, face, backend="cpu", min_samples=1, core=None,
              certificate="auto") -> BoxResult:
    """Phase 1 on one box: certified edges, the rest of its MST, super-vertices.

    points : (m, d) float, the box's points, ``gids`` (m,) int64 ascending
    (so the engine's tie order on local indices is the global one).
    face : (m,) float64 face distances (``face_distances``).
    core : (m,) squared core distances (mutual reachability) or None.

    The box's MST comes from the single-device engine on any backend; the
    certificate runs where the edges are, in the engine's scaled units (so
    nothing underflows): ``kruskal_certificate`` (numba) on the CPU,
    ``boruvka_certificate`` (whole-array CuPy operations) on the GPU
    (``certificate`` = "kruskal" or "boruvka" picks one; for the tests).
    """
    import time

    m, d = points.shape
    dt = points.dtype
    if m == 0:
        e = Edges.empty(dt)
        return BoxResult(e, e, np.zeros(0, np.int32), np.asarray(gids, np.int64), 0.0, 0, {})
    if m == 1:
        e = Edges.empty(dt)
        return BoxResult(e, e, np.zeros(1, np.int32), np.asarray(gids, np.int64), 0.0, 1, {})
    t0 = time.perf_counter()
    K = get_kernels(backend)
    xp, to = K.xp, K.to_host
    pts = K.to_device(points)
    res = engine.boruvka(K, pts, min_samples,
                         core_distances2=None if core is None else xp.asarray(core))
    s, t, w2s = res.source, res.target, res.weight2
    del pts  # the certificate's arrays take its place
    K.synchronize()
    t1 = time.perf_counter()
    alone = not np.isfinite(face).any()  # shares no face: its MST is final
    t_order = 0.0
    if alone:
        certified = None
        labels = xp.zeros(m, xp.int64)
        n_super = 1
    else:
        # on the device: a flushed subnormal only lowers a bound (still safe)
        safe = xp.ldexp(certificate_distances(K.to_device(face), dt, d).astype(xp.float64),
                        res.exponent)
        with np.errstate(over="ignore"):  # no face: +inf, certifies anything
            safe2 = safe * safe + 0.0     # (+ 0.0: no negative zero)
        del safe
        w2f = w2s.astype(xp.float64)
        order = strict_edge_order(xp, s, t, w2s)
        K.synchronize()
        t_order = time.perf_counter() - t1
        if certificate == "auto":
            certificate = "kruskal" if xp is np else "boruvka"
        if certificate == "kruskal":
            order = K.to_host(order)
            s, t = K.to_host(s), K.to_host(t)
            certified, labels = kruskal_certificate(order, s, t, K.to_host(w2f),
                                                    K.to_host(safe2))
            certified, labels = xp.asarray(certified), xp.asarray(labels)
            s, t = xp.asarray(s), xp.asarray(t)
        else:
            rank = xp.empty(m - 1, xp.int64)
            rank[order] = xp.arange(m - 1, dtype=xp.int64)
            del order
            certified, labels = boruvka_certificate(xp, s, t, rank, w2f, safe2, m,
                                                    _scatter_min(xp))
        n_super = int(xp.count_nonzero(labels == xp.arange(m)))  # roots label themselves
    K.synchronize()
    t2 = time.perf_counter()
    # local indices cross to the host (as int32 when they fit) and become
    # global ids there: half the bytes over the bus of global int64 ids
    gh = np.ascontiguousarray(gids, np.int64)

    def rows(local):
        return K.to_host(local.astype(xp.int32) if m < 2**31 else local)

    def ids(local):
        return take(gh, rows(local))

    def weights(w):  # on the host: GPU arithmetic may flush subnormals
        w = to(w)
        return np.ldexp(w.astype(np.float64), -2 * res.exponent).astype(dt) \
            if res.exponent else w

    label_rows = rows(labels)
    z = np.zeros(0, np.int64)
    if certified is None:
        cert = Edges(ids(s), ids(t), weights(w2s), z, z.copy())
        rest = Edges.empty(dt)
    else:
        nc = ~certified
        cert = Edges(ids(s[certified]), ids(t[certified]), weights(w2s[certified]), z,
                     z.copy())
        ns, nt = to(s[nc]), to(t[nc])
        rest = Edges(gh[ns], gh[nt], weights(w2s[nc]), gh[label_rows[ns]],
                     gh[label_rows[nt]])
    out = BoxResult(cert, rest, label_rows, gh, float(weights(w2s.max().reshape(1))[0]),
                    n_super)
    out.seconds = {"engine": t1 - t0, "order": t_order, "certificate": t2 - t1 - t_order,
                   "edges": time.perf_counter() - t2,
                   **{f"engine.{k}": v for k, v in res.timings.items()}}
    return out


@njit(parallel=True, cache=True)
def _indices_at_most(values, bound, n_chunks):
    n = values.shape[0]
    step = (n + n_chunks - 1) // n_chunks
    counts = np.zeros(n_chunks + 1, np.int64)
    for c in prange(n_chunks):
        k = 0
        for i in range(c * step, min(n, (c + 1) * step)):
            if values[i] <= bound:
                k += 1
        counts[c + 1] = k
    for c in range(n_chunks):
        counts[c + 1] += counts[c]
    out = np.empty(counts[n_chunks], np.int64)
    for c in prange(n_chunks):
        k = counts[c]
        for i in range(c * step, min(n, (c + 1) * step)):
            if values[i] <= bound:
                out[k] = i
                k += 1
    return out


def indices_at_most(values, bound: float) -> np.ndarray:
    """``np.flatnonzero(values <= bound)`` (ascending int64) in one parallel
    pass: the shell of a box of hundreds of millions of points is a small
    fraction of it."""
    v = np.ascontiguousarray(values)
    return _indices_at_most(v, float(bound), _n_chunks(v.shape[0]))


def shell_and_ghosts(part: Partitioning, k: int, points, face, radius: float):
    """For the points of box k: which go to which other box as ghosts.

    Returns a dict {box: index array into ``points``} of the shell points
    (face distance <= R) within R of that box.  A little slack on R only
    adds candidates; it never costs exactness.
    """
    r = radius * (1 + 1e-6) + 1e-300
    shell = indices_at_most(face, r)
    out = {}
    if shell.size == 0:
        return shell, out
    x = points[shell]
    for j in range(part.n_boxes):
        if j != k:
            near = shell[distance_to_box(part, j, x) <= r]
            if near.size:
                out[j] = near
    return shell, out


def connect_box(points, gids, super_labels, uncertified: Edges, backend="cpu",
                min_samples=1, core=None) -> Edges:
    """Phase 2 on one box: MST(shell + ghosts) candidates, reduced to an MSF.

    ``points``/``gids``/``super_labels``/``core`` hold the box's shell and its
    ghosts together, sorted by global id.
    """
    dt = uncertified.w2.dtype
    cands = [uncertified]
    if points.shape[0] > 1:
        res, s, t, w2 = _run_engine(points, backend, min_samples, core=core)
        keep = super_labels[s] != super_labels[t]
        s, t = s[keep], t[keep]
        cands.append(Edges(gids[s], gids[t], w2[keep].astype(dt, copy=False),
                           super_labels[s], super_labels[t]))
    return minimum_spanning_forest(Edges.concat(cands, dt))


# --------------------------------------------------------------------------
# the whole algorithm in one process (reference; the Dask driver mirrors it)
# --------------------------------------------------------------------------
@dataclass
class PartitionedResult:
    source: np.ndarray
    target: np.ndarray
    weight2: np.ndarray
    rounds: int
    radius: float
    n_super_vertices: int
    bytes_moved: int
    n_certified: int


def choose_partitioning(points, n_boxes, sample_size=100_000, seed=0) -> Partitioning:
    n = points.shape[0]
    rng = np.random.default_rng(seed)
    take = rng.choice(n, size=min(n, sample_size), replace=False) if n else np.zeros(0, int)
    sample = np.asarray(points[np.sort(take)], np.float64)
    lo = np.asarray(points.min(axis=0), np.float64) if n else np.zeros(points.shape[1])
    hi = np.asarray(points.max(axis=0), np.float64) if n else np.zeros(points.shape[1])
    return recursive_coordinate_bisection(sample, n_boxes, lo, hi)


def partitioned_core_distances(part, points, box_of, min_samples, backend="cpu"):
    """Exact squared core distances when each box only sees its own points plus
    ghosts: local core distances are upper bounds; a point whose local core
    distance reaches past its box's faces is recomputed with the ghosts
    within the largest such distance."""
    K = get_kernels(backend)
    n = points.shape[0]
    core = np.empty(n, np.float64 if points.dtype == np.float64 else np.float32)
    members = [np.flatnonzero(box_of == k) for k in range(part.n_boxes)]
    for k, idx in enumerate(members):
        if idx.size >= min_samples:
            core[idx] = K.to_host(engine.core_distances2(K, K.xp.asarray(points[idx]),
                                                         min_samples))
        else:  # too few points to know anything locally
            core[idx] = np.inf
    out = core.copy()
    for k, idx in enumerate(members):
        if idx.size == 0:
            continue
        face = face_distances(part, k, points[idx])
        unsure = face * face < core[idx]
        if not unsure.any():
            continue
        r = float(np.sqrt(core[idx][unsure].max())) * (1 + 1e-6)  # may be inf
        ghosts = [members[j][distance_to_box(part, k, points[members[j]]) <= r]
                  for j in range(part.n_boxes) if j != k]
        both = np.sort(np.concatenate([idx] + ghosts))
        c = K.to_host(engine.core_distances2(K, K.xp.asarray(points[both]), min_samples))
        pos = np.searchsorted(both, idx)
        out[idx] = c[pos]
    return out


def mean_spacing(part: Partitioning, n: int) -> float:
    """(volume / n) ** (1/d) over the axes of nonzero extent."""
    ext = part.global_hi - part.global_lo
    ext = ext[ext > 0]
    if ext.size == 0 or n == 0:
        return 0.0
    return float(np.exp(np.log(ext).sum() / ext.size) / n ** (1.0 / ext.size))


def emst_partitioned(points, n_boxes: int, min_samples: int = 1, backend="cpu",
                     max_rounds: int = 8, certificate="auto"):
    """Exact EMST of ``points`` (numpy, validated) computed box by box.

    With ``n_boxes == 1`` this is exactly the single-device algorithm.
    """
    n, d = points.shape
    dt = points.dtype
    part = choose_partitioning(points, n_boxes)
    box_of = assign_boxes(part, points)
    members = [np.flatnonzero(box_of == k) for k in range(part.n_boxes)]
    core = (partitioned_core_distances(part, points, box_of, min_samples, backend)
            if min_samples > 1 else None)
    faces, results = [], []
    for k, idx in enumerate(members):
        face = face_distances(part, k, points[idx])
        faces.append(face)
        results.append(solve_box(points[idx], idx, face, backend, min_samples,
                                 None if core is None else core[idx], certificate))
    certified = Edges.concat([r.certified for r in results], dt)
    super_labels = np.empty(n, np.int64)
    for idx, r in zip(members, results):
        super_labels[idx] = r.super_labels
    n_super = int(np.unique(super_labels).size) if n else 0
    # R starts at the longest local MST edge (cross-box MST edges are usually
    # no longer), and at least twice the mean spacing for near-empty boxes
    radius2 = max([r.max_local2 for r in results] + [4.0 * mean_spacing(part, n) ** 2])
    rounds = 0
    bytes_moved = 0
    tree = Edges.empty(dt)
    while n_super > 1:
        rounds += 1
        radius = float(np.sqrt(radius2))
        outgoing = [shell_and_ghosts(part, k, points[idx], faces[k], radius)
                    for k, idx in enumerate(members)]
        forests = []
        for k, idx in enumerate(members):
            shell = outgoing[k][0]
            parts = [idx[shell]] + [members[j][outgoing[j][1][k]]
                                    for j in range(part.n_boxes) if k in outgoing[j][1]]
            ghosts_n = sum(len(p) for p in parts[1:])
            bytes_moved += ghosts_n * (d * dt.itemsize + 16 + (dt.itemsize if core is not None else 0))
            sel = np.sort(np.concatenate(parts))
            forests.append(connect_box(points[sel], sel, super_labels[sel],
                                       results[k].uncertified, backend, min_samples,
                                       None if core is None else core[sel]))
        tree = minimum_spanning_forest(Edges.concat(forests, dt))
        longest2 = float(tree.w2.max()) if len(tree) else 0.0
        if len(tree) == n_super - 1 and longest2 <= radius2:
            break
        if rounds >= max_rounds:
            raise RuntimeError("partitioned EMST did not certify its cross-box edges")
        if len(tree) == n_super - 1:
            radius2 = longest2  # spans: one more round certifies it
        else:  # some super-vertex found no partner within R: widen fast
            ext2 = float(((part.global_hi - part.global_lo) ** 2).sum())
            radius2 = ext2 if rounds >= 2 else min(max(longest2, 16.0 * radius2), ext2)
    edges = Edges.concat([certified, tree], dt)
    return PartitionedResult(edges.u, edges.v, edges.w2, rounds, float(np.sqrt(radius2)),
                             n_super, bytes_moved, len(certified))
