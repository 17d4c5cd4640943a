"""Component bookkeeping of the Borůvka iterations on the CPU: label
reduction over the tree, each component's minimum outgoing edge under the
strict order, and the merge (hooks, roots by path compression, relabel).

Conventions of every CPU kernel: see ``emst_dask.kernels.cpu``.  "int" is
int32 below 2**31 - 1 points, else int64 (``kernel_set._index_type``).
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange


@njit(parallel=True, cache=True)
def reduce_labels(labels, span, node_labels, breaks, shift):
    """Label of every internal node: the common label of its leaves, or -1.

    A node is single-component iff no label changes inside its leaf range,
    i.e. iff the prefix count of label changes along the curve is equal at
    both ends of the range.  ``span`` is (n-1, 2): each node's first and
    last leaf (compact, from ``nodes``); ``breaks`` is (n,) int32 scratch.
    The count is kept per stretch of ``2**shift`` positions, each stretch
    counted by one thread; the stretch totals are added on the fly.

    Parameters
    ----------
    labels : (n,) int32/int64 component of each point, tree order.
    span : (n-1, 2) int32/int64 first and last leaf of each node.
    node_labels : (n-1,) int out, the node's common label or -1.
    breaks : (n,) int scratch (int32, or int64 for n >= 2**31 - 1).
    shift : int, log2 of the stretch length.
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
    the points of other stretches' components in ``foreign`` ((n,) int
    scratch), which a sequential pass takes afterwards, in order, so the
    result never depends on scheduling.  Only points with ``cand_w <=
    radii[C]`` can hold the minimum (the radius is the weight of a real
    outgoing edge), which leaves few foreign points in the late iterations,
    where components are large.

    Parameters
    ----------
    orig : (n,) int64 input row of each tree position.
    labels : (n,) int component of each point.
    cand_w : (n,) float squared weight of each point's candidate.
    cand_j : (n,) int tree position of the candidate (-1: none).
    radii : (n,) float per component id.
    comp_w : (n,) float out, per component id.
    comp_src, comp_dst : (n,) int out, the edge's tree positions.
    foreign : (n,) int scratch.
    nchunks : int, stretches of component ids (one per thread).
    inf : +inf of the points' dtype.
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



@njit(parallel=True, cache=True)
def merge_components(labels, comp_w, comp_src, comp_dst, lower,
                     edge_src, edge_dst, edge_w, n_edges, nxt, hooked, nchunks):
    """Add every component's chosen edge and relabel points to the new roots.

    Under a strict total order the chosen edges form a forest whose only
    cycles are 2-cycles over one shared edge; the smaller component of such a
    mutual pair becomes the root and its duplicate edge is dropped.
    ``nxt`` and ``hooked`` are (n,) int scratch.  Parallel over stretches
    of component ids; edges are appended in component order, as a
    sequential pass would; the roots are found by path compression.
    Returns the new number of edges.

    Parameters
    ----------
    labels : (n,) int in/out, component of each point (then its new root).
    comp_w, comp_src, comp_dst : (n,) per component id, from
        ``reduce_component_minima``.
    lower : (n,) float in/out, raised to the old component's edge weight.
    edge_src, edge_dst : (n-1,) int out, tree positions, appended at
        ``n_edges``.
    edge_w : (n-1,) float out, squared weights.
    n_edges : int, edges so far.
    nxt, hooked : (n,) int scratch.
    nchunks : int, stretches of component ids (one per thread).
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


