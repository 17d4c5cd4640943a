"""HDBSCAN* where the tree is: the condensed tree, the stabilities and the
per-point results, whole-array (CuPy on the device; numpy in the tests).

Only the cluster tree goes to the host (a row per cluster: about n /
min_cluster_size at most), where the selection runs (``select``), as for
host trees.  Steps, from the mutual-reachability tree's edges (1 to 3 in
``device_levels.level_set_clusters``):

1. the binary single-linkage dendrogram in the strict edge order, in
   parallel (``products.dendrogram``);
2. the level sets: a binary node whose parent has the same height is part of
   its parent's merge (merges at one height are one merge); pointer jumping
   gives every node the top of its run, the node of the level-set hierarchy;
3. the runt pruning: a node is *big* with at least ``min_cluster_size``
   points; the big children of a node with two or more big children are
   born as clusters; every point leaves the cluster of the lowest big node
   above it, at that node's lambda (pointer jumping through the small nodes
   below it and up the big nodes to the nearest birth);
4. clusters numbered as on the host (breadth first, siblings by their
   smallest row), stabilities summed per cluster by increasing lambda in
   the host's order of operations, so the selection sees the same numbers
   (from a row per big node, the points and clusters leaving there, rather
   than a row per point);
5. labels, probabilities and GLOSH scores, one gather per point.

The result equals ``extract`` on the host (the tests compare them).
"""
from __future__ import annotations

import functools

import numpy as np
from numba import njit

from ...arrays import stable_argsort, to_host
from ...engine.boruvka import Timers
from .condense import CONDENSED_DTYPE
from .device_levels import level_set_clusters
from .result import HDBSCANResult
from .scores import _nearest_selected, persistence_of_sizes
from .select import _select
from .tables import RUN_BLOCK, ClusterTable


@njit(cache=True)
def _preorder(parent, by_low):
    """Depth-first preorder of the births' tree (root last in the input,
    parents after children), the children of a birth by increasing ``low``
    (``by_low``: the births in that order)."""
    B = parent.shape[0]
    kids = np.zeros(B + 1, np.int64)
    for b in range(B - 1):
        kids[parent[b] + 1] += 1
    for b in range(B):
        kids[b + 1] += kids[b]
    fill = kids[:-1].copy()
    lst = np.empty(max(B - 1, 0), np.int64)
    for b in by_low:  # so every birth's children are listed by low
        if b != B - 1:
            lst[fill[parent[b]]] = b
            fill[parent[b]] += 1
    pre = np.empty(B, np.int64)
    stack = np.empty(B, np.int64)
    stack[0] = B - 1
    top, seen = 1, 0
    while top:
        top -= 1
        c = stack[top]
        pre[c] = seen
        seen += 1
        for i in range(kids[c + 1] - 1, kids[c] - 1, -1):  # the smallest row on top
            stack[top] = lst[i]
            top += 1
    return pre


@njit(cache=True)
def _upward(parent, min_row, spine):
    """Smallest row below each birth, and the depth of the node each birth
    is born at (births ordered children first, the root last)."""
    B = parent.shape[0]
    low = min_row.copy()
    for b in range(B - 1):
        low[parent[b]] = min(low[parent[b]], low[b])
    end = np.empty(B, np.int64)  # depth of the node a cluster ends at
    split = np.zeros(B, np.int64)
    end[B - 1] = spine[B - 1] - 1
    for b in range(B - 2, -1, -1):  # parents first
        split[b] = end[parent[b]]
        end[b] = split[b] + spine[b]  # born one below the split, spine nodes on
    return low, split


@njit(cache=True)
def _number_by_depth(split, pre):
    """number[b] = 1 + the place of birth b in the order (split, pre): the
    births in preorder, dealt stably into buckets by split.  ``split``,
    ``pre``: (B - 1,) of the births but the root (``pre`` a permutation of
    [1, B), the root's place 0); number: (B,) int64, 0 for the root."""
    B = pre.shape[0] + 1
    at = np.empty(B, np.int64)  # the birth at every preorder place
    for b in range(B - 1):
        at[pre[b]] = b
    start = np.zeros(split.max() + 2, np.int64)
    for b in range(B - 1):
        start[split[b] + 1] += 1
    for d in range(start.shape[0] - 1):
        start[d + 1] += start[d]
    number = np.zeros(B, np.int64)
    for q in range(1, B):
        b = at[q]
        number[b] = 1 + start[split[b]]
        start[split[b]] += 1
    return number


def host_numbers(parent, min_row, spine):
    """The host's cluster ids (minus n) of the births.

    The host numbers clusters as it meets them in a breadth-first walk of
    the hierarchy's big nodes, children by increasing smallest row: the
    clusters born at one node take consecutive numbers, and the nodes are
    met by depth, then (at one depth, so in different clusters) in the
    depth-first order of the clusters holding them.

    Parameters
    ----------
    parent : (B,) int64, the parent birth (-1 for the root, which is last;
        children before parents).
    min_row : (B,) int64, the smallest row leaving each birth.
    spine : (B,) int64, the big nodes of each birth's spine.

    Returns
    -------
    (B,) int64, 0 for the root.
    """
    B = parent.shape[0]
    low, split = _upward(parent, min_row, spine)
    # siblings hold disjoint points, so their smallest rows differ: any sort
    # by low lists every birth's children in one order
    pre = _preorder(parent, np.argsort(low))
    # by (split, pre): the parents of the clusters born at one depth are not
    # nested (a cluster ends deeper than its parent), so their depth-first
    # order is their children's, and siblings come in ``pre`` by low
    if B < 2:
        return np.zeros(B, np.int64)
    split, pre = split[:-1], pre[:-1]  # the root, last, is number 0
    deepest = int(split.max())
    if deepest < 4 * B:  # depths in a bucket each
        return _number_by_depth(split, pre)
    if deepest < (1 << 62) // B:  # long spines: one sort of unique keys
        order = np.argsort(split * B + pre)
    else:
        order = np.lexsort((pre, split))
    number = np.zeros(B, np.int64)
    number[order] = np.arange(1, B)
    return number


@njit(cache=True)
def _subtree_max(cparent, death):
    """The largest lambda in each cluster's subtree (clusters numbered
    parents first)."""
    top = death.copy()
    for k in range(top.shape[0] - 1, 0, -1):
        top[cparent[k]] = max(top[cparent[k]], top[k])
    return top


def _point_results(xp, pcl, lam, anc, rank, death, smax, single_root, threshold):
    """Labels, probabilities and GLOSH scores of the points (``scores``'
    ``_label_points`` and ``_glosh``), one gather per point.

    Parameters
    ----------
    pcl : (n,) int32 or int64 array of ``xp``, the cluster every point leaves.
    lam : (n,) float64 array of ``xp``, the lambda it leaves at.
    anc, rank : (K,) int64 numpy, the nearest selected cluster at or above
        each cluster (-1 for none), and each selected cluster's label.
    death, smax : (K,) float64 numpy, the largest lambda of a point leaving
        each cluster, and in each cluster's subtree.
    single_root : bool, the root is the one selected cluster; threshold :
        float, the lambda a point needs to stay in it.

    Returns
    -------
    labels : (n,) int64, -1 for noise; prob, scores : (n,) float64; arrays
    of ``xp``.
    """
    anc_x = xp.asarray(anc.astype(pcl.dtype))
    if xp is not np:  # one thread a point
        from ...kernels.cuda.clusters import label_points

        return label_points(pcl, lam, anc_x, xp.asarray(rank), xp.asarray(death),
                            xp.asarray(smax), single_root, threshold)
    # in place where it can, so that few (n,) temporaries are held at once
    sel = anc_x[pcl]  # the nearest selected cluster at or above
    del anc_x
    keep = sel >= 0
    keep &= (sel != 0) | (lam >= threshold) if single_root else sel != 0
    xp.maximum(sel, 0, out=sel)
    labels = xp.asarray(rank)[sel]
    xp.copyto(labels, -1, where=~keep)
    d = xp.asarray(death)[sel]
    del sel
    inf = xp.isinf(lam)
    prob = xp.where(inf, 0.0, lam)
    xp.minimum(prob, d, out=prob)
    zero = d == 0.0
    xp.copyto(d, 1.0, where=zero)
    prob /= d
    del d
    zero |= inf
    xp.copyto(prob, 1.0, where=zero)
    xp.copyto(prob, 0.0, where=~keep)
    del keep, inf, zero

    mx = xp.asarray(smax)[pcl]
    finite = xp.isfinite(lam)
    zero = (mx == 0.0) | ~finite
    plain = xp.isfinite(mx) & (mx != 0.0)
    xp.copyto(mx, 1.0, where=~plain)
    scores = xp.where(finite, lam, 0.0)
    xp.subtract(mx, scores, out=scores)
    scores /= mx
    del mx, finite
    xp.copyto(scores, 1.0, where=~plain)
    xp.copyto(scores, 0.0, where=zero)
    return labels, prob, scores


@njit(cache=True)
def _run_sums_host(offsets, run_lam, run_cnt, birth):
    K = offsets.shape[0] - 1
    stab = np.zeros(K, np.float64)
    for k in range(K):
        for start in range(offsets[k], offsets[k + 1], RUN_BLOCK):
            part = 0.0
            for i in range(start, min(start + RUN_BLOCK, offsets[k + 1])):
                part += (run_lam[i] - birth[k]) * run_cnt[i]
            stab[k] += part
    return stab


_RUN_SUMS = r"""
// The host's roundings (tables._table): runs summed a block at a time, the
// block sums in order; no FMA contraction.
extern "C" __global__ void block_sums(const long long* offsets, const long long* first_block,
                                      const long long* block_cluster, const double* lam,
                                      const long long* cnt, const double* birth, double* part,
                                      long long n_blocks, long long run_block) {
    long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (j >= n_blocks) return;
    long long k = block_cluster[j];
    long long start = offsets[k] + (j - first_block[k]) * run_block;
    long long end = min(start + run_block, offsets[k + 1]);
    double s = 0.0, b = birth[k];
    for (long long i = start; i < end; ++i)
        s = __dadd_rn(s, __dmul_rn(__dsub_rn(lam[i], b), (double)cnt[i]));
    part[j] = s;
}

extern "C" __global__ void cluster_sums(const long long* first_block, const double* part,
                                        double* stab, long long K) {
    long long k = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (k >= K) return;
    double s = 0.0;
    for (long long j = first_block[k]; j < first_block[k + 1]; ++j) s = __dadd_rn(s, part[j]);
    stab[k] = s;
}
"""


def _run_sums(xp, offsets, run_lam, run_cnt, birth):
    """Per cluster, ``sum((lambda - birth) * count)`` over its runs in order,
    with the host's roundings (``tables.RUN_BLOCK`` runs a block)."""
    if xp is np:
        return _run_sums_host(offsets, run_lam, run_cnt, birth)
    import cupy

    K = offsets.shape[0] - 1
    stab = cupy.zeros(K, cupy.float64)
    if K == 0:
        return stab
    blocks = (offsets[1:] - offsets[:-1] + RUN_BLOCK - 1) // RUN_BLOCK
    first = cupy.zeros(K + 1, cupy.int64)
    cupy.cumsum(blocks, out=first[1:])
    n_blocks = int(first[-1])
    cluster = cupy.searchsorted(first, cupy.arange(n_blocks, dtype=cupy.int64),
                                side="right") - 1
    part = cupy.empty(n_blocks, cupy.float64)
    mod = _run_sums_module()
    mod.get_function("block_sums")(
        (-(-n_blocks // 128),), (128,),
        (offsets, first, cluster, run_lam, run_cnt, birth, part, np.int64(n_blocks),
         np.int64(RUN_BLOCK)))
    mod.get_function("cluster_sums")((-(-K // 128),), (128,), (first, part, stab, np.int64(K)))
    return stab


@functools.cache
def _run_sums_module():
    import cupy

    return cupy.RawModule(code=_RUN_SUMS)


def _stabilities(xp, rows, birth, K):
    """Runs of equal (cluster, lambda), summed per cluster by increasing lambda.

    Parameters
    ----------
    rows : list of three (h,) arrays of ``xp``: the clusters (integer), the
        lambdas (float64) and the counts (int64) of the rows (points or child
        clusters leaving a cluster at a lambda, with their count) by
        increasing lambda, equal lambdas adjacent; rows of count 0 are
        skipped.  Emptied here, each array dropped once read, so that the
        caller holds none of them through the sort.
    birth : (K,) float64 array of ``xp``; K : int.

    Returns
    -------
    (K,) float64 array of ``xp``.
    """
    row_cluster, row_lam, row_count = rows
    rows.clear()
    # the rows with a count, by cluster, then by row (increasing lambda)
    row, c = _by_cluster(xp, row_cluster, row_count, K)
    del row_cluster
    lam = row_lam[row]
    del row_lam
    cnt = row_count[row]
    del row_count, row
    r = c.shape[0]
    new = xp.ones(r, bool)
    new[1:] = (c[1:] != c[:-1]) | (lam[1:] != lam[:-1])
    starts = xp.flatnonzero(new)  # the runs' first rows
    del new
    # a run's count: the running total at its last row less that before it
    total = xp.cumsum(cnt, out=cnt)
    last = xp.empty_like(starts)
    last[:-1] = starts[1:]
    last[-1:] = r
    last -= 1
    run_cnt = total[last]
    del last
    run_cnt[1:] -= total[starts[1:] - 1]
    del total, cnt
    run_cluster = c[starts]
    del c
    run_lam = lam[starts]
    del lam, starts
    offsets = xp.searchsorted(run_cluster, xp.arange(K + 1, dtype=run_cluster.dtype))
    del run_cluster
    return _run_sums(xp, offsets.astype(xp.int64, copy=False), run_lam, run_cnt, birth)


def _by_cluster(xp, cluster, count, K):
    """The rows of count > 0 by (cluster, row): ((r,) int64 rows, (r,) their
    clusters, of ``cluster``'s dtype; the clusters are below K).  One sort of
    (cluster << 32 | row) uint64 keys, the rows without a count keyed last,
    where clusters and rows fit 32 bits (an (h,) index and a stable
    argsort's arrays otherwise)."""
    h = cluster.shape[0]
    if h > 1 << 32 or K > 1 << 32:
        keep = xp.flatnonzero(count > 0)
        c = cluster[keep]
        by = stable_argsort(xp, c)
        return keep[by], c[by]
    r = int((count > 0).sum())
    if xp is not np:  # one pass each way
        from ...kernels.cuda.clusters import row_keys, split_row_keys

        key = row_keys(cluster, count)
        key.sort()
        return split_row_keys(key[:r], cluster.dtype)
    key = xp.where(count > 0, (cluster.astype(xp.uint64) << xp.uint64(32))
                   | xp.arange(h, dtype=xp.uint64), xp.uint64(2**64 - 1))
    key.sort()
    key = key[:r]
    return ((key & xp.uint64(2**32 - 1)).astype(xp.int64),
            (key >> xp.uint64(32)).astype(cluster.dtype))


def extract_xp(xp, s, t, w, n, min_cluster_size, method, allow_single, eps, max_size,
               timers=None, hierarchy=None):
    """``extract`` on checked edges of a spanning tree, where they are.

    Parameters
    ----------
    xp : numpy or cupy.
    s, t : (n-1,) int64; w : (n-1,) float32/float64 arrays of ``xp``.
    n : int >= 2; the other parameters checked, as ``extract``'s.
    timers : ``engine.boruvka.Timers``, optional; by default the device is
        synchronised at each phase's end and the seconds are the result's
        ``timings``.
    hierarchy : dict of arrays, optional (``level_set_clusters``).

    Returns
    -------
    ``HDBSCANResult`` whose labels, probabilities and outlier scores are
    arrays of ``xp``; its condensed tree is built on the host when first
    read (``DeviceCondensed``).
    """
    if timers is None:
        timers = Timers(sync=(lambda: None) if xp is np else xp.cuda.Device().synchronize)
    got = level_set_clusters(xp, s, t, w, n, min_cluster_size, timers, hierarchy)
    timers.start()
    host = {k: to_host(got[k]) for k in ("parent", "birth_lambda", "size", "min_row",
                                           "death", "spine")}
    number = host_numbers(host["parent"], host["min_row"], host["spine"])
    K = number.shape[0]
    inv = np.empty(K, np.int64)
    inv[number] = np.arange(K)
    cparent = np.full(K, -1, np.int64)
    cparent[1:] = number[host["parent"][inv[1:]]]
    birth = host["birth_lambda"][inv]
    size = host["size"][inv]
    death = host["death"][inv]
    if K > 1:
        np.maximum.at(death, cparent[1:], birth[1:])
        size[0] = size[1:][cparent[1:] == 0].sum()

    number_d = xp.asarray(number.astype(got["point_cluster"].dtype))  # the index dtype
    pcl = number_d[got["point_cluster"]]  # the cluster each point leaves
    lam = got["point_lambda"]
    rows = [number_d[got["holder_birth"]], got["holder_lambda"], got["holder_count"]]
    del number_d, got
    timers.stop("cluster_tree")
    stability = to_host(_stabilities(xp, rows, xp.asarray(birth), K))  # empties rows
    timers.stop("stabilities")
    table = ClusterTable(cparent, birth, death, size, stability)
    selected, eom_stab = _select(table, n, method, allow_single, eps, max_size)
    timers.stop("selection")

    # labels, probabilities and GLOSH scores (``scores._label_points``)
    mask = np.zeros(K, np.bool_)
    rank = np.full(K, -1, np.int64)
    k_sel = selected - n
    mask[k_sel] = True
    rank[k_sel] = np.arange(k_sel.shape[0])
    anc = _nearest_selected(cparent, mask)
    single_root = bool(allow_single and k_sel.shape[0] == 1 and mask[0])
    threshold = 1.0 / eps if eps != 0.0 else float(death[0])
    smax = _subtree_max(cparent, death)  # GLOSH: the largest lambda below each cluster
    labels, prob, scores = _point_results(xp, pcl, lam, anc, rank, death, smax, single_root,
                                          threshold)
    sizes = to_host(xp.bincount(labels + 1, minlength=k_sel.shape[0] + 1)[1:])
    lam_max = max(float(lam.max()), float(birth.max()) if K else 0.0)
    persistence = persistence_of_sizes(sizes, selected, eom_stab, lam_max, n)
    condensed = DeviceCondensed(xp, cparent, birth, size, pcl, lam, n)
    timers.stop("points")
    return HDBSCANResult(labels, prob, scores, condensed, stability, persistence, selected,
                         dict(timers.seconds))


class DeviceCondensed:
    """The condensed tree of a device result, built on the host on demand
    (``np.asarray``): the cluster rows by child id, then a row per point by
    row number (the host lists the same rows breadth first)."""

    def __init__(self, xp, cparent, birth, size, point_cluster, point_lambda, n):
        self._parts = (xp, cparent, birth, size, point_cluster, point_lambda, n)
        self._array = None

    def to_numpy(self) -> np.ndarray:
        if self._array is None:
            _, cparent, birth, size, pcl, lam, n = self._parts
            K = cparent.shape[0]
            out = np.empty(K - 1 + n, CONDENSED_DTYPE)
            out["parent"][:K - 1] = cparent[1:] + n
            out["child"][:K - 1] = np.arange(1, K) + n
            out["lambda_val"][:K - 1] = birth[1:]
            out["child_size"][:K - 1] = size[1:]
            out["parent"][K - 1:] = to_host(pcl).astype(np.int64) + n
            out["child"][K - 1:] = np.arange(n)
            out["lambda_val"][K - 1:] = to_host(lam)
            out["child_size"][K - 1:] = 1
            self._array = out
            self._parts = None
        return self._array

    def __array__(self, dtype=None, copy=None):
        return self.to_numpy() if dtype is None else self.to_numpy().astype(dtype)
