"""The level-set hierarchy of a spanning tree: multi-way single linkage.

The hierarchy of the level sets of a (mutual-reachability) graph is unique:
at each distinct edge weight ``w`` the components of the graph of the edges
of weight ``<= w`` are unions of the components of the edges ``< w``.  Any
minimum spanning tree of the graph has the same level sets, so the
hierarchy is computed from the tree by Kruskal's union-find with the edges
taken *by groups of equal weight*: a group joins the current components
into new ones, and each new component formed at ``w`` from parts
``p1..pk`` (k >= 2) is one node of height ``w`` with children ``p1..pk``.
With distinct weights this is the binary single-linkage tree; with ties it
does not depend on the order of the edges nor on which of several
equal-weight spanning trees was found.

Nodes: ``0..n-1`` are the points (leaves); internal nodes are numbered from
``n`` in the order they are formed (so a child's id is below its
parent's), the root is the last one.  Children are listed by the smallest
row they hold, which makes everything built on the hierarchy a function of
the level sets and the row numbering only.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ...errors import InputError
from ...kernels.cpu.bvh import radix_argsort
from .checks import check_edges


@njit(cache=True)
def _is_sorted(w):
    for i in range(1, w.shape[0]):
        if w[i] < w[i - 1]:
            return False
    return True


def edge_order(weight: np.ndarray) -> np.ndarray:
    """Indices of the edges by increasing weight (equal weights keep their
    order; the hierarchy does not depend on it).

    Parameters
    ----------
    weight : (m,) float32 or float64, finite and >= 0.

    Returns
    -------
    (m,) int64
    """
    m = weight.shape[0]
    if _is_sorted(weight):
        return np.arange(m, dtype=np.int64)
    w = weight + weight.dtype.type(0)  # -0.0 -> +0.0: the bits of w >= 0 sort as w
    if w.dtype == np.float32:
        return radix_argsort(w.view(np.uint32).astype(np.uint64), 32)
    return radix_argsort(w.view(np.uint64), 64)


# the union-find's record of a row, one cache line for what a root needs:
# parent, size of the component, its smallest row, its hierarchy node
_UP, _SIZE, _MIN, _NODE = 0, 1, 2, 3


@njit(cache=True)
def _find(uf, x):
    while uf[x, _UP] != x:  # path halving
        uf[x, _UP] = uf[uf[x, _UP], _UP]
        x = uf[x, _UP]
    return x


@njit(cache=True)
def _union(uf, ra, rb):
    """Join two roots (by size); returns the new root."""
    if uf[ra, _SIZE] < uf[rb, _SIZE]:
        ra, rb = rb, ra
    uf[rb, _UP] = ra
    uf[ra, _SIZE] += uf[rb, _SIZE]
    if uf[rb, _MIN] < uf[ra, _MIN]:
        uf[ra, _MIN] = uf[rb, _MIN]
    return ra


@njit(cache=True)
def _level_tree(src, dst, w, n):
    """Kruskal by groups of equal weight, the edges sorted by weight.

    Returns (node_parent (2n-1,) int64, -1 at the root and at unused ids;
    per internal node ``n + i``: height (n-1,) float64 and node (n-1, 3)
    int64 (size, smallest row, number of children); n_nodes; ok), ok False
    when the edges hold a cycle (not a spanning tree).
    """
    m = w.shape[0]
    n_int = max(n - 1, 0)
    uf = np.empty((n, 4), np.int64)
    for r in range(n):
        uf[r, _UP] = r
        uf[r, _SIZE] = 1
        uf[r, _MIN] = r
        uf[r, _NODE] = r
    node_parent = np.full(2 * n - 1, -1, np.int64)
    height = np.empty(n_int, np.float64)
    node = np.zeros((n_int, 3), np.int64)  # size, smallest row, number of children
    longest = 0  # the largest group of equal weights
    i = 0
    while i < m:
        j = i + 1
        while j < m and w[j] == w[i]:
            j += 1
        longest = max(longest, j - i)
        i = j
    a = np.empty(longest, np.int64)
    b = np.empty(longest, np.int64)
    big = longest > 1
    stamp_new = np.full(n if big else 0, -1, np.int64)  # group that made a root's new node
    new_of = np.empty(n if big else 0, np.int64)
    stamp_old = np.full(n if big else 0, -1, np.int64)  # group that attached an old root
    nd = n
    g = 0
    i = 0
    while i < m:
        wi = w[i]
        j = i + 1
        while j < m and w[j] == wi:
            j += 1
        if j == i + 1:  # a weight of its own: one binary merge
            ra = _find(uf, src[i])
            rb = _find(uf, dst[i])
            if ra == rb:
                return node_parent, height, node, nd, False
            node_parent[uf[ra, _NODE]] = nd
            node_parent[uf[rb, _NODE]] = nd
            r = _union(uf, ra, rb)
            uf[r, _NODE] = nd
            height[nd - n] = wi
            node[nd - n, 0] = uf[r, _SIZE]
            node[nd - n, 1] = uf[r, _MIN]
            node[nd - n, 2] = 2
            nd += 1
            i = j
            continue
        for e in range(j - i):  # the components before the group
            a[e] = _find(uf, src[i + e])
            b[e] = _find(uf, dst[i + e])
        for e in range(j - i):
            ra = _find(uf, a[e])
            rb = _find(uf, b[e])
            if ra == rb:
                return node_parent, height, node, nd, False
            _union(uf, ra, rb)
        for e in range(j - i):  # one node per new component, its parts below it
            r = _find(uf, a[e])
            if stamp_new[r] != g:
                stamp_new[r] = g
                new_of[r] = nd
                height[nd - n] = wi
                node[nd - n, 0] = uf[r, _SIZE]
                node[nd - n, 1] = uf[r, _MIN]
                nd += 1
            x = new_of[r]
            for old in (a[e], b[e]):
                if stamp_old[old] != g:
                    stamp_old[old] = g
                    node_parent[uf[old, _NODE]] = x
                    node[x - n, 2] += 1
        for e in range(j - i):
            r = _find(uf, a[e])
            uf[r, _NODE] = new_of[r]
        g += 1
        i = j
    return node_parent, height, node, nd, True


@njit(cache=True)
def _children(node_parent, node, n, n_nodes):
    """The children of each internal node in CSR form, each list by
    increasing smallest row: offsets (n_int + 1,) and kids (n_nodes - 1, 2)
    (child, its size).  Overwrites ``node[:, 2]``."""
    n_int = n_nodes - n
    offsets = np.zeros(n_int + 1, np.int64)
    for k in range(n_int):
        offsets[k + 1] = offsets[k] + node[k, 2]
        node[k, 2] = offsets[k]  # where its next child goes
    kids = np.empty((max(n_nodes - 1, 0), 2), np.int64)
    # every node x is reached from its smallest row r through nodes whose
    # smallest row is r: visiting rows in increasing order lists each
    # parent's children by increasing smallest row
    root = n_nodes - 1
    for r in range(n):
        x = r
        size = 1
        while x != root:
            k = node_parent[x] - n
            pos = node[k, 2]
            kids[pos, 0] = x
            kids[pos, 1] = size
            node[k, 2] = pos + 1
            if node[k, 1] != r:
                break
            x = k + n
            size = node[k, 0]
    return offsets, kids


def level_tree(source, target, weight, n):
    """The multi-way level-set hierarchy of a spanning tree.

    Parameters
    ----------
    source, target : (n-1,) integer array-like, rows in [0, n).
    weight : (n-1,) float32 or float64, finite and >= 0 (equal weights are
        compared exactly, in this type).
    n : int >= 1

    Returns
    -------
    height : (n_nodes - n,) float64, the level of internal node ``n + i``.
    offsets : (n_nodes - n + 1,) int64 and kids : (n_nodes - 1, 2) int64:
        the children of internal node ``n + i`` and their sizes (points
        under them) are the rows ``kids[offsets[i]:offsets[i + 1]]``, by
        increasing smallest row.
    The root is node ``n_nodes - 1`` (``n`` - 1 + number of internal nodes).

    Raises
    ------
    InputError
        When the edges are not a spanning tree of n points.
    """
    return _hierarchy(*check_edges(source, target, weight, n), int(n))


def _hierarchy(source, target, weight, n):
    """``level_tree`` on checked edges."""
    if not _is_sorted(weight):  # gathered once: the union-find reads them in sequence
        order = edge_order(weight)
        source, target, weight = source[order], target[order], weight[order]
        del order
    parent, height, node, n_nodes, ok = _level_tree(source, target, weight, n)
    if not ok:
        raise InputError("the edges are not a spanning tree (they hold a cycle)")
    n_int = n_nodes - n
    offsets, kids = _children(parent, node, n, n_nodes)
    return height[:n_int], offsets, kids
