"""``extract``: HDBSCAN* flat clusters from a (mutual-reachability)
spanning tree, in one call."""
from __future__ import annotations

import numpy as np

from ...arrays import is_device_array
from .checks import (
    check_allow_single_cluster,
    check_device_edges,
    check_edges,
    check_epsilon,
    check_max_cluster_size,
    check_method,
    check_min_cluster_size,
)
from .condense import CONDENSED_DTYPE, _condensed_columns, as_structured
from .result import HDBSCANResult
from .scores import _labels, _outlier_scores, _persistence
from .select import _select
from .tables import Fields, cluster_table

__all__ = ["HDBSCANResult", "extract"]


def extract(source, target, weight, n, min_cluster_size=5, cluster_selection_method="eom",
            allow_single_cluster=False, cluster_selection_epsilon=0.0,
            max_cluster_size=None, hierarchy=None) -> HDBSCANResult:
    """HDBSCAN* clusters of a spanning tree.

    Merges at one height are one merge (the level sets of the graph), so
    the result depends neither on the order of the edges nor on which of
    several equal-weight spanning trees is given.  Without tied merges it
    is scikit-learn's ``HDBSCAN`` (labels as a partition, probabilities)
    and hdbscan's (GLOSH scores, ``cluster_persistence_``).

    Parameters
    ----------
    source, target : (n-1,) integer array-like (numpy or cupy), rows.
    weight : (n-1,) float32/float64 edge weights (mutual reachability).
    n : int >= 1, number of points.
    min_cluster_size : int >= 2
    cluster_selection_method : {"eom", "leaf"}
    allow_single_cluster : bool
    cluster_selection_epsilon : float >= 0
    max_cluster_size : int >= 1 or None (eom only)
    hierarchy : dict of arrays, optional
        ``SpanningTree.hierarchy`` of a CUDA tree given with its own edges
        (in their order): the device dendrogram reuses the EMST's Borůvka
        picks instead of running rounds of its own.  Ignored on the host.

    Returns
    -------
    HDBSCANResult
        numpy arrays; for CuPy edges (a tree on the device) the labels,
        probabilities and outlier scores are CuPy arrays, computed there in
        parallel (``hdbscan.device``), and the condensed tree is built on the
        host when first read.

    Raises
    ------
    InputError
        On a bad parameter or edges that are not a spanning tree of n
        points, before any work.
    """
    m = check_min_cluster_size(min_cluster_size)
    method = check_method(cluster_selection_method)
    allow = check_allow_single_cluster(allow_single_cluster)
    eps = check_epsilon(cluster_selection_epsilon)
    max_size = check_max_cluster_size(max_cluster_size)
    if is_device_array(weight):
        xp, s, t, w = check_device_edges(source, target, weight, n)
        if int(n) > 1:
            from .device import extract_xp

            return extract_xp(xp, s, t, w, int(n), m, method, allow, eps, max_size,
                              hierarchy=hierarchy)
    s, t, w = check_edges(source, target, weight, n)
    n = int(n)
    columns = _condensed_columns(s, t, w, n, m)
    del s, t, w
    if n == 1:
        z = np.zeros(1, np.float64)
        return HDBSCANResult(np.full(1, -1, np.int64), z, z.copy(),
                             np.empty(0, CONDENSED_DTYPE), np.zeros(1), np.empty(0),
                             np.empty(0, np.int64))
    f = Fields(*columns, n)
    condensed = as_structured(*columns)
    del columns
    table = cluster_table(f)
    selected, eom_stab = _select(table, n, method, allow, eps, max_size)
    labels, prob = _labels(f, table, selected, allow, eps)
    scores = _outlier_scores(f, table)
    lam_max = float(f.lam.max())
    persistence = _persistence(labels, selected, eom_stab, lam_max, n)
    return HDBSCANResult(labels, prob, scores, condensed, table.stability, persistence,
                         selected)
