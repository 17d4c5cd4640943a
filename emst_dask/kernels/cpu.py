"""Numba CPU kernels of the single-tree Borůvka EMST.

Each public function is one phase of the paper's algorithm.  All arrays live
in *tree order* (points sorted by Morton code); ``orig`` maps a tree position
to its input row and is the only thing the tie order looks at.

Conventions shared by every kernel here and by the CUDA kernels:

* distances are **squared** (``w = |x_i - x_j|^2``, or for mutual
  reachability ``max(core2_i, core2_j, |x_i - x_j|^2)``); the square root is
  taken once, on output.  Squaring is monotone, so the MST is the same.
* an edge compares by ``(w, min(orig_i, orig_j), max(orig_i, orig_j))``.  For
  a fixed query point ``i`` this reduces to ``(w, orig_j)``, which is what
  the searches use.
* ``dims`` is a tuple of d zeros: its length is a compile-time constant,
  so each dimension gets its own compiled kernels with the loops over the
  axes unrolled.
* child ids are *unified*: ``c < n`` is leaf (point) ``c``; ``c >= n`` is
  internal node ``c - n``.  Internal node 0 is the root.

The CPU has no cheap atomics, so the formulations avoid them: the radix tree
is built top-down (every internal node independently, Karras 2012), bottom-up
passes run over a precomputed children-before-parents order, label reduction
is a prefix count of label changes along the curve, and racy minimum updates
of a component's shared radius are allowed because every value written is the
weight of a real outgoing edge (a stale value is only a looser bound).
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

_U1 = np.uint64(1)
_U0 = np.uint64(0)

# Searches process points in blocks of this many consecutive tree positions,
# so each block reuses one stack and walks nearby parts of the tree.
BLOCK = 256
STACK = 256  # > 64 Morton levels + 64 index levels for duplicates, with margin


# --------------------------------------------------------------------------
# LBVH construction
# --------------------------------------------------------------------------
@njit(cache=True, inline="always")
def _clz64(x):
    """Count leading zeros of a nonzero uint64."""
    n = 0
    if (x >> np.uint64(32)) == _U0:
        n += 32
        x = x << np.uint64(32)
    if (x >> np.uint64(48)) == _U0:
        n += 16
        x = x << np.uint64(16)
    if (x >> np.uint64(56)) == _U0:
        n += 8
        x = x << np.uint64(8)
    if (x >> np.uint64(60)) == _U0:
        n += 4
        x = x << np.uint64(4)
    if (x >> np.uint64(62)) == _U0:
        n += 2
        x = x << np.uint64(2)
    if (x >> np.uint64(63)) == _U0:
        n += 1
    return n


@njit(cache=True, inline="always")
def _delta(codes, i, j, n):
    """Common-prefix length of the augmented keys (code, position)."""
    if j < 0 or j >= n:
        return -1
    a = codes[i]
    b = codes[j]
    if a == b:
        # equal codes (duplicates): fall back to the position bits
        return 64 + _clz64(np.uint64(i ^ j))
    return _clz64(a ^ b)


@njit(parallel=True, cache=True)
def build_hierarchy(codes, nodes, parent):
    """Binary radix tree over sorted Morton codes (Karras 2012, top-down).

    Parameters
    ----------
    codes : (n,) uint64, sorted ascending.
    nodes : (n-1, 4) int64 out: left child, right child (unified ids), first
        and last leaf of the node's range.  One row per node keeps a visit to
        one cache line.
    parent : (2n-1,) int64 out, unified parent (internal index + n); -1 root.
    """
    n = codes.shape[0]
    parent[n] = -1
    for i in prange(n - 1):
        dl = _delta(codes, i, i - 1, n)
        dr = _delta(codes, i, i + 1, n)
        d = 1 if dr > dl else -1
        dmin = dl if d == 1 else dr
        lmax = 2
        while _delta(codes, i, i + lmax * d, n) > dmin:
            lmax *= 2
        ln = 0
        t = lmax // 2
        while t >= 1:
            if _delta(codes, i, i + (ln + t) * d, n) > dmin:
                ln += t
            t //= 2
        j = i + ln * d
        dnode = _delta(codes, i, j, n)
        s = 0
        div = 2
        while True:
            t = (ln + div - 1) // div
            if _delta(codes, i, i + (s + t) * d, n) > dnode:
                s += t
            if t <= 1:
                break
            div *= 2
        gamma = i + s * d + min(d, 0)
        lo = min(i, j)
        hi = max(i, j)
        nodes[i, 2] = lo
        nodes[i, 3] = hi
        lc = gamma if lo == gamma else gamma + n
        rc = gamma + 1 if hi == gamma + 1 else gamma + 1 + n
        nodes[i, 0] = lc
        nodes[i, 1] = rc
        parent[lc] = i + n
        parent[rc] = i + n


#: subtrees of at most this many leaves get their boxes from one thread
BOX_SUBTREE = 4096


@njit(cache=True, inline="always")
def _node_box(points, orig, nodes, box, min_orig, k, dims):
    """Box and smallest input row of internal node k from its children."""
    n = points.shape[0]
    d = len(dims)
    a = nodes[k, 0]
    b = nodes[k, 1]
    for q in range(d):
        if a < n:
            l0 = points[a, q]
            h0 = l0
        else:
            l0 = box[a - n, q]
            h0 = box[a - n, d + q]
        if b < n:
            l1 = points[b, q]
            h1 = l1
        else:
            l1 = box[b - n, q]
            h1 = box[b - n, d + q]
        box[k, q] = min(l0, l1)
        box[k, d + q] = max(h0, h1)
    ma = orig[a] if a < n else min_orig[a - n]
    mb = orig[b] if b < n else min_orig[b - n]
    min_orig[k] = min(ma, mb)


@njit(cache=True)
def _boxes_post_order(points, orig, nodes, box, min_orig, root, done_size, stack, dims):
    """Boxes of the subtree of internal node ``root``, children first.

    Subtrees of at most ``done_size`` leaves (other than ``root``) are taken
    as already done.  ``stack`` is int64 scratch (3 entries per level).
    """
    n = points.shape[0]
    sp = 1
    stack[0] = root
    while sp > 0:
        sp -= 1
        v = stack[sp]
        if v < 0:  # second visit: children are done
            _node_box(points, orig, nodes, box, min_orig, ~v, dims)
            continue
        stack[sp] = ~v
        sp += 1
        for c in (nodes[v, 0], nodes[v, 1]):
            if c >= n and nodes[c - n, 3] - nodes[c - n, 2] + 1 > done_size:
                stack[sp] = c - n
                sp += 1


@njit(parallel=True, cache=True)
def compute_bounding_boxes(points, orig, nodes, box, min_orig, dims):
    """Bounding box and smallest input row of every internal node.

    ``box`` is (n-1, 2d): lower corner then upper corner.  ``min_orig`` lets
    a search prune a subtree that is exactly at the cutoff distance but can
    only offer larger tie keys (duplicate points).

    The subtrees of at most ``BOX_SUBTREE`` leaves hanging below larger
    nodes are done in parallel (each one's nodes lie inside its leaf range,
    so one thread walks one compact stretch of memory), then the few larger
    nodes above them.
    """
    n = points.shape[0]
    # the roots of the small subtrees, by a descent over the large nodes
    roots = np.empty(n, np.int64)  # few in practice; n bounds any tree
    nroots = 0
    stack = np.empty(3 * 256, np.int64)
    if n - 1 <= BOX_SUBTREE:  # the whole tree is small
        roots[0] = 0
        nroots = 1
    else:
        sp = 1
        stack[0] = 0
        while sp > 0:
            sp -= 1
            v = stack[sp]
            for c in (nodes[v, 0], nodes[v, 1]):
                if c >= n:
                    if nodes[c - n, 3] - nodes[c - n, 2] + 1 <= BOX_SUBTREE:
                        roots[nroots] = c - n
                        nroots += 1
                    else:
                        stack[sp] = c - n
                        sp += 1
    for t in prange(nroots):
        st = np.empty(3 * 256, np.int64)
        _boxes_post_order(points, orig, nodes, box, min_orig, roots[t], 0, st, dims)
    if n - 1 > BOX_SUBTREE:
        _boxes_post_order(points, orig, nodes, box, min_orig, 0, BOX_SUBTREE, stack, dims)


@njit(parallel=True, cache=True)
def gather_rows(points, perm):
    """``points[perm]`` (C-contiguous), in parallel."""
    n, d = points.shape
    out = np.empty((n, d), points.dtype)
    for i in prange(n):
        p = perm[i]
        for q in range(d):
            out[i, q] = points[p, q]
    return out


# --------------------------------------------------------------------------
# distances
# --------------------------------------------------------------------------
@njit(cache=True, inline="always")
def _dist2(points, i, j, dims):
    d = len(dims)
    s = points[i, 0] - points[j, 0]
    s = s * s
    for q in range(1, d):
        t = points[i, q] - points[j, q]
        s += t * t
    return s


@njit(cache=True, inline="always")
def _box_dist2(points, i, box, k, dims):
    d = len(dims)
    s = points[i, 0] - points[i, 0]  # zero of the points' dtype
    for q in range(d):
        x = points[i, q]
        a = box[k, q]
        b = box[k, d + q]
        if x < a:
            t = a - x
            s += t * t
        elif x > b:
            t = x - b
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
                         k, leaf_size, out_d2, out_j, dims):
    """The k nearest *other* points of every point, under the order (d2, orig).

    Parameters
    ----------
    out_d2 : (n, k) float out, squared distances ascending.
    out_j : (n, k) int64 out, tree positions of the neighbours.
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
                    m = _heap_insert(kd, ko, kj, m, k, _dist2(points, i, j, dims), orig[j], j)
            sp = 1
            st_node[0] = 0
            st_dist[0] = _box_dist2(points, i, box, 0, dims)
            while sp > 0:
                sp -= 1
                node = st_node[sp]
                nd = st_dist[sp]
                if m == k and (nd > kd[k - 1] or (nd == kd[k - 1] and min_orig[node] > ko[k - 1])):
                    continue
                if nodes[node, 3] - nodes[node, 2] < leaf_size:
                    for j in range(nodes[node, 2], nodes[node, 3] + 1):
                        if j < a or j > z:  # seeded already (i included)
                            m = _heap_insert(kd, ko, kj, m, k, _dist2(points, i, j, dims), orig[j], j)
                    continue
                ca = nodes[node, 0]
                c = nodes[node, 1]
                da = kd[0]
                dc = kd[0]
                pa = False
                pc = False
                if ca < n:
                    if ca < a or ca > z:
                        m = _heap_insert(kd, ko, kj, m, k, _dist2(points, i, ca, dims), orig[ca], ca)
                else:
                    da = _box_dist2(points, i, box, ca - n, dims)
                    pa = m < k or da <= kd[k - 1]
                if c < n:
                    if c < a or c > z:
                        m = _heap_insert(kd, ko, kj, m, k, _dist2(points, i, c, dims), orig[c], c)
                else:
                    dc = _box_dist2(points, i, box, c - n, dims)
                    pc = m < k or dc <= kd[k - 1]
                sp = _push_children(st_node, st_dist, sp, ca - n, da, pa, c - n, dc, pc)
            for q in range(k):
                out_d2[i, q] = kd[q]
                out_j[i, q] = kj[q]


# --------------------------------------------------------------------------
# Borůvka phases
# --------------------------------------------------------------------------
@njit(parallel=True, cache=True)
def reduce_labels(labels, span, node_labels, breaks, shift):
    """Label of every internal node: the common label of its leaves, or -1.

    A node is single-component iff no label changes inside its leaf range,
    i.e. iff the prefix count of label changes along the curve is equal at
    both ends of the range.  ``span`` is (n-1, 2): each node's first and
    last leaf (compact, from ``nodes``); ``breaks`` is (n,) int32 scratch.
    The count is kept per stretch of ``2**shift`` positions, each stretch
    counted by one thread; the stretch totals are added on the fly.
    """
    n = labels.shape[0]
    step = 1 << shift
    nst = (n + step - 1) >> shift
    tot = np.zeros(nst + 1, np.int64)
    for c in prange(nst):
        lo = c * step
        hi = min(n, lo + step)
        cnt = 0
        for i in range(lo, hi):
            if i > 0 and labels[i] != labels[i - 1]:
                cnt += 1
            breaks[i] = cnt
        tot[c + 1] = cnt
    for c in range(nst):
        tot[c + 1] += tot[c]
    for k in prange(n - 1):
        a = span[k, 0]
        b = span[k, 1]
        ca = a >> shift
        cb = b >> shift
        if ca == cb:
            same = breaks[b] == breaks[a]
        else:
            same = breaks[b] + tot[cb] == breaks[a] + tot[ca]
        node_labels[k] = labels[a] if same else -1


@njit(cache=True, inline="always")
def _metric(points, core2, mrd, i, j, dims):
    w = _dist2(points, i, j, dims)
    if mrd:
        if core2[i] > w:
            w = core2[i]
        if core2[j] > w:
            w = core2[j]
    return w


@njit(parallel=True, cache=True)
def compute_upper_bounds(points, labels, core2, mrd, radii, dims):
    """Morton-neighbour upper bounds on each component's shortest edge.

    For consecutive tree positions in different components, their distance
    bounds both components' shortest outgoing edge from above.  ``radii`` must
    hold +inf on entry.  Racy minimum: every candidate is a real edge weight,
    so a lost update only leaves a looser (still valid) bound.
    """
    n = points.shape[0]
    for i in prange(n - 1):
        a = labels[i]
        b = labels[i + 1]
        if a != b:
            w = _metric(points, core2, mrd, i, i + 1, dims)
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
                                  leaf_size, resolved, cand_w, cand_j, dims):
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
            st_dist[0] = _box_dist2(points, i, box, 0, dims)
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
                            w = _metric(points, core2, mrd, i, j, dims)
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
                        w = _metric(points, core2, mrd, i, a, dims)
                        if _better(w, orig[a], bw, bo):
                            bw = w
                            bo = orig[a]
                            bj = a
                            if bw < r:
                                r = bw
                elif node_labels[a - n] != C:
                    da = _box_dist2(points, i, box, a - n, dims)
                    if mrd and ci > da:
                        da = ci
                    pa = da <= r
                if c < n:
                    if labels[c] != C:
                        w = _metric(points, core2, mrd, i, c, dims)
                        if _better(w, orig[c], bw, bo):
                            bw = w
                            bo = orig[c]
                            bj = c
                            if bw < r:
                                r = bw
                elif node_labels[c - n] != C:
                    dc = _box_dist2(points, i, box, c - n, dims)
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
def resolve_from_neighbour_lists(points, orig, labels, core2, mrd, knn_d2, knn_j,
                                 radii, lower, resolved, cand_w, cand_j, inf, dims,
                                 skip):
    """Answer the search from each point's k nearest neighbours where exact.

    ``knn_*`` (n, k) list the k nearest other points under the order
    (d2, orig), so any point not listed is at least ``knn_d2[i, -1]`` away.
    Euclidean: the first listed point of another component is exactly the
    nearest foreign point.  Mutual reachability: the best listed foreign
    point is exact if its weight is below ``max(core2_i, knn_d2[i, -1])``,
    the least weight an unlisted point can have; otherwise it seeds the
    search.  Early Borůvka iterations need no tree search at all this way.

    ``skip[i]`` (int32, 0 at the start) counts the leading listed points
    known to share i's component: components only merge, so they are not
    read again; once it reaches k the list has nothing more to offer
    (``lower[i]`` already holds its bound).
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
        bound = knn_d2[i, k - 1]
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
                    bw = knn_d2[i, q]
                    bj = j
                    break
                w = _metric(points, core2, mrd, i, j, dims)
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


@njit(cache=True, inline="always")
def _take_if_better(orig, i, j, w, comp_w, comp_src, comp_dst, C):
    """Component C keeps edge (i, j, w) if it beats its current one under
    (w, min orig, max orig)."""
    s = comp_src[C]
    if s >= 0:
        cw = comp_w[C]
        if w > cw:
            return
        if w == cw:
            a = min(orig[i], orig[j])
            b = max(orig[i], orig[j])
            ca = min(orig[s], orig[comp_dst[C]])
            cb = max(orig[s], orig[comp_dst[C]])
            if a > ca or (a == ca and b >= cb):
                return
    comp_w[C] = w
    comp_src[C] = i
    comp_dst[C] = j


@njit(parallel=True, cache=True)
def reduce_component_minima(orig, labels, cand_w, cand_j, radii, comp_w, comp_src,
                            comp_dst, foreign, nchunks, inf):
    """Each component's shortest outgoing edge under (w, min orig, max orig).

    comp_* are indexed by component id (a tree position); comp_src is -1
    (and comp_w ``inf``) where a component has no edge.  The tree positions are cut into
    ``nchunks`` stretches and a component belongs to the stretch holding its
    id: each thread initialises and reduces its own components, and leaves
    the points of other stretches' components in ``foreign`` ((n,) int64
    scratch), which a sequential pass takes afterwards, in order, so the
    result never depends on scheduling.  Only points with ``cand_w <=
    radii[C]`` can hold the minimum (the radius is the weight of a real
    outgoing edge), which leaves few foreign points in the late iterations,
    where components are large.
    """
    n = labels.shape[0]
    step = (n + nchunks - 1) // nchunks
    nforeign = np.zeros(nchunks, np.int64)
    for c in prange(nchunks):
        lo = c * step
        hi = min(n, lo + step)
        for C in range(lo, hi):
            comp_src[C] = -1
            comp_w[C] = inf
        f = lo
        for i in range(lo, hi):
            j = cand_j[i]
            if j < 0:
                continue
            C = labels[i]
            w = cand_w[i]
            if w > radii[C]:
                continue
            if C < lo or C >= hi:
                foreign[f] = i
                f += 1
                continue
            _take_if_better(orig, i, j, w, comp_w, comp_src, comp_dst, C)
        nforeign[c] = f - lo
    for c in range(nchunks):
        lo = c * step
        for t in range(lo, lo + nforeign[c]):
            i = foreign[t]
            _take_if_better(orig, i, cand_j[i], cand_w[i], comp_w, comp_src, comp_dst,
                            labels[i])


@njit(cache=True)
def certify_component_edges(labels, face2, comp_w, comp_src, comp_face2):
    """Keep only the component edges the local certificate proves global.

    An edge of weight w chosen by component C is an edge of the global MST
    if w < min over x in C of face2[x]: no point outside the box is that
    close to any point of C.  If at least one edge is certified, the others
    are dropped (``comp_src = -1``: those components wait); if none is,
    nothing is dropped and the caller switches certification off.
    ``comp_face2`` must hold +inf on entry.  Returns the certified count.
    """
    n = labels.shape[0]
    for i in range(n):
        C = labels[i]
        if face2[i] < comp_face2[C]:
            comp_face2[C] = face2[i]
    count = 0
    for C in range(n):
        if comp_src[C] >= 0 and comp_w[C] < comp_face2[C]:
            count += 1
    if count:
        for C in range(n):
            if comp_src[C] >= 0 and not comp_w[C] < comp_face2[C]:
                comp_src[C] = -1
    return count


@njit(parallel=True, cache=True)
def merge_components(labels, comp_w, comp_src, comp_dst, lower,
                     edge_src, edge_dst, edge_w, n_edges, nxt, hooked, nchunks):
    """Add every component's chosen edge and relabel points to the new roots.

    Under a strict total order the chosen edges form a forest whose only
    cycles are 2-cycles over one shared edge; the smaller component of such a
    mutual pair becomes the root and its duplicate edge is dropped.
    ``nxt`` and ``hooked`` are (n,) int64 scratch.  Parallel over stretches
    of component ids; edges are appended in component order, as a
    sequential pass would; the roots are found by path compression.
    Returns the new number of edges.
    """
    n = labels.shape[0]
    step = (n + nchunks - 1) // nchunks
    counts = np.zeros(nchunks + 1, np.int64)
    for c in prange(nchunks):
        cnt = 0
        for C in range(c * step, min(n, (c + 1) * step)):
            if labels[C] != C:
                continue
            nxt[C] = C
            if comp_src[C] < 0:
                continue
            D = labels[comp_dst[C]]
            back = labels[comp_dst[D]] if comp_src[D] >= 0 else -1
            if back == C and C < D:
                continue  # mutual pair: C is the root, D adds the shared edge
            nxt[C] = D
            cnt += 1
        counts[c + 1] = cnt
    for c in range(nchunks):
        counts[c + 1] += counts[c]
    for c in prange(nchunks):
        e = counts[c]
        for C in range(c * step, min(n, (c + 1) * step)):
            if labels[C] == C and nxt[C] != C:
                edge_src[n_edges + e] = comp_src[C]
                edge_dst[n_edges + e] = comp_dst[C]
                edge_w[n_edges + e] = comp_w[C]
                hooked[e] = C
                e += 1
    h = counts[nchunks]
    # find the roots with path compression, in parallel: every value a
    # thread writes or reads is an ancestor on the (fixed) path to the root
    for t in prange(h):
        c = hooked[t]
        r = c
        while nxt[r] != r:
            r = nxt[r]
        while nxt[c] != r:
            q = nxt[c]
            nxt[c] = r
            c = q
    _relabel(labels, nxt, comp_w, lower)
    return n_edges + h


@njit(parallel=True, cache=True)
def _relabel(labels, nxt, comp_w, lower):
    n = labels.shape[0]
    for i in prange(n):
        C = labels[i]
        # every point of C is at least C's shortest edge away from anything foreign
        w = comp_w[C]
        if w > lower[i]:
            lower[i] = w
        labels[i] = nxt[C]


# --------------------------------------------------------------------------
# Morton codes
# --------------------------------------------------------------------------
@njit(cache=True, inline="always")
def _spread_bits(v, d, bits):
    """Put bit l of ``v`` at bit l*d (magic-number forms for d = 2 and 3)."""
    x = np.uint64(v)
    if d == 3:
        x &= np.uint64(0x1FFFFF)
        x = (x | (x << np.uint64(32))) & np.uint64(0x1F00000000FFFF)
        x = (x | (x << np.uint64(16))) & np.uint64(0x1F0000FF0000FF)
        x = (x | (x << np.uint64(8))) & np.uint64(0x100F00F00F00F00F)
        x = (x | (x << np.uint64(4))) & np.uint64(0x10C30C30C30C30C3)
        x = (x | (x << np.uint64(2))) & np.uint64(0x1249249249249249)
        return x
    if d == 2:
        x &= np.uint64(0x7FFFFFFF)
        x = (x | (x << np.uint64(16))) & np.uint64(0x0000FFFF0000FFFF)
        x = (x | (x << np.uint64(8))) & np.uint64(0x00FF00FF00FF00FF)
        x = (x | (x << np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
        x = (x | (x << np.uint64(2))) & np.uint64(0x3333333333333333)
        x = (x | (x << np.uint64(1))) & np.uint64(0x5555555555555555)
        return x
    r = _U0
    for level in range(bits):
        r |= ((x >> np.uint64(level)) & _U1) << np.uint64(level * d)
    return r


@njit(parallel=True, cache=True)
def morton_codes(points, lo, scale, bits, codes):
    """64-bit Morton codes: ``bits`` bits per axis, axis 0 most significant.

    Parameters
    ----------
    points : (n, d) float.
    lo : (d,) float64, the scene box's lower corner.
    scale : (d,) float64, ``2**bits / extent`` (0 for an axis of zero
        extent, so a flat cloud never divides by zero).
    codes : (n,) uint64 out.
    """
    n, d = points.shape
    top = (1 << bits) - 1
    for i in prange(n):
        code = _U0
        for a in range(d):
            v = int((np.float64(points[i, a]) - lo[a]) * scale[a])
            v = min(max(v, 0), top)
            code |= _spread_bits(v, d, bits) << np.uint64(d - 1 - a)
        codes[i] = code


@njit(cache=True)
def radix_argsort(codes, key_bits):
    """Stable argsort of uint64 keys below ``2**key_bits`` (LSD radix, 11 bits).

    Equal keys keep their input order, which is what duplicate points need.
    Returns (n,) int64.
    """
    n = codes.shape[0]
    perm = np.arange(n)
    tmp = np.empty(n, np.int64)
    keys = codes.copy()
    ktmp = np.empty(n, np.uint64)
    radix = 11
    mask = np.uint64((1 << radix) - 1)
    shift = 0
    count = np.empty((1 << radix) + 1, np.int64)
    while shift < key_bits:
        sh = np.uint64(shift)
        count[:] = 0
        for i in range(n):
            count[((keys[i] >> sh) & mask) + np.uint64(1)] += 1
        if count.max() < n:  # skip digits every key shares
            for b in range(1 << radix):
                count[b + 1] += count[b]
            for i in range(n):
                b = (keys[i] >> sh) & mask
                p = count[b]
                count[b] = p + 1
                ktmp[p] = keys[i]
                tmp[p] = perm[i]
            keys, ktmp = ktmp, keys
            perm, tmp = tmp, perm
        shift += radix
    return perm


@njit(parallel=True, cache=True)
def axis_bounds(points):
    """Per-axis (min, max) of an (n, d) array, float64, n >= 1.

    numpy's axis-0 reductions walk the rows one axis at a time (about 25 ms
    per million 2-D points on two cores); this is one parallel pass.
    """
    n, d = points.shape
    chunks = 64
    step = (n + chunks - 1) // chunks
    lo = np.full((chunks, d), np.inf)
    hi = np.full((chunks, d), -np.inf)
    for c in prange(chunks):
        for i in range(c * step, min(n, (c + 1) * step)):
            for a in range(d):
                v = np.float64(points[i, a])
                if v < lo[c, a]:
                    lo[c, a] = v
                if v > hi[c, a]:
                    hi[c, a] = v
    out_lo = np.empty(d)
    out_hi = np.empty(d)
    for a in range(d):
        out_lo[a] = lo[:, a].min()
        out_hi[a] = hi[:, a].max()
    return out_lo, out_hi
