"""``emst_dask.HDBSCAN``: scikit-learn's HDBSCAN estimator on the exact tree.

The parameters and attributes are scikit-learn's (``sklearn.cluster.HDBSCAN``)
and hdbscan's (``outlier_scores_``, ``condensed_tree_``,
``cluster_persistence_``); the functional core is
``emst_dask.products.hdbscan``.  The tree is the exact mutual-reachability
MST of this package (in this process, on a Dask worker with ``client=``, or
partitioned with ``partitions=``).  Merges at equal heights are one merge,
so the clusters never depend on the row order (see ``products.hdbscan``).
"""
from __future__ import annotations

import numpy as np

from ..arrays import is_device_array
from ..arrays import to_host as _host
from ..errors import InputError
from .hdbscan import checks

_PARAMS = ("min_cluster_size", "min_samples", "cluster_selection_epsilon",
           "max_cluster_size", "metric", "metric_params", "alpha", "algorithm", "leaf_size",
           "n_jobs", "cluster_selection_method", "allow_single_cluster", "store_centers",
           "copy", "prediction_data", "backend", "client", "partitions", "out", "overwrite")


def check_hdbscan_params(min_cluster_size, min_samples, cluster_selection_epsilon,
                         max_cluster_size, cluster_selection_method, allow_single_cluster,
                         n=None) -> int:
    """Check the clustering parameters (``products.hdbscan.checks``); return
    k_pts (``min_samples``, or ``min_cluster_size`` for None).

    Raises
    ------
    InputError
        Naming the parameter and the value.
    """
    m = checks.check_min_cluster_size(min_cluster_size)
    k = m if min_samples is None else min_samples
    if not checks._is_int(k) or k < 1:
        raise InputError(f"min_samples must be None or an integer >= 1, got {min_samples!r}")
    if n is not None and n > 0 and k > n:
        raise InputError(f"min_samples={k}" + (" (min_samples=None takes min_cluster_size)"
                                               if min_samples is None else "")
                         + f" is larger than the number of points ({n})")
    checks.check_epsilon(cluster_selection_epsilon)
    checks.check_max_cluster_size(max_cluster_size)
    checks.check_method(cluster_selection_method)
    checks.check_allow_single_cluster(allow_single_cluster)
    return int(k)


class HDBSCAN:
    """HDBSCAN* clustering on the exact mutual-reachability minimum spanning tree.

    The parameters are ``sklearn.cluster.HDBSCAN``'s, in its order and with
    its meanings, then hdbscan's ``prediction_data`` and this package's own.

    Parameters
    ----------
    min_cluster_size : int, default 5
        The smallest size a group of points may have to be a cluster.
    min_samples : int or None, default None
        k_pts, counting the point itself (scikit-learn's meaning; hdbscan's
        ``min_samples`` is this minus 1); None: ``min_cluster_size``.
    cluster_selection_epsilon : float, default 0.0
        Clusters born below this distance are merged up (as scikit-learn).
    max_cluster_size : int or None
        Clusters larger than this are not selected by "eom".
    metric : {"euclidean", "l2", "minkowski"}, default "euclidean"
        Only Euclidean distances are supported ("minkowski" with ``p=2``);
        any other metric, and "precomputed", is refused with a ValueError
        (``InputError``) before any work.
    metric_params : None or dict
        None (or ``{}``; ``{"p": 2}`` with "minkowski").
    alpha : float > 0, default 1.0
        Robust single linkage's distance scaling, as scikit-learn applies
        it: the tree's weights are ``max(core_u, core_v, |x_u - x_v| / alpha)``
        (the core distances are not scaled).  Computed in this process:
        ``alpha != 1`` needs in-memory points without ``client``, ``out``
        or ``partitions``.
    algorithm : {"auto", "brute", "kd_tree", "ball_tree"}, default "auto"
        Accepted and checked, no effect: scikit-learn's choice of the
        structure that finds core distances.  Here one exact algorithm
        (Borůvka on this package's bounding-volume hierarchy) computes the
        core distances and the tree, whatever the value; every value gives
        the same (exact) result.
    leaf_size : int >= 1, default 40
        Accepted and checked, no effect: the leaf size of scikit-learn's
        KD/ball tree; this package's hierarchy sets its own.
    n_jobs : int or None
        Accepted and checked, no effect: the CPU backend runs on numba's
        threads (``NUMBA_NUM_THREADS``), a GPU on its own cores, and a Dask
        cluster on its workers.
    cluster_selection_method : {"eom", "leaf"}
    allow_single_cluster : bool
        Whether the root may be the one cluster.
    store_centers : {None, "centroid", "medoid", "both"}
        scikit-learn's ``centroids_`` (the probability-weighted mean of each
        cluster's points) and ``medoids_`` (the member minimising the
        probability-weighted sum of Euclidean distances to the other
        members; O(m^2) time for a cluster of m points, O(m) memory).
        Needs the points here (in memory, or a dask array).
    copy : bool, default False
        Accepted, no effect: ``fit`` never writes into ``X`` (scikit-learn's
        ``copy=True`` guarantee holds either way).
    prediction_data : bool, default False
        hdbscan's: keep what ``approximate_predict``, ``membership_vector``
        and ``all_points_membership_vectors``
        (``emst_dask.products.hdbscan.prediction``) and ``exemplars_`` need
        (the points as float64, their core distances, the cluster tree):
        8 (d + 1) bytes a point.  Needs the points here (in memory, or a
        dask array).
    backend : {"auto", "cpu", "cuda"}
    client : distributed.Client, address, scheduler file, False or None
        As for ``emst_dask.emst``: None computes in-memory points here and
        other sources on the embedded cluster.
    partitions : "auto", int or None
        As for ``emst_dask.emst`` (the tree comes to this process, which
        clusters it).
    out : path, URL or zarr store, optional
        The worker that computes the tree clusters it and writes labels,
        probabilities, outlier scores and the condensed tree there (a
        cluster store, ``emst_dask.io.cluster_store``; or the labels alone
        as an int64 ``.npy``), complete or absent; the attributes are then
        read back from it, and the tree stays on the worker
        (``minimum_spanning_tree_`` and ``single_linkage_tree_`` are None).
    overwrite : bool
        Replace a cluster store (or label array) this package wrote.

    Attributes
    ----------
    labels_ : (n,) int64
        Cluster of every point, -1 for noise.  numpy, or CuPy when the
        points were a CuPy array (computed on the device, as the next two).
    probabilities_ : (n,) float64
        Strength of each point's membership (scikit-learn's).
    outlier_scores_ : (n,) float64
        GLOSH outlier scores (hdbscan's).
    condensed_tree_ : CondensedTree
        hdbscan's structured array (``.to_numpy()``, ``.to_pandas()``) with
        ``.plot()``.
    single_linkage_tree_ : (n-1, 4) float64 ``LinkageMatrix``
        The scipy linkage matrix of the mutual-reachability tree (a numpy
        array; ``.to_pandas()`` gives hdbscan's table).
    minimum_spanning_tree_ : SpanningTree
    cluster_persistence_ : (n_clusters,) float64
        Persistence of each selected cluster (hdbscan's).
    relative_validity_ : float
        hdbscan's DBCV approximation on the mutual-reachability tree.
    centroids_, medoids_ : (n_clusters, d) float64
        With ``store_centers``.
    exemplars_ : list of (m_i, d) float64
        With ``prediction_data``: per cluster, the points of its leaf
        clusters that stay longest (hdbscan's).
    n_features_in_ : int
    feature_names_in_ : (d,) object
        The column names of a pandas DataFrame of strings.
    """

    def __init__(self, min_cluster_size=5, min_samples=None, cluster_selection_epsilon=0.0,
                 max_cluster_size=None, metric="euclidean", metric_params=None, alpha=1.0,
                 algorithm="auto", leaf_size=40, n_jobs=None, cluster_selection_method="eom",
                 allow_single_cluster=False, store_centers=None, copy=False, *,
                 prediction_data=False, backend="auto", client=None, partitions=None,
                 out=None, overwrite=False):
        self.min_cluster_size = min_cluster_size
        self.min_samples = min_samples
        self.cluster_selection_epsilon = cluster_selection_epsilon
        self.max_cluster_size = max_cluster_size
        self.metric = metric
        self.metric_params = metric_params
        self.alpha = alpha
        self.algorithm = algorithm
        self.leaf_size = leaf_size
        self.n_jobs = n_jobs
        self.cluster_selection_method = cluster_selection_method
        self.allow_single_cluster = allow_single_cluster
        self.store_centers = store_centers
        self.copy = copy
        self.prediction_data = prediction_data
        self.backend = backend
        self.client = client
        self.partitions = partitions
        self.out = out
        self.overwrite = overwrite

    # -- scikit-learn's estimator protocol --------------------------------------
    def get_params(self, deep: bool = True) -> dict:
        """The constructor's parameters (scikit-learn's protocol)."""
        return {k: getattr(self, k) for k in _PARAMS}

    def set_params(self, **params) -> "HDBSCAN":
        """Set constructor parameters (scikit-learn's protocol); they are
        checked by ``fit``."""
        for k, v in params.items():
            if k not in _PARAMS:
                raise ValueError(f"invalid parameter {k!r} for HDBSCAN; valid "
                                 f"parameters: {', '.join(_PARAMS)}")
            setattr(self, k, v)
        return self

    def __sklearn_tags__(self):
        """scikit-learn's tags (read by scikit-learn only, which it imports)."""
        from ._sklearn import sklearn_tags

        return sklearn_tags(self)

    def _more_tags(self) -> dict:
        """The tags as scikit-learn before 1.6 read them."""
        return {"allow_nan": False, "X_types": ["2darray"], "requires_y": False,
                "non_deterministic": False}

    def __repr__(self) -> str:
        changed = []
        for k in _PARAMS:
            v, d = getattr(self, k, None), _DEFAULTS[k]
            try:
                same = bool(v == d) if type(v) is type(d) or d is None else False
            except Exception:  # arrays and the like: shown
                same = False
            if not same:
                changed.append(f"{k}={v!r}")
        return f"HDBSCAN({', '.join(changed)})"

    # -- fitting --------------------------------------------------------------
    def _check_params(self, n=None) -> int:
        """Every parameter, before any work; return k_pts."""
        from ._sklearn import check_sklearn_params

        self._alpha = check_sklearn_params(self.metric, self.metric_params, self.alpha,
                                           self.algorithm, self.leaf_size, self.n_jobs,
                                           self.store_centers, self.copy,
                                           self.prediction_data)
        return check_hdbscan_params(self.min_cluster_size, self.min_samples,
                                    self.cluster_selection_epsilon, self.max_cluster_size,
                                    self.cluster_selection_method, self.allow_single_cluster,
                                    n)

    def fit(self, X, y=None, *, progress=None) -> "HDBSCAN":
        """Compute the tree of ``X`` and its clusters.

        Parameters
        ----------
        X : (n, d) array-like (numpy, CuPy, a pandas DataFrame, nested
            lists), or any source ``emst_dask.emst`` takes (a Zarr
            snapshot, a .npy path, a dask array, a zarr object)
        y : ignored
        progress : bool or callable, optional
            True, or ``progress(phase, **info)``; as for ``emst_dask.emst``.

        Returns
        -------
        self

        Raises
        ------
        InputError
            A bad parameter or input (NaN, inf, complex, non-numeric, not
            (n, d)), before any work.
        TypeError
            Sparse input.
        MemoryError
            The fit in this process ran out of (device) memory: the message
            says how much a point takes and what to do instead.
        """
        from ..api import emst
        from ..io.source import is_in_memory
        from ._sklearn import validate_points

        self._check_params()
        self._forget_fit()  # a fit that fails leaves no former results
        names = None
        device = is_device_array(X)
        if is_in_memory(X) and not device:
            X, names = validate_points(X)
        needs_points = bool(self.store_centers) or bool(self.prediction_data)
        if needs_points and self.out is not None and str(self.out).endswith(".npy"):
            raise InputError("store_centers and prediction_data need the probabilities "
                             "and the condensed tree: give out= a cluster store (not a "
                             ".npy of labels)")
        if needs_points and not is_in_memory(X) and not _is_dask_array(X):
            raise InputError("store_centers and prediction_data need the points in this "
                             "process: give them in memory or as a dask array, not "
                             f"{type(X).__name__} {X!r}")
        shape = getattr(X, "shape", None) if is_in_memory(X) else None
        k = self._k = self._check_params(int(shape[0]) if shape is not None
                                         and len(shape) == 2 else None)
        local = self.client in (None, False) and self.out is None and is_in_memory(X)
        if self._alpha != 1.0 and not (local and self.partitions is None):
            raise InputError(f"alpha={self.alpha!r} is computed in this process: give "
                             "in-memory points without client=, out= or partitions=")
        if local or self.partitions is not None:
            if self.out is not None:
                raise InputError("out= writes the clusters where the tree is computed; "
                                 "with partitions= the tree comes here: drop out=")
            try:
                if self._alpha != 1.0:
                    tree = _alpha_tree(X, k, self.backend, self._alpha, progress)
                else:
                    # an in-process CUDA tree records Borůvka's picks for the dendrogram
                    tree = emst(X, min_samples=k, backend=self.backend, client=self.client,
                                partitions=self.partitions, progress=progress,
                                hierarchy=self.partitions is None)
                self._fit_tree(tree, device_out=device)
            except MemoryError as e:  # CuPy's and thrust's out-of-memory errors
                raise MemoryError(_out_of_memory(X, e)) from e
        else:
            from ..distributed.service import emst as service_emst

            res = service_emst(X, client=self.client, min_samples=k, backend=self.backend,
                               clusters=self._clusters_params(), clusters_out=self.out,
                               overwrite=self.overwrite, progress=progress)
            self._from_job(res)
        if names is not None:
            self.feature_names_in_ = names
        if needs_points:
            self._keep_points(X)
        return self

    def _clusters_params(self) -> dict:
        return dict(min_cluster_size=int(self.min_cluster_size),
                    cluster_selection_method=self.cluster_selection_method,
                    allow_single_cluster=bool(self.allow_single_cluster),
                    cluster_selection_epsilon=float(self.cluster_selection_epsilon),
                    max_cluster_size=self.max_cluster_size)

    def _from_job(self, res) -> "HDBSCAN":
        """Attributes from a service job's ``Clusters`` (read back from the
        cluster store when the worker wrote one)."""
        from .condensed import CondensedTree

        if res.path is not None:
            from ..io.cluster_store import read_clusters

            if str(res.path).endswith(".npy"):
                self.labels_ = np.load(res.path)
                self.probabilities_ = self.outlier_scores_ = None
                self.condensed_tree_ = self.cluster_persistence_ = None
            else:
                got = read_clusters(res.path)
                self.labels_ = got["labels"]
                self.probabilities_ = got["probabilities"]
                self.outlier_scores_ = got["outlier_scores"]
                self.cluster_persistence_ = got["persistence"]
                ct = _structured(got["condensed/parent"], got["condensed/child"],
                                 got["condensed/lambda_val"], got["condensed/child_size"])
                self.condensed_tree_ = CondensedTree(ct, len(self.labels_), res.selected)
            self._linkage = self.minimum_spanning_tree_ = None
            self.n_features_in_ = None
            self.clusters_path_ = res.path
            return self
        self.labels_ = res.labels
        self.probabilities_ = res.probabilities
        self.outlier_scores_ = res.outlier_scores
        self.cluster_persistence_ = res.persistence
        self.condensed_tree_ = CondensedTree(res.condensed_tree, len(res.labels), res.selected)
        self._linkage = None
        self.minimum_spanning_tree_ = res.tree
        self.n_features_in_ = int(res.tree.n_dims)
        return self

    def _check_tree(self, n, tree_min_samples):
        """The parameters for a tree of n points and its k_pts: an
        InputError unless they fit."""
        if n < 1:
            raise InputError("HDBSCAN* needs at least one point; the tree has none")
        k = check_hdbscan_params(self.min_cluster_size, self.min_samples,
                                 self.cluster_selection_epsilon, self.max_cluster_size,
                                 self.cluster_selection_method, self.allow_single_cluster, n)
        if tree_min_samples != k:
            raise InputError(f"the tree was computed with min_samples={tree_min_samples}, "
                             f"this HDBSCAN needs min_samples={k}: compute the tree with "
                             f"emst(..., min_samples={k})")

    def fit_tree(self, tree, *, device_out=None) -> "HDBSCAN":
        """Cluster an existing mutual-reachability tree (a ``SpanningTree``,
        an ``EdgeStore`` or the path of one) without recomputing it.

        The tree's ``min_samples`` must be the k_pts of this estimator
        (``min_samples``, or ``min_cluster_size`` when None).  A tree on the
        device is clustered there; ``device_out`` (default: whether the tree
        is on the device) keeps the per-point attributes there as CuPy
        arrays, else they are numpy.  The tree is clustered as given:
        ``alpha`` must be 1, and ``store_centers``/``prediction_data``
        need the points (use ``fit``).
        """
        self._check_params()
        if self._alpha != 1.0 or self.store_centers or self.prediction_data:
            raise InputError("fit_tree clusters a tree as given, without its points: "
                             "alpha=1, store_centers=None and prediction_data=False "
                             "(fit(X) applies them)")
        return self._fit_tree(tree, device_out=device_out)

    def _fit_tree(self, tree, *, device_out=None) -> "HDBSCAN":
        from ..io import EdgeStore, open_edges
        from .hdbscan import extract

        if isinstance(tree, (str, EdgeStore)) or hasattr(tree, "__fspath__"):
            store = tree if isinstance(tree, EdgeStore) else open_edges(tree)
            if store.attrs.get("min_samples") is None:
                raise InputError(f"{store.path}: an .npy edge array does not record its "
                                 "min_samples; give the Zarr edge store")
            # the parameters against the store's attributes, before its arrays are read
            n = store.attrs.get("n")
            self._check_tree(int(store.n_edges) + 1 if n is None else int(n),
                             int(store.attrs["min_samples"]))
            tree = store.load()
        n = int(tree.n_points)
        self._check_tree(n, int(tree.min_samples))
        if tree.n_edges != max(n - 1, 0):
            raise InputError(f"the tree has {tree.n_edges} edges for {n} points: not a "
                             "spanning tree")
        self._forget_fit()
        # a tree on the device is clustered there (only the cluster tree
        # comes to the host); the attributes are numpy, as scikit-learn's
        res = extract(tree.source, tree.target, tree.weight, n, **self._clusters_params(),
                      hierarchy=getattr(tree, "hierarchy", None))
        from .condensed import CondensedTree

        keep = is_device_array(res.labels) if device_out is None else device_out
        here = (lambda a: a) if keep else _host
        self.labels_ = here(res.labels)
        self.probabilities_ = here(res.probabilities)
        self.outlier_scores_ = here(res.outlier_scores)
        self.condensed_tree_ = CondensedTree(res.condensed_tree, n, res.selected)
        self.cluster_persistence_ = res.persistence
        self._linkage = None
        self.minimum_spanning_tree_ = tree
        self.n_features_in_ = int(tree.n_dims)
        return self

    def _forget_fit(self):
        """Drop a former fit's results before computing new ones: on a GPU
        they would otherwise hold about 70 bytes a point of device memory
        (tree, labels, probabilities, scores) through the next fit."""
        for name in _FITTED:
            self.__dict__.pop(name, None)

    @property
    def single_linkage_tree_(self):
        """(n-1, 4) float64 numpy scipy linkage matrix of the tree (computed on
        first use, where the tree is), or None when the tree stayed on a
        worker."""
        if getattr(self, "minimum_spanning_tree_", None) is None:
            return None
        if self._linkage is None:
            from .condensed import LinkageMatrix

            self._linkage = np.asarray(_host(self.minimum_spanning_tree_.linkage()),
                                       dtype=np.float64).view(LinkageMatrix)
        return self._linkage

    @property
    def relative_validity_(self) -> float:
        """hdbscan's ``relative_validity_``: DBCV on the mutual-reachability
        tree (``products.hdbscan.centers.relative_validity``); None when the
        tree stayed on a worker."""
        tree = getattr(self, "minimum_spanning_tree_", None)
        if tree is None:
            if not hasattr(self, "labels_"):
                raise AttributeError("relative_validity_: fit the estimator first")
            return None
        if getattr(self, "_relative_validity", None) is None:
            from .hdbscan.centers import relative_validity

            self._relative_validity = relative_validity(
                _host(tree.source), _host(tree.target), _host(tree.weight),
                _host(self.labels_))
        return self._relative_validity

    def fit_predict(self, X, y=None, **kwargs) -> np.ndarray:
        """``fit(X).labels_``: (n,) int64."""
        return self.fit(X, **kwargs).labels_

    def _keep_points(self, X):
        """What ``store_centers`` and ``prediction_data`` compute from the
        points, on the host."""
        from .hdbscan.centers import centers

        pts = _host(X.compute() if _is_dask_array(X) else X)
        pts = np.asarray(pts, dtype=np.float64)
        labels, prob = _host(self.labels_), _host(self.probabilities_)
        if self.store_centers:
            cen, med = centers(pts, labels, prob,
                               centroids=self.store_centers in ("centroid", "both"),
                               medoids=self.store_centers in ("medoid", "both"))
            if cen is not None:
                self.centroids_ = cen
            if med is not None:
                self.medoids_ = med
        if self.prediction_data:
            from .hdbscan.prediction import prediction_data

            tree = self.minimum_spanning_tree_
            core = None if tree is None else tree.core_distances
            if core is None and self._k > 1:  # the tree stayed on a worker
                from ..engine import core_distances2
                from ..kernels import get_kernels

                core = np.sqrt(core_distances2(get_kernels("cpu"), pts, self._k))
            self._prediction = prediction_data(pts, None if core is None else _host(core),
                                               self._k, self.condensed_tree_.to_numpy(),
                                               self.condensed_tree_.selected)
            # a model fitted on the device predicts there (device_prediction)
            self._prediction.on_device = is_device_array(X)

    @property
    def prediction_data_(self):
        """``PredictionData`` (``products.hdbscan.prediction``) with
        ``prediction_data=True``, else None."""
        return getattr(self, "_prediction", None)

    @property
    def exemplars_(self) -> list:
        """hdbscan's exemplars: per cluster, a (m_i, d) float64 array of the
        points of its leaf clusters that leave at their leaf's largest
        lambda (lexicographic order).  Needs ``prediction_data=True``."""
        if self.prediction_data_ is None:
            raise AttributeError("exemplars_ needs HDBSCAN(prediction_data=True)")
        return self.prediction_data_.exemplars


def _is_dask_array(X) -> bool:
    return (type(X).__module__ or "").startswith("dask") and hasattr(X, "compute")


def _alpha_tree(X, k, backend, alpha, progress):
    """The tree of in-memory points with weights ``max(core_u, core_v,
    |x_u - x_v| / alpha)`` (scikit-learn's alpha): the engine's tree of
    ``max(alpha core_u, alpha core_v, |x_u - x_v|)``, divided by alpha."""
    import dataclasses

    from ..engine.core import spanning_tree
    from ..io.checks import as_points
    from ..progress import guarded

    tree = spanning_tree(as_points(X), k, backend, progress=guarded(progress or None),
                         core_scale=alpha)
    return dataclasses.replace(tree, weight=tree.weight / alpha)


def _out_of_memory(X, e) -> str:
    """What to do when a fit ran out of memory (``e``)."""
    n = getattr(X, "shape", (None,))[0]
    points = f"{n:,} points" if n is not None else "this cloud"
    return (f"HDBSCAN of {points} ran out of memory ({type(e).__name__}: {e}). On a GPU "
            f"the fit holds about {DEVICE_BYTES_PER_POINT_FIT} bytes a point beyond the "
            "points (one 80 GB H100: about 650 million 3-D float32 points); give "
            "partitions= to compute the tree in parts (the clusters are then computed "
            "on the host), or use a larger GPU")


#: peak device memory of ``HDBSCAN.fit`` per point beyond the points, as the
#: CuPy pool held it (H100, halos 3-D float32, 100M points): 95 bytes in use
#: at the dendrogram's chain sort, the pool's blocks on top
DEVICE_BYTES_PER_POINT_FIT = 110


_FITTED = ("labels_", "probabilities_", "outlier_scores_", "condensed_tree_",
           "cluster_persistence_", "minimum_spanning_tree_", "_linkage", "n_features_in_",
           "clusters_path_", "feature_names_in_", "centroids_", "medoids_", "_prediction",
           "_relative_validity")
_DEFAULTS = dict(min_cluster_size=5, min_samples=None, cluster_selection_epsilon=0.0,
                 max_cluster_size=None, metric="euclidean", metric_params=None, alpha=1.0,
                 algorithm="auto", leaf_size=40, n_jobs=None, cluster_selection_method="eom",
                 allow_single_cluster=False, store_centers=None, copy=False,
                 prediction_data=False, backend="auto", client=None, partitions=None,
                 out=None, overwrite=False)


def _structured(parent, child, lambda_val, child_size) -> np.ndarray:
    """hdbscan's condensed-tree structured array from its four columns."""
    out = np.empty(len(parent), dtype=[("parent", np.int64), ("child", np.int64),
                                       ("lambda_val", np.float64),
                                       ("child_size", np.int64)])
    out["parent"], out["child"] = parent, child
    out["lambda_val"], out["child_size"] = lambda_val, child_size
    return out


