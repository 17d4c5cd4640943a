"""hdbscan's prediction API on a fitted ``emst_dask.HDBSCAN(prediction_data=True)``:
``approximate_predict``, ``membership_vector`` and
``all_points_membership_vectors``, spelled and defined as hdbscan's
(``hdbscan.prediction``), vectorised (numba and scipy's KD-tree).

Definitions (hdbscan's, with two differences that make them exact and
order-free):

- A new point x joins the tree through its nearest training point in
  mutual reachability, ``argmin_j max(core_x, core_j, |x - x_j|)`` with
  ``core_j`` the fit's core distances and ``core_x`` the distance from x to
  its ``(min_samples - 1)``-th nearest training point (its core distance
  were it added, counting itself); ``lambda = 1 / that distance``.  hdbscan
  searches only the ``2 min_samples`` nearest neighbours and recomputes the
  training core distances with one neighbour fewer; here the minimum is
  exact (a radius search completes the k-NN where it could be beaten) and
  uses the fit's own core distances.  Of several training points at the
  same distance the lexicographically smallest point is taken, so results
  do not depend on the order of the rows.
- ``approximate_predict``: from the neighbour's cluster, walk up while the
  cluster was born at a lambda >= the new point's (when the neighbour left
  at a larger lambda); the label is the selected cluster at or above it,
  the probability ``min(lambda, max_lambda) / max_lambda`` with
  ``max_lambda`` the selected cluster's largest lambda.
- ``membership_vector`` / ``all_points_membership_vectors``: hdbscan's
  product of a distance vector (inverse distance to each cluster's
  exemplars, normalised) and an outlier vector (a softmax of the merge
  heights of the point's cluster with each selected cluster), times the
  probability of being in some cluster; the formulas, their constants
  (1e-8) and their different exponents in the two functions are hdbscan's.
  hdbscan rounds the new point's lambda to float32 in
  ``membership_vector``'s outlier vector; here it stays float64.

The condensed tree may merge more than two clusters at one height (ties);
the merge height of two clusters is then the height at which their lowest
common ancestor splits, as for two.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numba import njit, prange

from ...errors import InputError
from .tables import Fields, cluster_table

#: all_points_membership_vectors returns at most this many bytes as one
#: array (n * k * 8); beyond it give ``out=`` or iterate over the blocks.
#: Set with dask.config ``emst_dask.hdbscan.membership-max-bytes``.
MEMBERSHIP_MAX_BYTES = 8 * 2**30
#: rows per block: each block holds a few (rows, k) float64 arrays
BLOCK_ROWS = 65536
_DBL_MAX = np.finfo(np.float64).max


@dataclass
class PredictionData:
    """What prediction needs from a fit (``HDBSCAN.prediction_data_``).

    Attributes
    ----------
    raw_data : (n, d) float64, the points.
    core_distances : (n,) float64, the fit's core distances.
    min_samples : int, k_pts (counting the point itself).
    cparent, birth, death : (K,) int64, float64, float64
        Per condensed cluster ``n + c``: parent index (-1 for the root),
        lambda it is born at, largest lambda of its rows (hdbscan's
        ``leaf_max_lambdas``).
    point_cluster, point_lambda : (n,) int64, float64
        The cluster each point leaves, and the lambda it leaves at.
    selected : (k,) int64, cluster indices of the labels 0 .. k-1.
    cluster_label : (K,) int64, the label of the selected cluster at or
        above each cluster, -1 if none (hdbscan's ``cluster_map``).
    label_max_lambda : (K,) float64, that selected cluster's largest lambda
        (hdbscan's ``max_lambdas``).
    exemplars : list of (m_j, d) float64, per label: the points of its leaf
        clusters leaving at their leaf's largest lambda, in lexicographic
        order.
    """

    raw_data: np.ndarray
    core_distances: np.ndarray
    min_samples: int
    cparent: np.ndarray
    birth: np.ndarray
    death: np.ndarray
    point_cluster: np.ndarray
    point_lambda: np.ndarray
    selected: np.ndarray
    cluster_label: np.ndarray
    label_max_lambda: np.ndarray
    exemplars: list
    _tree: object = field(default=None, repr=False)
    _exemplar_trees: list = field(default=None, repr=False)

    @property
    def n_clusters(self) -> int:
        return int(self.selected.shape[0])

    def tree(self):
        """scipy's KD-tree of the points (built on first use)."""
        if self._tree is None:
            from scipy.spatial import cKDTree

            self._tree = cKDTree(self.raw_data)
        return self._tree

    def exemplar_trees(self):
        if self._exemplar_trees is None:
            from scipy.spatial import cKDTree

            self._exemplar_trees = [cKDTree(e) if e.shape[0] > EXEMPLARS_BRUTE else None
                                    for e in self.exemplars]
        return self._exemplar_trees

    def __getstate__(self):  # the trees are rebuilt, not pickled
        state = dict(self.__dict__)
        state["_tree"] = state["_exemplar_trees"] = None
        state.pop("_ex_cat", None)
        state.pop("_merge", None)
        return state


def prediction_data(points, core_distances, min_samples, condensed, selected):
    """Build ``PredictionData`` from a fit.

    Parameters
    ----------
    points : (n, d) float array, the fitted points (copied as float64).
    core_distances : (n,) float or None (min_samples 1: zeros).
    min_samples : int, k_pts.
    condensed : (r,) ``CONDENSED_DTYPE`` condensed tree.
    selected : (k,) int64, the selected cluster ids (``n + c``), increasing.

    Returns
    -------
    PredictionData
    """
    pts = np.array(points, dtype=np.float64, copy=True)
    n = pts.shape[0]
    core = (np.zeros(n) if core_distances is None
            else np.asarray(core_distances, dtype=np.float64).copy())
    if len(condensed) == 0:  # one point: no tree
        z = np.zeros(1)
        return PredictionData(pts, core, int(min_samples), np.full(1, -1, np.int64), z,
                              z.copy(), np.zeros(n, np.int64), np.zeros(n), np.empty(0, np.int64),
                              np.full(1, -1, np.int64), np.zeros(1), [])
    f = Fields.of(condensed)
    t = cluster_table(f)
    K = t.cparent.shape[0]
    is_point = f.child < n
    point_cluster = np.empty(n, np.int64)
    point_lambda = np.empty(n, np.float64)
    point_cluster[f.child[is_point]] = f.parent[is_point] - n
    point_lambda[f.child[is_point]] = f.lam[is_point]
    sel = np.asarray(selected, dtype=np.int64) - n
    label = np.full(K, -1, np.int64)
    label[sel] = np.arange(sel.shape[0])
    for c in range(1, K):  # parents first: a cluster takes its selected ancestor's
        if label[c] < 0:
            label[c] = label[t.cparent[c]]
    lml = np.zeros(K)
    ok = label >= 0
    lml[ok] = t.death[sel[label[ok]]]
    has_child = np.zeros(K, np.bool_)
    has_child[t.cparent[1:]] = True
    exemplars = []
    lab = label[point_cluster]
    rows = np.flatnonzero(~has_child[point_cluster] & (point_lambda == t.death[point_cluster])
                          & (lab >= 0))
    rows = rows[np.argsort(lab[rows], kind="stable")]  # grouped by label, in one sort
    bounds = np.searchsorted(lab[rows], np.arange(sel.shape[0] + 1))
    for j in range(sel.shape[0]):
        e = pts[rows[bounds[j]:bounds[j + 1]]]
        exemplars.append(e[np.lexsort(e.T[::-1])] if e.shape[0] > 1 else e)
    return PredictionData(pts, core, int(min_samples), t.cparent, t.birth, t.death,
                          point_cluster, point_lambda, sel, label, lml, exemplars)


def _data(clusterer) -> PredictionData:
    pd = getattr(clusterer, "prediction_data_", None)
    if pd is None:
        raise ValueError("Clusterer does not have prediction data! Fit it with "
                         "HDBSCAN(prediction_data=True)")
    return pd


def _new_points(pd: PredictionData, X) -> np.ndarray:
    from .._sklearn import validate_points

    if hasattr(X, "get") and (type(X).__module__ or "").startswith("cupy"):
        X = X.get()
    if (type(X).__module__ or "").startswith("dask"):
        X = X.compute()
    arr, _ = validate_points(X, "prediction")
    if arr.shape[1] != pd.raw_data.shape[1]:
        raise InputError(f"New points dimension does not match fit data: {arr.shape[1]} "
                         f"features, the model has {pd.raw_data.shape[1]}")
    return np.asarray(arr, dtype=np.float64)


def _lex_smallest(pts, rows):
    cand = pts[rows]
    return rows[np.lexsort(cand.T[::-1])[0]]


def nearest_mutual_reachability(pd: PredictionData, X, block_rows: int = BLOCK_ROWS):
    """Each new point's nearest training point in mutual reachability and
    the lambda it joins at (exact; ties to the lexicographically smallest
    training point).

    Parameters
    ----------
    pd : PredictionData
    X : (m, d) float64

    Returns
    -------
    neighbours : (m,) int64
    lambdas : (m,) float64 (``finfo.max`` at distance 0, as hdbscan)
    """
    nbr = np.empty(X.shape[0], np.int64)
    best = np.empty(X.shape[0])
    for start in range(0, X.shape[0], block_rows):
        stop = min(X.shape[0], start + block_rows)
        nbr[start:stop], best[start:stop] = _nearest_block(pd, X[start:stop])
    with np.errstate(divide="ignore"):
        lam = np.where(best > 0.0, 1.0 / best, _DBL_MAX)
    return nbr, lam


def _distances(pts, rows, x):
    """|pts[rows] - x| with one formula everywhere (the k-NN's own distances
    may differ in the last bit), so that equal distances compare equal."""
    return np.sqrt(((pts[rows] - x[..., None, :]) ** 2).sum(axis=-1))


def _nearest_block(pd: PredictionData, X):
    n = pd.raw_data.shape[0]
    k = pd.min_samples
    q = min(n, max(2 * k, 2))
    tree = pd.tree()
    m = X.shape[0]
    _, Ind = tree.query(X, k=q, workers=-1)
    Ind = Ind.reshape(m, q).astype(np.int64)
    D = _distances(pd.raw_data, Ind, X)
    order = np.argsort(D, axis=1, kind="stable")
    D = np.take_along_axis(D, order, axis=1)
    Ind = np.take_along_axis(Ind, order, axis=1)
    core_x = D[:, k - 2] if k >= 2 else np.zeros(m)
    mr = np.maximum(np.maximum(pd.core_distances[Ind], core_x[:, None]), D)
    best = mr.min(axis=1)
    hit = mr == best[:, None]
    nbr = Ind[np.arange(m), hit.argmax(axis=1)]
    # a point beyond the q nearest is at least D[:, -1] away (to within a
    # rounding): it can tie or beat ``best`` only where best >= D[:, -1]
    unsure = (best >= D[:, -1] * (1 - 1e-12)) if q < n else np.zeros(m, np.bool_)
    for i in np.flatnonzero(unsure | (hit.sum(axis=1) > 1)):
        if unsure[i]:
            rows = np.asarray(tree.query_ball_point(X[i], best[i] * (1 + 1e-9)),
                              dtype=np.int64)
            rows = np.union1d(rows, Ind[i])
            mi = np.maximum(np.maximum(pd.core_distances[rows], core_x[i]),
                            _distances(pd.raw_data, rows, X[i]))
            best[i] = mi.min()
            tied = rows[mi == best[i]]
        else:
            tied = Ind[i][hit[i]]
        nbr[i] = _lex_smallest(pd.raw_data, tied) if tied.shape[0] > 1 else tied[0]
    return nbr, best


@njit(cache=True, parallel=True)
def _walk_up(start, lam, plam, cparent, birth):
    out = start.copy()
    for i in prange(start.shape[0]):
        c = start[i]
        if plam[i] > lam[i]:
            while c > 0 and birth[c] >= lam[i]:
                c = cparent[c]
        out[i] = c
    return out


def approximate_predict(clusterer, points_to_predict, return_connecting_points=False):
    """The labels and probabilities new points would take in a fitted
    clustering (hdbscan's ``approximate_predict``).

    Parameters
    ----------
    clusterer : ``emst_dask.HDBSCAN`` fitted with ``prediction_data=True``
    points_to_predict : (m, d) array-like
    return_connecting_points : bool
        Also return each point's training neighbour (row).

    Returns
    -------
    labels : (m,) int64, -1 for noise
    probabilities : (m,) float64
    neighbors : (m,) int64, with ``return_connecting_points``
    """
    pd = _data(clusterer)
    X = _new_points(pd, points_to_predict)
    m = X.shape[0]
    if pd.cparent.shape[0] <= 1:  # no cluster below the root: noise (hdbscan)
        out = (np.full(m, -1, np.int64), np.zeros(m))
        return out + (np.full(m, -1, np.int64),) if return_connecting_points else out
    nbr, lam = nearest_mutual_reachability(pd, X)
    c = _walk_up(pd.point_cluster[nbr], lam, pd.point_lambda[nbr], pd.cparent, pd.birth)
    labels = pd.cluster_label[c]
    ml = pd.label_max_lambda[c]
    with np.errstate(divide="ignore", invalid="ignore"):
        prob = np.where(ml > 0.0, np.minimum(ml, lam) / ml, 1.0)
    prob = np.where(labels >= 0, prob, 0.0)
    if return_connecting_points:
        return labels, prob, nbr
    return labels, prob


#: merge heights are tabulated per (cluster, selected cluster) up to this
#: many entries (8 bytes each); beyond, each point walks the tree
MERGE_TABLE_ENTRIES = 2**25


@njit(cache=True, parallel=True)
def _merge_table(cparent, birth, sel):
    """(K, k): the lambda at which cluster c and selected cluster j part
    (their lowest common ancestor's split), NaN where one is at or above
    the other (hdbscan's merge_height then takes the point's own lambda)."""
    K, k = cparent.shape[0], sel.shape[0]
    out = np.empty((K, k), np.float64)
    for c in prange(K):
        for j in range(k):
            left, right = cparent[c] * 0 + c, sel[j]  # int64, as cparent
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
            out[c, j] = birth[last] if (took_l and took_r) else np.nan
    return out


@njit(cache=True, parallel=True)
def _merge_walk(pc, plam, sel, cparent, birth):
    B, k = pc.shape[0], sel.shape[0]
    out = np.empty((B, k), np.float64)
    for b in prange(B):
        for j in range(k):
            left, right = pc[b], sel[j]
            took_l = took_r = False
            last = left
            while left != right:
                if left > right:
                    took_l = True
                    last = left
                    left = cparent[left]
                else:
                    took_r = True
                    last = right
                    right = cparent[right]
            out[b, j] = birth[last] if (took_l and took_r) else plam[b]
    return out


def _merge_heights(pd: PredictionData, pc, plam):
    """(B, k) hdbscan's merge heights of points leaving clusters ``pc`` at
    lambdas ``plam`` with each selected cluster."""
    K, k = pd.cparent.shape[0], pd.n_clusters
    if K * k > MERGE_TABLE_ENTRIES:
        return _merge_walk(pc, plam, pd.selected, pd.cparent, pd.birth)
    if getattr(pd, "_merge", None) is None:
        pd._merge = _merge_table(pd.cparent, pd.birth, pd.selected)
    H = pd._merge[pc]
    return np.where(np.isnan(H), plam[:, None], H)


#: clusters with more exemplars than this are searched with a KD-tree, the
#: others by brute force over their exemplars
EXEMPLARS_BRUTE = 512


#: points per tile of the brute-force exemplar search
TILE = 64


@njit(cache=True, parallel=True)
def _min_dist_brute(X, ex, offsets, clusters, out):
    """out[i, j] = min over cluster j's exemplars of |X[i] - e| for the
    listed clusters.  Tiles of TILE points by columns, so that one
    exemplar's squared distances to a tile vectorise and the exemplars are
    read once a tile."""
    m, d = X.shape
    tiles = (m + TILE - 1) // TILE
    for ti in prange(tiles):
        lo = ti * TILE
        P = min(m, lo + TILE) - lo
        xt = np.empty((d, P))
        for c in range(d):
            for p in range(P):
                xt[c, p] = X[lo + p, c]
        r = np.empty(P)
        best = np.empty(P)
        for jj in range(clusters.shape[0]):
            j = clusters[jj]
            best[:] = np.inf
            for e in range(offsets[j], offsets[j + 1]):
                v = ex[e, 0]
                for p in range(P):
                    t = xt[0, p] - v
                    r[p] = t * t
                for c in range(1, d):
                    v = ex[e, c]
                    for p in range(P):
                        t = xt[c, p] - v
                        r[p] += t * t
                for p in range(P):
                    best[p] = min(best[p], r[p])
            for p in range(P):
                out[lo + p, j] = np.sqrt(best[p])


def _dist_vectors(pd: PredictionData, X):
    """(B, k) hdbscan's distance membership: 1 / (distance to the nearest
    exemplar of each cluster) (finfo.max / k at 0), rows normalised."""
    k = pd.n_clusters
    d = np.empty((X.shape[0], k))
    sizes = np.array([e.shape[0] for e in pd.exemplars], np.int64)
    few = np.flatnonzero(sizes <= EXEMPLARS_BRUTE)
    if few.shape[0]:
        if getattr(pd, "_ex_cat", None) is None:
            pd._ex_cat = np.ascontiguousarray(
                np.concatenate([e for e in pd.exemplars if e.shape[0] <= EXEMPLARS_BRUTE]))
        offsets = np.zeros(k + 1, np.int64)  # of the brute-force clusters' exemplars
        offsets[few + 1] = sizes[few]
        offsets = np.cumsum(offsets)
        _min_dist_brute(np.ascontiguousarray(X), pd._ex_cat, offsets, few, d)
    trees = pd.exemplar_trees()
    for j in np.flatnonzero(sizes > EXEMPLARS_BRUTE):
        d[:, j] = trees[j].query(X, k=1, workers=-1)[0]
    with np.errstate(divide="ignore"):
        inv = np.where(d != 0.0, 1.0 / d, _DBL_MAX / k)
    return inv / inv.sum(axis=1, keepdims=True)


def _softmax_rows(s):
    e = np.exp(s - np.nanmax(s, axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _in_some_cluster(pd, H, lam, eps):
    arg = H.argmax(axis=1)
    top = pd.death[pd.selected[arg]]
    return H.max(axis=1) / (np.maximum(lam, top) + eps)


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
    cluster j; (m, 0) without clusters.
    """
    pd = _data(clusterer)
    X = _new_points(pd, points_to_predict)
    k = pd.n_clusters
    if k == 0:
        return np.zeros((X.shape[0], 0))
    nbr, lam = nearest_mutual_reachability(pd, X)
    lam = np.minimum(lam, pd.point_lambda[nbr])
    pc = pd.point_cluster[nbr]
    out = np.empty((X.shape[0], k))
    for start in range(0, X.shape[0], BLOCK_ROWS):  # the temporaries a block at a time
        b = slice(start, start + BLOCK_ROWS)
        H = _merge_heights(pd, pc[b], lam[b])
        ml = pd.death[pc[b]][:, None]
        den = ml - H
        with np.errstate(divide="ignore", invalid="ignore"):
            scores = ml / np.where(den <= 0.0, 1e-8, den)
        o = _dist_vectors(pd, X[b]) ** 0.5 * _softmax_rows(scores) ** 2.0
        o /= o.sum(axis=1, keepdims=True)
        o *= _in_some_cluster(pd, H, lam[b], 1e-8)[:, None]
        out[b] = o
    return out


@njit(cache=True, parallel=True)
def _all_points_combine(D, table, pc, pl, death, sel):
    """In place on D, the (B, k) distance vectors: hdbscan's
    all_points_membership_vectors from them, row by row (the merge heights
    from ``table`` (``_merge_table``), the outlier vector's softmax, the
    product normalised, times the probability of being in some cluster)."""
    B, k = D.shape
    for b in prange(B):
        c = pc[b]
        h = np.empty(k)
        hmax = -np.inf
        arg = 0
        for j in range(k):
            v = table[c, j]
            h[j] = pl[b] if np.isnan(v) else v
            if h[j] > hmax:
                hmax = h[j]
                arg = j
        a = death[c] + 1e-8
        s = np.empty(k)
        smax = -np.inf
        for j in range(k):
            s[j] = np.exp(-(a / h[j]))
            if s[j] > smax:  # NaN never compares larger: nanmax
                smax = s[j]
        tot = 0.0
        for j in range(k):
            s[j] = np.exp(s[j] - smax)
            tot += s[j]
        rs = 0.0
        for j in range(k):
            D[b, j] = D[b, j] * (s[j] / tot)
            rs += D[b, j]
        ins = hmax / max(pl[b], death[sel[arg]])
        for j in range(k):
            D[b, j] = D[b, j] / rs * ins
    return D


def _all_points_block(pd: PredictionData, rows):
    pc, pl = pd.point_cluster[rows], pd.point_lambda[rows]
    D = _dist_vectors(pd, pd.raw_data[rows])
    if pd.cparent.shape[0] * pd.n_clusters <= MERGE_TABLE_ENTRIES:
        if getattr(pd, "_merge", None) is None:
            pd._merge = _merge_table(pd.cparent, pd.birth, pd.selected)
        return _all_points_combine(D, pd._merge, pc, pl, pd.death, pd.selected)
    H = _merge_heights(pd, pc, pl)
    with np.errstate(divide="ignore", invalid="ignore"):
        s = np.exp(-((pd.death[pc] + 1e-8)[:, None] / H))
    out = D * _softmax_rows(s)
    out /= out.sum(axis=1, keepdims=True)
    out *= _in_some_cluster(pd, H, pl, 0.0)[:, None]
    return out


def iter_all_points_membership_vectors(clusterer, block_rows: int = BLOCK_ROWS):
    """``all_points_membership_vectors`` one block of rows at a time.

    Yields
    ------
    start : int, the block's first row
    block : (rows, k) float64
    """
    pd = _data(clusterer)
    n = pd.raw_data.shape[0]
    if not isinstance(block_rows, (int, np.integer)) or block_rows < 1:
        raise InputError(f"block_rows must be an integer >= 1, got {block_rows!r}")
    for start in range(0, n, int(block_rows)):
        rows = np.arange(start, min(n, start + int(block_rows)))
        if pd.n_clusters == 0:
            yield start, np.zeros((rows.shape[0], 0))
        else:
            yield start, _all_points_block(pd, rows)


def membership_max_bytes() -> int:
    """The largest result ``all_points_membership_vectors`` returns as one
    array (dask.config ``emst_dask.hdbscan.membership-max-bytes``)."""
    import dask.config

    return int(dask.config.get("emst_dask.hdbscan.membership-max-bytes",
                               MEMBERSHIP_MAX_BYTES))


def all_points_membership_vectors(clusterer, *, out=None, block_rows: int = BLOCK_ROWS):
    """Soft membership of every fitted point in each cluster (hdbscan's
    ``all_points_membership_vectors``), computed in blocks of rows.

    The result is an (n, k) float64 matrix: ``n * k * 8`` bytes.  Up to
    ``membership_max_bytes()`` (8 GiB unless set) it is returned as one
    array; beyond, give ``out`` (any (n, k) float64 array taking slice
    assignment: ``np.lib.format.open_memmap``, a zarr array) to have it
    written there block by block, or iterate
    ``iter_all_points_membership_vectors``.  Each block holds a few
    (block_rows, k) arrays besides.

    Parameters
    ----------
    clusterer : ``emst_dask.HDBSCAN`` fitted with ``prediction_data=True``
    out : (n, k) array, optional
    block_rows : int

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
        out = np.empty((n, k))
    elif tuple(out.shape) != (n, k):
        raise InputError(f"out has shape {tuple(out.shape)}, expected ({n}, {k})")
    for start, block in iter_all_points_membership_vectors(clusterer, block_rows):
        out[start:start + block.shape[0]] = block
    return out
