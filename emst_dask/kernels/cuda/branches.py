"""The MST statistics' branches on the GPU in fused passes.

``products.branches_xp`` written as CuPy elementwise kernels, each doing in
one pass what the whole-array version does in several: the degrees and
each node's smallest and largest edge (one pass over the edges, atomics);
both half-edges of every edge with their successor, step, length and
whether they still have to jump (one pass); per pointer-jumping round a
gather into temporaries, a scatter, and the flag of the half-edges still
jumping (three passes over the active ones, one compaction); the branches'
first edges, their sizes, lengths, ends and end-to-end distances (one pass
over the edges, one over the branches); the edges' places in their
branches (one pass).  The same additions in the same order as
``branches_xp``, so the same bits (products are written with ``__dmul_rn``
and ``__dadd_rn``: no fused multiply-add).
"""
from __future__ import annotations

import functools

import numpy as np

from ...errors import InputError

_CYCLE = "edges lie on a cycle of degree-2 nodes: the edges are not a tree"


@functools.cache
def _kernels():
    import cupy

    ek = cupy.ElementwiseKernel
    ends = ek(
        "int64 s, int64 t", "raw uint64 degree, raw uint64 lo, raw uint64 hi",
        "unsigned long long e = (unsigned long long)i, one = 1;"
        "atomicAdd(&degree[s], one); atomicAdd(&degree[t], one);"
        "atomicMin(&lo[s], e); atomicMax(&hi[s], e);"
        "atomicMin(&lo[t], e); atomicMax(&hi[t], e);", "emst_branch_node_edges")
    halves = ek(
        "int64 s, int64 t, raw int64 source, raw int64 target, raw W weight, "
        "raw uint64 degree, raw uint64 lo, raw uint64 hi",
        "raw int64 nxt, raw int64 steps, raw float64 ahead, raw bool act",
        "for (int r = 0; r < 2; ++r) {"
        "  long long h = 2 * (long long)i + r, head = r == 0 ? t : s;"
        "  bool on = degree[head] == 2;"
        "  long long other = on ? (long long)(lo[head] + hi[head]) - (long long)i"
        "                       : (long long)i;"
        "  long long g = on ? 2 * other + (source[other] == head ? 0 : 1) : h;"
        "  nxt[h] = g; steps[h] = on ? 1 : 0;"
        "  ahead[h] = on ? (double)weight[other] : 0.0;"
        "  long long gh = (g & 1) ? source[g >> 1] : target[g >> 1];"
        "  act[h] = on && degree[gh] == 2;"
        "}", "emst_branch_half_edges")
    gather = ek(
        "int64 h, raw int64 nxt, raw int64 steps, raw float64 ahead",
        "int64 n_nxt, int64 n_steps, float64 n_ahead",
        "long long on = nxt[h]; n_ahead = ahead[h] + ahead[on];"
        "n_steps = steps[h] + steps[on]; n_nxt = nxt[on];", "emst_branch_jump_gather")
    scatter = ek(
        "int64 h, int64 n_nxt, int64 n_steps, float64 n_ahead",
        "raw int64 nxt, raw int64 steps, raw float64 ahead",
        "nxt[h] = n_nxt; steps[h] = n_steps; ahead[h] = n_ahead;", "emst_branch_jump_scatter")
    more = ek("int64 h, raw int64 nxt", "bool more",
              "long long on = nxt[h]; more = nxt[on] != on;", "emst_branch_jump_more")
    firsts = ek(
        "int64 s, int64 t, raw int64 nxt, raw uint64 degree",
        "bool member, int64 first_of, bool is_first",
        "long long e = i, l0 = nxt[2 * e] >> 1, l1 = nxt[2 * e + 1] >> 1;"
        "member = degree[s] == 2 || degree[t] == 2;"
        "first_of = l0 < l1 ? l0 : l1;"
        "is_first = member && first_of == e;", "emst_branch_firsts")
    branch = ek(
        "int64 f, raw int64 source, raw int64 target, raw W weight, raw int64 nxt, "
        "raw int64 steps, raw float64 ahead, raw uint64 degree",
        "int64 size, float64 length, raw int64 ends",
        "long long r = (nxt[2 * f] >> 1) == f ? 1 : 0;"
        "size = steps[2 * f + r] + 1;"
        "length = (double)weight[f] + ahead[2 * f + r];"
        "long long g = nxt[2 * f + r] >> 1;"
        "long long u = source[f], v = source[g];"
        "ends[2 * i] = degree[u] == 2 ? target[f] : u;"
        "ends[2 * i + 1] = degree[v] == 2 ? target[g] : v;", "emst_branch_rows")
    reach = ek(
        "int64 e0, int64 e1, raw P points, raw float64 box, int32 d, bool periodic",
        "float64 reach",
        "double s2 = 0.0;"
        "for (int j = 0; j < d; ++j) {"
        "  double dx = (double)points[e0 * d + j] - (double)points[e1 * d + j];"
        "  dx = dx < 0 ? -dx : dx;"
        "  if (periodic) { double o = box[j] - dx; dx = o < dx ? o : dx; }"
        "  s2 = __dadd_rn(s2, __dmul_rn(dx, dx));"
        "}"
        "reach = sqrt(s2);", "emst_branch_reach")
    place = ek(
        "bool member, int64 first_of, raw int64 nxt, raw int64 steps, raw int64 number, "
        "raw int64 offsets",
        "raw int64 branch_edges",
        "if (member) {"
        "  long long f = first_of;"
        "  long long pos = (nxt[2 * i + 1] >> 1) == f ? steps[2 * i + 1] : steps[2 * i];"
        "  branch_edges[offsets[number[f]] + pos] = i;"
        "}", "emst_branch_place")
    return dict(ends=ends, halves=halves, gather=gather, scatter=scatter, more=more,
                firsts=firsts, branch=branch, reach=reach, place=place)


def branches_device(cp, source, target, weight, n, points=None, box=None):
    """``products.branches_xp`` on CuPy arrays (``cp``: the cupy module), in
    fused passes.  Same arguments and result, the same bits."""
    K = _kernels()
    m = int(source.shape[0])
    degree = cp.zeros(n, cp.int64)
    count = degree.view(cp.uint64)  # the atomics' type; counts are never negative
    lo = cp.full(n, m, cp.uint64)
    hi = cp.zeros(n, cp.uint64)
    if m:
        K["ends"](source, target, count, lo, hi)
    nxt = cp.empty(2 * m, cp.int64)
    steps = cp.empty(2 * m, cp.int64)
    ahead = cp.empty(2 * m, cp.float64)
    act = cp.empty(2 * m, cp.bool_)
    if m:
        K["halves"](source, target, source, target, weight, count, lo, hi, nxt, steps, ahead,
                    act)
    active = cp.flatnonzero(act)
    rounds = 0
    limit = max(1, 2 * m).bit_length() + 1
    while active.shape[0]:
        if rounds == limit:
            raise InputError(_CYCLE)
        n_nxt, n_steps, n_ahead = K["gather"](active, nxt, steps, ahead)
        K["scatter"](active, n_nxt, n_steps, n_ahead, nxt, steps, ahead)
        active = active[K["more"](active, nxt)]
        rounds += 1
    member, first_of, is_first = K["firsts"](source, target, nxt, count) if m else (
        cp.zeros(0, cp.bool_), cp.zeros(0, cp.int64), cp.zeros(0, cp.bool_))
    number = cp.cumsum(is_first, dtype=cp.int64) - 1
    first_edge = cp.flatnonzero(is_first)
    B = int(first_edge.shape[0])
    ends = cp.empty((B, 2), cp.int64)
    sizes = cp.empty(B, cp.int64)
    length = cp.empty(B, cp.float64)
    if B:
        K["branch"](first_edge, source, target, weight, nxt, steps, ahead, count, sizes,
                    length, ends)
    offsets = cp.zeros(B + 1, cp.int64)
    cp.cumsum(sizes, out=offsets[1:])
    total = 0
    if m:  # one read back: the members and the branches' edges
        members, total = cp.stack([cp.count_nonzero(member), offsets[-1]]).tolist()
        if members != total:
            raise InputError(_CYCLE)
    branch_edges = cp.empty(int(total), cp.int64)
    if m:
        K["place"](member, first_of, nxt, steps, number, offsets, branch_edges)
    reach = None
    if points is not None:
        reach = cp.empty(B, cp.float64)
        if B:
            periodic = box is not None
            L = cp.asarray(np.asarray(box if periodic else np.zeros(points.shape[1]),
                                      np.float64))
            K["reach"](cp.ascontiguousarray(ends[:, 0]), cp.ascontiguousarray(ends[:, 1]),
                       cp.ascontiguousarray(points), L, np.int32(points.shape[1]),
                       np.bool_(periodic), reach)
    return dict(degree=degree, branch_edges=branch_edges,
                branch_offsets=offsets, branch_length=length, branch_ends=ends,
                branch_reach=reach)
