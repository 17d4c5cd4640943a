"""Degrees and branches of a tree on the device (MiSTree's definitions,
as in ``products.branches``).

Device (whole-array, ``branches_xp``, written against an array module so
that it runs with numpy too): degrees by ``bincount``; the two edges of a
degree-2 node by a scatter-min and a scatter-max; each edge taken in both
directions (2m *half-edges*, a half-edge's successor is the next edge of
the branch entered at its head node, so each branch is two linked lists,
one per direction); list ranking by pointer jumping (Wyllie) gives every
half-edge the end edge its direction leads to, the number of steps and the
sum of lengths on the way (each round on the half-edges not yet done);
numbering, positions and lengths follow without a sort.  O(m + sum of
log2 of the branch lengths) work.
"""
from __future__ import annotations

import numpy as np

from ..arrays import scatter_max, scatter_min
from ..errors import InputError


def branches_xp(xp, source, target, weight, n, points=None, box=None):
    """``branches_host`` with whole-array operations of ``xp`` (numpy or cupy).

    Parameters
    ----------
    xp : numpy or cupy.
    source, target : (m,) int64 arrays of ``xp``, endpoints in [0, n).
    weight : (m,) float32 or float64 array of ``xp``.
    n : int.
    points : (n, d) float array of ``xp`` or None.
    box : (d,) float64 or None, the periodic box's lengths.

    Returns
    -------
    dict as ``branches_host``, arrays of ``xp``; the same values except the
    lengths, summed in the order of the pointer jumps (equal to the last
    bits or so).

    Raises
    ------
    InputError
        Edges on a cycle of degree-2 nodes (not a tree).
    """
    if xp is not np:  # the same steps in fused kernels
        from ..kernels.cuda.branches import branches_device

        return branches_device(xp, source, target, weight, n, points, box)
    m = int(source.shape[0])
    degree = xp.bincount(xp.concatenate([source, target]), minlength=n).astype(xp.int64)
    ids = xp.arange(m, dtype=xp.int64)
    lo = xp.full(n, m, xp.int64)
    hi = xp.zeros(n, xp.int64)
    for ends in (source, target):
        scatter_min(xp, lo, ends, ids)
        scatter_max(xp, hi, ends, ids)
    two = degree == 2
    # half-edge h = 2 e + r: edge e from source to target (r = 0) or back
    # (r = 1); its head is the node it enters
    head = xp.stack([target, source], axis=1).reshape(-1)
    edge = xp.repeat(ids, 2)
    goes_on = two[head]
    other = xp.where(goes_on, lo[head] + hi[head] - edge, edge)  # the head's other edge
    step_in = xp.where(source[other] == head, 0, 1)  # entered at its source: r = 0
    nxt = xp.where(goes_on, 2 * other + step_in, xp.arange(2 * m, dtype=xp.int64))
    steps = goes_on.astype(xp.int64)
    w64 = weight.astype(xp.float64)
    ahead = xp.where(goes_on, w64[other], 0.0)  # lengths beyond the half-edge's own edge
    # pointer jumping (Wyllie) on the half-edges whose successor is not yet
    # an end (ends point at themselves and add 0): after round k, those
    # more than 2^k steps from their end; most branches are short, so the
    # active set shrinks fast
    active = xp.flatnonzero(nxt[nxt] != nxt)
    rounds = 0
    limit = max(1, 2 * m).bit_length() + 1
    while active.shape[0]:
        if rounds == limit:
            raise InputError("edges lie on a cycle of degree-2 nodes: the edges are not a tree")
        on = nxt[active]
        ahead[active] = ahead[active] + ahead[on]  # (right sides read before any write)
        steps[active] = steps[active] + steps[on]
        nxt[active] = nxt[on]
        on = nxt[active]
        active = active[nxt[on] != on]
        rounds += 1
    last = (nxt >> 1).reshape(m, 2)  # the end edge each direction leads to
    steps = steps.reshape(m, 2)
    ahead = ahead.reshape(m, 2)
    member = two[source] | two[target]
    first_of = xp.minimum(last[:, 0], last[:, 1])
    is_first = member & (first_of == ids)
    number = xp.cumsum(is_first, dtype=xp.int64) - 1
    first_edge = xp.flatnonzero(is_first)
    # the direction from the first edge along the branch: the one not ending at once
    r_first = xp.where(last[first_edge, 0] == first_edge, 1, 0)
    sizes = steps[first_edge, r_first] + 1
    length = w64[first_edge] + ahead[first_edge, r_first]
    offsets = xp.zeros(int(first_edge.shape[0]) + 1, xp.int64)
    offsets[1:] = xp.cumsum(sizes)
    if m and int(member.sum()) != int(offsets[-1]):
        raise InputError("edges lie on a cycle of degree-2 nodes: the edges are not a tree")
    # position of an edge from its branch's first edge: the steps in the
    # direction that leads there
    mem = xp.flatnonzero(member)
    f = first_of[mem]
    pos = xp.where(last[mem, 1] == f, steps[mem, 1], steps[mem, 0])
    branch_edges = xp.empty(int(offsets[-1]), xp.int64)
    branch_edges[offsets[number[f]] + pos] = mem
    end_edge = xp.where(r_first == 1, last[first_edge, 1], last[first_edge, 0])
    ends = xp.stack([_outer_end(xp, source, target, two, first_edge),
                     _outer_end(xp, source, target, two, end_edge)], axis=1)
    reach = None
    if points is not None:
        a, b = points[ends[:, 0]], points[ends[:, 1]]
        s2 = xp.zeros(int(ends.shape[0]), xp.float64)
        for j in range(points.shape[1]):  # axis by axis, as the host sums
            dx = xp.abs(a[:, j].astype(xp.float64) - b[:, j].astype(xp.float64))
            if box is not None:
                dx = xp.minimum(dx, float(box[j]) - dx)
            s2 = s2 + dx * dx
        reach = xp.sqrt(s2)
    return dict(degree=degree, branch_edges=branch_edges, branch_offsets=offsets,
                branch_length=length, branch_ends=ends, branch_reach=reach)


def _outer_end(xp, source, target, two, edges):
    """The end of each (end) edge whose degree is not 2."""
    s, t = source[edges], target[edges]
    return xp.where(two[s], t, s)
