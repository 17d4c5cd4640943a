"""HDBSCAN* clusters from a (mutual-reachability) minimum spanning tree.

The functional core under ``emst_dask.HDBSCAN``: the multi-way level-set
hierarchy (``levels``), its condensed tree (``condense``), per-cluster
stabilities (``tables``), the flat selection (``select``) and the per-point
results (``scores``); ``extract`` runs them all.  Semantics are
scikit-learn's and hdbscan's except for ties: merges at one height are one
merge, so results depend on the level sets of the graph only (see
``levels`` and ``condense``).
"""
from .condense import CONDENSED_DTYPE, condensed_tree
from .extract import HDBSCANResult, extract
from .levels import level_tree
from .scores import cluster_persistence, labels_and_probabilities, outlier_scores
from .select import select_clusters
from .tables import stabilities

__all__ = ["CONDENSED_DTYPE", "HDBSCANResult", "cluster_persistence", "condensed_tree",
           "extract", "labels_and_probabilities", "level_tree", "outlier_scores",
           "select_clusters", "stabilities"]
