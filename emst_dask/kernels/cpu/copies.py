"""Exact duplicates on the CPU: the numba passes behind the kernel set's
``mark_copies`` and ``compact_copies`` (the CUDA set's ``copies.cu`` does the
same; ``engine.duplicates`` says why the tree of the distinct points is exact)."""
from __future__ import annotations

import numpy as np
from numba import njit, prange


@njit(parallel=True, cache=True)
def mark_copies(x, perm, codes, keep_tree):
    """keep_tree 0 at each point equal to the one before it in tree order
    (sharing its code), else 1; returns (copies, positions sharing the code
    of the one before, of those the unequal)."""
    n, d = x.shape
    copies = 0
    shared = 0
    mixed = 0
    for i in prange(n):
        copy = False
        if i > 0 and codes[i] == codes[i - 1]:
            shared += 1
            r = perm[i]
            q = perm[i - 1]
            copy = True
            for a in range(d):
                if x[r, a] != x[q, a]:
                    copy = False
            if copy:
                copies += 1
            else:
                mixed += 1
        keep_tree[i] = 0 if copy else 1
    return copies, shared, mixed


@njit(parallel=True, cache=True)
def compact_copies(codes, perm, keep_tree, keep_in, pos, local, rows, kcodes, kperm, copy, head):
    """The distinct points and the copies, when every run of equal codes is
    one group; ``pos`` and ``local`` are the inclusive sums of ``keep_tree``
    and ``keep_in`` (the arrays as in ``copies.cu``'s ``k_compact_copies``)."""
    n = codes.shape[0]
    for i in prange(n):
        p = pos[i] - 1
        if keep_tree[i]:
            kcodes[p] = codes[i]
            kperm[p] = local[perm[i]] - 1
        else:
            c = i - pos[i]
            copy[c] = perm[i]
            head[c] = p
        if keep_in[i]:
            rows[local[i] - 1] = i


def compact(codes, perm, keep_tree, m):
    """(rows, codes, perm, copy, rep) of the distinct points, numpy arrays
    (the kernel set's ``compact_copies``)."""
    n = codes.shape[0]
    keep_in = np.empty(n, np.uint8)
    keep_in[perm] = keep_tree
    pos = np.cumsum(keep_tree, dtype=np.int64)
    local = np.cumsum(keep_in, dtype=np.int64)
    rows = np.empty(m, np.int64)
    kcodes = np.empty(m, np.uint64)
    kperm = np.empty(m, perm.dtype)
    copy = np.empty(n - m, np.int64)
    head = np.empty(n - m, np.int64)
    compact_copies(codes, perm, keep_tree, keep_in, pos, local, rows, kcodes, kperm, copy, head)
    del pos, local
    return rows, kcodes, kperm, copy, rows[kperm[head]]
