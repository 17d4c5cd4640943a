"""Tree searches on the CPU: k nearest neighbours (core distances and the
neighbour lists), Morton-neighbour upper bounds, and every point's nearest
point in another component (one pruned traversal per point).

Conventions of every CPU kernel: see ``emst_dask.kernels.cpu``.
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

# Searches process points in blocks of this many consecutive tree positions,
# so each block reuses one stack and walks nearby parts of the tree.
BLOCK = 256
STACK = 256  # > 64 + 64 Morton levels (cells, crowded cells) + 64 index levels


@njit(cache=True, inline="always")
def _dist2(points, i, j, dims, period):
    """Squared distance of tree positions i and j; with a period (d,) (a
    periodic box: every coordinate in [0, L)), under the minimum image."""
    d = len(dims)
    if len(period) == 0:
        s = points[i, 0] - points[j, 0]
        s = s * s
        for q in range(1, d):
            t = points[i, q] - points[j, q]
            s += t * t
        return s
    s = points[i, 0] - points[i, 0]  # zero of the points' dtype
    for q in range(d):
        a = points[i, q]
        b = points[j, q]
        if a < b:
            a, b = b, a
        # the way round as (L - a) + b, not L - (a - b): L - a is exact where
        # the wrap can win (a >= L/2), so each way has one rounding of its own
        t = a - b
        u = (period[q] - a) + b
        if u < t:
            t = u
        s += t * t
    return s


@njit(cache=True, inline="always")
def _box_dist2(points, i, box, k, dims, period):
    """Squared distance from tree position i to node k's box: a lower bound
    on ``_dist2`` to every point in it.  Periodic: the gap to [a, b] the
    short way round, (L - b) + x (or (L - x) + a): ``_dist2``'s formula at
    the box's far corner, so that, rounding being monotone, it never
    exceeds the computed distance of any point inside."""
    d = len(dims)
    s = points[i, 0] - points[i, 0]  # zero of the points' dtype
    periodic = len(period) > 0
    for q in range(d):
        x = points[i, q]
        a = box[k, q]
        b = box[k, d + q]
        if x < a:
            t = a - x
            if periodic:
                u = (period[q] - b) + x
                if u < t:
                    t = u
            s += t * t
        elif x > b:
            t = x - b
            if periodic:
                u = (period[q] - x) + a
                if u < t:
                    t = u
            s += t * t
    return s


@njit(cache=True, inline="always")
def _push_children(st_node, st_dist, sp, a, da, pa, c, dc, pc):
    """Push the children to visit (internal ids), the farther first so the
    nearer is popped first; returns the new stack size."""
    if pa and pc:
        if da <= dc:
            st_node[sp] = c
            st_dist[sp] = dc
            st_node[sp + 1] = a
            st_dist[sp + 1] = da
        else:
            st_node[sp] = a
            st_dist[sp] = da
            st_node[sp + 1] = c
            st_dist[sp + 1] = dc
        return sp + 2
    if pa:
        st_node[sp] = a
        st_dist[sp] = da
        return sp + 1
    if pc:
        st_node[sp] = c
        st_dist[sp] = dc
        return sp + 1
    return sp


# --------------------------------------------------------------------------
# k nearest neighbours (core distances)
# --------------------------------------------------------------------------
@njit(cache=True, inline="always")
def _heap_insert(kd, ko, kj, m, k, w, o, j):
    """Insert (w, o, j) into the sorted arrays kd/ko/kj holding m entries."""
    if m == k:
        if w > kd[k - 1] or (w == kd[k - 1] and o > ko[k - 1]):
            return m
        p = k - 1
    else:
        p = m
        m += 1
    while p > 0 and (kd[p - 1] > w or (kd[p - 1] == w and ko[p - 1] > o)):
        kd[p] = kd[p - 1]
        ko[p] = ko[p - 1]
        kj[p] = kj[p - 1]
        p -= 1
    kd[p] = w
    ko[p] = o
    kj[p] = j
    return m


@njit(parallel=True, cache=True)
def k_nearest_neighbours(points, orig, nodes, box, min_orig,
                         k, leaf_size, core_rank, out_j, out_bound, out_core, dims, period):
    """The k nearest *other* points of every point, under the order (d2, orig).

    Only the positions are kept (a listed point's distance is recomputed, to
    the same bits, where it is needed): 4 bytes a neighbour instead of 16.

    Parameters
    ----------
    core_rank : int, the rank (0-based) whose squared distance goes to
        ``out_core``; -1 for none.
    out_j : (n, k) int32/int64 out, tree positions of the neighbours, nearest
        first.
    out_bound : (n,) float out, the k-th squared distance.
    out_core : (n,) float out, the ``core_rank``-th squared distance (unused
        when ``core_rank`` is -1).
    """
    n = points.shape[0]
    nblocks = (n + BLOCK - 1) // BLOCK
    for b in prange(nblocks):
        st_node = np.empty(STACK, np.int64)
        st_dist = np.empty(STACK, points.dtype)
        kd = np.empty(k, points.dtype)
        ko = np.empty(k, np.int64)
        kj = np.empty(k, np.int64)
        for i in range(b * BLOCK, min(n, (b + 1) * BLOCK)):
            # seed with the neighbours along the curve: usually close, so the
            # k-th distance starts small and the descent prunes early
            m = 0
            a = max(0, min(i - k // 2, n - 1 - k))
            z = min(n - 1, a + k)
            for j in range(a, z + 1):
                if j != i:
                    m = _heap_insert(kd, ko, kj, m, k, _dist2(points, i, j, dims, period), orig[j], j)
            sp = 1
            st_node[0] = 0
            st_dist[0] = _box_dist2(points, i, box, 0, dims, period)
            while sp > 0:
                sp -= 1
                node = st_node[sp]
                nd = st_dist[sp]
                if m == k and (nd > kd[k - 1] or (nd == kd[k - 1] and min_orig[node] > ko[k - 1])):
                    continue
                if nodes[node, 3] - nodes[node, 2] < leaf_size:
                    for j in range(nodes[node, 2], nodes[node, 3] + 1):
                        if j < a or j > z:  # seeded already (i included)
                            m = _heap_insert(kd, ko, kj, m, k, _dist2(points, i, j, dims, period), orig[j], j)
                    continue
                ca = nodes[node, 0]
                c = nodes[node, 1]
                da = kd[0]
                dc = kd[0]
                pa = False
                pc = False
                if ca < n:
                    if ca < a or ca > z:
                        m = _heap_insert(kd, ko, kj, m, k, _dist2(points, i, ca, dims, period), orig[ca], ca)
                else:
                    da = _box_dist2(points, i, box, ca - n, dims, period)
                    pa = m < k or da <= kd[k - 1]
                if c < n:
                    if c < a or c > z:
                        m = _heap_insert(kd, ko, kj, m, k, _dist2(points, i, c, dims, period), orig[c], c)
                else:
                    dc = _box_dist2(points, i, box, c - n, dims, period)
                    pc = m < k or dc <= kd[k - 1]
                sp = _push_children(st_node, st_dist, sp, ca - n, da, pa, c - n, dc, pc)
            for q in range(k):
                out_j[i, q] = kj[q]
            out_bound[i] = kd[k - 1]
            if core_rank >= 0:
                out_core[i] = kd[core_rank]



@njit(cache=True, inline="always")
def _metric(points, core2, mrd, i, j, dims, period):
    w = _dist2(points, i, j, dims, period)
    if mrd:
        if core2[i] > w:
            w = core2[i]
        if core2[j] > w:
            w = core2[j]
    return w


@njit(parallel=True, cache=True)
def compute_upper_bounds(points, labels, core2, mrd, radii, dims, period):
    """Morton-neighbour upper bounds on each component's shortest edge.

    For consecutive tree positions in different components, their distance
    bounds both components' shortest outgoing edge from above.  ``radii`` must
    hold +inf on entry.  Racy minimum: every candidate is a real edge weight,
    so a lost update only leaves a looser (still valid) bound.

    Parameters
    ----------
    points : (n, d) float, tree order.
    labels : (n,) int32/int64 component (a tree position) of each point.
    core2 : (n,) float squared core distances (read only when ``mrd``).
    mrd : bool, mutual reachability.
    radii : (n,) float in/out, per component id.
    dims : tuple of d zeros.
    period : (p,) float, the box lengths of a periodic box (p = d, scaled
        with the points), or empty (p = 0) for open space.
    """
    n = points.shape[0]
    for i in prange(n - 1):
        a = labels[i]
        b = labels[i + 1]
        if a != b:
            w = _metric(points, core2, mrd, i, i + 1, dims, period)
            if w < radii[a]:
                radii[a] = w
            if w < radii[b]:
                radii[b] = w


@njit(cache=True, inline="always")
def _better(w, o, bw, bo):
    return w < bw or (w == bw and o < bo)


@njit(parallel=True, cache=True)
def find_component_outgoing_edges(points, orig, labels, node_labels, nodes, box,
                                  min_orig, core2, mrd, radii, lower,
                                  leaf_size, resolved, cand_w, cand_j, dims, period):
    """Every point's nearest point in another component (the paper's search).

    Points with ``resolved[i]`` set already hold their exact answer (from
    ``resolve_from_neighbour_lists``); the others start from the candidate
    in ``cand_w``/``cand_j`` (``cand_j = -1`` for none).

    Points whose lower bound already exceeds their component's radius are
    skipped.  Subtrees whose leaves all share the query's component are
    skipped.  Each point leaves its best ``(cand_w[i], cand_j[i])`` (or
    ``cand_j[i] = -1``) and lowers its component's shared radius.

    ``lower[i]`` is updated to a lower bound on i's nearest-foreign distance
    that stays valid after components merge.

    Parameters
    ----------
    points : (n, d) float, tree order.
    orig : (n,) int64 input row of each position.
    labels : (n,) int32/int64 component of each point.
    node_labels : (n-1,) int, each internal node's common label or -1.
    nodes, box, min_orig : the tree (see ``CpuBVH``).
    core2 : (n,) float squared core distances (read only when ``mrd``).
    mrd : bool, mutual reachability.
    radii : (n,) float in/out, per component id.
    lower : (n,) float in/out, per point.
    leaf_size : int, subtrees of at most this many points are scanned.
    resolved : (n,) bool, points already answered.
    cand_w : (n,) float in/out, squared weight of each point's candidate.
    cand_j : (n,) int32/int64 in/out, its tree position (-1: none).
    dims : tuple of d zeros.
    period : (p,) float, the box lengths of a periodic box (p = d, scaled
        with the points), or empty (p = 0) for open space.
    """
    n = points.shape[0]
    nblocks = (n + BLOCK - 1) // BLOCK
    for b in prange(nblocks):
        st_node = np.empty(STACK, np.int64)
        st_dist = np.empty(STACK, points.dtype)
        for i in range(b * BLOCK, min(n, (b + 1) * BLOCK)):
            if resolved[i]:
                continue
            C = labels[i]
            if lower[i] > radii[C]:
                continue
            ci = core2[i]
            # start from the neighbour-list candidate, if any
            bw = cand_w[i]
            bj = cand_j[i]
            bo = orig[bj] if bj >= 0 else -1
            sp = 1
            st_node[0] = 0
            st_dist[0] = _box_dist2(points, i, box, 0, dims, period)
            while sp > 0:
                sp -= 1
                node = st_node[sp]
                nd = st_dist[sp]
                if mrd and ci > nd:
                    nd = ci
                r = radii[C]
                if bw < r:
                    r = bw
                if nd > r or (nd == bw and min_orig[node] > bo):
                    continue
                if nodes[node, 3] - nodes[node, 2] < leaf_size:
                    for j in range(nodes[node, 2], nodes[node, 3] + 1):
                        if labels[j] != C:
                            w = _metric(points, core2, mrd, i, j, dims, period)
                            if _better(w, orig[j], bw, bo):
                                bw = w
                                bo = orig[j]
                                bj = j
                    continue
                a = nodes[node, 0]
                c = nodes[node, 1]
                r = radii[C]
                if bw < r:
                    r = bw
                da = r
                dc = r
                pa = False
                pc = False
                if a < n:
                    if labels[a] != C:
                        w = _metric(points, core2, mrd, i, a, dims, period)
                        if _better(w, orig[a], bw, bo):
                            bw = w
                            bo = orig[a]
                            bj = a
                            if bw < r:
                                r = bw
                elif node_labels[a - n] != C:
                    da = _box_dist2(points, i, box, a - n, dims, period)
                    if mrd and ci > da:
                        da = ci
                    pa = da <= r
                if c < n:
                    if labels[c] != C:
                        w = _metric(points, core2, mrd, i, c, dims, period)
                        if _better(w, orig[c], bw, bo):
                            bw = w
                            bo = orig[c]
                            bj = c
                            if bw < r:
                                r = bw
                elif node_labels[c - n] != C:
                    dc = _box_dist2(points, i, box, c - n, dims, period)
                    if mrd and ci > dc:
                        dc = ci
                    pc = dc <= r
                sp = _push_children(st_node, st_dist, sp, a - n, da, pa, c - n, dc, pc)
            # Nothing foreign lies closer than min(best found, final cutoff):
            # every pruned subtree was beyond the cutoff at the time.
            r = radii[C]
            lb = bw if bw < r else r
            if lb > lower[i]:
                lower[i] = lb
            if bj >= 0:
                cand_w[i] = bw
                cand_j[i] = bj
                if bw < radii[C]:
                    radii[C] = bw


@njit(parallel=True, cache=True)
def resolve_from_neighbour_lists(points, orig, labels, core2, mrd, knn_bound, knn_j,
                                 radii, lower, resolved, cand_w, cand_j, inf, dims,
                                 skip, period):
    """Answer the search from each point's k nearest neighbours where exact.

    ``knn_j`` (n, k) lists the k nearest other points under the order
    (d2, orig), so any point not listed is at least ``knn_bound[i]`` away.
    Euclidean: the first listed point of another component is exactly the
    nearest foreign point.  Mutual reachability: the best listed foreign
    point is exact if its weight is below ``max(core2_i, knn_bound[i])``,
    the least weight an unlisted point can have; otherwise it seeds the
    search.  Early Borůvka iterations need no tree search at all this way.

    ``skip[i]`` (int32, 0 at the start) counts the leading listed points
    known to share i's component: components only merge, so they are not
    read again; once it reaches k the list has nothing more to offer
    (``lower[i]`` already holds its bound).

    Parameters
    ----------
    points : (n, d) float, tree order.
    orig : (n,) int64 input row of each position.
    labels : (n,) int32/int64 component of each point.
    core2 : (n,) float squared core distances (read only when ``mrd``).
    mrd : bool, mutual reachability.
    knn_bound : (n,) float, the k-th listed squared distance.
    knn_j : (n, k) int32/int64 tree positions, nearest first.
    radii : (n,) float in/out, per component id.
    lower : (n,) float in/out, per point.
    resolved : (n,) bool out, the answer is exact.
    cand_w : (n,) float out, squared weight of the best listed foreign point
        (``inf`` for none).
    cand_j : (n,) int32/int64 out, its tree position (-1: none).
    inf : +inf of the points' dtype.
    dims : tuple of d zeros.
    period : (p,) float, the box lengths of a periodic box (p = d, scaled
        with the points), or empty (p = 0) for open space.
    skip : (n,) int32 in/out.
    """
    n = points.shape[0]
    k = knn_j.shape[1]
    for i in prange(n):
        q0 = skip[i]
        if q0 == k:
            cand_w[i] = inf
            cand_j[i] = -1
            resolved[i] = False
            continue
        C = labels[i]
        bound = knn_bound[i]
        if mrd and core2[i] > bound:
            bound = core2[i]
        bw = inf
        bj = -1
        bo = -1
        first = k
        for q in range(q0, k):
            j = knn_j[i, q]
            if labels[j] != C:
                if first == k:
                    first = q
                if not mrd:
                    bw = _dist2(points, i, j, dims, period)  # the k-NN's bits
                    bj = j
                    break
                w = _metric(points, core2, mrd, i, j, dims, period)
                if _better(w, orig[j], bw, bo):
                    bw = w
                    bj = j
                    bo = orig[j]
        cand_w[i] = bw
        cand_j[i] = bj
        skip[i] = first
        done = bj >= 0 and (not mrd or bw < bound)
        resolved[i] = done
        lb = bw if done else (bound if bw > bound else bw)
        if lb > lower[i]:
            lower[i] = lb
        if bj >= 0 and bw < radii[C]:
            radii[C] = bw


