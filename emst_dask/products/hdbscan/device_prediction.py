"""hdbscan's prediction API on the device, for a model fitted on CuPy
points: the same definitions and results as ``prediction`` and
``membership`` (labels exactly, probabilities and memberships to rounding),
computed where the model's points are.

- The new points' nearest training point in mutual reachability and their
  core distances: queries against the LBVH of the training points (the
  CUDA kernel set's ``query_knn2`` and ``query_mr_nearest``), exact, ties
  to the lexicographically smallest point as on the host.  The tree is
  built once a model (float64 points: 8 d + about 50 bytes a point).
- The walk up the cluster tree, the merge heights (a (clusters, selected)
  table on the device up to ``MERGE_TABLE_ENTRIES``, else a walk per point
  and cluster) and the exemplar distances (each (point, cluster) pair
  against the cluster's exemplars, consecutive threads sharing a cluster):
  small CuPy kernels; the rest array operations in blocks of rows.
"""
from __future__ import annotations

import functools

import numpy as np

from ...errors import InputError
from .fitted import _DBL_MAX, PredictionData, _new_points

#: rows of new points a query launch takes (bounds the k-NN scratch)
QUERY_ROWS = 1 << 20
#: merge heights are tabulated on the device up to this many entries (8
#: bytes each); beyond, each (point, cluster) pair walks the tree
MERGE_TABLE_ENTRIES = 1 << 28
#: device bytes the membership temporaries of one block of rows may take
#: (about eight (rows, k) float64 arrays)
BLOCK_BYTES = 1 << 31


def _kernels():
    from ...kernels import get_kernels

    return get_kernels("cuda")


@functools.cache
def _walk_up_kernel():
    import cupy

    return cupy.ElementwiseKernel(
        "int64 start, float64 lam, float64 plam, raw int64 cparent, raw float64 birth",
        "int64 c",
        "long long v = start; if (plam > lam) { while (v > 0 && birth[v] >= lam) "
        "v = cparent[v]; } c = v;",
        "emst_predict_walk_up")


@functools.cache
def _parting_kernel():
    # the lambda at which cluster rowc[i / k] and selected cluster sel[i % k]
    # part (membership._parting), -1 where one is at or above the other
    import cupy

    return cupy.ElementwiseKernel(
        "raw int64 rowc, raw int64 sel, raw int64 cparent, raw float64 birth, int64 k",
        "float64 h",
        "long long l = rowc[i / k], r = sel[i % k], last = l; bool tl = false, tr = false;"
        "while (l != r) { if (l > r) { tl = true; last = l; l = cparent[l]; }"
        " else { tr = true; last = r; r = cparent[r]; } }"
        "h = (tl && tr) ? birth[last] : -1.0;",
        "emst_predict_parting")


@functools.cache
def _exemplar_kernel():
    # out[r, j] = min over cluster j's exemplars of |X[r] - e|; thread i is
    # (j = i / B, r = i % B), so that a warp reads one cluster's exemplars
    import cupy

    return cupy.ElementwiseKernel(
        "raw float64 X, raw float64 ex, raw int64 off, int64 B, int64 d, int64 k",
        "raw float64 out",
        "long long j = i / B, r = i % B;"
        "double best = __longlong_as_double(0x7ff0000000000000LL);"
        "for (long long e = off[j]; e < off[j + 1]; ++e) {"
        " double s = 0.0;"
        " for (long long c = 0; c < d; ++c) { double t = X[r * d + c] - ex[e * d + c];"
        " s += t * t; }"
        " if (s < best) best = s; }"
        "out[r * k + j] = sqrt(best);",
        "emst_predict_exemplars")


class DeviceState:
    """What prediction holds on the device for one ``PredictionData``."""

    def __init__(self, pd: PredictionData):
        from ...engine.boruvka import Timers, construct_bvh

        K = self.K = _kernels()
        if K is None:
            raise InputError("this model was fitted on the GPU and predicts there, but CuPy "
                             "is not available in this process")
        xp = self.xp = K.xp
        self.pts = K.to_device(np.ascontiguousarray(pd.raw_data, dtype=np.float64))
        self.n, self.d = pd.raw_data.shape
        self.bvh = construct_bvh(K, self.pts, Timers(enabled=False))
        core = K.to_device(np.ascontiguousarray(pd.core_distances, dtype=np.float64))
        self.core_tree = xp.ascontiguousarray(core[self.bvh.orig])
        dev = lambda a: xp.asarray(np.ascontiguousarray(a))  # noqa: E731
        self.point_cluster, self.point_lambda = dev(pd.point_cluster), dev(pd.point_lambda)
        self.cparent, self.birth, self.death = dev(pd.cparent), dev(pd.birth), dev(pd.death)
        self.selected, self.cluster_label = dev(pd.selected), dev(pd.cluster_label)
        self.label_max_lambda = dev(pd.label_max_lambda)
        k = pd.n_clusters
        if k:
            self.ex = dev(np.concatenate(pd.exemplars).astype(np.float64))
            off = np.zeros(k + 1, np.int64)
            off[1:] = np.cumsum([e.shape[0] for e in pd.exemplars])
            self.ex_off = dev(off)
        self._table = None

    def merge_table(self):
        """(K, k) parting lambdas (-1: one at or above the other), or None
        beyond ``MERGE_TABLE_ENTRIES``."""
        K, k = self.cparent.shape[0], self.selected.shape[0]
        if K * k > MERGE_TABLE_ENTRIES:
            return None
        if self._table is None:
            xp = self.xp
            rows = xp.arange(K, dtype=np.int64)
            self._table = _parting_kernel()(rows, self.selected, self.cparent, self.birth,
                                            np.int64(k), size=K * k).reshape(K, k)
        return self._table


def state(pd: PredictionData) -> DeviceState:
    """The device state of ``pd``, built on first use."""
    st = getattr(pd, "_device", None)
    if st is None:
        st = pd._device = DeviceState(pd)
    return st


def device_points(pd: PredictionData, X):
    """New points as a (m, d) float64 array on the device (checked as on the
    host; a host array is checked there, then copied)."""
    st = state(pd)
    xp = st.xp
    if isinstance(X, xp.ndarray) and xp is not np or (
            hasattr(X, "__cuda_array_interface__") and not isinstance(X, np.ndarray)):
        X = xp.asarray(X)
        if X.ndim != 2 or X.shape[0] < 1:
            raise InputError(f"prediction: expected a 2-D array of points, got shape "
                             f"{tuple(X.shape)}")
        if X.dtype.kind not in "fiu":
            raise InputError(f"prediction: points of dtype {X.dtype} (real numbers needed)")
        if X.shape[1] != st.d:
            raise InputError(f"New points dimension does not match fit data: {X.shape[1]} "
                             f"features, the model has {st.d}")
        X = xp.ascontiguousarray(X, dtype=np.float64)
        if not bool(xp.isfinite(X).all()):
            raise InputError("prediction: the points contain NaN or infinity")
        return X
    return st.K.to_device(np.ascontiguousarray(_new_points(pd, X)))


def nearest_mutual_reachability(pd: PredictionData, X):
    """``prediction.nearest_mutual_reachability`` on the device: (m,) int64
    neighbours and (m,) float64 lambdas, CuPy."""
    st = state(pd)
    xp, K = st.xp, st.K
    m = X.shape[0]
    nbr = xp.empty(m, np.int64)
    best = xp.empty(m, np.float64)
    k = pd.min_samples
    for start in range(0, m, QUERY_ROWS):
        Xb = X[start:start + QUERY_ROWS]
        cx = (xp.sqrt(K.query_knn2(st.bvh, Xb, k - 1)) if k >= 2
              else xp.zeros(Xb.shape[0], np.float64))
        nbr[start:start + Xb.shape[0]], best[start:start + Xb.shape[0]] = \
            K.query_mr_nearest(st.bvh, st.core_tree, Xb, cx)
    lam = xp.where(best > 0.0, 1.0 / xp.where(best > 0.0, best, 1.0), _DBL_MAX)
    return nbr, lam


def approximate_predict(pd: PredictionData, X, return_connecting_points=False):
    """``prediction.approximate_predict`` on the device (CuPy results)."""
    st = state(pd)
    xp = st.xp
    X = device_points(pd, X)
    m = X.shape[0]
    if pd.cparent.shape[0] <= 1:
        out = (xp.full(m, -1, np.int64), xp.zeros(m))
        return out + (xp.full(m, -1, np.int64),) if return_connecting_points else out
    nbr, lam = nearest_mutual_reachability(pd, X)
    c = _walk_up_kernel()(st.point_cluster[nbr], lam, st.point_lambda[nbr], st.cparent,
                          st.birth)
    labels = st.cluster_label[c]
    ml = st.label_max_lambda[c]
    prob = xp.where(ml > 0.0, xp.minimum(ml, lam) / xp.where(ml > 0.0, ml, 1.0), 1.0)
    prob = xp.where(labels >= 0, prob, 0.0)
    if return_connecting_points:
        return labels, prob, nbr
    return labels, prob


def block_rows(k: int) -> int:
    """Rows of a membership block of k clusters (``BLOCK_BYTES``)."""
    return int(max(256, min(1 << 20, BLOCK_BYTES // (64 * max(k, 1)))))


def _merge_heights(st: DeviceState, pc, plam):
    xp = st.xp
    k = st.selected.shape[0]
    table = st.merge_table()
    if table is not None:
        H = table[pc]
    else:
        H = _parting_kernel()(xp.ascontiguousarray(pc), st.selected, st.cparent, st.birth,
                              np.int64(k), size=pc.shape[0] * k).reshape(-1, k)
    return xp.where(H < 0.0, plam[:, None], H)


def _dist_vectors(st: DeviceState, X):
    xp = st.xp
    B, k = X.shape[0], st.selected.shape[0]
    d = xp.empty((B, k), np.float64)
    _exemplar_kernel()(xp.ascontiguousarray(X), st.ex, st.ex_off, np.int64(B),
                       np.int64(st.d), np.int64(k), d, size=B * k)
    inv = xp.where(d != 0.0, 1.0 / xp.where(d != 0.0, d, 1.0), _DBL_MAX / k)
    return inv / inv.sum(axis=1, keepdims=True)


def _softmax_rows(xp, s):
    e = xp.exp(s - s.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _in_some_cluster(st, H, lam, eps):
    top = st.death[st.selected[H.argmax(axis=1)]]
    return H.max(axis=1) / (st.xp.maximum(lam, top) + eps)


def membership_vector(pd: PredictionData, X):
    """``membership.membership_vector`` on the device: (m, k) float64 CuPy."""
    st = state(pd)
    xp = st.xp
    X = device_points(pd, X)
    k = pd.n_clusters
    if k == 0:
        return xp.zeros((X.shape[0], 0))
    nbr, lam = nearest_mutual_reachability(pd, X)
    lam = xp.minimum(lam, st.point_lambda[nbr])
    pc = st.point_cluster[nbr]
    out = xp.empty((X.shape[0], k))
    rows = block_rows(k)
    with np.errstate(divide="ignore", invalid="ignore"):  # numpy as a stand-in
        for start in range(0, X.shape[0], rows):
            _membership_block(st, X, pc, lam, out, slice(start, start + rows))
    return out


def _membership_block(st, X, pc, lam, out, b):
    """Rows ``b`` of ``membership_vector`` into ``out``."""
    xp = st.xp
    H = _merge_heights(st, pc[b], lam[b])
    ml = st.death[pc[b]][:, None]
    den = ml - H
    scores = ml / xp.where(den <= 0.0, 1e-8, den)
    o = _dist_vectors(st, X[b]) ** 0.5 * _softmax_rows(xp, scores) ** 2.0
    o /= o.sum(axis=1, keepdims=True)
    o *= _in_some_cluster(st, H, lam[b], 1e-8)[:, None]
    out[b] = o


def all_points_block(pd: PredictionData, start: int, stop: int):
    """Rows ``start:stop`` of ``all_points_membership_vectors`` on the
    device: (stop - start, k) float64 CuPy."""
    st = state(pd)
    xp = st.xp
    pc, pl = st.point_cluster[start:stop], st.point_lambda[start:stop]
    H = _merge_heights(st, pc, pl)
    with np.errstate(divide="ignore"):  # numpy as a stand-in; 0 heights give 0
        s = xp.exp(-((st.death[pc] + 1e-8)[:, None] / H))
    out = _dist_vectors(st, st.pts[start:stop]) * _softmax_rows(xp, s)
    out /= out.sum(axis=1, keepdims=True)
    out *= _in_some_cluster(st, H, pl, 0.0)[:, None]
    return out
