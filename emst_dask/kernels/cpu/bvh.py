"""LBVH construction on the CPU: Morton codes, the radix sort, the radix
tree (Karras 2012, top-down: every internal node independently) and its
bounding boxes (bottom-up over subtrees), plus the per-axis bounds.

Conventions of every CPU kernel: see ``emst_dask.kernels.cpu``.
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

_U1 = np.uint64(1)
_U0 = np.uint64(0)


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
def _delta(codes, fine, i, j, n):
    """Common-prefix length of the augmented keys (code, fine code, position)."""
    if j < 0 or j >= n:
        return -1
    a = codes[i]
    b = codes[j]
    if a != b:
        return _clz64(a ^ b)
    if fine.shape[0]:  # a crowded cell, refined: codes over its own box
        fa = fine[i]
        fb = fine[j]
        if fa != fb:
            return 64 + _clz64(fa ^ fb)
    # equal codes (duplicates): fall back to the position bits
    return 128 + _clz64(np.uint64(i ^ j))


@njit(parallel=True, cache=True)
def build_hierarchy(codes, fine, nodes, parent):
    """Binary radix tree over sorted Morton codes (Karras 2012, top-down).

    Parameters
    ----------
    codes : (n,) uint64, sorted ascending.
    fine : (n,) uint64, the finer codes of the points of crowded cells
        (runs of equal codes), ascending within each run, or (0,): none.
    nodes : (n-1, 4) int32/int64 out: left child, right child (unified ids), first
        and last leaf of the node's range.  One row per node keeps a visit to
        one cache line.
    parent : (2n-1,) int64 out, unified parent (internal index + n); -1 root.
    """
    n = codes.shape[0]
    parent[n] = -1
    for i in prange(n - 1):
        dl = _delta(codes, fine, i, i - 1, n)
        dr = _delta(codes, fine, i, i + 1, n)
        d = 1 if dr > dl else -1
        dmin = dl if d == 1 else dr
        lmax = 2
        while _delta(codes, fine, i, i + lmax * d, n) > dmin:
            lmax *= 2
        ln = 0
        t = lmax // 2
        while t >= 1:
            if _delta(codes, fine, i, i + (ln + t) * d, n) > dmin:
                ln += t
            t //= 2
        j = i + ln * d
        dnode = _delta(codes, fine, i, j, n)
        s = 0
        div = 2
        while True:
            t = (ln + div - 1) // div
            if _delta(codes, fine, i, i + (s + t) * d, n) > dnode:
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

    Parameters
    ----------
    points : (n, d) float, tree order.
    orig : (n,) int64 input row of each position.
    nodes : (n-1, 4) int32/int64 from ``build_hierarchy``.
    box : (n-1, 2d) float out.
    min_orig : (n-1,) int32/int64 out.
    dims : tuple of d zeros.
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
    """Per-axis (min, max) of an (n, d) array, float64, n >= 1, and the
    smallest nonzero magnitude of any coordinate (+inf when all are zero).

    numpy's axis-0 reductions walk the rows one axis at a time (about 25 ms
    per million 2-D points on two cores); this is one parallel pass.  The
    smallest magnitude bounds the closest two distinct points can be (see
    ``emst_dask.engine.scaling``).
    """
    n, d = points.shape
    chunks = 64
    step = (n + chunks - 1) // chunks
    lo = np.full((chunks, d), np.inf)
    hi = np.full((chunks, d), -np.inf)
    small = np.full(chunks, np.inf)
    for c in prange(chunks):
        for i in range(c * step, min(n, (c + 1) * step)):
            for a in range(d):
                v = np.float64(points[i, a])
                if v < lo[c, a]:
                    lo[c, a] = v
                if v > hi[c, a]:
                    hi[c, a] = v
                m = abs(v)
                if m != 0.0 and m < small[c]:
                    small[c] = m
    out_lo = np.empty(d)
    out_hi = np.empty(d)
    for a in range(d):
        out_lo[a] = lo[:, a].min()
        out_hi[a] = hi[:, a].max()
    return out_lo, out_hi, small.min()
