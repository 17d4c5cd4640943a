"""What prediction keeps of a fit (``PredictionData``), and the check of
new points: below both the host's prediction (``prediction``,
``membership``) and the device's (``device_prediction``), which the host's
calls for a model fitted on the device."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...errors import InputError

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
    on_device : bool, the model was fitted on the GPU: prediction runs
        there (``device_prediction``) and returns CuPy arrays.
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
    on_device: bool = False
    _tree: object = field(default=None, repr=False)
    _exemplar_index: object = field(default=None, repr=False)

    @property
    def n_clusters(self) -> int:
        return int(self.selected.shape[0])

    def tree(self):
        """scipy's KD-tree of the points (built on first use)."""
        if self._tree is None:
            from scipy.spatial import cKDTree

            self._tree = cKDTree(self.raw_data)
        return self._tree

    def exemplar_index(self):
        """``exemplar_search.ExemplarIndex`` of the exemplars (built on first
        use)."""
        if self._exemplar_index is None:
            from .exemplar_search import build_index

            self._exemplar_index = build_index(self.exemplars)
        return self._exemplar_index

    def __getstate__(self):  # the trees are rebuilt, not pickled
        state = dict(self.__dict__)
        state["_tree"] = state["_exemplar_index"] = None
        state.pop("_merge", None)
        state.pop("_device", None)
        return state

    def __setstate__(self, state):
        state = dict(state)
        state.pop("_exemplar_trees", None)  # models pickled before the index
        state.setdefault("_exemplar_index", None)
        self.__dict__.update(state)


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
