"""Soft memberships: hdbscan's ``membership_vector`` and
``all_points_membership_vectors`` on a fitted
``emst_dask.HDBSCAN(prediction_data=True)`` (the prediction data and the
definitions: ``prediction``).

Each is hdbscan's product of a distance vector (inverse distance to each
cluster's exemplars, normalised) and an outlier vector (a softmax of the
merge heights of the point's cluster with each selected cluster), times the
probability of being in some cluster.  The merge heights come from a table
per (cluster, selected cluster) up to ``MERGE_TABLE_ENTRIES``, else from a
walk up the tree per point; the exemplar distances from
``exemplar_search`` (exact, pruned).  ``all_points_membership_vectors``
works in row blocks and returns at most ``membership_max_bytes()`` as one
array.
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

from ...errors import InputError
from .exemplar_search import nearest_exemplar_distances
from .prediction import (_DBL_MAX, BLOCK_ROWS, PredictionData, _data, _new_points,
                         nearest_mutual_reachability)

#: all_points_membership_vectors returns at most this many bytes as one
#: array (n * k * 8); beyond it give ``out=`` or iterate over the blocks.
#: Set with dask.config ``emst_dask.hdbscan.membership-max-bytes``.
MEMBERSHIP_MAX_BYTES = 8 * 2**30


#: merge heights are tabulated per (cluster, selected cluster) up to this
#: many entries (8 bytes each); beyond, each point walks the tree
MERGE_TABLE_ENTRIES = 2**25


@njit(cache=True)
def _parting(left, right, cparent, birth):
    """The lambda at which clusters ``left`` and ``right`` part (their lowest
    common ancestor's split), NaN when one is at or above the other."""
    took_l = took_r = False
    last = left
    while left != right:
        if left > right:  # a parent's index is below its children's
            took_l = True
            last = left
            left = cparent[left]
        else:
            took_r = True
            last = right
            right = cparent[right]
    return birth[last] if (took_l and took_r) else np.nan


@njit(cache=True, parallel=True)
def _merge_table(cparent, birth, sel):
    """(K, k): the lambda at which cluster c and selected cluster j part
    (their lowest common ancestor's split), NaN where one is at or above
    the other (hdbscan's merge_height then takes the point's own lambda)."""
    K, k = cparent.shape[0], sel.shape[0]
    out = np.empty((K, k), np.float64)
    for c in prange(K):
        for j in range(k):
            out[c, j] = _parting(cparent[c] * 0 + c, sel[j], cparent, birth)  # int64
    return out


@njit(cache=True, parallel=True)
def _merge_walk(pc, plam, sel, cparent, birth):
    B, k = pc.shape[0], sel.shape[0]
    out = np.empty((B, k), np.float64)
    for b in prange(B):
        for j in range(k):
            h = _parting(pc[b], sel[j], cparent, birth)
            out[b, j] = plam[b] if np.isnan(h) else h
    return out


def membership_vector(clusterer, points_to_predict):
    """Soft membership of new points in each cluster (hdbscan's
    ``membership_vector``).

    Parameters
    ----------
    clusterer : ``emst_dask.HDBSCAN`` fitted with ``prediction_data=True``
    points_to_predict : (m, d) array-like

    Returns
    -------
    (m, k) float64: entry ``[i, j]`` the probability that point i is in
    cluster j; (m, 0) without clusters.  CuPy, computed on the device, for
    a model fitted on CuPy points.
    """
    pd = _data(clusterer)
    if pd.on_device:
        from . import device_prediction

        return device_prediction.membership_vector(pd, points_to_predict)
    X = _new_points(pd, points_to_predict)
    k = pd.n_clusters
    if k == 0:
        return np.zeros((X.shape[0], 0))
    nbr, lam = nearest_mutual_reachability(pd, X)
    lam = np.minimum(lam, pd.point_lambda[nbr])
    pc = pd.point_cluster[nbr]
    out = np.empty((X.shape[0], k))
    for start in range(0, X.shape[0], BLOCK_ROWS):  # the merge heights a block at a time
        b = slice(start, start + BLOCK_ROWS)
        D = nearest_exemplar_distances(pd.exemplar_index(), X[b], out[b])
        table, rows = _merge_rows(pd, pc[b], lam[b])
        _membership_combine(D, table, rows, pc[b], lam[b], pd.death, pd.selected)
    return out


def _merge_rows(pd: PredictionData, pc, plam):
    """The merge heights of points leaving clusters ``pc`` at lambdas
    ``plam`` as (table, rows): row b's are ``table[rows[b]]``, NaN standing
    for the point's own lambda; the (clusters, k) table when it is small
    enough, else a (B, k) walk per point."""
    if pd.cparent.shape[0] * pd.n_clusters <= MERGE_TABLE_ENTRIES:
        if getattr(pd, "_merge", None) is None:
            pd._merge = _merge_table(pd.cparent, pd.birth, pd.selected)
        return pd._merge, pc
    return (_merge_walk(pc, plam, pd.selected, pd.cparent, pd.birth),
            np.arange(pc.shape[0], dtype=np.int64))


@njit(cache=True)
def _heights(table, r, lam, h):
    """h = table[r] with NaN as lam; returns the first largest's index."""
    hmax = -np.inf
    arg = 0
    for j in range(h.shape[0]):
        v = table[r, j]
        h[j] = lam if np.isnan(v) else v
        if h[j] > hmax:
            hmax = h[j]
            arg = j
    return arg


@njit(cache=True)
def _inverse_distances(D, b, w):
    """w = hdbscan's distance vector of row b of the exemplar distances D:
    1 / d (finfo.max / k at 0), normalised."""
    k = w.shape[0]
    tot = 0.0
    for j in range(k):
        w[j] = 1.0 / D[b, j] if D[b, j] != 0.0 else _DBL_MAX / k
        tot += w[j]
    for j in range(k):
        w[j] = w[j] / tot


@njit(cache=True)
def _softmax(s):
    smax = -np.inf
    for j in range(s.shape[0]):
        if s[j] > smax:  # NaN never compares larger: nanmax
            smax = s[j]
    tot = 0.0
    for j in range(s.shape[0]):
        s[j] = np.exp(s[j] - smax)
        tot += s[j]
    for j in range(s.shape[0]):
        s[j] = s[j] / tot


@njit(cache=True, parallel=True)
def _membership_combine(D, table, rows, pc, lam, death, sel):
    """In place on D, the (B, k) exemplar distances: hdbscan's
    membership_vector, row by row (its distance vector to the power 0.5
    times the softmax of ``death / (death - merge height)`` squared,
    normalised, times the probability of being in some cluster)."""
    B, k = D.shape
    for b in prange(B):
        h = np.empty(k)
        w = np.empty(k)
        s = np.empty(k)
        arg = _heights(table, rows[b], lam[b], h)
        ml = death[pc[b]]
        for j in range(k):
            den = ml - h[j]
            s[j] = ml / (1e-8 if den <= 0.0 else den)
        _softmax(s)
        _inverse_distances(D, b, w)
        tot = 0.0
        for j in range(k):
            w[j] = np.sqrt(w[j]) * (s[j] * s[j])
            tot += w[j]
        ins = h[arg] / (max(lam[b], death[sel[arg]]) + 1e-8)
        for j in range(k):
            D[b, j] = w[j] / tot * ins
    return D


@njit(cache=True, parallel=True)
def _all_points_combine(D, table, rows, pc, pl, death, sel):
    """In place on D, the (B, k) exemplar distances: hdbscan's
    all_points_membership_vectors, row by row (its distance vector times
    the softmax of ``exp(-(death + 1e-8) / merge height)``, normalised,
    times the probability of being in some cluster)."""
    B, k = D.shape
    for b in prange(B):
        h = np.empty(k)
        w = np.empty(k)
        s = np.empty(k)
        arg = _heights(table, rows[b], pl[b], h)
        a = death[pc[b]] + 1e-8
        for j in range(k):
            s[j] = np.exp(-(a / h[j]))
        _softmax(s)
        _inverse_distances(D, b, w)
        tot = 0.0
        for j in range(k):
            w[j] = w[j] * s[j]
            tot += w[j]
        ins = h[arg] / max(pl[b], death[sel[arg]])
        for j in range(k):
            D[b, j] = w[j] / tot * ins
    return D


def _all_points_block(pd: PredictionData, rows):
    pc, pl = pd.point_cluster[rows], pd.point_lambda[rows]
    D = nearest_exemplar_distances(pd.exemplar_index(), pd.raw_data[rows])
    table, trows = _merge_rows(pd, pc, pl)
    return _all_points_combine(D, table, trows, pc, pl, pd.death, pd.selected)


def iter_all_points_membership_vectors(clusterer, block_rows: int | None = None):
    """``all_points_membership_vectors`` one block of rows at a time.

    Parameters
    ----------
    clusterer : ``emst_dask.HDBSCAN`` fitted with ``prediction_data=True``
    block_rows : int, optional
        Rows a block (default ``BLOCK_ROWS``; on the device
        ``device_prediction.block_rows(k)``: about 2 GiB of temporaries).

    Yields
    ------
    start : int, the block's first row
    block : (rows, k) float64, CuPy on the device for a model fitted on
        CuPy points
    """
    pd = _data(clusterer)
    n = pd.raw_data.shape[0]
    if block_rows is None:
        if pd.on_device:
            from .device_prediction import block_rows as device_rows

            block_rows = device_rows(pd.n_clusters)
        else:
            block_rows = BLOCK_ROWS
    if not isinstance(block_rows, (int, np.integer)) or block_rows < 1:
        raise InputError(f"block_rows must be an integer >= 1, got {block_rows!r}")
    if pd.on_device:
        yield from _iter_device(pd, n, int(block_rows))
        return
    for start in range(0, n, int(block_rows)):
        rows = np.arange(start, min(n, start + int(block_rows)))
        if pd.n_clusters == 0:
            yield start, np.zeros((rows.shape[0], 0))
        else:
            yield start, _all_points_block(pd, rows)


def _iter_device(pd, n, block_rows):
    from . import device_prediction

    xp = device_prediction.state(pd).xp
    for start in range(0, n, block_rows):
        stop = min(n, start + block_rows)
        if pd.n_clusters == 0:
            yield start, xp.zeros((stop - start, 0))
        else:
            yield start, device_prediction.all_points_block(pd, start, stop)


def membership_max_bytes() -> int:
    """The largest result ``all_points_membership_vectors`` returns as one
    array (dask.config ``emst_dask.hdbscan.membership-max-bytes``)."""
    import dask.config

    return int(dask.config.get("emst_dask.hdbscan.membership-max-bytes",
                               MEMBERSHIP_MAX_BYTES))


def all_points_membership_vectors(clusterer, *, out=None, block_rows: int | None = None):
    """Soft membership of every fitted point in each cluster (hdbscan's
    ``all_points_membership_vectors``), computed in blocks of rows.

    The result is an (n, k) float64 matrix: ``n * k * 8`` bytes.  Up to
    ``membership_max_bytes()`` (8 GiB unless set: at 10 million points up
    to 107 clusters, at 1 million up to 1,073) it is returned as one array;
    beyond, it is refused before any work with the memory it needs: give
    ``out`` (any (n, k) float64 array taking slice assignment:
    ``np.lib.format.open_memmap``, a zarr array, a CuPy array) to have it
    written there block by block, or iterate
    ``iter_all_points_membership_vectors``, whose memory is one block
    whatever n and k.  Each block holds a few (block_rows, k) arrays
    besides (about 2 GiB on the device by default).

    A model fitted on CuPy points computes on the device and returns a
    CuPy array (without ``out``); blocks are copied into a host ``out``.

    Parameters
    ----------
    clusterer : ``emst_dask.HDBSCAN`` fitted with ``prediction_data=True``
    out : (n, k) array, optional
    block_rows : int, optional

    Returns
    -------
    (n, k) float64 (``out`` when given); (n, 0) without clusters.

    Raises
    ------
    InputError
        The matrix is larger than the limit and no ``out`` was given, or
        ``out`` has the wrong shape; before any work.
    """
    pd = _data(clusterer)
    n, k = pd.raw_data.shape[0], pd.n_clusters
    if out is None:
        nbytes, limit = n * k * 8, membership_max_bytes()
        if nbytes > limit:
            raise InputError(
                f"all_points_membership_vectors of {n:,} points and {k} clusters is "
                f"{nbytes / 2**30:.1f} GiB (n * k * 8 bytes), above the "
                f"{limit / 2**30:.1f} GiB limit (dask.config "
                "emst_dask.hdbscan.membership-max-bytes): give out= (an (n, k) float64 "
                "memmap or zarr array) or iterate iter_all_points_membership_vectors")
        if pd.on_device:
            from .device_prediction import state

            out = state(pd).xp.empty((n, k))
        else:
            out = np.empty((n, k))
    elif tuple(out.shape) != (n, k):
        raise InputError(f"out has shape {tuple(out.shape)}, expected ({n}, {k})")
    to_host = pd.on_device and not hasattr(out, "__cuda_array_interface__")
    for start, block in iter_all_points_membership_vectors(clusterer, block_rows):
        out[start:start + block.shape[0]] = block.get() if to_host and hasattr(
            block, "get") else block
    return out
