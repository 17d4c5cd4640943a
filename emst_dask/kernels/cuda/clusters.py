"""CUDA kernels of HDBSCAN*'s level sets, runt pruning and per-point
results (``products.hdbscan.device_levels``, ``products.hdbscan.device``):
each one thread per item where the whole-array formulation takes several
passes and (n,) temporaries.

The index arrays of one call share one type, int32 below 2**31 dendrogram
nodes and int64 beyond (``products.chains.index_dtype``); heights are
float32 or float64.  Every result equals the whole-array formulation's, bit
for bit (the GPU tests compare them with the host).
"""
from __future__ import annotations

import functools

import numpy as np

from .backend import THREADS, grid_stride_blocks
from .dendrogram import INDEX_CTYPES, item_source, jump_in_place

_FLOAT = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}
_BY_INDEX = ("level_parents", "count_big", "holders_births", "climb_start",
             "holder_counts")
_BY_INDEX_AND_HEIGHT = ("level_up", "points_leave", "lambdas_at")


@functools.cache
def _module():
    import cupy

    code = item_source("clusters.cu")
    index = INDEX_CTYPES.values()
    names = ([f"{k}<{i}>" for k in _BY_INDEX for i in index]
             + [f"{k}<{i}, {f}>" for k in _BY_INDEX_AND_HEIGHT for i in index
                for f in _FLOAT.values()])
    return cupy.RawModule(code=code, options=("-std=c++14",), name_expressions=names)


def _launch(name, count, args, index, height=None):
    """``name<index's C type[, height's]>`` over ``count`` items, grid-stride."""
    if count <= 0:
        return
    types = INDEX_CTYPES[np.dtype(index)]
    if height is not None:
        types += ", " + _FLOAT[np.dtype(height)]
    _module().get_function(f"{name}<{types}>")(grid_stride_blocks(count), (THREADS,), args)


def level_set_parents(parent, w, n):
    """Step 2: every node's level-set parent, and the level-set nodes.

    Parameters
    ----------
    parent : (2n - 1,) int32 or int64 cupy array, C-contiguous, the binary
        dendrogram's parents of the tree's edges in the strict order (node
        ids, -1 for the root; ``products.dendrogram`` with ``parents``);
        overwritten.
    w : (m,) float32 or float64 cupy array, the heights, non-decreasing.
    n : int >= 2, m = n - 1.

    Returns
    -------
    mparent : ``parent``, now the top of the run of equal heights that holds
        each node's parent (a node id; -1 for the root).
    level : (m,) bool cupy array: the merges that are the top of their run.
    """
    import cupy

    it = parent.dtype
    m = n - 1
    args = (np.int64(m), np.int64(n))
    top = cupy.empty(m, it)
    _launch("level_up", m, (parent, cupy.ascontiguousarray(w), top) + args, it, w.dtype)
    jump_in_place(top)
    level = cupy.empty(m, bool)
    _launch("level_parents", 2 * m, (top, parent, level) + args, it)
    return parent, level


def holders_and_births(mparent, level, size, n, min_cluster_size):
    """The big merges of the runt pruning.

    Parameters
    ----------
    mparent, level : as ``level_set_parents`` returns them.
    size : (m,) cupy array of the index type, the points under each merge.
    n : int; min_cluster_size : int >= 2.

    Returns
    -------
    holder : (m,) bool cupy array, the big merges (level-set nodes of at
        least ``min_cluster_size`` points) and the root.
    birth : (m,) bool cupy array, the big children of a merge with two or
        more, and the root: where clusters are born.
    """
    import cupy

    it, m = mparent.dtype, n - 1
    args = (np.int64(m), np.int64(n), np.int64(min_cluster_size))
    n_big = cupy.zeros(m, it)
    _launch("count_big", m - 1, (mparent, level, size, n_big) + args, it)
    holder = cupy.empty(m, bool)
    birth = cupy.empty(m, bool)
    _launch("holders_births", m, (mparent, level, size, n_big, holder, birth) + args, it)
    return holder, birth


def highest_small(mparent, level, size, n, min_cluster_size):
    """(m,) cupy array of the index type: the top of every merge's climb
    through small level-set merges (a merge index; itself for a merge that
    does not climb)."""
    import cupy

    it, m = mparent.dtype, n - 1
    climb = cupy.empty(m, it)
    _launch("climb_start", m, (mparent, level, size, climb, np.int64(m), np.int64(n),
                               np.int64(min_cluster_size)), it)
    return jump_in_place(climb)


def points_leave(top, mparent, size, w, where, holders, holder_birth, n, min_cluster_size, B):
    """Where and from which cluster every point leaves, in one pass, and
    the points leaving at every holder.

    Parameters
    ----------
    top : (m,) the ``highest_small`` of every merge.
    mparent : (2n - 1,) level-set parents (node ids).
    size : (m,) the points under every merge.
    w : (m,) float32 or float64, the heights.
    where : (m,) the holder index of every holder merge (-1 elsewhere).
    holders : (h,) integer, the holder merges (big merges and the root), by
        index.
    holder_birth : (h,) the birth (an index into the B births) holding
        each holder.
    n, min_cluster_size, B : int, the numbers of points, the smallest
        cluster, the number of births.
    All index arrays are cupy arrays of one index type.

    Returns
    -------
    point_cluster : (n,) index type, the birth every point leaves.
    point_lambda : (n,) float64, the lambda it leaves at.
    holder_count : (h,) int64, the points leaving at each holder.
    min_row : (B,) index type, the smallest row leaving each birth (n for
        none).
    """
    import cupy

    it = mparent.dtype
    h = int(holders.shape[0])
    point_cluster = cupy.empty(n, it)
    point_lambda = cupy.empty(n, cupy.float64)
    min_row = cupy.full(B, n, it)
    _launch("points_leave", n, (top, mparent, size, cupy.ascontiguousarray(w), where,
                                holder_birth, point_lambda, point_cluster, min_row,
                                np.int64(n), np.int64(min_cluster_size)),
            it, w.dtype)
    holder_count = cupy.zeros(h, cupy.int64)  # modulo 2**64 while summing
    holders = holders.astype(it, copy=False)  # flatnonzero's are int64
    _launch("holder_counts", h, (holders, mparent, size, where, holder_count, np.int64(h),
                                 np.int64(n)), it)
    return point_cluster, point_lambda, holder_count, min_row


@functools.cache
def _label_kernel():
    import cupy

    # device.extract_xp's whole-array steps, in their order and roundings
    return cupy.ElementwiseKernel(
        "I pcl, float64 lam, raw I anc, raw int64 rank, raw float64 death, "
        "raw float64 smax, bool single_root, float64 threshold",
        "int64 label, float64 prob, float64 score",
        """
        I sel = anc[pcl];
        bool keep = sel >= 0 && (single_root ? (sel != 0 || lam >= threshold) : sel != 0);
        if (sel < 0) sel = 0;
        label = keep ? rank[sel] : -1;
        double dth = death[sel];
        bool lam_inf = isinf(lam);
        double pr = lam_inf ? 0.0 : lam;
        if (dth < pr) pr = dth;
        bool dth_zero = dth == 0.0;
        pr = pr / (dth_zero ? 1.0 : dth);
        pr = (dth_zero || lam_inf) ? 1.0 : pr;
        prob = keep ? pr : 0.0;
        double mx = smax[pcl];
        bool lam_finite = isfinite(lam);
        bool none_below = mx == 0.0 || !lam_finite;
        bool mx_plain = isfinite(mx) && mx != 0.0;
        if (!mx_plain) mx = 1.0;
        double sc = (mx - (lam_finite ? lam : 0.0)) / mx;
        sc = mx_plain ? sc : 1.0;
        score = none_below ? 0.0 : sc;
        """, "emst_hdbscan_label_points")


def label_points(pcl, lam, anc, rank, death, smax, single_root, threshold):
    """Labels, probabilities and GLOSH outlier scores, one thread a point.

    Parameters
    ----------
    pcl : (n,) int32 or int64 cupy array, the cluster every point leaves.
    lam : (n,) float64 cupy array, the lambda it leaves at.
    anc : (K,) cupy array of pcl's type, the nearest selected cluster at or
        above each cluster (-1 for none).
    rank : (K,) int64 cupy array, each selected cluster's label.
    death : (K,) float64 cupy array, the largest lambda of a point leaving
        each cluster.
    smax : (K,) float64 cupy array, the largest lambda in each subtree.
    single_root : bool, the root is the one selected cluster
        (``allow_single_cluster``); threshold : float, the lambda a point
        needs to stay in it.

    Returns
    -------
    label : (n,) int64, -1 for noise; prob, score : (n,) float64.
    """
    return _label_kernel()(pcl, lam, anc, rank, death, smax, bool(single_root),
                           float(threshold))


@functools.cache
def _row_key_kernels():
    import cupy

    key = cupy.ElementwiseKernel(
        "I cluster, int64 count", "uint64 key",
        "key = count > 0 ? ((unsigned long long)cluster << 32) | (unsigned long long)i"
        " : ~0ULL", "emst_hdbscan_row_keys")
    split = cupy.ElementwiseKernel(
        "uint64 key", "int64 row, I cluster",
        "row = (long long)(key & 0xffffffffULL); cluster = (I)(key >> 32)",
        "emst_hdbscan_split_row_keys")
    return key, split


def row_keys(cluster, count):
    """(h,) uint64 cupy: ``cluster << 32 | row`` for the rows of count > 0,
    the largest key for the others (so that a sort puts them last).

    Parameters
    ----------
    cluster : (h,) int32 or int64 cupy array, below 2**32; h < 2**32.
    count : (h,) int64 cupy array.
    """
    import cupy

    key = cupy.empty(cluster.shape[0], cupy.uint64)
    _row_key_kernels()[0](cluster, count, key)
    return key


def split_row_keys(key, dtype):
    """``row_keys``' keys apart: ((r,) int64 rows, (r,) ``dtype`` clusters)."""
    import cupy

    row = cupy.empty(key.shape[0], cupy.int64)
    cluster = cupy.empty(key.shape[0], dtype)
    _row_key_kernels()[1](key, row, cluster)
    return row, cluster


def lambdas_at(w, at):
    """(c,) float64 cupy: lambda = 1 / w[at] (+inf at height 0), one pass.

    Parameters
    ----------
    w : (m,) float32 or float64 cupy array, the heights.
    at : (c,) int32 or int64 cupy array, indices into ``w``.
    """
    import cupy

    lam = cupy.empty(at.shape[0], cupy.float64)
    _launch("lambdas_at", int(at.shape[0]), (at, cupy.ascontiguousarray(w), lam,
                                            np.int64(at.shape[0])), at.dtype, w.dtype)
    return lam
