"""Per-group sums of the friends-of-friends catalogue, in a fixed order.

The members of every group are taken by (label, row) (one stable sort of
the labels), and each group's values are summed pairwise: neighbours
(0, 1), (2, 3), ... of the group's sequence are added, an odd last one
carried, and so on until one value is left.  The result depends on the
group's members alone, never on the order of the rows, the threads or
the atomics; the host (numba, a thread a group), the whole-array rounds
(``segment_sums_xp``, each halving every group) and the device
(``kernels.cuda.fof_products.member_sums``: 32 members a thread, their
values formed in registers, then rounds 32 to one) do the same additions,
so they give the same bits.  The work is linear in the number of members, with no
contention: a group of 10^7 members costs what 10^5 groups of 100 do
(float64 atomics into a few very large groups serialise on one address).
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

from ..arrays import stable_argsort


def member_rows(xp, labels, members: int, groups=None):
    """(M,) int64: the rows with ``labels >= 0`` ordered by (label, row).

    Parameters
    ----------
    xp : numpy or cupy; labels : (n,) int64 of ``xp``, -1 or 0 .. G-1.
    members : int, M, the number of labels >= 0.
    groups : int, optional, G (found from the labels when not given).
    """
    if xp is np:  # a counting sort: one pass, where a sort of n keys takes many
        return _host_rows(np.ascontiguousarray(labels, np.int64), int(members))
    rows = xp.flatnonzero(labels >= 0)
    key = labels[rows]
    top = (int(key.max()) if key.shape[0] else 0) if groups is None else int(groups) - 1
    if key.shape[0] and top < 2 ** 31:  # a radix sort of half the passes
        key = key.astype(xp.int32)
    return rows[stable_argsort(xp, key)].astype(xp.int64, copy=False)


@njit(cache=True)
def _host_rows(labels, members):
    G = 0
    for i in range(labels.shape[0]):
        if labels[i] >= G:
            G = labels[i] + 1
    at = np.zeros(G + 1, np.int64)
    for i in range(labels.shape[0]):
        if labels[i] >= 0:
            at[labels[i] + 1] += 1
    for g in range(G):
        at[g + 1] += at[g]
    out = np.empty(members, np.int64)
    for i in range(labels.shape[0]):
        g = labels[i]
        if g >= 0:
            out[at[g]] = i
            at[g] += 1
    return out


def segment_sums(values, length):
    """Each group's sum of ``values``, pairwise in the group's order.

    Parameters
    ----------
    values : (M, c) float64, numpy or cupy: the groups' members one group
        after another (``member_rows`` order).
    length : (G,) int64 of the same module, each >= 1, summing to M.

    Returns
    -------
    (G, c) float64 of the same module.
    """
    from .order import array_module

    xp = array_module(values)
    if xp is np:
        return _host_sums(np.ascontiguousarray(values, np.float64),
                          np.ascontiguousarray(length, np.int64))
    return segment_sums_xp(xp, values, length)


def segment_sums_xp(xp, values, length):
    """``segment_sums`` with whole-array operations (any array module): a
    round per halving of the largest group, each round one gather and one
    addition over what is left (half the values of the round before)."""
    G = int(length.shape[0])
    x = values.astype(xp.float64, copy=False)
    if G == 0 or x.shape[0] == G:
        return x.copy() if G else xp.zeros((0,) + values.shape[1:], xp.float64)
    L = length.astype(xp.int64)
    for _ in range(int(int(length.max()) - 1).bit_length()):
        half = (L + 1) // 2
        start = xp.cumsum(L) - L
        hstart = xp.cumsum(half) - half
        size = int(hstart[-1] + half[-1])
        step = xp.zeros(size, xp.int64)
        step[hstart[1:]] = 1
        seg = xp.cumsum(step)  # the group of every pair
        k = xp.arange(size, dtype=xp.int64) - hstart[seg]
        left = start[seg] + 2 * k
        both = 2 * k + 1 < L[seg]
        right = xp.where(both, left + 1, left)
        x = xp.where(both[:, None], x[left] + x[right], x[left])
        L = half
    return x


@njit(parallel=True, cache=True)
def _host_sums(values, length):
    G = length.shape[0]
    c = values.shape[1]
    start = np.zeros(G + 1, np.int64)
    for g in range(G):
        start[g + 1] = start[g] + length[g]
    work = values.copy()
    out = np.empty((G, c), np.float64)
    for g in prange(G):
        a = start[g]
        m = length[g]
        while m > 1:  # the pairs of this round, in place (k <= 2k)
            h = (m + 1) // 2
            for k in range(h):
                if 2 * k + 1 < m:
                    for j in range(c):
                        work[a + k, j] = work[a + 2 * k, j] + work[a + 2 * k + 1, j]
                else:
                    for j in range(c):
                        work[a + k, j] = work[a + 2 * k, j]
            m = h
        for j in range(c):
            out[g, j] = work[a, j]
    return out
